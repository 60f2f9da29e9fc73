/**
 * The checkpoint codec: a `JournalState` as one JSON document and back, exactly.
 * Counters above 2^53 − 1 are written as decimal strings. Adapters store this
 * document (a file, a row) and replay only the entries after `next_sequence`.
 *
 * @since 0.1.0
 */
import * as HashMap from "effect/HashMap"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Entry from "./Entry.ts"
import * as Ring from "./internal/Ring.ts"
import * as JournalState from "./JournalState.ts"
import { SessionMeta } from "./SessionMeta.ts"

/**
 * Version of the checkpoint document written by this release.
 *
 * @since 0.1.0
 */
export const VERSION = 1

const Nat = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))
const Counter = Schema.Union([Nat, Schema.String.check(Schema.isPattern(/^[0-9]{1,20}$/))])
const Hash = Schema.String.check(Schema.isPattern(/^[0-9a-f]{64}$/))

/**
 * The checkpoint document's schema.
 *
 * @since 0.1.0
 */
export const CheckpointJson = Schema.Struct({
  v: Schema.Literal(VERSION),
  session_id: Schema.String,
  entry_cap: Nat,
  tool_counts_cap: Nat,
  next_sequence: Nat,
  evicted_head: Schema.NullOr(Hash),
  entries: Schema.Array(Entry.Entry),
  tool_sequence: Schema.Array(Schema.String),
  data_flow: Schema.Struct({
    total_bytes_read: Counter,
    total_bytes_written: Counter,
    total_invocations: Counter,
    max_delegation_depth: Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: Entry.MAX_U32 }))
  }),
  tool_counts: Schema.Array(Schema.Tuple([Schema.String, Counter])),
  current_streak_tool: Schema.NullOr(Schema.String),
  current_streak_len: Counter,
  message_count: Counter,
  meta: Schema.NullOr(SessionMeta)
})

/**
 * The checkpoint document.
 *
 * @since 0.1.0
 */
export type CheckpointJson = typeof CheckpointJson.Encoded

const toJson = JournalState.counterToJson

/**
 * Encodes a state as its checkpoint document (plain JSON).
 *
 * @since 0.1.0
 */
export const encode = (state: JournalState.JournalState): CheckpointJson => ({
  ...head(state),
  entries: JournalState.entries(state).map((e) => Entry.encode(e)),
  ...tail(state)
})

// The document's fields before `entries`, and after it, in the document's order.
const head = (state: JournalState.JournalState) => ({
  v: VERSION as typeof VERSION,
  session_id: state.session_id,
  entry_cap: state.entry_cap,
  tool_counts_cap: state.tool_counts_cap,
  next_sequence: state.next_sequence,
  evicted_head: state.evicted_head
})
const tail = (state: JournalState.JournalState) => ({
  tool_sequence: Ring.toArray(state.tool_sequence),
  data_flow: JournalState.dataFlowToJson(state.data_flow),
  tool_counts: Array.from(state.tool_counts, ([name, n]) => [name, toJson(n)] as const),
  current_streak_tool: state.current_streak_tool,
  current_streak_len: toJson(state.current_streak_len),
  message_count: toJson(state.message_count),
  meta: state.meta === null ? null : Schema.encodeSync(SessionMeta)(state.meta)
})

/**
 * Writes the checkpoint document's JSON text, piece by piece, to `write`: the
 * pieces joined are exactly `Entry.toJsonText(encode(state))`. Each retained
 * entry is one piece (`Entry.jsonText`, the fast path), and no text of the whole
 * document is built: an adapter writes the pieces into its output as they come
 * (for a full ring, a megabyte-sized string and its UTF-8 copy cost more than
 * writing the document).
 *
 * @since 0.3.0
 */
export const writeJsonText = (state: JournalState.JournalState, write: (piece: string) => void): void => {
  // The document's fields in `encode`'s order, around `entries`.
  write(`${Entry.toJsonText(head(state)).slice(0, -1)},"entries":[`)
  const ring = state.entries
  for (let i = ring.start; i < ring.end; i++) {
    if (i > ring.start) write(",")
    write(Entry.jsonText(ring.buf[i]!))
  }
  write(`],${Entry.toJsonText(tail(state)).slice(1)}`)
}

/**
 * The checkpoint document's JSON text: exactly `Entry.toJsonText(encode(state))`,
 * built from the pieces of `writeJsonText`.
 *
 * @since 0.3.0
 */
export const toJsonText = (state: JournalState.JournalState): string => {
  const pieces: Array<string> = []
  writeJsonText(state, (piece) => {
    pieces.push(piece)
  })
  return pieces.join("")
}

/**
 * The floor of the checkpoint policy: a checkpoint is never due before this many
 * bytes were appended since the last one (256 KiB).
 *
 * @since 0.3.0
 */
export const MIN_BYTES = 256 * 1024

