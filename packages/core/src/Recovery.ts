/**
 * The one recovery of a stored session (docs/DESIGN.md §9), pure: given the checkpoint
 * document and the stored records in storage order, it returns the state and the
 * one `RecoveryReport`. Every adapter's load, the service's verify, the node
 * adapter's `inspect` / `repair` and PostgreSQL's load feed it; adapters only move
 * bytes and say where each record was found.
 *
 * A checkpoint is a claim, not a proof. It is accepted only when the stored
 * records bear it out:
 * - records before the checkpoint's `next_sequence` that the adapter hands in must
 *   chain to each other and carry the checkpoint's retained hashes where those
 *   cover them, and storage must hold the entry at `next_sequence − 1` (when the
 *   history is not cut by a retention policy);
 * - records after it must link to its head;
 * - in `verify` mode the whole history is replayed from sequence 0 and every field
 *   of the checkpoint is compared with the replay, naming the first that differs.
 *
 * Records are strict: inside a segment whose first sequence is `base`, the records
 * run `base, base + 1, …`; a record at an already used sequence is skipped only when
 * it is hash-identical to the entry accepted there; anything else at a used
 * sequence, a segment whose base does not continue the previous one, a gap, or a
 * complete line that does not parse is corruption, reported with its segment, byte
 * offset and sequence. Only an unterminated last line, or a zero-filled tail, at the
 * very end of storage is a torn tail (benign: a crash leaves exactly that).
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Entry from "./Entry.ts"
import {
  decodeCheckpoint,
  firstDifference,
  type Input,
  type Options,
  type Outcome,
  type Recovery,
  type RecoveryReport,
  short,
  type Stopped
} from "./internal/recovery.ts"
import { Replayed } from "./internal/replayFold.ts"
import * as JournalState from "./JournalState.ts"

export {
  /**
   * Decodes a checkpoint document and checks it by itself.
   *
   * @since 0.1.0
   */
  decodeCheckpoint,
  /**
   * The first field in which two states differ (meta excepted), or null.
   *
   * @since 0.1.0
   */
  firstDifference
} from "./internal/recovery.ts"

export type {
  /**
   * A checkpoint as an adapter found it.
   *
   * @since 0.1.0
   */
  CheckpointInput,
  /**
   * One stored record, a torn tail, or damage, as an adapter found it.
   *
   * @since 0.1.0
   */
  Input,
  /**
   * What to recover and how.
   *
   * @since 0.1.0
   */
  Options,
  /**
   * The result of a recovery.
   *
   * @since 0.1.0
   */
  Outcome,
  /**
   * A recovery in progress.
   *
   * @since 0.1.0
   */
  Recovery,
  /**
   * What a load found beyond the valid state.
   *
   * @since 0.1.0
   */
  RecoveryReport,
  /**
   * Where and why the valid prefix ends.
   *
   * @since 0.1.0
   */
  Stopped,
  /**
   * Why the valid prefix of a stored session ends early.
   *
   * @since 0.1.0
   */
  StopReason
} from "./internal/recovery.ts"

/**
 * Starts a recovery.
 *
 * @since 0.1.0
 */
