/**
 * The vocabulary of `Recovery`: what adapters hand in, what comes out, and the
 * checks of a checkpoint by itself.
 */
import { bytesToHex } from "@noble/hashes/utils.js"
import * as Result from "effect/Result"
import * as Checkpoint from "../Checkpoint.ts"
import type * as CorruptReason from "../CorruptReason.ts"
import type * as Entry from "../Entry.ts"
import * as JournalState from "../JournalState.ts"
import type { SessionMeta } from "../SessionMeta.ts"
import { canonicalize } from "./jcs.ts"
import * as Ring from "./ring.ts"

/**
 * Why the valid prefix of a stored session ends early:
 * - `corruption`: bytes that are not a valid record, a record at a used sequence
 *   that differs from the accepted one, a segment that does not continue the
 *   previous one;
 * - `gap`: a record or segment past the next expected sequence;
 * - `missing`: entries the checkpoint claims (or that a complete history must
 *   hold) are not in storage;
 * - `checkpoint`: the checkpoint disagrees with the stored records;
 * - `unknown_version`: a record of a schema version this release does not read;
 * - `integrity`: a record's link or hash does not verify.
 *
 * @since 0.1.0
 */
export type StopReason = CorruptReason.StopReason

/**
 * Where and why the valid prefix ends. `offset` is a byte offset in `segment` for
 * files (a sequence for row stores, which have no bytes to point at); `sequence`
 * is the sequence where the valid prefix ends; `missing` names the range of
 * sequences storage lacks, when that is the problem.
 *
 * @since 0.1.0
 */
export interface Stopped {
  readonly reason: StopReason
  readonly segment: string
  readonly offset: number
  readonly sequence: number | null
  readonly detail: string
  readonly missing?: { readonly from: number; readonly to: number } | undefined
  /** For `integrity`: which hash failed, the value expected and the value found. */
  readonly violation?: {
    readonly what: "prev_hash" | "entry_hash"
    readonly expected: string
    readonly actual: string
  } | undefined
}

/**
 * What a load or verify found beyond the valid state: whether a checkpoint was
 * used (`loaded`), rebuilt from the records because it was missing or unreadable
 * (`rebuilt`), or compared field by field with a replay of the whole history
 * (`verified`); how many entries were replayed and skipped (identical
 * re-appends); a torn tail; and where and why the valid prefix ends, if it does.
 *
 * @since 0.1.0
 */
export interface RecoveryReport {
  readonly checkpoint: "none" | "loaded" | "rebuilt" | "verified"
  readonly replayed: number
  readonly skipped: number
  readonly tornTail: null | {
    readonly segment: string
    readonly offset: number
    readonly bytes: number
  }
  readonly stopped: null | Stopped
}

/**
 * One stored record, as an adapter found it, in storage order.
 *
 * - `Segment`: a new segment (a file, or the one table of a row store) starts; its
 *   records begin at `base`.
 * - `Entry` / `Meta`: a parsed record at byte `offset` of `segment`.
 * - `Damaged`: bytes at `offset` that are no record. `terminated` says whether the
 *   line ended with a newline; `zeros` that the bytes from `offset` to the end of
 *   the file are all zero; `atEnd` that nothing follows in storage (no more bytes,
 *   no later segment). Only `atEnd` and (`!terminated` or `zeros`) is a torn tail.
 * - `UnknownVersion`: a record of another schema version at `offset`.
 *
 * @since 0.1.0
 */
export type Input =
  | { readonly _tag: "Segment"; readonly segment: string; readonly base: number }
  | { readonly _tag: "Entry"; readonly entry: Entry.Entry; readonly segment: string; readonly offset: number }
  | { readonly _tag: "Meta"; readonly meta: SessionMeta }
  | {
    readonly _tag: "Damaged"
    readonly segment: string
    readonly offset: number
    readonly reason: string
    readonly terminated: boolean
    readonly zeros: boolean
    readonly atEnd: boolean
    /** Bytes from `offset` to the end of the file. */
    readonly bytes: number
  }
  | { readonly _tag: "UnknownVersion"; readonly segment: string; readonly offset: number; readonly version: unknown }

/**
 * The checkpoint as storage holds it: absent, a parsed JSON document, or bytes that
 * could not even be parsed (with the reason).
 *
 * @since 0.1.0
 */
export type CheckpointInput =
  | null
  | { readonly _tag: "Document"; readonly document: unknown; readonly location: string }
  | { readonly _tag: "Unreadable"; readonly reason: string; readonly location: string }

/**
 * How to recover.
 *
 * - `load`: start from the checkpoint; the adapter hands in the records from (at
 *   least) the one at `next_sequence − 1` on.
 * - `verify`: replay every stored record from sequence 0 (or from where a
 *   retention policy cut the history) and compare the checkpoint with the replay.
 *
 * `retention` says that history before the first stored record was removed on
 * purpose (a retention option): then the checkpoint alone vouches for it. Without
 * it, storage must hold every entry from sequence 0.
 *
 * @since 0.1.0
 */
