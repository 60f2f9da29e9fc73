/**
 * Custody of a call Claude Code refused. The real Claude Code CLI (offline, against
 * the fake Messages API) runs three calls: a Bash that a PreToolUse command hook
 * denies, a Write that its own permission rules deny (not in `--allowedTools`), and
 * a Bash that runs. Its transcript, archived, has one tool entry per call: the two
 * refused `allowed: false`, the one that ran `allowed: true`. Skipped (with the
 * reason on stderr) only when the binary is absent; `.ci/run` installs it.
 */
import { afterAll, assert, describe, it } from "@effect/vitest"
import { Entry, JournalState, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { Archive, ProjectDir, SessionIds } from "../src/index.ts"
import * as Claude from "./claudeCli.ts"
import * as Fake from "./fakeApi.ts"

afterAll(Claude.cleanup)

// Denies a Bash call whose command contains "refused".
const HOOK = `
const chunks = []
process.stdin.on("data", (b) => chunks.push(b))
process.stdin.on("end", () => {
  const input = JSON.parse(Buffer.concat(chunks).toString("utf8"))
  if (String(input.tool_input && input.tool_input.command).includes("refused")) {
    process.stdout.write(JSON.stringify({ hookSpecificOutput: {
      hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: "not this one"
    } }))
  }
})
`

const inJournal = <A, E>(root: string, program: Effect.Effect<A, E, SessionJournal.SessionJournal>) =>
  program.pipe(
    Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root })))),
    Effect.scoped,
    Effect.runPromise
  )

describe.skipIf(Claude.CLAUDE_BIN === null)("custody of calls Claude Code refused", () => {
  it("a call denied by a hook or by the permission rules is journaled allowed: false; a call that ran, allowed: true", async () => {
    const root = Claude.tempDir()
    const work = path.join(root, "work")
    const outside = path.join(root, "written.txt")
    fs.writeFileSync(path.join(root, "hook.cjs"), HOOK)
    const api = await Fake.start(Fake.perConversation(() => [
      Fake.tools(Fake.bash("echo refused > refused.txt", "refused by the hook")),
      Fake.tools({ name: "Write", input: { file_path: outside, content: "no\n" } }),
      Fake.tools(Fake.bash("echo ran > ran.txt; echo ran", "runs")),
      Fake.text("One of three.")
    ]))
    let sid: string
    let home: string
    try {
      const r = await Claude.run({
        api,
        prompt: "Three calls.",
        tools: ["Bash", "Write"],
        allowedTools: ["Bash"],
        work,
        home: path.join(root, "home"),
        settings: {
          hooks: { PreToolUse: [{ matcher: "Bash", hooks: [Claude.nodeHook(path.join(root, "hook.cjs"))] }] }
        }
      })
      assert.isFalse(r.timedOut, r.stderr)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(api.connects, [])
      assert.isFalse(fs.existsSync(path.join(work, "refused.txt")), "the hook-denied Bash ran")
      assert.isFalse(fs.existsSync(outside), "the Write not allowed wrote")
      assert.isTrue(fs.existsSync(path.join(work, "ran.txt")))
      assert.deepStrictEqual(
        (r.result?.["permission_denials"] as Array<Record<string, unknown>> | undefined ?? []).map((d) =>
          d["tool_name"]
        ),
        ["Bash", "Write"]
      )
      sid = r.sessionId!
      home = r.home
    } finally {
      await api.close()
    }

    const source = path.join(home, ".claude", "projects")
    const transcript = fs.readFileSync(path.join(source, ProjectDir.encode(work), `${sid}.jsonl`), "utf8")
    // What the transcript says about each refusal (PROTOCOL.md (e)): the result line's
    // permissionDecision and toolDenialKind.
    const results = transcript.split("\n").filter((l) => l.includes(`"tool_result"`)).map((l) => JSON.parse(l))
    assert.deepStrictEqual(
      results.map((l) => [l.permissionDecision?.decision, l.permissionDecision?.source, l.toolDenialKind ?? null]),
      [["reject", "hook", "permission-rule"], ["reject", "config", "user-rejected"], ["accept", "config", null]]
    )

    const journal = path.join(root, "journal")
    const id = SessionIds.sessionId({ _tag: "Main", project: ProjectDir.encode(work), session: sid })
    const { entries, state } = await inJournal(
      journal,
      Effect.gen(function*() {
        const report = yield* Archive.archive({ source, project: work })
        assert.deepStrictEqual(report.files.map((f) => [f.session, f.status, f.tools]), [[id, "created", 3]])
        const j = yield* SessionJournal.SessionJournal
        return { entries: yield* Stream.runCollect(j.entries(id)), state: yield* j.state(id) }
      })
    )
    const tools = Array.from(entries).filter(Entry.isTool)
    assert.deepStrictEqual(tools.map((e) => [e.tool_name, e.allowed]), [["Bash", false], ["Write", false], [
      "Bash",
      true
    ]])
    // Counted as chio counts denied calls: every call is an invocation.
    assert.strictEqual(JournalState.snapshot(state).data_flow.total_invocations, 3n)
  })
})