/**
 * The one checkpoint policy (docs/DESIGN.md §10): a checkpoint is due once the bytes
 * appended since the last one reach max(`minBytes`, a quarter of the last
 * checkpoint's size). The quarter bounds write amplification: however large a
 * session's state, rewriting it costs at most four bytes per byte of history.
 *
 * @since 0.3.0
 */
export const due = (appendedBytes: number, checkpointBytes: number, minBytes: number = MIN_BYTES): boolean =>
  appendedBytes >= Math.max(minBytes, checkpointBytes / 4)

const toBig = (c: number | string): bigint | undefined => {
  const n = BigInt(c)
  return n <= JournalState.U64_MAX ? n : undefined
}

// Unknown keys are refused rather than stripped: a document with fields this
// version does not know is not one it can restore exactly.
//
// The retained entries (up to entry_cap, 4,096 by default) are decoded one by one
// with `Entry.decode`, whose hand-written fast path accepts exactly what the entry
// schema accepts (the schema runs only to describe a rejected entry): the document
// schema over thousands of entries was most of a command's start on a long session.
const decodeDoc = Schema.decodeUnknownResult(
  Schema.Struct({ ...CheckpointJson.fields, entries: Schema.Array(Schema.Unknown) }),
  { onExcessProperty: "error" }
)

const decodeEntries = (input: ReadonlyArray<unknown>): Result.Result<Array<Entry.Entry>, string> => {
  const out = new Array<Entry.Entry>(input.length)
  for (let i = 0; i < input.length; i++) {
    const entry = Entry.decode(input[i])
    if (Result.isFailure(entry)) return Result.fail(`malformed checkpoint: entries[${i}]: ${entry.failure.message}`)
    out[i] = entry.success
  }
  return Result.succeed(out)
}

/**
 * Decodes a checkpoint document (already parsed JSON). Fails with a reason when the
 * document is malformed or internally inconsistent (rings over the cap, counters
 * above 2^64 − 1, sequence numbers that do not fit, a tool counted twice, a streak
 * without a tool). Chain verification of the entries is the caller's job
 * (`JournalState.verify`).
 *
 * @since 0.1.0
 */
export const decode = (input: unknown): Result.Result<JournalState.JournalState, string> => {
  const doc = decodeDoc(input)
  if (Result.isFailure(doc)) return Result.fail(`malformed checkpoint: ${doc.failure.message}`)
  const decodedEntries = decodeEntries(doc.success.entries)
  if (Result.isFailure(decodedEntries)) return Result.fail(decodedEntries.failure)
  const d = { ...doc.success, entries: decodedEntries.success }
  if (d.entries.length > d.entry_cap) return Result.fail("more entries than entry_cap")
  if (d.tool_sequence.length > d.entry_cap) return Result.fail("tool_sequence longer than entry_cap")
  if (d.tool_counts.length > d.tool_counts_cap) return Result.fail("more tool_counts than tool_counts_cap")
  const lastEntry = d.entries[d.entries.length - 1]
  if (lastEntry !== undefined && lastEntry.sequence + 1 !== d.next_sequence) {
    return Result.fail("next_sequence does not follow the last entry")
  }
  const firstSequence = d.next_sequence - d.entries.length
  if (d.entries.some((e, i) => e.sequence !== firstSequence + i)) {
    return Result.fail("retained entries are not consecutive")
  }
  // Without an eviction the window still starts at sequence 0; otherwise entries
  // would have vanished without being committed to evicted_head.
  if (d.evicted_head === null && firstSequence !== 0) {
    return Result.fail("entries missing before the window but evicted_head is null")
  }
  if (new Set(d.tool_counts.map(([name]) => name)).size !== d.tool_counts.length) {
    return Result.fail("a tool name is counted twice")
  }
  const counters = [
    d.data_flow.total_bytes_read,
    d.data_flow.total_bytes_written,
    d.data_flow.total_invocations,
    d.current_streak_len,
    d.message_count,
    ...d.tool_counts.map(([, n]) => n)
  ].map(toBig)
  if (counters.some((c) => c === undefined)) return Result.fail("counter above 2^64 - 1")
  const big = counters as Array<bigint>
  if ((d.current_streak_tool === null) !== (big[3] === 0n)) {
    return Result.fail("current_streak_len does not match current_streak_tool")
  }
  return Result.succeed({
    session_id: d.session_id,
    entry_cap: d.entry_cap,
    tool_counts_cap: d.tool_counts_cap,
    next_sequence: d.next_sequence,
    entries: Ring.fromArray(d.entries),
    tool_sequence: Ring.fromArray(d.tool_sequence),
    evicted_head: d.evicted_head,
    data_flow: {
      total_bytes_read: big[0]!,
      total_bytes_written: big[1]!,
      total_invocations: big[2]!,
      max_delegation_depth: d.data_flow.max_delegation_depth
    },
    tool_counts: HashMap.fromIterable(d.tool_counts.map(([name], i) => [name, big[5 + i]!] as const)),
    current_streak_tool: d.current_streak_tool,
    current_streak_len: big[3]!,
    message_count: big[4]!,
    meta: d.meta
  })
}
