/**
 * The state of one session as plain data, and the pure, total `fold` that advances it
 * by one entry (docs/DESIGN.md §3). Everything a guard decides on lives here: the hashes of
 * the retained entries, the tool-name ring, the cumulative counters and the head. Of the
 * retained entries themselves only the newest are kept, up to a budget of bytes
 * (`window_bytes`); storage holds them all.
 *
 * @since 0.1.0
 */
import * as HashMap from "effect/HashMap"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as Chain from "./Chain.ts"
import * as Entry from "./Entry.ts"
import { IntegrityViolation } from "./Errors.ts"
import type { GuardState } from "./Guard.ts"
import * as Ring from "./internal/ring.ts"
import * as TreeHash from "./internal/treeHash.ts"
import { GUARD_STATE_KIND, guardStateProblem, OUTCOME_KIND, outcomeBytes } from "./internal/validate.ts"
import * as Window from "./internal/window.ts"
import * as Merkle from "./Merkle.ts"
import type { SessionMeta } from "./SessionMeta.ts"

/**
 * Default number of retained entries (and tool names in `tool_sequence`).
 *
 * @since 0.1.0
 */
export const DEFAULT_ENTRY_CAP = 4096

/**
 * Default number of distinct tool names counted in `tool_counts`.
 *
 * @since 0.1.0
 */
export const DEFAULT_TOOL_COUNTS_CAP = 4096

/**
 * Default budget of the in-memory window of recent entries (256 KiB), estimated
 * heap bytes.
 *
 * @since 0.1.0
 */
export const DEFAULT_WINDOW_BYTES = 256 * 1024

/**
 * 2^64 − 1: every cumulative counter saturates here, as chio's u64 counters do.
 *
 * @since 0.1.0
 */
export const U64_MAX = 18446744073709551615n

/**
 * Cumulative data-flow counters (chio's `SessionDataFlow`).
 *
 * @since 0.1.0
 */
export interface DataFlow {
  readonly total_bytes_read: bigint
  readonly total_bytes_written: bigint
  readonly total_invocations: bigint
  readonly max_delegation_depth: number
}

/**
 * Caps of a journal; both default to 4096.
 *
 * @since 0.1.0
 */
export interface Caps {
  readonly entry_cap?: number | undefined
  readonly tool_counts_cap?: number | undefined
}

/**
 * The whole state of one session. Treat it as immutable; `fold` returns a new value
 * and never changes its argument.
 *
 * @since 0.1.0
 */
export interface JournalState {
  readonly session_id: string
  readonly entry_cap: number
  readonly tool_counts_cap: number
  /** Sequence of the next entry; monotonic, independent of the ring's length. */
  readonly next_sequence: number
  /** Hashes of the retained entries, oldest first, at most `entry_cap`: what the chain needs. */
  readonly hashes: Ring.Ring<string>
  /**
   * The newest retained entries, oldest first, whose estimated weights add up to at
   * most `window_bytes` (a suffix of the retained entries; storage holds them all).
   */
  readonly window: Window.Window
  /** The budget of `window` in estimated heap bytes; not stored (a checkpoint has none). */
  readonly window_bytes: number
  /** Tool names of the newest tool entries, oldest first, at most `entry_cap`. */
  readonly tool_sequence: Ring.Ring<string>
  /** `null` until the first eviction, then the fold of every evicted hash. */
  readonly evicted_head: string | null
  /**
   * The RFC 6962 tree over every entry's `entry_hash` (docs/DESIGN.md §14), as its
   * compact range (size `next_sequence`); `null` when unknown (a state loaded from a
   * checkpoint of an earlier version whose retained hashes do not reach back to
   * sequence 0, or a service that does not keep it).
   */
  readonly tree: Merkle.CompactRange | null
  readonly data_flow: DataFlow
  /** Calls per tool name; at most `tool_counts_cap` names, unseen names past it are dropped. */
  readonly tool_counts: HashMap.HashMap<string, bigint>
  readonly current_streak_tool: string | null
  readonly current_streak_len: bigint
  readonly message_count: bigint
  readonly meta: SessionMeta | null
  /**
   * The policy's state (docs/DESIGN.md §16): the payload of the newest entry of kind
   * `Guard.STATE_KIND` whose payload is a state (`Guard.stateProblem`), `null` before
   * any. Since 0.8.0.
   */
  readonly guard_state: GuardState | null
}

const emptyDataFlow: DataFlow = {
  total_bytes_read: 0n,
  total_bytes_written: 0n,
  total_invocations: 0n,
  max_delegation_depth: 0
}

const normalizeCap = (cap: number | undefined, fallback: number): number =>
  cap === undefined || !Number.isInteger(cap) || cap < 0 ? fallback : cap

/**
 * The state of a session with no entries.
 *
 * @since 0.1.0
 */
