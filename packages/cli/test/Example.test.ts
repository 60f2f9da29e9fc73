import { execFileSync } from "node:child_process"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "vitest"
import { cleanup, run, tempDir } from "./Run.ts"

const EXAMPLE = fileURLToPath(new URL("../examples/quickstart.ts", import.meta.url))

afterAll(cleanup)

describe("the README's library example", () => {
  it("runs, denies the forbidden transition, and leaves a session that verifies", async () => {
    const dir = tempDir()
    const out = execFileSync(process.execPath, [EXAMPLE, dir], { encoding: "utf8" })
    assert.include(out, "deploy may not follow write_file")
    const verified = await run(["--dir", dir, "--json", "verify", "s-1"])
    assert.strictEqual(verified.code, 0, verified.stderr)
    const report = JSON.parse(verified.stdout)
    assert.strictEqual(report.sessions[0].ok, true)
    // A message, a record, and two decided calls each with its decision entry.
    assert.strictEqual(report.sessions[0].entries_checked, 6)
  }, 60_000)
})
