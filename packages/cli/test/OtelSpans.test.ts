/**
 * `Spans.fold`, the pure half of `otel export`, over any order of hook-like
 * entries (calls of the main agent and of sub-agents, decisions, outcomes with and
 * without `duration_ms`, sub-agents starting and stopping, unrelated entries):
 * every span started is ended exactly once, a parent is open when its child
 * starts, no span ends before it starts, and the bound on open calls holds.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Entry } from "@session-journal/core"
import * as fc from "fast-check"
import * as Spans from "../src/otel/Spans.ts"

const SEED = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)
const HASH = "a".repeat(64)

type Step =
  | {
    readonly _tag: "call"
    readonly tool: string
    readonly agent: number
    readonly allowed: boolean
    readonly decide: boolean
  }
  | { readonly _tag: "outcome"; readonly pick: number; readonly ms: number | null }
  | { readonly _tag: "start"; readonly agent: number }
  | { readonly _tag: "stop"; readonly agent: number }
  | { readonly _tag: "other" }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    _tag: fc.constant("call" as const),
    tool: fc.constantFrom("Bash", "Read", "Agent", "Task", "mcp__s__t"),
    agent: fc.integer({ min: 0, max: 3 }),
    allowed: fc.boolean(),
    decide: fc.boolean()
  }),
  fc.record({
    _tag: fc.constant("outcome" as const),
    pick: fc.nat(),
    ms: fc.option(fc.integer({ min: 0, max: 5000 }), { nil: null })
  }),
  fc.record({ _tag: fc.constant("start" as const), agent: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ _tag: fc.constant("stop" as const), agent: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ _tag: fc.constant("other" as const) })
)

// The entries the hooks would write for the steps, one second apart at most.
const entriesOf = (steps: ReadonlyArray<Step>, gaps: ReadonlyArray<number>): Array<Entry.Entry> => {
  const out: Array<Entry.Entry> = []
  let t = 1_764_400_000
  const calls: Array<string> = []
  const agentId = (n: number) => (n === 0 ? "main" : `agent${n}`)
  const push = (kind: string, payload: unknown) => {
    out.push({
      sequence: out.length,
      prev_hash: HASH,
      entry_hash: HASH,
      timestamp_secs: t,
      kind,
      payload
    } as Entry.Entry)
  }
  steps.forEach((s, i) => {
    t += gaps[i % gaps.length]!
    switch (s._tag) {
      case "call": {
        const seq = out.length
        out.push({
          sequence: seq,
          prev_hash: HASH,
          entry_hash: HASH,
          timestamp_secs: t,
          kind: "tool",
          tool_name: s.tool,
          server_id: "claude-code",
          agent_id: agentId(s.agent),
          bytes_read: 0,
          bytes_written: 10,
          delegation_depth: s.agent === 0 ? 0 : 1,
          allowed: s.allowed
        })
        const id = `toolu_${seq}`
        if (s.decide) {
          push("claude-code.decision", {
            tool_use_id: id,
            agent_id: agentId(s.agent),
            tool_sequence: seq,
            verdict: s.allowed ? "allow" : "deny",
            guard: s.allowed ? null : "denyList",
            reason: s.allowed ? null : "no"
          })
        }
        calls.push(id)
        return
      }
      case "outcome":
        if (calls.length === 0) return
        return push("tool.outcome", {
          tool_use_id: calls[s.pick % calls.length]!,
          bytes_read: 5,
          bytes_written: 0,
          duration_ms: s.ms,
          error: s.pick % 5 === 0 ? "failed" : null
        })
      case "start":
        return push("claude-code.SubagentStart", { agent_id: agentId(s.agent), agent_type: "general-purpose" })
      case "stop":
        return push("claude-code.SubagentStop", { agent_id: agentId(s.agent) })
      case "other":
        return push("message", { role: "user", content: "hi" })
    }
  })
  return out
}

describe("Spans.fold", () => {
  it("starts each span once, ends it once, after its start, under a parent that is open (property)", () => {
    fc.assert(
      fc.property(
        fc.array(step, { maxLength: 80 }),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 1, maxLength: 5 }),
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

  it("keeps at most MAX_OPEN_CALLS calls open, ending the oldest", () => {
    const fold = Spans.fold("s1", null)
    let open = 0
    let most = 0
    for (let i = 0; i < Spans.MAX_OPEN_CALLS + 50; i++) {
      const entry = {
        sequence: 2 * i,
        prev_hash: HASH,
        entry_hash: HASH,
        timestamp_secs: 1,
        kind: "tool",
        tool_name: "Bash",
        server_id: "claude-code",
        agent_id: "main",
        bytes_read: 0,
        bytes_written: 0,
        delegation_depth: 0,
        allowed: true
      } as const
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
    assert.deepStrictEqual(Spans.identityOf("plain", null), { conversation: "plain", agent: null })
  })
})
