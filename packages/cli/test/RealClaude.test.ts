/**
 * The `session-journal` binary as a hook of the real Claude Code CLI (offline,
 * against the fake Messages API of `@session-journal/claude-code`'s tests): a
 * PreToolUse hook that journals its stdin with `append --payload -`. This is how
 * the hook work spawns the CLI.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { BIN, hasNodeAdapter, run } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()

afterAll(Claude.cleanup)

describe.skipIf(Claude.CLAUDE_BIN === null || !nodeAdapter)("session-journal as a Claude Code hook", () => {
  it("a PreToolUse command hook journals its input", async () => {
    const api = await Fake.start(Fake.inOrder([Fake.tools(Fake.bash("echo one")), Fake.text("done")]))
    try {
      const root = Claude.tempDir()
      const journal = path.join(root, "journal")
      const hook = {
        type: "command",
        command: [
          process.execPath,
          BIN,
          "--dir",
          journal,
          "append",
          "cc",
          "--kind",
          "claude-code.hook",
          "--payload",
          "-"
        ]
          .map((a) => `'${a}'`)
          .join(" "),
        timeout: 30
      }
      const r = await Claude.run({
        api,
        prompt: "One call.",
        tools: ["Bash"],
        work: path.join(root, "work"),
        home: path.join(root, "home"),
        env: Claude.sourcesEnv(),
        settings: { hooks: { PreToolUse: [{ matcher: "", hooks: [hook] }] } }
      })
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(api.connects, [])
      assert.isTrue(fs.existsSync(journal))

      const shown = await run(["--dir", journal, "--json", "show", "cc"])
      assert.strictEqual(shown.code, 0, shown.stderr)
      const entries = shown.stdout.trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(entries.map((e) => e.payload.tool_input.command), ["echo one"])
      assert.isTrue(entries.every((e) => e.kind === "claude-code.hook" && e.payload.session_id === r.sessionId))
      const ids = api.answers.slice(0, 1).map((a) => a.blocks[0]!.type === "tool_use" ? a.blocks[0]!.id : null)
      assert.deepStrictEqual(entries.map((e) => e.payload.tool_use_id), ids)
    } finally {
      await api.close()
    }
  })
})
