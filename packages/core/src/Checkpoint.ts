/**
 * The checkpoint codec: a `JournalState` as one JSON document and back, exactly
 * (docs/DESIGN.md §10). Counters above 2^53 − 1 are written as decimal strings.
 * Adapters store this document (a file, a row) and replay only the entries after
 * `next_sequence`. Version 2 holds the hashes of the retained entries, not the
 * entries: what the chain and the guards need, a few hundred bytes per entry
 * whatever the entries weigh. Version 1 documents (the retained entries in full)
 * still decode; their entries are verified and only the hashes and the newest
 * within the window budget kept.
 *
 * @since 0.1.0
 */
import { bytesToHex } from "@noble/hashes/utils.js"
import * as HashMap from "effect/HashMap"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Chain from "./Chain.ts"
import * as Entry from "./Entry.ts"
import { type GuardState, STATE_KIND, stateProblem } from "./Guard.ts"
import * as Ring from "./internal/ring.ts"
import * as Window from "./internal/window.ts"
import * as JournalState from "./JournalState.ts"
import * as Merkle from "./Merkle.ts"
import { SessionMeta } from "./SessionMeta.ts"
import * as Sha256 from "./Sha256.ts"

/**
 * Version of the checkpoint document written by this release.
 *
 * @since 0.1.0
 */
export const VERSION = 4

const Nat = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))
const Counter = Schema.Union([Nat, Schema.String.check(Schema.isPattern(/^[0-9]{1,20}$/))])

const fieldsBefore = {
  session_id: Schema.String,
  entry_cap: Nat,
  tool_counts_cap: Nat,
  next_sequence: Nat,
  evicted_head: Schema.NullOr(Entry.Hash)
}

const fieldsAfter = {
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
}

/**
 * The checkpoint document this release writes (version 4): version 3 and the
 * policy's state, `guard_state` (docs/DESIGN.md §16), last.
 *
 * @since 0.1.0
 */
export const CheckpointJsonV4 = Schema.Struct({
  v: Schema.Literal(4),
  ...fieldsBefore,
  tree: Schema.NullOr(Schema.Array(Entry.Hash)),
  hashes: Schema.Array(Entry.Hash),
  ...fieldsAfter,
  guard_state: Schema.NullOr(Schema.Record(Schema.String, Schema.Json))
})

/**
 * The checkpoint document of earlier releases (version 3): version 2 and the
 * compact range of the session's Merkle tree (docs/DESIGN.md §14), its node hashes
 * in hex, largest subtree first, or null when the state does not know it. Still
 * decoded, its `guard_state` null.
 *
 * @since 0.1.0
 */
export const CheckpointJsonV3 = Schema.Struct({
  v: Schema.Literal(3),
  ...fieldsBefore,
  tree: Schema.NullOr(Schema.Array(Entry.Hash)),
  hashes: Schema.Array(Entry.Hash),
  ...fieldsAfter
})

/**
 * The checkpoint document of earlier releases (version 2): the retained entries
 * by their hashes, without the tree. Still decoded.
 *
 * @since 0.1.0
 */
export const CheckpointJsonV2 = Schema.Struct({
  v: Schema.Literal(2),
  ...fieldsBefore,
  hashes: Schema.Array(Entry.Hash),
  ...fieldsAfter
})

/**
 * The checkpoint document of earlier releases (version 1): the retained entries in
 * full. Still decoded.
 *
 * @since 0.1.0
 */
export const CheckpointJsonV1 = Schema.Struct({
  v: Schema.Literal(1),
  ...fieldsBefore,
  entries: Schema.Array(Entry.Entry),
  ...fieldsAfter
})

/**
 * The checkpoint document's schema: any version.
 *
 * @since 0.1.0
 */
export const CheckpointJson = Schema.Union([CheckpointJsonV4, CheckpointJsonV3, CheckpointJsonV2, CheckpointJsonV1])

/**
 * A checkpoint document, of any version.
 *
 * @since 0.1.0
 */
export type CheckpointJson = typeof CheckpointJson.Encoded

