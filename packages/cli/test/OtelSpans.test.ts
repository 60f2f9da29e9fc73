/**
 * `Spans.fold`, the pure half of `otel export`, over any order of hook-like
 * entries (calls of the main agent and of sub-agents, decisions, outcomes with and
 * without `duration_ms`, sub-agents starting and stopping, unrelated entries):
 * every span started is ended exactly once, a parent is open when its child
 * starts, no span ends before it starts, and the bound on open calls holds; the
 * spans assembled from the operations are each complete once, their parents among
 * them, and a second fold of the same entries gives the same spans (so the ids
 * derived from their keys are the same: what lets a live export and a later
 * `otel export` agree).
 */
import { assert, describe, it } from "@effect/vitest"
import { type Entry, Guard } from "@session-journal/core"
import { Journaling } from "@session-journal/mcp"
import * as fc from "fast-check"
import * as Spans from "../src/otel/Spans.ts"
import * as Denials from "../src/viewer/Denials.ts"
import { entriesOf, HASH, otherAt, SEED, step, toolAt } from "./hookEntries.ts"
// Any hook-like session: its steps, and the gaps between their times.
const sessions = [
  fc.array(step, { maxLength: 80 }),
  fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 5 })
] as const

describe("Spans.fold", () => {
  it("starts each span once, ends it once, after its start, under a parent that is open (property)", () => {
    fc.assert(
      fc.property(
        ...sessions,
        (steps, gaps) => {
          const entries = entriesOf(steps, gaps)
          const fold = Spans.fold("s1", null)
          const ops = [...entries.flatMap((e) => fold.add(e)), ...fold.finish()]
          const open = new Map<string, bigint>()
          const ended = new Set<string>()
          for (const op of ops) {
            if (op._tag === "Start") {
              assert.isFalse(open.has(op.key) || ended.has(op.key), `${op.key} started twice`)
              if (op.parent !== null) assert.isTrue(open.has(op.parent), `${op.key}'s parent ${op.parent} is open`)
              else assert.strictEqual(op.key, Spans.SESSION_KEY)
              assert.strictEqual(op.attributes["session_journal.session.id"], "s1")
              assert.isNumber(op.attributes["session_journal.entry.sequence"])
              open.set(op.key, op.time)
            } else if (op._tag === "End") {
              const start = open.get(op.key)
              assert.isDefined(start, `${op.key} ended while not open`)
              assert.isTrue(op.time >= start!, `${op.key} ends before it starts`)
              open.delete(op.key)
              ended.add(op.key)
            } else {
              assert.isTrue(open.has(op.key), `${op._tag} on ${op.key}, which is not open`)
            }
          }
          assert.strictEqual(open.size, 0, `still open: ${[...open.keys()].join(", ")}`)
          const calls = entries.filter((e) => e.kind === "tool").length
          assert.strictEqual([...ended].filter((k) => k.startsWith("call:")).length, calls)
          if (entries.length > 0) assert.isTrue(ended.has(Spans.SESSION_KEY))
        }
      ),
      { seed: SEED, verbose: true, numRuns: 300 }
    )
  })

  it("assembles each span once, its parent among them, the same on a second fold (property)", () => {
    fc.assert(
      fc.property(
        ...sessions,
        (steps, gaps) => {
          const entries = entriesOf(steps, gaps)
          const assemble = () => {
            const fold = Spans.fold("s1", null)
            const assembler = Spans.assembler()
            const out = [...entries.flatMap((e) => assembler.apply(fold.add(e))), ...assembler.apply(fold.finish())]
            assert.strictEqual(assembler.open(), 0)
            return out
          }
          const spans = assemble()
          const keys = new Set(spans.map((f) => f.key))
          assert.strictEqual(keys.size, spans.length, "a span assembled twice")
          for (const f of spans) {
            if (f.parent === null) assert.strictEqual(f.key, Spans.SESSION_KEY)
            else assert.isTrue(keys.has(f.parent), `${f.key}'s parent ${f.parent}`)
            assert.isTrue(f.end >= f.start)
          }
          assert.deepStrictEqual(assemble(), spans)
          const ids = new Set(spans.map((f) => Spans.spanIdOf("s1", f.key)))
          assert.strictEqual(ids.size, spans.length)
          for (const id of ids) assert.match(id, /^[0-9a-f]{16}$/)
        }
      ),
      { seed: SEED, verbose: true, numRuns: 200 }
    )
    assert.match(Spans.traceIdOf("s1"), /^[0-9a-f]{32}$/)
    assert.notStrictEqual(Spans.traceIdOf("s1"), Spans.traceIdOf("s2"))
  })

  it("ends an MCP call at its outcome, which names the call by its sequence (failed before: it ended at the session's end)", () => {
    const at = (sequence: number, kind: string, payload: unknown) => otherAt(sequence, 100 + sequence, kind, payload)
    const tool = { ...toolAt(1, 101, { tool: "mcp__everything__echo" }), server_id: "everything", agent_id: "client" }
    const outcome = Journaling.outcomeEntry(
      { id: 7, tool: "mcp__everything__echo", sequence: 1 },
      { bytes: 42, sha256: null, isError: false, error: null },
      1500
    )
    const fold = Spans.fold("mcp-1", null)
    const assembler = Spans.assembler()
    assembler.apply(fold.add(at(0, Journaling.INITIALIZE_KIND, {})))
    assembler.apply(fold.add(tool))
    assembler.apply(fold.add(at(2, Journaling.DECISION_KIND, {
      jsonrpc_id: 7,
      tool_name: "mcp__everything__echo",
      ...Guard.decisionPayload(Guard.allow, 1)
    })))
    const ended = assembler.apply(fold.add(at(3, outcome.kind, outcome.payload)))
    assert.deepStrictEqual(ended.map((f) => f.key), ["call:1"])
    const call = ended[0]!
    assert.strictEqual(call.end - call.start, 1_500_000_000n)
    assert.strictEqual(call.attributes["session_journal.outcome.sequence"], 3)
    assert.strictEqual(call.attributes["session_journal.bytes_read"], 42)
    assert.strictEqual(call.attributes[Spans.Attr.jsonRpcId], "7")
    assert.strictEqual(call.attributes[Spans.Attr.mcpMethod], "tools/call")
    assert.isUndefined(call.attributes[Spans.Attr.toolCallId])
  })

  it("a call id used twice: the first call's denial leaves the second paired with its outcome (failed before)", () => {
    const at = (sequence: number, kind: string, payload: unknown) => otherAt(sequence, 100 + sequence, kind, payload)
    const tool = (sequence: number, allowed: boolean) => toolAt(sequence, 100 + sequence, { allowed })
    const decision = (sequence: number, of: number, verdict: "allow" | "deny") =>
      at(sequence, "claude-code.decision", {
        tool_use_id: "toolu_same",
        tool_sequence: of,
        verdict,
        guard: verdict === "deny" ? "denyList([Bash])" : null,
        reason: null
      })
    const fold = Spans.fold("s1", null)
    const assembler = Spans.assembler()
    const apply = (e: Entry.Entry) => assembler.apply(fold.add(e))
    apply(tool(0, true))
    apply(decision(1, 0, "allow"))
    apply(tool(2, true))
    apply(decision(3, 2, "allow"))
    // A second decision on the first call, a denial, ends it.
    assert.deepStrictEqual(apply(decision(4, 0, "deny")).map((f) => f.key), ["call:0"])
    const ended = apply(at(5, "tool.outcome", { tool_use_id: "toolu_same", bytes_read: 7, error: null }))
    assert.deepStrictEqual(ended.map((f) => f.key), ["call:2"])
    assert.strictEqual(ended[0]!.attributes["session_journal.bytes_read"], 7)
  })

  it("an open span holds no more of a payload's strings than the bound, whatever their size (failed before)", () => {
    const huge = "x".repeat(200_000)
    const fold = Spans.fold("s1", null)
    const assembler = Spans.assembler()
    const apply = (e: Entry.Entry) => assembler.apply(fold.add(e))
    apply(toolAt(0, 100))
    apply(otherAt(1, 100, "mcp.decision", {
      jsonrpc_id: huge,
      tool_use_id: huge,
      tool_sequence: 0,
      verdict: "allow",
      guard: huge,
      reason: huge
    }))
    const ended = apply(otherAt(2, 101, "tool.outcome", { tool_sequence: 0, bytes_read: 1, error: huge }))
    assert.deepStrictEqual(ended.map((f) => f.key), ["call:0"])
    const call = ended[0]!
    const strings = [
      ...Object.values(call.attributes),
      ...call.events.flatMap((e) => Object.values(e.attributes)),
      call.error
    ].filter((v): v is string => typeof v === "string")
    assert.isTrue(strings.length > 0)
    for (const v of strings) assert.isAtMost(v.length, Spans.MAX_VALUE_CHARS)
    // A call id longer than any agent's names no call: no call id on the span, pairing by sequence.
    assert.isUndefined(call.attributes[Spans.Attr.toolCallId])
    assert.strictEqual(Denials.callKey({ tool_use_id: huge, tool_sequence: 0 }), "seq:0")
    assert.strictEqual(Denials.callKey({ tool_use_id: "toolu_1", tool_sequence: 0 }), "id:toolu_1")
  })

  it("keeps at most MAX_OPEN_CALLS calls open, ending the oldest", () => {
    const fold = Spans.fold("s1", null)
    let open = 0
    let most = 0
    for (let i = 0; i < Spans.MAX_OPEN_CALLS + 50; i++) {
      const entry = toolAt(2 * i, 1)
      const decision = {
        sequence: 2 * i + 1,
        prev_hash: HASH,
        entry_hash: HASH,
        timestamp_secs: 1,
        kind: "claude-code.decision",
        payload: { tool_use_id: `t${i}`, tool_sequence: 2 * i, verdict: "allow", guard: null, reason: null }
      } as const
      for (const op of [...fold.add(entry), ...fold.add(decision)]) {
        if (op._tag === "Start" && op.key.startsWith("call:")) open++
        if (op._tag === "End" && op.key.startsWith("call:")) open--
        most = Math.max(most, open)
      }
    }
    assert.strictEqual(most, Spans.MAX_OPEN_CALLS)
  })

  it("names the conversation after the agent's own session id when the metadata says it", () => {
    assert.deepStrictEqual(
      Spans.identityOf("cch-1-x", {
        updated_at: 1,
        labels: ["claude-code", "hooked"],
        data: { claude_code_session: "x" }
      }),
      { conversation: "x", agent: "claude-code" }
    )
    assert.deepStrictEqual(
      Spans.identityOf("cc-1-x", { updated_at: 1, data: { claude_session_id: "x", transcript: "main" } }),
      { conversation: "x", agent: "claude-code" }
    )
    assert.deepStrictEqual(Spans.identityOf("plain", null), { conversation: "plain", agent: null })
  })
})
