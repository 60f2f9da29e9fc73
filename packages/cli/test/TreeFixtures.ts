/**
 * What the tests of the tree's commands share: a session filled through `import`, and
 * a signer key made with `key generate`.
 */
import { assert } from "@effect/vitest"
import * as path from "node:path"
import { run } from "./Run.ts"

/** `n` tool entries appended in one start of the command (an import from stdin): each start costs a Node. */
export const record = async (dir: string, id: string, n: number, tool = "read_file") => {
  const input = Array.from(
    { length: n },
    (_, i) => JSON.stringify({ tool_name: `${tool}-${i}`, server_id: "srv", agent_id: "a", bytes_read: i }) + "\n"
  ).join("")
  const r = await run(["--dir", dir, "import", id, "-"], { input })
  assert.strictEqual(r.code, 0, r.stderr)
}

/** A new signer key in `dir` and its verifier key. */
export const newKey = async (dir: string, name: string) => {
  const file = path.join(dir, `${name.replace(/\W/g, "_")}.key`)
  const r = await run(["key", "generate", name, "--out", file])
  assert.strictEqual(r.code, 0, r.stderr)
  return { file, vkey: r.stdout.trim() }
}