/**
 * The sequence and hash of the entry a checkpoint document ends with, if any
 * (what storage must hold for the document to be borne out).
 *
 * @since 0.1.0
 */
export const lastOf = (
  document: CheckpointJson
): { readonly sequence: number; readonly entry_hash: string } | undefined => {
  if (document.v === 1) return document.entries[document.entries.length - 1]
  const hash = document.hashes[document.hashes.length - 1]
  return hash === undefined ? undefined : { sequence: document.next_sequence - 1, entry_hash: hash }
}

const toJson = JournalState.counterToJson

/**
 * Encodes a state as its checkpoint document (plain JSON).
 *
 * @since 0.1.0
 */
export const encode = (state: JournalState.JournalState): typeof CheckpointJsonV4.Encoded => ({
  ...head(state),
  hashes: JournalState.retainedHashes(state),
  ...tail(state)
})

// The document's fields before `entries`, and after it, in the document's order.
const head = (state: JournalState.JournalState) => ({
  v: VERSION as typeof VERSION,
  session_id: state.session_id,
  entry_cap: state.entry_cap,
  tool_counts_cap: state.tool_counts_cap,
  next_sequence: state.next_sequence,
  evicted_head: state.evicted_head,
  tree: state.tree === null ? null : state.tree.nodes.map(bytesToHex)
})
const tail = (state: JournalState.JournalState) => ({
  tool_sequence: Ring.toArray(state.tool_sequence),
  data_flow: JournalState.dataFlowToJson(state.data_flow),
  tool_counts: Array.from(state.tool_counts, ([name, n]) => [name, toJson(n)] as const),
  current_streak_tool: state.current_streak_tool,
  current_streak_len: toJson(state.current_streak_len),
  message_count: toJson(state.message_count),
  meta: state.meta === null ? null : Schema.encodeSync(SessionMeta)(state.meta),
  guard_state: state.guard_state
})

/**
 * Writes the checkpoint document's JSON text, piece by piece, to `write`: the
 * pieces joined are exactly `Entry.toJsonText(encode(state))`. No text of the whole
 * document is built: an adapter writes the pieces into its output as they come.
 *
 * @since 0.1.0
 */
export const writeJsonText = (state: JournalState.JournalState, write: (piece: string) => void): void => {
  // The document's fields in `encode`'s order, around `hashes` (64 hex characters
  // each: their JSON text is the hash in quotes).
  write(`${Entry.toJsonText(head(state)).slice(0, -1)},"hashes":[`)
  const ring = state.hashes
  for (let i = ring.start; i < ring.end; i++) write(i > ring.start ? `,"${ring.buf[i]!}"` : `"${ring.buf[i]!}"`)
  write(`],${Entry.toJsonText(tail(state)).slice(1)}`)
}

/**
 * The checkpoint document's JSON text: exactly `Entry.toJsonText(encode(state))`,
 * built from the pieces of `writeJsonText`.
 *
 * @since 0.1.0
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
 * @since 0.1.0
 */
export const MIN_BYTES = 256 * 1024

