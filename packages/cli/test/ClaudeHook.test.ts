/**
 * The command hook in the real Claude Code CLI (offline, against the fake
 * Messages API of `@session-journal/claude-code`'s tests), installed with
 * `claude-code install`: a denied Write leaves no file and a denied Bash never
 * runs, the model is told which guard denied, and the chain holds the session
 * in order; eight parallel read-only calls under maxInvocations 5 get exactly
 * five allowed; a sub-agent's calls are journaled at depth 1 under its agent id,
 * and its own sub-agent's at depth 2 (denied by maxDelegationDepth(1)), still
 * when it rewrites its meta file to say depth 1;
 * with a journal it cannot write, the hook fails closed and the prompt never
 * reaches the model.
 *
 * The hooks run the command as it ships, one bundle (`scripts/bundle.ts`), built
 * from the workspace's sources before the tests: its start is the hook's, and a
 * hook started from the TypeScript sources takes seconds on a loaded machine.
 */
import { assert, describe, it } from "@effect/vitest"
import { Hook } from "@session-journal/claude-code"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { hookedProjects } from "./hookedProject.ts"
import { hasNodeAdapter } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()
const STRESS = process.env["STRESS"] === "1"
/** Parallel reads in one turn: 8, or 16 with STRESS=1 (the CLI runs at most 10 at once). */
const PARALLEL = STRESS ? 16 : 8

const { run, setUp } = hookedProjects(Claude.CLAUDE_BIN !== null && nodeAdapter)

afterAll(Claude.cleanup)

type Entry = Record<string, unknown> & { readonly kind: string; readonly payload?: Record<string, unknown> }

const entriesOf = async (journal: string, sid: string, cwd: string): Promise<Array<Entry>> => {
  const list = await run(["--dir", journal, "--json", "list"])
  assert.strictEqual(list.code, 0, list.stderr)
  const ids = (JSON.parse(list.stdout) as { sessions: Array<{ id: string }> }).sessions.map((s) => s.id)
  const id = Hook.sessionId({ session_id: sid, cwd, hook_event_name: "x" })
  assert.deepStrictEqual(ids, [id])
  const verified = await run(["--dir", journal, "verify", id])
  assert.strictEqual(verified.code, 0, verified.stderr)
  const shown = await run(["--dir", journal, "--json", "show", id])
  assert.strictEqual(shown.code, 0, shown.stderr)
  return shown.stdout.trim().split("\n").map((l) => JSON.parse(l))
}

const decisions = (entries: ReadonlyArray<Entry>) =>
  entries.filter((e) => e.kind === Hook.DECISION_KIND).map((e) => e.payload!)