export interface Options {
  readonly id: string
  readonly mode: "load" | "verify"
  readonly checkpoint: CheckpointInput
  /** Caps when there is no usable checkpoint (a checkpoint's own caps win). */
  readonly caps?: JournalState.Caps | undefined
  readonly retention?: boolean | undefined
  /**
   * Storage's own count of the entries it holds, when it keeps one (a row store's
   * session row): the stored records must reach it.
   */
  readonly storedCount?: number | undefined
  /** Names the storage in reports when no segment was seen (a table, a directory). */
  readonly location: string
}

/**
 * The outcome of a recovery.
 *
 * @since 0.1.0
 */
export interface Outcome {
  /** The recovered state (when `report.stopped` is set: the state up to where the valid prefix ends). */
  readonly state: JournalState.JournalState
  readonly report: RecoveryReport
  /** The checkpoint as decoded, when it decoded and verified by itself. */
  readonly checkpoint: JournalState.JournalState | null
  /** Why the checkpoint could not be used at all (unparsable, inconsistent, another session's). */
  readonly brokenCheckpoint: string | null
  /** One past the highest sequence of the valid stored records (where the next entry goes). */
  readonly storedNext: number
  /** Whether storage holds anything of the session (a checkpoint or a segment). */
  readonly exists: boolean
}

/**
 * A recovery in progress: offer the stored records in order, then take the outcome.
 * `offer` returns false once the valid prefix has ended (the adapter may stop reading).
 *
 * @since 0.1.0
 */
export interface Recovery {
  /** The checkpoint as decoded, when it decoded and verified by itself. */
  readonly checkpoint: JournalState.JournalState | null
  readonly offer: (input: Input) => boolean
  readonly done: () => Outcome
  /** Whether the valid prefix has ended. */
  readonly stopped: () => boolean
}

/**
 * Decodes a checkpoint document and checks it by itself: it decodes, belongs to
 * the session, and its retained window verifies.
 *
 * @since 0.1.0
 */
export const decodeCheckpoint = (
  id: string,
  input: CheckpointInput
): Result.Result<JournalState.JournalState | null, string> => {
  if (input === null) return Result.succeed(null)
  if (input._tag === "Unreadable") return Result.fail(input.reason)
  const decoded = Checkpoint.decode(input.document)
  if (Result.isFailure(decoded)) return decoded
  if (decoded.success.session_id !== id) {
    return Result.fail(`checkpoint belongs to session ${decoded.success.session_id}`)
  }
  const verified = JournalState.verify(decoded.success)
  if (Result.isFailure(verified)) return Result.fail(`checkpoint does not verify: ${verified.failure.message}`)
  return Result.succeed(decoded.success)
}

const hashList = (state: JournalState.JournalState): string => Ring.toArray(state.hashes).join(",")

/**
 * The first field in which two states differ (meta excepted: it is not chained),
 * with both values as text, or null when they agree.
 *
 * @since 0.1.0
 */
export const firstDifference = (
  claimed: JournalState.JournalState,
  actual: JournalState.JournalState
): null | { readonly field: string; readonly claimed: string; readonly actual: string } => {
  const counts = (s: JournalState.JournalState) =>
    Array.from(s.tool_counts, ([k, v]) => `${JSON.stringify(k)}:${v}`).sort().join(",")
  const fields: ReadonlyArray<readonly [string, (s: JournalState.JournalState) => string]> = [
    ["next_sequence", (s) => String(s.next_sequence)],
    ["entry_cap", (s) => String(s.entry_cap)],
    ["tool_counts_cap", (s) => String(s.tool_counts_cap)],
    ["evicted_head", (s) => String(s.evicted_head)],
    // A checkpoint that does not know its tree claims nothing about it.
    ["tree", (s) => claimed.tree === null || s.tree === null ? "" : s.tree.nodes.map(bytesToHex).join(",")],
    ["entries", hashList],
    ["tool_sequence", (s) => JSON.stringify(Ring.toArray(s.tool_sequence))],
    ["data_flow.total_bytes_read", (s) => String(s.data_flow.total_bytes_read)],
    ["data_flow.total_bytes_written", (s) => String(s.data_flow.total_bytes_written)],
    ["data_flow.total_invocations", (s) => String(s.data_flow.total_invocations)],
    ["data_flow.max_delegation_depth", (s) => String(s.data_flow.max_delegation_depth)],
    ["tool_counts", counts],
    ["current_streak_tool", (s) => String(s.current_streak_tool)],
    ["current_streak_len", (s) => String(s.current_streak_len)],
    ["message_count", (s) => String(s.message_count)],
    // A claim like the tree: what the replay of the guard.state entries gives.
    ["guard_state", (s) => s.guard_state === null ? "null" : canonicalize(s.guard_state)]
  ]
  for (const [field, get] of fields) {
    const a = get(claimed)
    const b = get(actual)
    if (a !== b) return { field, claimed: short(a), actual: short(b) }
  }
  return null
}

/** A value cut to 200 characters for a report. */
export const short = (s: string): string => s.length > 200 ? `${s.slice(0, 200)}…` : s
