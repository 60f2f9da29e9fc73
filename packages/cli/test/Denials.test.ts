/**
 * The denials of a session (`Denials`), against a model: random histories of
 * allowed and denied calls, with and without decision entries beside them
 * (linked by `tool_sequence`, or just after the call), other entries between;
 * and the decision rows of the timeline, hostile guard names inert.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry } from "@session-journal/core"
import * as fc from "fast-check"
import * as Denials from "../src/viewer/Denials.ts"
import * as ReportModel from "../src/viewer/ReportModel.ts"
import * as Timeline from "../src/viewer/Timeline.ts"

const STRESS = process.env["STRESS"] === "1"
const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))

const at = (sequence: number) => ({ sequence, prev_hash: Entry.ZERO_HASH, timestamp_secs: 1764400000 })
const tool = (sequence: number, tool_name: string, allowed: boolean) =>
  Entry.makeTool(at(sequence), {
    tool_name,
    server_id: "srv",
    agent_id: "main",
    bytes_read: 0,
    bytes_written: 0,
    delegation_depth: 0,
    allowed
  })
const other = (sequence: number, kind: string, payload: unknown) =>
  Entry.makeOther(at(sequence), kind, payload as never)

// One call: allowed or not; its decision beside it: none, linked by tool_sequence, or just after it; a guard or none.
const call = fc.record({
  tool: fc.constantFrom("Read", "Bash", "Write"),
  allowed: fc.boolean(),
  decision: fc.constantFrom("none", "linked", "after"),
  guard: fc.option(fc.constantFrom("maxStreak(3)", "denyList([\"Write\"])", "maxInvocations(5)"), { nil: null }),
  noise: fc.nat(2)
})

describe("Denials", () => {
  it("counts denied calls, per guard and without one, as the model does", () => {
    fc.assert(
      fc.property(fc.array(call, { maxLength: 60 }), (calls) => {
        const entries: Array<Entry.Entry> = []
        const model = { denied: 0, byGuard: new Map<string, number>(), unguarded: 0 }
        for (const c of calls) {
          const seq = entries.length
          entries.push(tool(seq, c.tool, c.allowed))
          if (c.decision !== "none") {
            entries.push(other(entries.length, "claude-code.decision", {
              verdict: c.allowed ? "allow" : "deny",
              guard: c.allowed ? null : c.guard,
              reason: c.allowed ? null : `no ${c.tool}`,
              ...(c.decision === "linked" ? { tool_sequence: seq } : {})
            }))
          }
          for (let i = 0; i < c.noise; i++) {
            entries.push(other(entries.length, "message", { role: "user", content: "x" }))
          }
          if (!c.allowed) {
            model.denied++
            if (c.decision !== "none" && c.guard !== null) {
              model.byGuard.set(c.guard, (model.byGuard.get(c.guard) ?? 0) + 1)
            } else model.unguarded++
          }
        }
        const t = Denials.tally()
        for (const e of entries) t.add(e)
        const r = t.result()
        assert.strictEqual(r.denied, model.denied)
        assert.strictEqual(r.unguarded, model.unguarded)
        assert.deepStrictEqual(new Map(r.byGuard), model.byGuard)
        // Most first.
        for (let i = 1; i < r.byGuard.length; i++) assert.isAtLeast(r.byGuard[i - 1]![1], r.byGuard[i]![1])
        assert.strictEqual(r.recent.length, Math.min(model.denied, Denials.MAX_RECENT))
        // The summary of a report counts the same.
        assert.deepStrictEqual(ReportModel.summarize(entries).denials, r)
      }),
      { numRuns: STRESS ? 20_000 : 300, seed: SEED }
    )
  })

  it("keeps its memory bounded: the newest denials, a bounded number of guards", () => {
    const t = Denials.tally()
    let seq = 0
    for (let i = 0; i < 1000; i++) {
      const s = seq++
      t.add(tool(s, "Bash", false))
      t.add(other(seq++, "claude-code.decision", { verdict: "deny", guard: `g${i}`, reason: "r", tool_sequence: s }))
    }
    const r = t.result()
    assert.strictEqual(r.denied, 1000)
    assert.strictEqual(r.recent.length, Denials.MAX_RECENT)
    assert.strictEqual(r.recent[r.recent.length - 1]!.guard, "g999")
    assert.strictEqual(r.byGuard.length, Denials.MAX_GUARDS + 1)
    assert.strictEqual(new Map(r.byGuard).get(Denials.OTHER_GUARDS), 1000 - Denials.MAX_GUARDS)
    assert.strictEqual(r.unguarded, 0)
  })

  it("reads decisions of any kind by their shape; ignores what is not one", () => {
    assert.deepStrictEqual(
      Denials.decisionOf(other(3, "x", { verdict: "deny", guard: "g", reason: "r", tool_sequence: 2 })),
      {
        verdict: "deny",
        guard: "g",
        reason: "r",
        toolSequence: 2
      }
    )
    for (const payload of [{ verdict: "Deny" }, { verdict: true }, "deny", null, [{ verdict: "deny" }]]) {
      assert.isNull(Denials.decisionOf(other(0, "x", payload)), JSON.stringify(payload))
    }
    assert.isNull(Denials.decisionOf(tool(0, "Bash", false)))
    assert.strictEqual(
      Denials.decisionOf(other(0, "x", { verdict: "deny", tool_sequence: -1, guard: 3 }))!.toolSequence,
      null
    )
  })

  it("a decision row says DENIED, by which guard, and links the call; hostile text inert", () => {
    const hostile = "<script>alert(1)</script>\"'"
    const row = Timeline.row(
      other(5, "claude-code.decision", { verdict: "deny", guard: hostile, reason: hostile, tool_sequence: 4 })
    )
    assert.include(row, `class="other decision denied"`)
    assert.include(row, `<em>DENIED</em> <i>call</i> <a href="#e4">4</a> <i>by</i> <code class="guard">&lt;script&gt;`)
    assert.notInclude(row, "<script>")
    const allowed = Timeline.row(
      other(7, "claude-code.decision", { verdict: "allow", guard: null, reason: null, tool_sequence: 6 })
    )
    assert.include(allowed, `class="other decision allowed"`)
    assert.notInclude(allowed, "DENIED")
    // A person was asked: a decision, not a denial.
    const ask = { verdict: "ask", guard: "ask(\"Bash(git push *)\")", reason: "pushes need a person", tool_sequence: 8 }
    assert.strictEqual(Denials.decisionOf(other(9, "claude-code.decision", ask))?.verdict, "ask")
    const asked = Timeline.row(other(9, "claude-code.decision", ask))
    assert.include(asked, `<em>asked</em>`)
    assert.notInclude(asked, "DENIED")
  })
})
