/**
 * The journal state as releases before the byte-budgeted window kept it, as a
 * reference model: every retained entry in full in a plain array (no shared rings),
 * chio's fold on it, its snapshot and head, and the version 1 checkpoint document
 * those releases wrote. Tests compare the current state with it (same snapshot,
 * head and guard verdicts) and use its documents to check that old checkpoints load.
 */
import * as Schema from "effect/Schema"
import { Chain, type Checkpoint, Entry, JournalState, SessionMeta } from "../src/index.ts"

/** The state with its whole retained ring. */
export interface LegacyState {
  readonly session_id: string
  readonly entry_cap: number
  readonly tool_counts_cap: number
  readonly next_sequence: number
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly tool_sequence: ReadonlyArray<string>
  readonly evicted_head: string | null
  readonly data_flow: JournalState.DataFlow
  readonly tool_counts: ReadonlyMap<string, bigint>
  readonly current_streak_tool: string | null
  readonly current_streak_len: bigint
  readonly message_count: bigint
  readonly meta: SessionMeta.SessionMeta | null
}

const cap = (c: number | undefined, fallback: number) => c === undefined || !Number.isInteger(c) || c < 0 ? fallback : c

export const empty = (id: string, caps?: JournalState.Caps): LegacyState => ({
  session_id: id,
  entry_cap: cap(caps?.entry_cap, 4096),
  tool_counts_cap: cap(caps?.tool_counts_cap, 4096),
  next_sequence: 0,
  entries: [],
  tool_sequence: [],
  evicted_head: null,
  data_flow: { total_bytes_read: 0n, total_bytes_written: 0n, total_invocations: 0n, max_delegation_depth: 0 },
  tool_counts: new Map(),
  current_streak_tool: null,
  current_streak_len: 0n,
  message_count: 0n,
  meta: null
})

const sat = (n: bigint) => n > JournalState.U64_MAX ? JournalState.U64_MAX : n

/** chio's fold: push, evict the oldest past the cap into `evicted_head`, count. */
export const fold = (s: LegacyState, entry: Entry.Entry): LegacyState => {
  const entries = [...s.entries, entry]
  let evicted = s.evicted_head
  while (entries.length > s.entry_cap) evicted = Chain.foldHash(evicted ?? "", entries.shift()!.entry_hash)
  const base = { ...s, entries, evicted_head: evicted, next_sequence: entry.sequence + 1 }
  if (!Entry.isTool(entry)) {
    // An outcome adds its bytes (docs/DESIGN.md §13), as the fold of today's state does.
    const flow = entry.kind === Entry.OUTCOME_KIND ? Entry.outcomeBytes(entry.payload) : null
    const data_flow = flow === null ? s.data_flow : {
      ...s.data_flow,
      total_bytes_read: sat(s.data_flow.total_bytes_read + BigInt(flow.read)),
      total_bytes_written: sat(s.data_flow.total_bytes_written + BigInt(flow.written))
    }
    return { ...base, data_flow, message_count: sat(s.message_count + 1n) }
  }
  const name = entry.tool_name
  const tool_sequence = [...s.tool_sequence, name].slice(Math.max(0, s.tool_sequence.length + 1 - s.entry_cap))
  const counts = new Map(s.tool_counts)
  const known = counts.get(name)
  if (known !== undefined) counts.set(name, sat(known + 1n))
  else if (counts.size < s.tool_counts_cap) counts.set(name, 1n)
  return {
    ...base,
    tool_sequence: s.entry_cap <= 0 ? [] : tool_sequence,
    data_flow: {
      total_bytes_read: sat(s.data_flow.total_bytes_read + BigInt(entry.bytes_read)),
      total_bytes_written: sat(s.data_flow.total_bytes_written + BigInt(entry.bytes_written)),
      total_invocations: sat(s.data_flow.total_invocations + 1n),
      max_delegation_depth: Math.max(s.data_flow.max_delegation_depth, entry.delegation_depth)
    },
    tool_counts: counts,
    current_streak_tool: name,
    current_streak_len: s.current_streak_tool === name ? sat(s.current_streak_len + 1n) : 1n
  }
}

export const applyMeta = (s: LegacyState, meta: SessionMeta.SessionMeta): LegacyState =>
  s.meta === null || meta.updated_at >= s.meta.updated_at ? { ...s, meta } : s

export const lastHash = (s: LegacyState): string => s.entries.at(-1)?.entry_hash ?? Entry.ZERO_HASH

export const head = (s: LegacyState): string => Chain.exportedHead(s.evicted_head, s.entries.at(-1)?.entry_hash)

/** The snapshot guards read, from the ring. */
export const snapshot = (s: LegacyState): JournalState.Snapshot => ({
  session_id: s.session_id,
  entry_count: s.entries.length,
  head_hash: head(s),
  data_flow: s.data_flow,
  tool_sequence: [...s.tool_sequence],
  tool_counts: new Map(s.tool_counts),
  current_streak_tool: s.current_streak_tool,
  current_streak_len: s.current_streak_len
})

/** The version 1 checkpoint document, field for field as those releases wrote it. */
export const encodeV1 = (s: LegacyState): typeof Checkpoint.CheckpointJsonV1.Encoded => ({
  v: 1,
  session_id: s.session_id,
  entry_cap: s.entry_cap,
  tool_counts_cap: s.tool_counts_cap,
  next_sequence: s.next_sequence,
  evicted_head: s.evicted_head,
  entries: s.entries.map((e) => Entry.encode(e)),
  tool_sequence: [...s.tool_sequence],
  data_flow: JournalState.dataFlowToJson(s.data_flow),
  tool_counts: Array.from(s.tool_counts, ([name, n]) => [name, JournalState.counterToJson(n)] as const),
  current_streak_tool: s.current_streak_tool,
  current_streak_len: JournalState.counterToJson(s.current_streak_len),
  message_count: JournalState.counterToJson(s.message_count),
  meta: s.meta === null ? null : Schema.encodeSync(SessionMeta.SessionMeta)(s.meta)
})

/** The legacy state after `history` (entries from sequence 0, in order). */
export const foldAll = (
  id: string,
  caps: JournalState.Caps | undefined,
  history: Iterable<Entry.Entry>
): LegacyState => {
  let s = empty(id, caps)
  for (const e of history) s = fold(s, e)
  return s
}

/**
 * The version 1 document of a current state, whose history (from sequence 0) is
 * `history`: what an earlier release would have written at that point.
 */
export const v1Of = (state: JournalState.JournalState, history: ReadonlyArray<Entry.Entry>) => {
  const legacy = foldAll(state.session_id, state, history.slice(0, state.next_sequence))
  return encodeV1(state.meta === null ? legacy : applyMeta(legacy, state.meta))
}