/**
 * The one checkpoint policy (docs/DESIGN.md §10): a checkpoint is due once the bytes
 * appended since the last one reach max(`minBytes`, a quarter of the last
 * checkpoint's size). The quarter bounds write amplification: however large a
 * session's state, rewriting it costs at most four bytes per byte of history.
 *
 * @since 0.1.0
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
// The retained entries of a version 1 document (up to entry_cap, 4,096 by default)
// are decoded one by one with `Entry.decode`, whose hand-written fast path accepts
// exactly what the entry schema accepts (the schema runs only to describe a
// rejected entry); the hashes of a version 2 document are checked by a loop. The
// document schema over thousands of items was most of a command's start on a long
// session.
const decodeDocV4 = Schema.decodeUnknownResult(
  Schema.Struct({
    ...CheckpointJsonV4.fields,
    tree: Schema.NullOr(Schema.Array(Schema.Unknown)),
    hashes: Schema.Array(Schema.Unknown),
    guard_state: Schema.NullOr(Schema.Unknown)
  }),
  { onExcessProperty: "error" }
)
const decodeDocV2 = Schema.decodeUnknownResult(
  Schema.Struct({ ...CheckpointJsonV2.fields, hashes: Schema.Array(Schema.Unknown) }),
  { onExcessProperty: "error" }
)
const decodeDocV1 = Schema.decodeUnknownResult(
  Schema.Struct({ ...CheckpointJsonV1.fields, entries: Schema.Array(Schema.Unknown) }),
  { onExcessProperty: "error" }
)

const decodeHashes = (input: ReadonlyArray<unknown>, field = "hashes"): Result.Result<Array<string>, string> => {
  for (let i = 0; i < input.length; i++) {
    const h = input[i]
    if (!Entry.isHash(h)) {
      return Result.fail(`malformed checkpoint: ${field}[${i}]: not 64 lowercase hex characters`)
    }
  }
  return Result.succeed(input as Array<string>)
}

// Retained hashes from which the tree is rebuilt with the bulk SHA-256, when there
// is one (`Sha256.bulk`): a short process runs the tree's own compression cold,
// 4,096 hashes in about 0.3 s of CPU, against about 0.1 s with `node:crypto` loaded
// for them.
const BULK_HASHES = 256

// The tree over the hashes of every entry from sequence 0, in order.
const treeOf = (hashes: ReadonlyArray<string>): Merkle.CompactRange => {
  const bulk = hashes.length >= BULK_HASHES ? Sha256.bulk() : null
  if (bulk !== null) return Merkle.fromEntryHashes(hashes, bulk)
  const builder = Merkle.builder()
  for (const h of hashes) builder.appendEntryHash(h)
  return builder.range()
}

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
 * Decodes a checkpoint document (already parsed JSON) of either version. Fails with
 * a reason when the document is malformed or internally inconsistent (rings over the
 * cap, counters above 2^64 − 1, sequence numbers that do not fit, a tool counted
 * twice, a streak without a tool). The retained entries of a version 1 document must
 * verify as a chain by themselves (docs/DESIGN.md §2); the newest of them within
 * `windowBytes` (default `JournalState.DEFAULT_WINDOW_BYTES`) are kept in the state's
 * window. A version 2 document's state starts with an empty window.
 *
 * @since 0.1.0
 */