export const empty = (sessionId: string, caps?: Caps): JournalState => ({
  session_id: sessionId,
  entry_cap: normalizeCap(caps?.entry_cap, DEFAULT_ENTRY_CAP),
  tool_counts_cap: normalizeCap(caps?.tool_counts_cap, DEFAULT_TOOL_COUNTS_CAP),
  next_sequence: 0,
  hashes: Ring.empty(),
  window: Window.empty(),
  window_bytes: DEFAULT_WINDOW_BYTES,
  tool_sequence: Ring.empty(),
  evicted_head: null,
  tree: Merkle.empty,
  data_flow: emptyDataFlow,
  tool_counts: HashMap.empty(),
  current_streak_tool: null,
  current_streak_len: 0n,
  message_count: 0n,
  meta: null,
  guard_state: null
})

const sat = (n: bigint): bigint => n > U64_MAX ? U64_MAX : n

// The tree with the entry's leaf; unknown stays unknown, and so does a tree given a
// hash that is no hash (the fold is total: it takes entries as given).
const growTree = (tree: Merkle.CompactRange | null, entryHash: string): Merkle.CompactRange | null => {
  if (tree === null) return null
  const nodes = TreeHash.appendEntryHashTo(tree.size, tree.nodes, entryHash)
  return nodes === undefined ? null : { size: tree.size + 1, nodes }
}

/**
 * The state without its tree (`tree: null`): for a service that does not keep it.
 *
 * @since 0.1.0
 */
export const withoutTree = (state: JournalState): JournalState => state.tree === null ? state : { ...state, tree: null }

/**
 * Advances the state by one entry. Pure and total: the entry is taken as given (the
 * caller links and hashes it, see `nextTool` / `nextOther`); its sequence sets
 * `next_sequence`. Tool entries — allowed or denied — update every counter; other
 * kinds touch only the chain, the ring and `message_count`, except that an outcome
 * (`kind: "tool.outcome"`) also adds its payload's `bytes_read` and
 * `bytes_written` to the data-flow byte counters (docs/DESIGN.md §13), and a policy's
 * state (`kind: "guard.state"`, a valid one) becomes `guard_state` (§16).
 *
 * @since 0.1.0
 */
export const fold = (state: JournalState, entry: Entry.Entry): JournalState => {
  const cap = state.entry_cap
  const retained = state.hashes
  const hashes = Ring.push(retained, entry.entry_hash, cap)
  const window = Window.push(state.window, entry, cap, state.window_bytes)
  // Every entry the push evicted, oldest first, is folded into `evicted_head`: the
  // oldest ones of the previous window (its cells never change), or with a cap of 0
  // the new entry itself. Read back from the rings rather than through a callback:
  // this runs once per record.
  let evictedHead = state.evicted_head
  if (cap <= 0) {
    evictedHead = Chain.foldHash(evictedHead ?? "", entry.entry_hash)
  } else {
    const evicted = Ring.size(retained) + 1 - Ring.size(hashes)
    for (let i = 0; i < evicted; i++) evictedHead = Chain.foldHash(evictedHead ?? "", Ring.get(retained, i)!)
  }
  const next_sequence = entry.sequence + 1
  const tree = growTree(state.tree, entry.entry_hash)
  if (!Entry.isTool(entry)) {
    const flow = entry.kind === OUTCOME_KIND ? outcomeBytes(entry.payload) : null
    const df = state.data_flow
    return {
      session_id: state.session_id,
      entry_cap: cap,
      tool_counts_cap: state.tool_counts_cap,
      next_sequence,
      hashes,
      window,
      window_bytes: state.window_bytes,
      tool_sequence: state.tool_sequence,
      evicted_head: evictedHead,
      tree,
      data_flow: flow === null || (flow.read === 0 && flow.written === 0)
        ? df
        : {
          total_bytes_read: flow.read === 0 ? df.total_bytes_read : sat(df.total_bytes_read + BigInt(flow.read)),
          total_bytes_written: flow.written === 0
            ? df.total_bytes_written
            : sat(df.total_bytes_written + BigInt(flow.written)),
          total_invocations: df.total_invocations,
          max_delegation_depth: df.max_delegation_depth
        },
      tool_counts: state.tool_counts,
      current_streak_tool: state.current_streak_tool,
      current_streak_len: state.current_streak_len,
      message_count: sat(state.message_count + 1n),
      meta: state.meta,
      guard_state: entry.kind === GUARD_STATE_KIND && guardStateProblem(entry.payload) === undefined
        ? entry.payload as GuardState
        : state.guard_state
    }
  }
  const name = entry.tool_name
  const df = state.data_flow
  const known = HashMap.get(state.tool_counts, name)
  const tool_counts = Option.isSome(known)
    ? HashMap.set(state.tool_counts, name, sat(known.value + 1n))
    : HashMap.size(state.tool_counts) < state.tool_counts_cap
    ? HashMap.set(state.tool_counts, name, 1n)
    : state.tool_counts
  return {
    session_id: state.session_id,
    entry_cap: cap,
    tool_counts_cap: state.tool_counts_cap,
    next_sequence,
    hashes,
    window,
    window_bytes: state.window_bytes,
    tool_sequence: Ring.push(state.tool_sequence, name, cap),
    evicted_head: evictedHead,
    tree,
    data_flow: {
      total_bytes_read: entry.bytes_read === 0
        ? df.total_bytes_read
        : sat(df.total_bytes_read + BigInt(entry.bytes_read)),
      total_bytes_written: entry.bytes_written === 0
        ? df.total_bytes_written
        : sat(df.total_bytes_written + BigInt(entry.bytes_written)),
      total_invocations: sat(df.total_invocations + 1n),
      max_delegation_depth: Math.max(df.max_delegation_depth, entry.delegation_depth)
    },
    tool_counts,
    current_streak_tool: name,
    current_streak_len: state.current_streak_tool === name ? sat(state.current_streak_len + 1n) : 1n,
    message_count: state.message_count,
    meta: state.meta,
    guard_state: state.guard_state
  }
}

