/**
 * Hook-like entries for property tests of what reads a hooked session (the
 * spans of `otel export`, the timeline's call rows): calls of the main agent and
 * of sub-agents, their decisions, outcomes with and without `duration_ms`,
 * sub-agents starting and stopping, unrelated entries, in any order. Hashes are
 * not real: nothing that reads them here checks them.
 */
import type { Entry } from "@session-journal/core"
import * as fc from "fast-check"

/** The seed of a property test: `FC_SEED` when set, printed by fast-check on failure. */
export const SEED = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)

/** The hash every entry carries. */
export const HASH = "a".repeat(64)

/** A tool entry of the main agent's call of `tool` at `sequence` and time `secs` (hashes not real). */
export const toolAt = (
  sequence: number,
  secs: number,
  fields?: { readonly tool?: string; readonly allowed?: boolean }
): Entry.ToolEntry => ({
  sequence,
  prev_hash: HASH,
  entry_hash: HASH,
  timestamp_secs: secs,
  kind: "tool",
  tool_name: fields?.tool ?? "Bash",
  server_id: "claude-code",
  agent_id: "main",
  bytes_read: 0,
  bytes_written: 0,
  delegation_depth: 0,
  allowed: fields?.allowed ?? true
})

/** An entry of `kind` with `payload` at `sequence` and time `secs` (hashes not real). */
export const otherAt = (sequence: number, secs: number, kind: string, payload: unknown): Entry.Entry =>
  ({ sequence, prev_hash: HASH, entry_hash: HASH, timestamp_secs: secs, kind, payload }) as Entry.Entry

/** One step of a hooked session. */
export type Step =
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

/** Any step. */
export const step: fc.Arbitrary<Step> = fc.oneof(
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

/** The entries the hooks would write for the steps, `gaps` seconds apart in turn. */
export const entriesOf = (steps: ReadonlyArray<Step>, gaps: ReadonlyArray<number>): Array<Entry.Entry> => {
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
            tool_input: { command: `run ${seq}` },
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