export const decode = (
  input: unknown,
  windowBytes: number = JournalState.DEFAULT_WINDOW_BYTES
): Result.Result<JournalState.JournalState, string> => {
  const version = typeof input === "object" && input !== null ? (input as { readonly v?: unknown }).v : undefined
  let d: typeof CheckpointJsonV2.Type
  let entries: Array<Entry.Entry> | null = null
  // The tree the document claims: absent before version 3.
  let claimedTree: Array<string> | null | undefined
  // The policy's state: null before version 4 (no earlier release wrote one), or the
  // newest in a version 1 document's retained entries.
  let guardState: GuardState | null = null
  if (version === 3 || version === 4) {
    // A version 3 document is version 4 without `guard_state` (and may not have one).
    if (version === 3 && Object.hasOwn(input as object, "guard_state")) {
      return Result.fail("malformed checkpoint: guard_state is not a field of version 3")
    }
    const doc = decodeDocV4(version === 4 ? input : { ...(input as object), v: 4, guard_state: null })
    if (Result.isFailure(doc)) return Result.fail(`malformed checkpoint: ${doc.failure.message}`)
    if (doc.success.guard_state !== null) {
      const problem = stateProblem(doc.success.guard_state)
      if (problem !== undefined) return Result.fail(`malformed checkpoint: guard_state: ${problem}`)
      guardState = doc.success.guard_state as GuardState
    }
    const hashes = decodeHashes(doc.success.hashes)
    if (Result.isFailure(hashes)) return Result.fail(hashes.failure)
    if (doc.success.tree !== null) {
      const nodes = decodeHashes(doc.success.tree, "tree")
      if (Result.isFailure(nodes)) return Result.fail(nodes.failure)
      claimedTree = nodes.success
    } else {
      claimedTree = null
    }
    const { tree: _, v: __, guard_state: ___, ...rest } = doc.success
    d = { ...rest, v: 2, hashes: hashes.success }
    if (d.hashes.length > d.next_sequence) return Result.fail("more retained hashes than entries before next_sequence")
  } else if (version === 1) {
    const doc = decodeDocV1(input)
    if (Result.isFailure(doc)) return Result.fail(`malformed checkpoint: ${doc.failure.message}`)
    const decodedEntries = decodeEntries(doc.success.entries)
    if (Result.isFailure(decodedEntries)) return Result.fail(decodedEntries.failure)
    entries = decodedEntries.success
    for (const e of entries) {
      if (!Entry.isTool(e) && e.kind === STATE_KIND && stateProblem(e.payload) === undefined) {
        guardState = e.payload as GuardState
      }
    }
    const { entries: _, v: __, ...rest } = doc.success
    d = { ...rest, v: 2, hashes: entries.map((e) => e.entry_hash) }
    const lastEntry = entries[entries.length - 1]
    if (lastEntry !== undefined && lastEntry.sequence + 1 !== d.next_sequence) {
      return Result.fail("next_sequence does not follow the last entry")
    }
    const firstSequence = d.next_sequence - entries.length
    if (entries.some((e, i) => e.sequence !== firstSequence + i)) {
      return Result.fail("retained entries are not consecutive")
    }
  } else {
    const doc = decodeDocV2(input)
    if (Result.isFailure(doc)) return Result.fail(`malformed checkpoint: ${doc.failure.message}`)
    const hashes = decodeHashes(doc.success.hashes)
    if (Result.isFailure(hashes)) return Result.fail(hashes.failure)
    d = { ...doc.success, hashes: hashes.success }
    if (d.hashes.length > d.next_sequence) return Result.fail("more retained hashes than entries before next_sequence")
  }
  if (d.hashes.length > d.entry_cap) return Result.fail("more entries than entry_cap")
  if (d.tool_sequence.length > d.entry_cap) return Result.fail("tool_sequence longer than entry_cap")
  if (d.tool_counts.length > d.tool_counts_cap) return Result.fail("more tool_counts than tool_counts_cap")
  // Without an eviction the window still starts at sequence 0; otherwise entries
  // would have vanished without being committed to evicted_head.
  if (d.evicted_head === null && d.next_sequence !== d.hashes.length) {
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
  if (entries !== null) {
    const verified = Chain.verify(entries, { prefixEvicted: d.evicted_head !== null })
    if (Result.isFailure(verified)) return Result.fail(`checkpoint does not verify: ${verified.failure.message}`)
  }
  // The tree: checked against the retained hashes when they reach back to sequence
  // 0, else a claim (as evicted_head is) that verification checks (§9). Without a
  // claim (an earlier version, or null) it is computed from the retained hashes when
  // they reach back to 0, and unknown otherwise.
  let tree: Merkle.CompactRange | null = null
  const covered = d.evicted_head === null
  if (claimedTree !== undefined && claimedTree !== null) {
    const nodes = Merkle.rangeNodes(d.next_sequence)
    if (claimedTree.length !== nodes) {
      return Result.fail(`tree has ${claimedTree.length} node hashes, a tree of ${d.next_sequence} leaves has ${nodes}`)
    }
    tree = { size: d.next_sequence, nodes: claimedTree.map((h) => Merkle.entryLeaf(h)) }
    if (covered && treeOf(d.hashes).nodes.some((node, i) => !Merkle.equals(node, tree!.nodes[i]!))) {
      return Result.fail("tree does not match the retained hashes")
    }
  } else if (covered) {
    tree = treeOf(d.hashes)
  }
  const budget = Math.max(0, Math.floor(windowBytes))
  return Result.succeed({
    session_id: d.session_id,
    entry_cap: d.entry_cap,
    tool_counts_cap: d.tool_counts_cap,
    next_sequence: d.next_sequence,
    hashes: Ring.fromArray(d.hashes),
    window: entries === null ? Window.empty() : Window.fromArray(entries, d.entry_cap, budget),
    window_bytes: budget,
    tool_sequence: Ring.fromArray(d.tool_sequence),
    evicted_head: d.evicted_head,
    tree,
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
    meta: d.meta,
    guard_state: guardState
  })
}
