/**
 * The real Claude Code CLI, offline against the scripted fake Messages API, with a
 * PreToolUse `command` hook in `$W/.claude/settings.json`: the hook gets the input
 * PROTOCOL.md (a) documents, the result envelope arrives, and a hook's
 * `permissionDecision: "deny"` keeps the Bash command from running. Skipped (with
 * the reason on stderr) only when the binary is absent; `.ci/run` installs it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as Claude from "./claudeCli.ts"
import * as Fake from "./fakeApi.ts"

afterAll(Claude.cleanup)

// Appends its stdin (one hook input) as a line to the file named by argv[2]; with
// argv[3] = "deny-if" denies a Bash call whose command contains argv[4].
const HOOK = `
const fs = require("node:fs")
const chunks = []
process.stdin.on("data", (b) => chunks.push(b))
process.stdin.on("end", () => {
  const text = Buffer.concat(chunks).toString("utf8")
  fs.appendFileSync(process.argv[2], text.replace(/\\n/g, " ") + "\\n")
  const input = JSON.parse(text)
  if (process.argv[3] === "deny-if" && String(input.tool_input && input.tool_input.command).includes(process.argv[4])) {
    process.stdout.write(JSON.stringify({ hookSpecificOutput: {
      hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: "no " + process.argv[4] + " here"
    } }))
  }
})
`

const hookFile = (dir: string): string => {
  const file = path.join(dir, "hook.cjs")
  fs.writeFileSync(file, HOOK)
  return file
}

const readLines = (file: string): Array<Record<string, unknown>> =>
  fs.existsSync(file)
    ? fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
    : []

describe.skipIf(Claude.CLAUDE_BIN === null)(`Claude Code ${Claude.CLAUDE_CODE_VERSION}, offline with hooks`, () => {
  it("a PreToolUse hook gets the documented input; the call runs and the result envelope arrives", async () => {
    const api = await Fake.start(Fake.inOrder([Fake.tools(Fake.bash("echo hi", "say hi")), Fake.text("It said hi.")]))
    try {
      const root = Claude.tempDir()
      const log = path.join(root, "pre.jsonl")
      const r = await Claude.run({
        api,
        prompt: "Say hi through Bash.",
        tools: ["Bash"],
        work: path.join(root, "work"),
        home: path.join(root, "home"),
        settings: { hooks: { PreToolUse: [{ matcher: "Bash", hooks: [Claude.nodeHook(hookFile(root), [log])] }] } }
      })
      assert.isFalse(r.timedOut, r.stderr)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(api.connects, [])

      // The result envelope.
      assert.strictEqual(r.result?.["subtype"], "success")
      assert.strictEqual(r.result?.["is_error"], false)
      assert.strictEqual(r.result?.["result"], "It said hi.")
      assert.deepStrictEqual(r.result?.["permission_denials"], [])
      const sid = r.sessionId!
      assert.match(sid, /^[0-9a-f-]{36}$/)
      assert.strictEqual(r.result?.["session_id"], sid)

      // The hook's input: one PreToolUse for the one call.
      const toolUse = api.answers[0]!.blocks[0]!
      assert.strictEqual(toolUse.type, "tool_use")
      const inputs = readLines(log)
      assert.strictEqual(inputs.length, 1)
      const input = inputs[0]!
      assert.strictEqual(input["session_id"], sid)
      assert.strictEqual(input["hook_event_name"], "PreToolUse")
      assert.strictEqual(input["tool_name"], "Bash")
      assert.deepStrictEqual(input["tool_input"], { command: "echo hi", description: "say hi" })
      assert.strictEqual(input["tool_use_id"], toolUse.type === "tool_use" ? toolUse.id : null)
      assert.strictEqual(input["cwd"], r.work)
      assert.strictEqual(input["permission_mode"], "default")
      assert.isString(input["prompt_id"])
      // Encoded as PROTOCOL.md (e) says: every character outside [A-Za-z0-9] becomes "-".
      const project = r.work.replace(/[^A-Za-z0-9]/g, "-")
      assert.strictEqual(input["transcript_path"], path.join(r.home, ".claude", "projects", project, `${sid}.jsonl`))
      assert.notProperty(input, "agent_id")

      // The model got the command's output; every request named the session.
      assert.strictEqual(api.requests.length, 2)
      assert.isTrue(api.requests.every((q) => q.sessionId === sid && q.url === "/v1/messages?beta=true"))
      const [result] = api.requests[1]!.toolResults
      assert.strictEqual(result?.["tool_use_id"], input["tool_use_id"])
      assert.strictEqual(result?.["is_error"], false)
      assert.include(JSON.stringify(result?.["content"]), "hi")
    } finally {
      await api.close()
    }
  })

  it("a sub-agent and parallel calls through the fake: sub-agent events carry agent_id and agent_type", async () => {
    const subagent = {
      name: "Agent",
      input: {
        description: "run one",
        prompt: "SUBTASK: run echo",
        subagent_type: "general-purpose",
        run_in_background: false
      }
    }
    const api = await Fake.start(Fake.perConversation((r) =>
      // A sub-agent's conversation starts with its own prompt; it sends the parent's session id.
      r.prompt.includes("SUBTASK")
        ? [Fake.tools(Fake.bash("echo from-sub")), Fake.text("sub done")]
        : [
          Fake.tools(subagent),
          Fake.tools(Fake.bash("echo one"), Fake.bash("echo two"), {
            name: "Read",
            input: { file_path: "/etc/hostname" }
          }),
          Fake.text("main done")
        ]
    ))
    try {
      const root = Claude.tempDir()
      const log = path.join(root, "events.jsonl")
      const every = [{ matcher: "", hooks: [Claude.nodeHook(hookFile(root), [log])] }]
      const r = await Claude.run({
        api,
        prompt: "Delegate, then run three calls at once.",
        tools: ["Bash", "Read", "Agent"],
        work: path.join(root, "work"),
        home: path.join(root, "home"),
        settings: { hooks: { PreToolUse: every, PostToolUse: every, SubagentStart: every, SubagentStop: every } }
      })
      assert.isFalse(r.timedOut, r.stderr)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.strictEqual(r.result?.["result"], "main done")
      assert.deepStrictEqual(api.connects, [])
      assert.isTrue(api.requests.every((q) => q.sessionId === r.sessionId))

      const events = readLines(log)
      assert.isTrue(events.every((e) => e["session_id"] === r.sessionId))
      const sub = events.filter((e) => e["agent_id"] !== undefined)
      const agentId = sub[0]?.["agent_id"]
      assert.match(String(agentId), /^[0-9a-f]{17}$/)
      assert.deepStrictEqual(
        sub.map((e) => [e["hook_event_name"], e["tool_name"] ?? null, e["agent_id"], e["agent_type"]]),
        [
          ["SubagentStart", null, agentId, "general-purpose"],
          ["PreToolUse", "Bash", agentId, "general-purpose"],
          ["PostToolUse", "Bash", agentId, "general-purpose"],
          ["SubagentStop", null, agentId, "general-purpose"]
        ]
      )
      // The main agent's events have neither field; the three parallel calls each got their hooks.
      const main = events.filter((e) => e["agent_id"] === undefined)
      assert.isTrue(main.every((e) => !("agent_type" in e)))
      const pre = main.filter((e) => e["hook_event_name"] === "PreToolUse").map((e) => e["tool_name"])
      assert.deepStrictEqual([...pre].sort(), ["Agent", "Bash", "Bash", "Read"])
      assert.strictEqual(main.filter((e) => e["hook_event_name"] === "PostToolUse").length, 4)
    } finally {
      await api.close()
    }
  })

  it("a hook's permissionDecision deny: that Bash never runs, the next one does", async () => {
    const api = await Fake.start(Fake.perConversation(() => [
      Fake.tools(Fake.bash("echo no > denied.txt; echo wrote-denied", "write the denied marker")),
      Fake.tools(Fake.bash("echo yes > allowed.txt; echo wrote-allowed", "write the allowed marker")),
      Fake.text("One of two.")
    ]))
    try {
      const root = Claude.tempDir()
      const log = path.join(root, "pre.jsonl")
      const r = await Claude.run({
        api,
        prompt: "Write both markers.",
        tools: ["Bash"],
        work: path.join(root, "work"),
        home: path.join(root, "home"),
        settings: {
          hooks: {
            PreToolUse: [{ matcher: "Bash", hooks: [Claude.nodeHook(hookFile(root), [log, "deny-if", "denied.txt"])] }]
          }
        }
      })
      assert.isFalse(r.timedOut, r.stderr)
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(api.connects, [])
      assert.isFalse(fs.existsSync(path.join(r.work, "denied.txt")), "the denied command ran")
      assert.strictEqual(fs.readFileSync(path.join(r.work, "allowed.txt"), "utf8"), "yes\n")
      assert.strictEqual(readLines(log).length, 2)

      // The model was told, as PROTOCOL.md (b) says, and the result lists the denial.
      const [denied] = api.requests[1]!.toolResults
      assert.strictEqual(denied?.["is_error"], true)
      assert.include(JSON.stringify(denied?.["content"]), "PreToolUse:Bash hook error: no denied.txt here")
      const denials = r.result?.["permission_denials"] as Array<Record<string, unknown>>
      assert.strictEqual(denials.length, 1)
      assert.strictEqual(denials[0]!["tool_name"], "Bash")
      assert.strictEqual(denials[0]!["tool_use_id"], denied?.["tool_use_id"])
      assert.strictEqual(r.result?.["result"], "One of two.")
    } finally {
      await api.close()
    }
  })
})
