/**
 * A call is one row (`Calls`), without a browser: its tool entry, decision and
 * outcome make one row saying what it did, the verdict with guard and reason, how
 * long it took, its bytes and its error; for any hooked session, in the order
 * written or arriving live, every entry's `eN` is in the page exactly once, rows
 * stay in order, and no more than the bound is held back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Guard } from "@session-journal/core"
import { Journaling } from "@session-journal/mcp"
import * as fc from "fast-check"
import * as Calls from "../src/viewer/Calls.ts"
import * as Timeline from "../src/viewer/Timeline.ts"
import { entriesOf, SEED, step } from "./hookEntries.ts"

const link = { prev_hash: Entry.ZERO_HASH, timestamp_secs: 1764400000 }
const tool = (sequence: number, tool_name: string, allowed = true, agent_id = "main") =>
  Entry.makeTool({ ...link, sequence }, {
    tool_name,
    server_id: "claude-code",
    agent_id,
    bytes_read: 0,
    bytes_written: 42,
    delegation_depth: agent_id === "main" ? 0 : 1,
    allowed
  })
const other = (sequence: number, kind: string, payload: unknown, secs = 0) =>
  Entry.makeOther({ ...link, sequence, timestamp_secs: link.timestamp_secs + secs }, kind, payload as never)
const decision = (sequence: number, toolSequence: number, id: string, input: unknown, deny?: string) =>
  other(sequence, "claude-code.decision", {
    tool_use_id: id,
    tool_input: input,
    tool_sequence: toolSequence,
    verdict: deny === undefined ? "allow" : "deny",
    guard: deny === undefined ? null : "denyList([Write])",
    reason: deny ?? null
  })
const outcome = (sequence: number, id: string, extra: Record<string, unknown>, secs = 2) =>
  other(
    sequence,
    Entry.OUTCOME_KIND,
    { tool_use_id: id, bytes_read: 2048, bytes_written: 0, error: null, ...extra },
    secs
  )

const rowIds = (html: string) => [...html.matchAll(/<tr id="e(\d+)"/g)].map((m) => Number(m[1]))
const allIds = (html: string) => [...html.matchAll(/id="e(\d+)"/g)].map((m) => Number(m[1]))

const render = (entries: ReadonlyArray<Entry.Entry>, maxHeld?: number) => {
  const g = Calls.grouper(Timeline.row, maxHeld)
  return entries.map(g.add).join("") + g.end()
}

describe("Calls", () => {
  it("writes a call's three entries as one row: what, verdict, time, bytes, error, the entries on demand", () => {
    const html = render([
      tool(0, "Bash"),
      decision(1, 0, "toolu_a", { command: "npm test", description: "run" }),
      other(2, "message", { role: "assistant", content: "waiting" }),
      outcome(3, "toolu_a", { duration_ms: 1500, error: "exit 1\nmore" }),
      tool(4, "Write", false),
      decision(5, 4, "toolu_b", { file_path: "/etc/passwd" }, "Write is on the deny list")
    ])
    assert.deepStrictEqual(rowIds(html), [0, 2, 4])
    assert.deepStrictEqual(allIds(html).sort((a, b) => a - b), [0, 1, 2, 3, 4, 5])
    const rowOf = (seq: number) => html.slice(html.indexOf(`<tr id="e${seq}"`)).split("</tr>")[0]!
    const [bash, write] = [rowOf(0), rowOf(4)]
    assert.include(bash, `<b>Bash</b> <code class="what">npm test</code>`)
    assert.include(bash, `<em>allowed</em>`)
    assert.include(bash, `<span class="took">1.5 s</span>`)
    assert.include(bash, `<i>read</i> 2.0 KiB · <i>written</i> 42 B`)
    assert.include(bash, `<span class="err">error: exit 1</span>`)
    assert.include(bash, `<summary class="muted">entries 0, 1, 3</summary>`)
    assert.include(bash, `data-tool="Bash" data-agent="main" data-verdict="allow"`)
    assert.include(
      write,
      `<em>DENIED</em> <i>by</i> <code class="guard">denyList([Write])</code> Write is on the deny list`
    )
    assert.include(write, `class="call tool denied"`)
  })

  it("an MCP call through the gateway, whose outcome names it by sequence, is one row, on a page and live (failed before)", () => {
    const result = Journaling.outcomeEntry(
      { id: 3, tool: "mcp__everything__echo", sequence: 0 },
      { bytes: 2048, sha256: null, isError: false, error: null },
      250
    )
    const entries = [
      tool(0, "mcp__everything__echo"),
      other(1, Journaling.DECISION_KIND, {
        jsonrpc_id: 3,
        tool_name: "mcp__everything__echo",
        tool_input: { message: "hi" },
        ...Guard.decisionPayload(Guard.allow, 0)
      }),
      other(2, result.kind, result.payload, 1)
    ]
    const html = render(entries)
    assert.deepStrictEqual(rowIds(html), [0])
    assert.include(html, `<span class="took">250 ms</span>`)
    assert.include(html, `<summary class="muted">entries 0, 1, 2</summary>`)
    const live = Calls.live(Timeline.row)
    const sent = entries.map(live.add)
    assert.deepStrictEqual(sent.map((r) => r.replace), [null, 0, 0])
    assert.include(sent[2]!.html, `<span class="took">250 ms</span>`)
  })

  it("a call a door only decided (core's own decision entry: no outcome is ever recorded) has no note of a missing outcome (failed before)", () => {
    const entries = [
      tool(0, "Bash"),
      other(1, Guard.DECISION_KIND, Guard.decisionPayload(Guard.allow, 0)),
      tool(2, "Read"),
      other(3, Guard.DECISION_KIND, Guard.decisionPayload(Guard.allow, 2)),
      other(4, "message", { role: "assistant", content: "done" })
    ]
    const html = render(entries)
    assert.deepStrictEqual(rowIds(html), [0, 2, 4])
    assert.notInclude(html, "no outcome recorded here")
    const live = Calls.live(Timeline.row)
    for (const r of entries.map(live.add)) assert.notInclude(r.html, "no outcome recorded here")
    // Past the bound too: the row is written as known, with no such note.
    assert.notInclude(render(entries, 1), "no outcome recorded here")
    // A hooked call's decision names its call id: until its outcome the note is there.
    assert.include(render([tool(0, "Bash"), decision(1, 0, "toolu_a", { command: "ls" })]), "no outcome recorded here")
  })

  it("a call whose outcome comes after the bound is written as known, and its outcome links to it", () => {
    const entries = [
      tool(0, "Agent"),
      decision(1, 0, "toolu_agent", { subagent_type: "reviewer", description: "review" }),
      ...Array.from({ length: 6 }, (_, i) => other(2 + i, "message", { role: "user", content: `m${i}` })),
      outcome(8, "toolu_agent", {}, 9)
    ]
    const html = render(entries, 4)
    assert.deepStrictEqual(rowIds(html), [0, 2, 3, 4, 5, 6, 7, 8])
    assert.include(html, "no outcome recorded here")
    assert.include(html, `↳ outcome of <a href="#e0">call 0</a>`)
    // Past the bound on the characters held, the same.
    const small = Calls.grouper(Timeline.row, 100, 1000)
    const chars = entries.map(small.add).join("") + small.end()
    assert.include(chars, `↳ outcome of <a href="#e0">call 0</a>`)
    // Within the bounds it is one row, 9 s long.
    const whole = render(entries)
    assert.deepStrictEqual(rowIds(whole), [0, 2, 3, 4, 5, 6, 7])
    assert.include(whole, `<span class="took">9.0 s</span>`)
  })

  it("a call held for its outcome counts toward the characters held: a large one is written as known (failed before: only written rows counted)", () => {
    const result = Journaling.outcomeEntry(
      { id: 1, tool: "mcp__fs__write", sequence: 0 },
      { bytes: 2, sha256: null, isError: false, error: null },
      10
    )
    const entries = [
      tool(0, "mcp__fs__write"),
      other(1, Journaling.DECISION_KIND, {
        jsonrpc_id: 1,
        tool_name: "mcp__fs__write",
        tool_input: { content: "x".repeat(50_000) },
        ...Guard.decisionPayload(Guard.allow, 0)
      }),
      other(2, "message", { role: "user", content: "m" }),
      other(3, result.kind, result.payload, 1)
    ]
    const g = Calls.grouper(Timeline.row, Calls.MAX_HELD, 10_000)
    const before = entries.slice(0, 3).map(g.add).join("")
    assert.deepStrictEqual(rowIds(before), [0, 2], "the large call is not held past the bound on characters")
    const html = before + g.add(entries[3]!) + g.end()
    assert.include(html, `↳ outcome of <a href="#e0">call 0</a>`)
  })

  it("live: the calls remembered for their outcomes are bounded in characters too, the oldest forgotten (failed before)", () => {
    const gateway = (sequence: number, id: number) => [
      tool(sequence, "mcp__fs__write"),
      other(sequence + 1, Journaling.DECISION_KIND, {
        jsonrpc_id: id,
        tool_name: "mcp__fs__write",
        tool_input: { content: "x".repeat(6_000) },
        ...Guard.decisionPayload(Guard.allow, sequence)
      })
    ]
    const result = (sequence: number, id: number, call: number) => {
      const o = Journaling.outcomeEntry(
        { id, tool: "mcp__fs__write", sequence: call },
        { bytes: 2, sha256: null, isError: false, error: null },
        10
      )
      return other(sequence, o.kind, o.payload, 1)
    }
    const live = Calls.live(Timeline.row, 10_000)
    for (const e of [...gateway(0, 1), ...gateway(2, 2)]) live.add(e)
    // The first call's payload was forgotten to keep the second's within the bound.
    assert.strictEqual(live.add(result(4, 1, 0)).replace, null)
    assert.strictEqual(live.add(result(5, 2, 2)).replace, 2)
  })

  it("for any hooked session every entry is in the page once, rows in order, at most the bound held (property)", () => {
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 60 }),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 4 }),
        fc.integer({ min: 1, max: 10 }),
        (steps, gaps, maxHeld) => {
          const entries = entriesOf(steps, gaps)
          const g = Calls.grouper(Timeline.row, maxHeld)
          let html = ""
          let written = 0
          entries.forEach((e, i) => {
            html += g.add(e)
            written = allIds(html).length
            // A held row is a call of at most two entries (its tool entry and decision).
            assert.isAtMost(i + 1 - written, 2 * (maxHeld + 1), "held back past the bound")
          })
          html += g.end()
          assert.deepStrictEqual(allIds(html).sort((a, b) => a - b), entries.map((e) => e.sequence))
          const rows = rowIds(html)
          assert.deepStrictEqual(rows, [...rows].sort((a, b) => a - b))
        }
      ),
      { seed: SEED, verbose: true, numRuns: 300 }
    )
  })

  it("live: each call's row is replaced as its decision and outcome come; every entry once (property)", () => {
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 60 }),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 4 }),
        (steps, gaps) => {
          const entries = entriesOf(steps, gaps)
          const live = Calls.live(Timeline.row)
          // The page as the viewer's script builds it: rows by id, replaced in place.
          const page: Array<{ id: number; html: string }> = []
          for (const e of entries) {
            const r = live.add(e)
            const at = r.replace === null ? -1 : page.findIndex((p) => p.id === r.replace)
            if (at >= 0) page[at] = { id: r.replace!, html: r.html }
            else page.push({ id: e.sequence, html: r.html })
          }
          const html = page.map((p) => p.html).join("\n")
          assert.deepStrictEqual(allIds(html).sort((a, b) => a - b), entries.map((e) => e.sequence))
        }
      ),
      { seed: SEED, verbose: true, numRuns: 300 }
    )
  })
})
