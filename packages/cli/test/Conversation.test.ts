/**
 * Transcripts as a conversation, without a browser: the one line a call's input
 * comes to (`CallLine`, total over any input), a transcript line as a turn
 * (`Conversation`) with the time the transcript states, and the timeline's row of
 * a `claude-code.line` entry (role, sub-agent, tool use and result, that time;
 * hostile text inert; the line itself on demand; the anchor `eN` kept), and the
 * summary counting turns as messages over the transcript's times.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry } from "@session-journal/core"
import * as fc from "fast-check"
import * as CallLine from "../src/viewer/CallLine.ts"
import * as Conversation from "../src/viewer/Conversation.ts"
import * as ReportModel from "../src/viewer/ReportModel.ts"
import * as Timeline from "../src/viewer/Timeline.ts"

const SEED = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)
const ARCHIVED = 1_764_500_000 // when custody journaled the lines, a day after they happened
const link = { prev_hash: Entry.ZERO_HASH, timestamp_secs: ARCHIVED }
const lineEntry = (sequence: number, record: unknown): Entry.OtherEntry =>
  Entry.makeOther({ ...link, sequence }, Conversation.LINE_KIND, { n: sequence + 1, line: JSON.stringify(record) })

const T = "2025-11-29T07:06:40.000Z" // 1764400000
const user = { type: "user", timestamp: T, message: { role: "user", content: "<script>x()</script> fix the build" } }
const assistant = {
  type: "assistant",
  timestamp: "2025-11-29T07:06:45.000Z",
  message: {
    role: "assistant",
    content: [
      { type: "text", text: "Running the tests." },
      { type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "npm test\n&& echo done" } }
    ]
  }
}
const result = {
  type: "user",
  timestamp: "2025-11-29T07:06:50.000Z",
  permissionDecision: { decision: "reject" },
  message: {
    role: "user",
    content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "denied", is_error: true }]
  }
}
const subagent = {
  type: "assistant",
  timestamp: "2025-11-29T07:07:00.000Z",
  isSidechain: true,
  agentId: "a1b14090cc7d1bd2d",
  message: {
    role: "assistant",
    content: [{ type: "tool_use", id: "toolu_2", name: "Read", input: { file_path: "/w/a.ts" } }]
  }
}
const note = {
  type: "system",
  subtype: "compact_boundary",
  timestamp: "2025-11-29T07:08:00.000Z",
  content: "compacted"
}

describe("CallLine.summary", () => {
  it("says what each kind of call did", () => {
    assert.strictEqual(CallLine.summary("Bash", { command: "npm test", description: "run" }), "npm test")
    assert.strictEqual(CallLine.summary("Read", { file_path: "/w/a.ts" }), "/w/a.ts")
    assert.strictEqual(CallLine.summary("Grep", { pattern: "TODO", path: "src" }), "TODO in src")
    assert.strictEqual(
      CallLine.summary("WebFetch", { url: "https://example.com/x", prompt: "p" }),
      "https://example.com/x"
    )
    assert.strictEqual(
      CallLine.summary("Agent", { subagent_type: "reviewer", description: "review" }),
      "reviewer: review"
    )
    assert.strictEqual(
      CallLine.summary("mcp__github__search_issues", { query: "bug", limit: 3 }),
      "github · search_issues: bug"
    )
    assert.strictEqual(CallLine.summary("mcp__db__ping", {}), "db · ping")
    assert.strictEqual(CallLine.summary("Custom", { target: "prod" }), "target: prod")
    assert.strictEqual(CallLine.summary("Bash", { command: "a\nb" }), "a ⏎ b")
  })

  it("is one line of at most MAX_CHARS for any input (property)", () => {
    fc.assert(
      fc.property(fc.string(), fc.jsonValue(), (name, input) => {
        const line = CallLine.summary(name, input)
        return line.length <= CallLine.MAX_CHARS && !/[\r\n]/.test(line)
      }),
      { seed: SEED, verbose: true, numRuns: 500 }
    )
  })
})

describe("Conversation.parse", () => {
  it("reads roles, parts, sub-agents and the transcript's own time", () => {
    const u = Conversation.parse(JSON.stringify(user))!
    assert.strictEqual(u.role, "user")
    assert.strictEqual(u.timestamp, Date.parse(T))
    assert.deepStrictEqual(u.parts, [{ _tag: "Text", text: user.message.content }])
    const a = Conversation.parse(JSON.stringify(assistant))!
    assert.deepStrictEqual(a.parts[1], {
      _tag: "ToolUse",
      id: "toolu_1",
      name: "Bash",
      line: "npm test ⏎ && echo done"
    })
    const r = Conversation.parse(JSON.stringify(result))!
    assert.deepStrictEqual(r.parts[0], { _tag: "ToolResult", id: "toolu_1", text: "denied", error: true, denied: true })
    assert.strictEqual(Conversation.parse(JSON.stringify(subagent))!.agentId, "a1b14090cc7d1bd2d")
    const n = Conversation.parse(JSON.stringify(note))!
    assert.deepStrictEqual([n.role, n.type], ["note", "system/compact_boundary"])
    assert.isNull(Conversation.parse("not json"))
    assert.isNull(Conversation.parse("{\"no\":\"type\"}"))
  })

  it("is total over any text (property)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.jsonValue().map((v) => JSON.stringify(v))), (text) => {
        const turn = Conversation.parse(text)
        return turn === null || ["user", "assistant", "note"].includes(turn.role)
      }),
      { seed: SEED, verbose: true, numRuns: 500 }
    )
  })
})

describe("the timeline's turns", () => {
  const entries = [user, assistant, result, subagent, note].map((r, i) => lineEntry(i, r))

  it("shows a transcript line as a turn at the time the transcript states", () => {
    const rows = entries.map(Timeline.row)
    assert.match(rows[0]!, /^<tr id="e0" [^>]*class="msg turn role-user"/)
    assert.include(rows[0]!, "2025-11-29T07:06:40Z")
    assert.include(rows[0]!, `title="journaled ${"2025-11-30T10:53:20Z"}"`)
    assert.include(rows[0]!, "&lt;script&gt;x()&lt;/script&gt; fix the build")
    assert.notInclude(rows[0]!, "<script>")
    assert.include(rows[1]!, `→ <b>Bash</b> <code>npm test ⏎ &amp;&amp; echo done</code>`)
    assert.include(rows[2]!, `← result of <code>toolu_1</code> <em>refused</em>`)
    assert.match(rows[3]!, /class="msg turn role-assistant sub"/)
    assert.include(rows[3]!, `sub-agent <code>a1b14090cc7d1bd2d</code>`)
    assert.include(rows[4]!, "system/compact_boundary")
    // The line itself on demand, as stored.
    for (const row of rows) assert.include(row, `<details class="raw"><summary class="muted">line</summary>`)
  })

  it("counts the user's and the assistant's lines as messages, over the times the transcript states", () => {
    const s = ReportModel.summarize(entries)
    assert.strictEqual(s.messages, 4)
    assert.strictEqual(s.others, 1)
    assert.strictEqual(s.firstSecs, 1764400000)
    assert.strictEqual(s.lastSecs, 1764400080)
  })
})
