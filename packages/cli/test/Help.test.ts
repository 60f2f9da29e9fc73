/**
 * `--help` names every environment variable the command reads (each falls back
 * through `Config`, most behind a flag's `Flag.withFallbackConfig`), and the
 * variables reach the command through its `ConfigProvider`: an in-process run
 * given them in its environment behaves as the bin does.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Install from "@session-journal/claude-code/Installer"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as GuardCommands from "../src/commands/GuardCommands.ts"
import * as HookProcess from "../src/commands/HookProcess.ts"
import * as Storage from "../src/Storage.ts"
import { cleanup, hasNodeAdapter, runInProcess, tempDir } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()

afterAll(cleanup)

const documented: ReadonlyArray<readonly [ReadonlyArray<string>, ReadonlyArray<string>]> = [
  [[], [Storage.DIR_VAR, Storage.PG_URL_VAR, Storage.TABLE_PREFIX_VAR, Storage.RETENTION_VAR]],
  [["list"], [Storage.DIR_VAR, Storage.PG_URL_VAR]],
  [["claude-code", "guard"], [GuardCommands.POLICY_VAR, GuardCommands.GUARD_TOKEN_VAR]],
  [["claude-code", "hook"], [HookProcess.POLICY_VAR]],
  [["claude-code", "install"], [Install.CLAUDE_CONFIG_DIR_VAR]]
]

describe("--help documents the environment", () => {
  for (const [command, vars] of documented) {
    it(`session-journal ${[...command, "--help"].join(" ")} names ${vars.join(", ")}`, async () => {
      const r = await runInProcess([...command, "--help"])
      assert.strictEqual(r.code, 0, r.stderr)
      for (const name of vars) assert.include(r.stdout, `$${name}`, `${name} in the help of ${command.join(" ")}`)
    })
  }
})

describe.runIf(nodeAdapter)("the environment through Config", () => {
  it("SESSION_JOURNAL_DIR chooses the journal when --dir is not given; --dir wins", async () => {
    const dir = tempDir()
    const other = tempDir()
    const env = { [Storage.DIR_VAR]: dir }
    const recorded = await runInProcess(["record", "s1", "--tool", "t", "--server", "s", "--agent", "a"], { env })
    assert.strictEqual(recorded.code, 0, recorded.stderr)
    assert.isTrue(fs.existsSync(path.join(dir, "s1")))
    const listed = await runInProcess(["--json", "list"], { env })
    assert.strictEqual(listed.code, 0, listed.stderr)
    assert.include(listed.stdout, `"s1"`)
    const elsewhere = await runInProcess(["--json", "--dir", other, "list"], { env })
    assert.strictEqual(elsewhere.code, 0, elsewhere.stderr)
    assert.notInclude(elsewhere.stdout, `"s1"`)
  })

  it("an invalid SESSION_JOURNAL_PG_URL is named as the variable, --postgres as the flag", async () => {
    const fromEnv = await runInProcess(["list"], { env: { [Storage.PG_URL_VAR]: "mysql://x" } })
    assert.strictEqual(fromEnv.code, 2)
    assert.include(fromEnv.stderr, Storage.PG_URL_VAR)
    const fromFlag = await runInProcess(["--postgres", "mysql://x", "list"], {
      env: { [Storage.PG_URL_VAR]: "postgres://u@127.0.0.1:1/d" }
    })
    assert.strictEqual(fromFlag.code, 2)
    assert.include(fromFlag.stderr, "--postgres")
  })
})