/**
 * Folds many entries in order.
 *
 * @since 0.1.0
 */
export const foldAll = (state: JournalState, entries: Iterable<Entry.Entry>): JournalState => {
  let s = state
  for (const e of entries) s = fold(s, e)
  return s
}

/**
 * Applies session metadata: the value with the later `updated_at` wins (ties go to
 * the one applied last). Metadata is not part of the chain.
 *
 * @since 0.1.0
 */
export const applyMeta = (state: JournalState, meta: SessionMeta): JournalState =>
  state.meta === null || meta.updated_at >= state.meta.updated_at ? { ...state, meta } : state

/**
 * Hash of the newest retained entry, or ZERO_HASH when none is retained: what the
 * next entry's `prev_hash` must be.
 *
 * @since 0.1.0
 */
export const lastHash = (state: JournalState): string => Ring.last(state.hashes) ?? Entry.ZERO_HASH

/**
 * The exported head (docs/DESIGN.md §2): commits to every entry ever folded.
 *
 * @since 0.1.0
 */
export const head = (state: JournalState): string => Chain.exportedHead(state.evicted_head, Ring.last(state.hashes))

/**
 * The link of the next entry at the given time.
 *
 * @since 0.1.0
 */
export const nextLink = (state: JournalState, timestampSecs: number): Entry.Link => ({
  sequence: state.next_sequence,
  prev_hash: lastHash(state),
  timestamp_secs: timestampSecs
})

/**
 * Builds the next tool entry (validated parameters) without folding it.
 *
 * @since 0.1.0
 */
export const nextTool = (state: JournalState, timestampSecs: number, params: Entry.ValidToolParams): Entry.ToolEntry =>
  Entry.makeTool(nextLink(state, timestampSecs), params)

/**
 * Builds the next non-tool entry (validated kind and payload) without folding it.
 *
 * @since 0.1.0
 */
export const nextOther = (
  state: JournalState,
  timestampSecs: number,
  kind: string,
  payload: Schema.Json
): Entry.OtherEntry => Entry.makeOther(nextLink(state, timestampSecs), kind, payload)

/**
 * The retained entries the state keeps in memory, oldest first: the newest ones, up
 * to `window_bytes` (all retained entries while they fit). The others are in storage
 * (`SessionJournal.entries`); `windowStart` is the sequence of the first one here.
 *
 * @since 0.1.0
 */
export const entries = (state: JournalState): Array<Entry.Entry> => Window.toArray(state.window)

/**
 * The sequence of the oldest entry `entries` returns (`next_sequence` when it
 * returns none).
 *
 * @since 0.1.0
 */
export const windowStart = (state: JournalState): number => state.next_sequence - Window.size(state.window)

/**
 * The entry at `sequence` when the in-memory window holds it.
 *
 * @since 0.1.0
 */
export const entryAt = (state: JournalState, sequence: number): Entry.Entry | undefined =>
  Window.get(state.window, sequence - windowStart(state))

/**
 * Number of retained entries (chio's `entry_count`), whether or not their payloads
 * are in memory.
 *
 * @since 0.1.0
 */
export const entryCount = (state: JournalState): number => Ring.size(state.hashes)

/**
 * The hashes of the retained entries, oldest first.
 *
 * @since 0.1.0
 */
export const retainedHashes = (state: JournalState): Array<string> => Ring.toArray(state.hashes)

/**
 * The hash of the retained entry at `sequence`, when it is retained.
 *
 * @since 0.1.0
 */
