/**
 * Random operation sequences for the property tests of the pure core: tool records
 * and non-tool appends with valid parameters, and a runner that folds them from an
 * empty state while keeping every intermediate state.
 */
import type * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { vi } from "vitest"
import { Entry, JournalState } from "../src/index.ts"

/** STRESS=1 runs every property many more times (root script `test:stress`). */
export const STRESS = process.env.STRESS === "1"

if (STRESS) {
  fc.configureGlobal({ numRuns: 2000 })
  // Twenty times the runs need more than the default five seconds per test.
  vi.setConfig({ testTimeout: 600_000 })
}

/** The number of runs of a property: `n` normally, 20 times more under STRESS=1. */
export const runs = (n: number): number => STRESS ? n * 20 : n

export type Op =
  | { readonly op: "record"; readonly ts: number; readonly params: Entry.ValidToolParams }
  | { readonly op: "append"; readonly ts: number; readonly kind: string; readonly payload: Schema.Json }

const isValidIdentity = (s: string): boolean => Entry.isIdentity(s)

/** Any string chio accepts as a tool name, server id or agent id. */
export const identity: fc.Arbitrary<string> = fc.string({ minLength: 1, maxLength: 12, unit: "grapheme" }).filter(
  isValidIdentity
)

/** Mostly a few names (so streaks and repeats happen), sometimes any valid name. */
export const toolName: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom("read_file", "write_file", "search", "a", "b"), weight: 4 },
  { arbitrary: identity, weight: 1 }
)

const u53: fc.Arbitrary<number> = fc.oneof(
  fc.nat(1000),
  fc.constant(Entry.MAX_U53),
  fc.maxSafeNat()
)

const u32: fc.Arbitrary<number> = fc.oneof(fc.nat(8), fc.constant(Entry.MAX_U32), fc.nat(Entry.MAX_U32))

/** Valid tool parameters with `allowed` resolved. */
export const toolParams: fc.Arbitrary<Entry.ValidToolParams> = fc.record({
  tool_name: toolName,
  server_id: fc.oneof(fc.constantFrom("srv-1", "srv-2"), identity),
  agent_id: fc.oneof(fc.constantFrom("agent-1"), identity),
  bytes_read: u53,
  bytes_written: u53,
  delegation_depth: u32,
  allowed: fc.boolean()
})

/**
 * JSON values RFC 8785 can canonicalize, with `__proto__` keys mixed in. `-0` is
 * folded to `0` here because several tests move values through JSON.stringify,
 * which writes `-0` as `0` (the adapters keep `-0` with their own serializer, and
 * the hash is the same either way since RFC 8785 writes `-0` as `0`).
 */
export const json: fc.Arbitrary<Schema.Json> = fc.oneof(
  {
    arbitrary: fc.jsonValue({ maxDepth: 3, stringUnit: "grapheme" }).map((v) => JSON.parse(JSON.stringify(v))),
    weight: 5
  },
  {
    arbitrary: fc.jsonValue({ maxDepth: 1 }).map((v) => JSON.parse(`{"__proto__":${JSON.stringify(v)},"x":1}`)),
    weight: 1
  }
) as fc.Arbitrary<Schema.Json>

/** A kind for non-tool entries accepted by `validatePayload`. */
export const otherKind: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constant("message"), weight: 4 },
  { arbitrary: fc.stringMatching(/^[A-Za-z0-9_.:-]{1,64}$/).filter((k) => k !== "tool"), weight: 1 }
)

const timestamp: fc.Arbitrary<number> = fc.oneof(fc.integer({ min: 1_700_000_000, max: 1_800_000_000 }), u53)

/**
 * The payload of an outcome (`Entry.OUTCOME_KIND`): byte counts the fold adds to
 * the data-flow counters, each sometimes absent, sometimes near 2^53 − 1.
 */
export const outcomePayload: fc.Arbitrary<Schema.Json> = fc.record(
  { tool_use_id: fc.string({ maxLength: 8 }), bytes_read: u53, bytes_written: u53 },
  { requiredKeys: ["tool_use_id"] }
)

/** One operation: mostly tool records, sometimes other kinds, sometimes outcomes. */
export const op: fc.Arbitrary<Op> = fc.oneof(
  {
    arbitrary: fc.record({
      op: fc.constant("append" as const),
      ts: timestamp,
      kind: fc.constant(Entry.OUTCOME_KIND),
      payload: outcomePayload
    }),
    weight: 1
  },
  {
    arbitrary: fc.record({ op: fc.constant("record" as const), ts: timestamp, params: toolParams }),
    weight: 3
  },
  {
    arbitrary: fc.record({ op: fc.constant("append" as const), ts: timestamp, kind: otherKind, payload: json }),
    weight: 1
  },
  {
    // A policy's state: the fold keeps the newest (Guard.STATE_KIND).
    arbitrary: fc.record({
      op: fc.constant("append" as const),
      ts: timestamp,
      kind: fc.constant("guard.state"),
      payload: fc.dictionary(fc.string({ maxLength: 6 }), json, { maxKeys: 3 }) as fc.Arbitrary<Schema.Json>
    }),
    weight: 1
  }
)

/** A sequence of operations. */
export const ops = (maxLength = 40): fc.Arbitrary<Array<Op>> => fc.array(op, { maxLength })

/** Caps small enough that eviction and the tool-count limit happen often; 0 included. */
export const caps: fc.Arbitrary<{ entry_cap: number; tool_counts_cap: number }> = fc.record({
  entry_cap: fc.oneof(fc.constant(0), fc.constant(1), fc.nat(8), fc.constant(4096)),
  tool_counts_cap: fc.oneof(fc.constant(0), fc.nat(4), fc.constant(4096))
})

/** Builds the entry an operation appends to `state` (linked and hashed, not folded). */
export const entryFor = (state: JournalState.JournalState, o: Op): Entry.Entry =>
  o.op === "record"
    ? JournalState.nextTool(state, o.ts, o.params)
    : JournalState.nextOther(state, o.ts, o.kind, o.payload)

/** Folds `ops` from an empty state; `states[i]` is the state after `i` operations. */
export const run = (
  c: JournalState.Caps,
  list: ReadonlyArray<Op>,
  sessionId = "prop-session"
): { readonly states: Array<JournalState.JournalState>; readonly entries: Array<Entry.Entry> } => {
  let state = JournalState.empty(sessionId, c)
  const states = [state]
  const entries: Array<Entry.Entry> = []
  for (const o of list) {
    const entry = entryFor(state, o)
    entries.push(entry)
    state = JournalState.fold(state, entry)
    states.push(state)
  }
  return { states, entries }
}

/** Tool parameters with default numbers, for hand-written cases. */
export const call = (tool_name: string, extra: Partial<Entry.ValidToolParams> = {}): Entry.ValidToolParams => ({
  tool_name,
  server_id: "srv-1",
  agent_id: "agent-1",
  bytes_read: 0,
  bytes_written: 0,
  delegation_depth: 0,
  allowed: true,
  ...extra
})

/** A record operation with default numbers, for hand-written cases. */
export const record = (tool_name: string, extra: Partial<Entry.ValidToolParams> = {}, ts = 1_764_400_000): Op => ({
  op: "record",
  ts,
  params: call(tool_name, extra)
})

/** A message append, for hand-written cases. */
export const message = (payload: Schema.Json, ts = 1_764_400_000): Op => ({
  op: "append",
  ts,
  kind: "message",
  payload
})