describe.skipIf(Claude.CLAUDE_BIN === null || !nodeAdapter)("the command hook in Claude Code", () => {
  it("a denied Write leaves no file, a denied Bash never runs, the chain holds the session", async () => {
    const { home, journal, work } = await setUp([
      { denyList: ["Write"] },
      { requirePredecessors: { Bash: ["Glob"] } }
    ])
    fs.writeFileSync(path.join(work, "notes.txt"), "alpha\n")
    const api = await Fake.start(Fake.perConversation(() => [
      Fake.tools({ name: "Write", input: { file_path: path.join(work, "written.txt"), content: "no\n" } }),
      Fake.tools(Fake.bash("echo ran > ran.txt; echo ran", "write a marker")),
      Fake.tools({ name: "Read", input: { file_path: path.join(work, "notes.txt") } }),
      Fake.text("Two refused, one read.")
    ]))
    try {
      const r = await Claude.run({
        api,
        prompt: "Write, run, read.",
        tools: ["Bash", "Read", "Write"],
        work,
        home
      })
      assert.isFalse(r.timedOut, r.stderr)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(api.connects, [])
      assert.isFalse(fs.existsSync(path.join(work, "written.txt")), "the denied Write wrote")
      assert.isFalse(fs.existsSync(path.join(work, "ran.txt")), "the denied Bash ran")

      // The model saw each denial with its guard; the Read ran.
      const results = api.requests.slice(1, 4).map((q) => q.toolResults[0]!)
      assert.deepStrictEqual(results.map((t) => t["is_error"] === true), [true, true, false])
      assert.include(JSON.stringify(results[0]!["content"]), "Write is on the deny list [denyList([\\\"Write\\\"])]")
      assert.include(JSON.stringify(results[1]!["content"]), "Bash requires Glob first [requirePredecessors(")
      assert.deepStrictEqual(
        (r.result?.["permission_denials"] as Array<Record<string, unknown>> | undefined ?? []).map((d) =>
          d["tool_name"]
        ),
        ["Write", "Bash"]
      )

      const entries = await entriesOf(journal, r.sessionId!, work)
      assert.deepStrictEqual(entries.map((e) => e.kind), [
        "claude-code.SessionStart",
        "message",
        "tool",
        Hook.DECISION_KIND,
        "tool",
        Hook.DECISION_KIND,
        "tool",
        Hook.DECISION_KIND,
        "tool.outcome",
        "claude-code.Stop",
        "claude-code.SessionEnd"
      ])
      assert.strictEqual(entries[1]!.payload!["content"], "Write, run, read.")
      const tools = entries.filter((e) => e.kind === "tool")
      assert.deepStrictEqual(tools.map((t) => [t["tool_name"], t["allowed"], t["agent_id"], t["delegation_depth"]]), [
        ["Write", false, "main", 0],
        ["Bash", false, "main", 0],
        ["Read", true, "main", 0]
      ])
      const ids = api.answers.slice(0, 3).map((a) => a.blocks[0]!.type === "tool_use" ? a.blocks[0]!.id : null)
      assert.deepStrictEqual(decisions(entries).map((d) => [d["tool_use_id"], d["verdict"], d["guard"]]), [
        [ids[0], "deny", "denyList([\"Write\"])"],
        [ids[1], "deny", "requirePredecessors({\"Bash\":[\"Glob\"]})"],
        [ids[2], "allow", null]
      ])
      const outcome = entries[8]!.payload!
      assert.strictEqual(outcome["tool_use_id"], ids[2])
      assert.strictEqual(outcome["bytes_read"], "alpha\n".length)

      const id = Hook.sessionId({ session_id: r.sessionId!, cwd: work, hook_event_name: "x" })
      const stats = await run(["--dir", journal, "--json", "stats", id])
      assert.strictEqual(stats.code, 0, stats.stderr)
      const flow = JSON.parse(stats.stdout).data_flow
      assert.strictEqual(flow.total_invocations, 3)
      assert.strictEqual(flow.total_bytes_read, outcome["bytes_read"])
    } finally {
      await api.close()
    }
  }, 180_000)

  it(`${PARALLEL} parallel reads under maxInvocations 5: exactly five allowed, every hook answered`, async () => {
    const { home, journal, work } = await setUp({ maxInvocations: 5 })
    const files = Array.from({ length: PARALLEL }, (_, i) => {
      const file = path.join(work, `f${i}.txt`)
      fs.writeFileSync(file, `file ${i}\n`)
      return file
    })
    const api = await Fake.start(Fake.perConversation(() => [
      Fake.tools(...files.map((file_path) => ({ name: "Read", input: { file_path } }))),
      Fake.text("Read what I could.")
    ]))
    try {
      const r = await Claude.run({ api, prompt: "Read them all.", tools: ["Read"], work, home })
      assert.isFalse(r.timedOut, r.stderr)
      assert.strictEqual(r.code, 0, r.stderr)
      const results = api.requests[1]!.toolResults
      assert.strictEqual(results.length, PARALLEL)
      const errors = results.filter((t) => t["is_error"] === true)
      assert.strictEqual(errors.length, PARALLEL - 5)
      for (const e of errors) {
        assert.include(JSON.stringify(e["content"]), "invocations would exceed 5 [maxInvocations(5)]")
      }

      const entries = await entriesOf(journal, r.sessionId!, work)
      const tools = entries.filter((e) => e.kind === "tool")
      assert.strictEqual(tools.length, PARALLEL)
      assert.deepStrictEqual(tools.map((t) => t["allowed"]), [
        ...Array(5).fill(true),
        ...Array(PARALLEL - 5).fill(false)
      ])
      assert.strictEqual(decisions(entries).length, PARALLEL)
      assert.strictEqual(entries.filter((e) => e.kind === "tool.outcome").length, 5)
    } finally {
      await api.close()
    }
  }, 180_000)

  it("a sub-agent's calls are journaled at depth 1 under its agent id", async () => {
    const { home, journal, work } = await setUp({ maxDelegationDepth: 1 })
    const api = await Fake.start(Fake.perConversation((q) =>
      q.prompt.includes("SUBTASK")
        ? [Fake.tools(Fake.bash("echo from-sub")), Fake.text("sub done")]
        : [
          Fake.tools({
            name: "Agent",
            input: {
              description: "run one",
              prompt: "SUBTASK: run echo",
              subagent_type: "general-purpose",
              run_in_background: false
            }
          }),
          Fake.text("main done")
        ]
    ))
    try {
      const r = await Claude.run({ api, prompt: "Delegate.", tools: ["Bash", "Agent"], work, home })
      assert.isFalse(r.timedOut, r.stderr)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.result?.["result"], "main done")
      const entries = await entriesOf(journal, r.sessionId!, work)
      const tools = entries.filter((e) => e.kind === "tool")
      assert.strictEqual(tools.length, 2)
      const [agent, bash] = tools
      assert.deepStrictEqual([agent!["tool_name"], agent!["agent_id"], agent!["delegation_depth"]], [
        "Agent",
        "main",
        0
      ])
      assert.strictEqual(bash!["tool_name"], "Bash")
      assert.match(String(bash!["agent_id"]), /^[0-9a-f]{17}$/)
      assert.strictEqual(bash!["delegation_depth"], 1)
      assert.isTrue(tools.every((t) => t["allowed"] === true))
      const kinds = entries.map((e) => e.kind)
      const start = kinds.indexOf("claude-code.SubagentStart")
      const stop = kinds.indexOf("claude-code.SubagentStop")
      assert.isTrue(
        start > kinds.indexOf("tool") && start < kinds.lastIndexOf("tool") && stop > kinds.lastIndexOf("tool"),
        kinds.join(",")
      )
      assert.strictEqual(entries[start]!.payload!["agent_id"], bash!["agent_id"])
      assert.strictEqual(decisions(entries)[1]!["agent_type"], "general-purpose")
    } finally {
      await api.close()
    }
  }, 180_000)

  // One run of the real CLI, a sub-agent's sub-agent at depth 2 whose meta file is lowered
  // to depth 1 after its first call, serves two cases: its first Bash (the meta file still
  // true) and its second (the meta file lowered). Whichever case runs first starts it.
  let depthTwoRun: ReturnType<typeof startDepthTwoRun> | undefined
  const startDepthTwoRun = async () => {
    const { home, journal, work } = await setUp({ maxDelegationDepth: 1 })
    const agent = (prompt: string) => ({
      name: "Agent",
      input: { description: "delegate", prompt, subagent_type: "general-purpose", run_in_background: false }
    })
    // Every sub-agent meta file under the home's projects, its spawnDepth lowered to 1.
    const lower = (dir: string): number => {
      let n = 0
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const p = path.join(dir, entry.name)
        if (entry.isDirectory()) n += lower(p)
        else if (entry.name.endsWith(".meta.json")) {
          const meta = JSON.parse(fs.readFileSync(p, "utf8")) as Record<string, unknown>
          if (meta["spawnDepth"] === 2) {
            fs.writeFileSync(p, JSON.stringify({ ...meta, spawnDepth: 1 }))
            n++
          }
        }
      }
      return n
    }
    let lowered = 0
    const api = await Fake.start((q) => {
      if (q.prompt.includes("LEVEL2")) {
        // After its first call was denied at depth 2, the sub-agent's file says 1.
        if (q.turn === 1) lowered += lower(path.join(home, ".claude", "projects"))
        return [
          Fake.tools(Fake.bash("echo one > one.txt")),
          Fake.tools(Fake.bash("echo two > two.txt")),
          Fake.text("level 2 done")
        ][q.turn]
      }
      return (q.prompt.includes("LEVEL1")
        ? [Fake.tools(agent("LEVEL2: write two files")), Fake.text("level 1 done")]
        : [Fake.tools(agent("LEVEL1: delegate again")), Fake.text("main done")])[q.turn]
    })
    try {
      const r = await Claude.run({ api, prompt: "Delegate twice.", tools: ["Bash", "Agent"], work, home })
      const entries = r.timedOut || r.sessionId === undefined ? [] : await entriesOf(journal, r.sessionId, work)
      return { r, work, lowered, entries }
    } finally {
      await api.close()
    }
  }
  const depthTwo = () => (depthTwoRun ??= startDepthTwoRun())

  it("a sub-agent's sub-agent is at depth 2: maxDelegationDepth(1) keeps its Bash from running", async () => {
    const { r, work, entries } = await depthTwo()
    assert.isFalse(r.timedOut, r.stderr)
    assert.isFalse(fs.existsSync(path.join(work, "one.txt")), "the depth-2 Bash ran")
    const tools = entries.filter((e) => e.kind === "tool")
    assert.deepStrictEqual(
      tools.slice(0, 3).map((t) => [t["tool_name"], t["delegation_depth"], t["allowed"]]),
      [["Agent", 0, true], ["Agent", 1, true], ["Bash", 2, false]]
    )
  }, 180_000)

  it("a meta file rewritten to depth 1 mid-session: the sub-agent is still judged at depth 2", async () => {
    const { r, work, lowered, entries } = await depthTwo()
    assert.isFalse(r.timedOut, r.stderr)
    assert.strictEqual(lowered, 1, "the depth-2 sub-agent's meta file was rewritten")
    assert.isFalse(fs.existsSync(path.join(work, "one.txt")), "the depth-2 Bash ran")
    assert.isFalse(fs.existsSync(path.join(work, "two.txt")), "the Bash after the meta file was lowered ran")
    const tools = entries.filter((e) => e.kind === "tool")
    assert.deepStrictEqual(
      tools.map((t) => [t["tool_name"], t["delegation_depth"], t["allowed"]]),
      [["Agent", 0, true], ["Agent", 1, true], ["Bash", 2, false], ["Bash", 2, false]]
    )
    assert.strictEqual(decisions(entries)[3]!["delegation_depth_claimed"], 1)
  }, 180_000)

  it("a journal deleted mid-session is not started afresh: the transcript says what the hooks allowed", async () => {
    const { home, journal, work } = await setUp({ maxInvocations: 3 })
    const turns = [
      Fake.tools(Fake.bash("echo one > one.txt")),
      Fake.tools(Fake.bash("echo two > two.txt")),
      Fake.text("done")
    ]
    const api = await Fake.start((q) => {
      // Between the two calls, the session's journal goes (as a call the hooks did not see could do it).
      if (q.turn === 1) {
        for (const name of fs.readdirSync(journal)) fs.rmSync(path.join(journal, name), { recursive: true })
      }
      return turns[q.turn]
    })
    try {
      const r = await Claude.run({ api, prompt: "Two files.", tools: ["Bash"], work, home })
      assert.isFalse(r.timedOut, r.stderr)
      assert.isTrue(fs.existsSync(path.join(work, "one.txt")))
      assert.isFalse(fs.existsSync(path.join(work, "two.txt")), "the call after the reset ran")
      const results = api.requests.flatMap((q) => q.toolResults.map((t) => JSON.stringify(t)))
      assert.isTrue(
        results.some((t) => t.includes("vanished or shrank") && t.includes("[selfProtection]")),
        results.join("\n")
      )
    } finally {
      await api.close()
    }
  }, 180_000)

  it("fails closed: with a journal it cannot write, the prompt never reaches the model", async () => {
    const root = Claude.tempDir()
    const work = path.join(root, "work")
    fs.mkdirSync(work, { recursive: true })
    const journal = path.join(root, "not-a-directory")
    fs.writeFileSync(journal, "x")
    const installed = await run(["--dir", journal, "claude-code", "install", "--project", work])
    assert.strictEqual(installed.code, 0, installed.stderr)
    const api = await Fake.start(
      Fake.perConversation(() => [Fake.tools(Fake.bash("echo ran > ran.txt")), Fake.text("done")])
    )
    try {
      const r = await Claude.run({ api, prompt: "Run it.", tools: ["Bash"], work, home: path.join(root, "home") })
      assert.isFalse(r.timedOut, r.stderr)
      assert.strictEqual(api.requests.length, 0, "the model was asked")
      assert.isFalse(fs.existsSync(path.join(work, "ran.txt")))
      assert.strictEqual(r.result?.["num_turns"], 0)
      assert.match(
        String(r.result?.["result"]),
        /UserPromptSubmit operation blocked by hook[\s\S]*session-journal: cannot record UserPromptSubmit/
      )
    } finally {
      await api.close()
    }
  }, 180_000)
})