export const make = (options: Options): Recovery => {
  const cp = decodeCheckpoint(options.id, options.checkpoint)
  const checkpoint = Result.isSuccess(cp) ? cp.success : null
  const brokenCheckpoint = Result.isFailure(cp) ? cp.failure : null
  const cpLocation = options.checkpoint?.location ?? options.location
  const caps: JournalState.Caps = checkpoint === null
    ? options.caps ?? {}
    : { entry_cap: checkpoint.entry_cap, tool_counts_cap: checkpoint.tool_counts_cap }
  const verifyMode = options.mode === "verify"
  const retention = options.retention === true

  // In load mode the state starts at the checkpoint; in verify mode (and without a
  // usable checkpoint) it is replayed from the empty state. `claimed` is what the
  // replay must agree with when it reaches the checkpoint's next sequence.
  // A replay from the empty state folds into a mutable accumulator in verify mode,
  // where no intermediate state is kept (`ReplayFold`: the fold's data, a fraction
  // of its cost on a long history).
  const state = new Replayed(
    checkpoint !== null && !verifyMode ? checkpoint : JournalState.empty(options.id, caps),
    { mutable: verifyMode }
  )
  let claimedPending = checkpoint !== null && verifyMode
  let compared = false
  let replayed = 0
  let skipped = 0
  let tornTail: RecoveryReport["tornTail"] = null
  let stopped: Stopped | null = null
  let exists = options.checkpoint !== null

  // Storage order: the sequence the next record must carry, and the hash it must
  // link to (null at the start of what was handed in: nothing to link to yet).
  let cursor = -1
  let segmentBase = 0
  let previousHash: string | null = null
  let firstSegment = true
  // Whether the stored record at the checkpoint's next_sequence − 1 was seen and matched.
  let checkpointTailSeen = checkpoint === null || checkpoint.next_sequence === 0
  let lastSegment = options.location
  let damagedPending: Extract<Input, { _tag: "Damaged" }> | null = null

  const stop = (s: Stopped): false => {
    stopped = s
    return false
  }

  const compareClaimed = (segment: string, offset: number): boolean => {
    if (!claimedPending || checkpoint === null || state.nextSequence !== checkpoint.next_sequence) return true
    claimedPending = false
    const diff = firstDifference(checkpoint, state.state())
    if (diff === null) {
      compared = true
      return true
    }
    return stop({
      reason: "checkpoint",
      segment: cpLocation,
      offset: 0,
      sequence: checkpoint.next_sequence,
      detail:
        `the checkpoint's ${diff.field} is ${diff.claimed}, the stored history gives ${diff.actual} (at ${segment}, offset ${offset})`
    })
  }

  // Whether the entry's own hash recomputes; otherwise the valid prefix ends here.
  const hashVerifies = (entry: Entry.Entry, segment: string, offset: number): boolean => {
    const recomputed = Entry.computeHash(entry)
    if (recomputed === entry.entry_hash) return true
    return stop({
      reason: "integrity",
      segment,
      offset,
      sequence: entry.sequence,
      detail: `entry_hash of sequence ${entry.sequence} is ${entry.entry_hash}, the entry hashes to ${recomputed}`,
      violation: { what: "entry_hash", expected: recomputed, actual: entry.entry_hash }
    })
  }

  // Records before the state's next sequence (those a load-mode checkpoint already
  // covers): they must chain among themselves and equal the checkpoint's retained
  // entries where the window reaches them.
  const checkCovered = (entry: Entry.Entry, segment: string, offset: number): boolean => {
    const linkTo = state.entryCap === 0 ? Entry.ZERO_HASH : previousHash
    if (linkTo !== null && entry.prev_hash !== linkTo) {
      return stop({
        reason: "integrity",
        segment,
        offset,
        sequence: entry.sequence,
        detail: `prev_hash of sequence ${entry.sequence} is ${entry.prev_hash}, the record before it has ${linkTo}`,
        violation: { what: "prev_hash", expected: linkTo, actual: entry.prev_hash }
      })
    }
    const retained = state.retainedAt(entry.sequence)
    if (retained !== undefined) {
      if (retained !== entry.entry_hash) {
        return stop({
          reason: "checkpoint",
          segment,
          offset,
          sequence: entry.sequence,
          detail:
            `stored sequence ${entry.sequence} has hash ${entry.entry_hash}, the checkpoint's entry there has ${retained}`
        })
      }
    }
    // The stored record must also be what its hash says (a record with changed
    // content and the old hash must not pass as the checkpoint's entry).
    if (!hashVerifies(entry, segment, offset)) return false
    if (checkpoint !== null && entry.sequence === checkpoint.next_sequence - 1) checkpointTailSeen = true
    return true
  }

  const apply = (entry: Entry.Entry, segment: string, offset: number): boolean => {
    const expectedPrev = state.lastHash()
    if (entry.prev_hash !== expectedPrev) {
      return stop({
        reason: "integrity",
        segment,
        offset,
        sequence: entry.sequence,
        detail: `prev_hash of sequence ${entry.sequence} is ${entry.prev_hash}, expected ${expectedPrev}`,
        violation: { what: "prev_hash", expected: expectedPrev, actual: entry.prev_hash }
      })
    }
    if (!hashVerifies(entry, segment, offset)) return false
    state.fold(entry)
    replayed++
    if (checkpoint !== null && entry.sequence === checkpoint.next_sequence - 1) checkpointTailSeen = true
    return compareClaimed(segment, offset)
  }

  const startSegment = (segment: string, base: number): boolean => {
    exists = true
    lastSegment = segment
    if (firstSegment) {
      firstSegment = false
      if (verifyMode && checkpoint !== null && base > 0) {
        if (!retention) {
          return stop({
            reason: "missing",
            segment,
            offset: 0,
            sequence: 0,
            detail: `the stored history starts at sequence ${base}: entries 0..${base - 1} are missing`,
            missing: { from: 0, to: base - 1 }
          })
        }
        // History cut by retention: the checkpoint vouches for what is gone.
        state.set(checkpoint, { mutable: false })
        claimedPending = false
      }
      const anchor = checkpoint !== null && !(verifyMode && base === 0) ? checkpoint.next_sequence : 0
      if (base > anchor || (checkpoint === null && base !== 0)) {
        return stop({
          reason: "missing",
          segment,
          offset: 0,
          sequence: anchor,
          detail: checkpoint === null
            ? `${
              brokenCheckpoint === null ? "no checkpoint" : `checkpoint unusable (${brokenCheckpoint})`
            }, and the stored history starts at sequence ${base}: entries 0..${base - 1} are missing`
            : `the checkpoint covers sequences up to ${
              anchor - 1
            }, the stored history resumes at ${base}: entries ${anchor}..${base - 1} are missing`,
          missing: { from: anchor, to: base - 1 }
        })
      }
      if (checkpoint !== null && !verifyMode && retention && base === checkpoint.next_sequence) {
        checkpointTailSeen = true
      }
    } else if (base !== cursor) {
      return stop({
        reason: base > cursor ? "gap" : "corruption",
        segment,
        offset: 0,
        sequence: cursor,
        detail: `segment starts at sequence ${base}, but the previous segment ends before ${cursor}`,
        missing: base > cursor ? { from: cursor, to: base - 1 } : undefined
      })
    }
    cursor = base
    segmentBase = base
    return true
  }

  const offerEntry = (entry: Entry.Entry, segment: string, offset: number): boolean => {
    const seq = entry.sequence
    if (seq < cursor && seq >= segmentBase) {
      // An identical re-append of an accepted entry is harmless; anything else at
      // a used sequence is a forged or damaged record.
      const accepted = state.retainedAt(seq)
      if (accepted !== undefined && accepted === entry.entry_hash && Entry.computeHash(entry) === entry.entry_hash) {
        skipped++
        return true
      }
      return stop({
        reason: "corruption",
        segment,
        offset,
        sequence: cursor,
        detail: `a record at the already used sequence ${seq} differs from the accepted entry`
      })
    }
    if (seq !== cursor) {
      return stop({
        reason: seq > cursor ? "gap" : "corruption",
        segment,
        offset,
        sequence: cursor,
        detail: seq > cursor
          ? `expected sequence ${cursor}, found ${seq}: entries ${cursor}..${seq - 1} are missing`
          : `a record of sequence ${seq} inside the segment that starts at ${segmentBase}`,
        missing: seq > cursor ? { from: cursor, to: seq - 1 } : undefined
      })
    }
    const ok = seq < state.nextSequence ? checkCovered(entry, segment, offset) : apply(entry, segment, offset)
    if (!ok) return false
    cursor = seq + 1
    previousHash = entry.entry_hash
    return true
  }

  const offer = (input: Input): boolean => {
    if (stopped !== null) return false
    if (damagedPending !== null) {
      // Damage followed by anything more is not a torn tail.
      const d = damagedPending
      return stop({
        reason: "corruption",
        segment: d.segment,
        offset: d.offset,
        sequence: Math.max(cursor, 0),
        detail: `${d.reason}, followed by more data`
      })
    }
    switch (input._tag) {
      case "Segment":
        return startSegment(input.segment, input.base)
      case "Meta":
        state.applyMeta(input.meta)
        return true
      case "Entry":
        if (cursor < 0) {
          if (!startSegment(input.segment, input.entry.sequence)) return false
        }
        return offerEntry(input.entry, input.segment, input.offset)
      case "UnknownVersion":
        return stop({
          reason: "unknown_version",
          segment: input.segment,
          offset: input.offset,
          sequence: Math.max(cursor, 0),
          detail: `record of schema version ${
            short(JSON.stringify(input.version) ?? String(input.version))
          }; this release reads version 1`
        })
      case "Damaged":
        if (input.atEnd && (!input.terminated || input.zeros)) {
          damagedPending = input
          return true
        }
        return stop({
          reason: "corruption",
          segment: input.segment,
          offset: input.offset,
          sequence: Math.max(cursor, 0),
          detail: input.atEnd
            ? `${input.reason} (a complete line: not a torn write)`
            : `${input.reason}, followed by more data`
        })
    }
  }

  const done = (): Outcome => {
    if (stopped === null && damagedPending !== null) {
      tornTail = { segment: damagedPending.segment, offset: damagedPending.offset, bytes: damagedPending.bytes }
    }
    if (stopped === null) compareClaimed(lastSegment, 0)
    if (stopped === null && checkpoint !== null && !checkpointTailSeen) {
      const claimedEnd = checkpoint.next_sequence - 1
      const from = cursor < 0 ? 0 : Math.min(cursor, claimedEnd)
      stopped = {
        reason: "missing",
        segment: lastSegment,
        offset: 0,
        sequence: from,
        detail: `the checkpoint covers sequences up to ${claimedEnd}, but storage ${
          cursor <= 0
            ? "holds none of them"
            : cursor <= claimedEnd
            ? `ends at ${cursor - 1}`
            : `lacks the entry at ${claimedEnd}`
        }: entries ${from}..${claimedEnd} are missing`,
        missing: { from, to: claimedEnd }
      }
    }
    const holds = Math.max(cursor, state.nextSequence)
    if (stopped === null && options.storedCount !== undefined && options.storedCount > holds) {
      stopped = {
        reason: "missing",
        segment: lastSegment,
        offset: holds,
        sequence: holds,
        detail: `storage records ${options.storedCount} entries, its records end at ${holds}: entries ${holds}..${
          options.storedCount - 1
        } are missing`,
        missing: { from: holds, to: options.storedCount - 1 }
      }
    }
    if (stopped === null && options.storedCount !== undefined && options.storedCount < holds) {
      stopped = {
        reason: "corruption",
        segment: lastSegment,
        offset: options.storedCount,
        sequence: options.storedCount,
        detail: `storage records ${options.storedCount} entries, but holds records up to sequence ${holds - 1}`
      }
    }
    // A load rebuilds an unusable checkpoint from the records; a verify says it is unusable.
    if (stopped === null && verifyMode && brokenCheckpoint !== null) {
      stopped = { reason: "checkpoint", segment: cpLocation, offset: 0, sequence: null, detail: brokenCheckpoint }
    }
    const kind: RecoveryReport["checkpoint"] = checkpoint !== null
      ? compared && stopped === null ? "verified" : "loaded"
      : brokenCheckpoint !== null
      ? "rebuilt"
      : "none"
    return {
      state: state.state(),
      report: { checkpoint: kind, replayed, skipped, tornTail, stopped },
      checkpoint,
      brokenCheckpoint,
      storedNext: Math.max(cursor, 0),
      exists
    }
  }

  // A checkpoint at sequence 0 claims no history, so it must be the empty state of
  // its caps; the replay never meets its next_sequence once it has an entry, so it
  // is compared before the first record, in both modes.
  if (checkpoint !== null && checkpoint.next_sequence === 0) {
    claimedPending = true
    const empty = JournalState.empty(options.id, caps)
    const claimedState = state.state()
    state.set(empty, { mutable: false })
    compareClaimed(cpLocation, 0)
    if (stopped === null) state.set(verifyMode ? empty : claimedState, { mutable: verifyMode })
    // A load takes the checkpoint as loaded; only a verify reports it verified.
    if (!verifyMode) compared = false
  }

  return { checkpoint, offer, done, stopped: () => stopped !== null }
}

/**
 * Runs a whole recovery over records already in memory.
 *
 * @since 0.1.0
 */
export const run = (options: Options, inputs: Iterable<Input>): Outcome => {
  const r = make(options)
  for (const input of inputs) if (!r.offer(input)) break
  return r.done()
}

/**
 * The inputs of an array of consecutive entries stored as one segment (row stores
 * and the in-memory adapter): a `Segment` starting at the first entry's sequence
 * (or `base` when there are none), then each entry with its sequence as offset.
 *
 * @since 0.1.0
 */
export const rows = function*(
  location: string,
  base: number,
  entries: Iterable<Entry.Entry>
): Generator<Input> {
  let started = false
  for (const entry of entries) {
    if (!started) {
      started = true
      yield { _tag: "Segment", segment: location, base: entry.sequence }
    }
    yield { _tag: "Entry", entry, segment: location, offset: entry.sequence }
  }
  if (!started && base >= 0) yield { _tag: "Segment", segment: location, base }
}