export const retainedHashAt = (state: JournalState, sequence: number): string | undefined =>
  Ring.get(state.hashes, sequence - (state.next_sequence - Ring.size(state.hashes)))

/**
 * The same state with another budget for its in-memory window: a smaller one lets
 * go of the oldest entries now, a larger one keeps more from the next entry on.
 * A budget that is not a non-negative integer means the default.
 *
 * @since 0.1.0
 */
export const withWindowBytes = (state: JournalState, bytes: number): JournalState => {
  const budget = normalizeCap(bytes, DEFAULT_WINDOW_BYTES)
  return budget === state.window_bytes
    ? state
    : { ...state, window: Window.trim(state.window, budget), window_bytes: budget }
}

/**
 * Verifies the entries in memory (docs/DESIGN.md §2): each recomputes to its hash,
 * which is the retained hash at its sequence, and links to its predecessor; the
 * oldest links to the retained hash before it, or to ZERO_HASH at the start of an
 * unevicted history (after an eviction its own `prev_hash` is the boundary).
 *
 * @since 0.1.0
 */
export const verify = (state: JournalState) => {
  const start = windowStart(state)
  const retainedStart = state.next_sequence - Ring.size(state.hashes)
  const inWindow = entries(state)
  for (let i = 0; i < inWindow.length; i++) {
    const expected = Ring.get(state.hashes, start + i - retainedStart)
    const entry = inWindow[i]!
    if (expected !== entry.entry_hash) {
      return Result.fail(
        new IntegrityViolation({
          index: i,
          sequence: entry.sequence,
          what: "entry_hash",
          expected: expected ?? "",
          actual: entry.entry_hash
        })
      )
    }
  }
  return Chain.verify(inWindow, {
    prefixEvicted: state.evicted_head !== null,
    previousHash: start > retainedStart ? Ring.get(state.hashes, start - 1 - retainedStart) : undefined
  })
}

/**
 * One consistent view of the counters that guards decide on, with chio's
 * `SessionJournalSnapshot` field names.
 *
 * @since 0.1.0
 */
export interface Snapshot {
  readonly session_id: string
  readonly entry_count: number
  readonly head_hash: string
  readonly data_flow: DataFlow
  readonly tool_sequence: ReadonlyArray<string>
  readonly tool_counts: ReadonlyMap<string, bigint>
  readonly current_streak_tool: string | null
  readonly current_streak_len: bigint
}

/**
 * Takes the snapshot of a state. The result shares nothing mutable with later states.
 *
 * @since 0.1.0
 */
export const snapshot = (state: JournalState): Snapshot => {
  // `decide` takes a snapshot for every guarded call, and most guards read only
  // counters: the head (a SHA-256 after an eviction), the ring copy and the counts
  // map are built on first access. The state is immutable, so a deferred field has
  // the value it would have had at the time of the snapshot.
  let headHash: string | undefined
  let toolSequence: ReadonlyArray<string> | undefined
  let toolCounts: ReadonlyMap<string, bigint> | undefined
  return {
    session_id: state.session_id,
    entry_count: Ring.size(state.hashes),
    get head_hash() {
      return headHash ??= head(state)
    },
    data_flow: state.data_flow,
    get tool_sequence() {
      return toolSequence ??= Ring.toArray(state.tool_sequence)
    },
    get tool_counts() {
      return toolCounts ??= new Map(state.tool_counts)
    },
    current_streak_tool: state.current_streak_tool,
    current_streak_len: state.current_streak_len
  }
}

/**
 * A counter as JSON: a number up to 2^53 − 1, a decimal string above.
 *
 * @since 0.1.0
 */
export const counterToJson = (n: bigint): number | string =>
  n <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(n) : n.toString()

/**
 * The JSON form of a data-flow value (counters above 2^53 − 1 as decimal strings).
 *
 * @since 0.1.0
 */
export const dataFlowToJson = (df: DataFlow) => ({
  total_bytes_read: counterToJson(df.total_bytes_read),
  total_bytes_written: counterToJson(df.total_bytes_written),
  total_invocations: counterToJson(df.total_invocations),
  max_delegation_depth: df.max_delegation_depth
})

/**
 * The JSON form of a snapshot, field for field as chio serializes it (counters above
 * 2^53 − 1 as decimal strings).
 *
 * @since 0.1.0
 */
export const snapshotToJson = (s: Snapshot) => ({
  session_id: s.session_id,
  entry_count: s.entry_count,
  head_hash: s.head_hash,
  data_flow: dataFlowToJson(s.data_flow),
  tool_sequence: [...s.tool_sequence],
  tool_counts: Object.fromEntries(Array.from(s.tool_counts, ([k, v]) => [k, counterToJson(v)])),
  current_streak_tool: s.current_streak_tool,
  current_streak_len: counterToJson(s.current_streak_len)
})
