/**
 * The maintenance functions of the filesystem adapter, for the command line's
 * `verify`, `repair` and `unlock`: `inspect` reports, `repair` sets damaged bytes
 * aside so the session can be written again, `unlock` removes a stale lock whose
 * holder is proved gone. Re-exported by `NodePersistence`.
 */
import {
  type CorruptJournal,
  Entry,
  Follow,
  JournalState,
  Persistence,
  SessionLocked,
  SessionNotFound,
  StorageError,
  StorageReason
} from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as path from "node:path"
import * as Lock from "../Lock.ts"
import type { Options } from "../NodePersistence.ts"
import {
  invalidId,
  isSafeSessionId,
  loadOptions,
  lockSession,
  type Resolved,
  resolveWith,
  toDeclaredErrors
} from "./adapter.ts"
import * as Base from "./fileOps/base.ts"
import * as Open from "./fileOps/open.ts"
import * as Replace from "./fileOps/replace.ts"
import * as Load from "./load.ts"
import * as Segment from "./segment.ts"
import * as Session from "./session.ts"
import * as Writer from "./writer.ts"

/**
 * Integrity of one segment file, as `inspect` found it.
 *
 * @since 0.1.0
 */
export type SegmentReport = Load.SegmentReport

/**
 * What `inspect` found: the recovery report of a verify (the whole history
 * replayed from its start, the checkpoint compared field by field with the
 * replay), the checkpoint's status, every segment's integrity, files set aside by
 * earlier repairs, and the lock holder. `ok` is false when anything other than a
 * torn tail is wrong.
 *
 * @since 0.1.0
 */
export interface InspectReport {
  readonly id: string
  readonly ok: boolean
  readonly recovery: Persistence.RecoveryReport
  readonly nextSequence: number
  readonly head: string
  readonly checkpoint:
    | { readonly status: "missing" }
    | { readonly status: "broken"; readonly detail: string }
    | { readonly status: "ok" | "mismatch"; readonly nextSequence: number; readonly detail: string | null }
  readonly segments: ReadonlyArray<SegmentReport>
  readonly setAside: ReadonlyArray<string>
  readonly lock: null | { readonly holder: string; readonly alive: boolean }
}

const inspectSession = Effect.fnUntraced(function*(r: Resolved, id: string, caps: JournalState.Caps | undefined) {
  const ctx = r.ctx
  const dir = path.join(ctx.root, id)
  if (!(yield* Open.confineSessionDir(ctx, dir))) return yield* new SessionNotFound({ id })
  const files = yield* Load.listing(ctx, dir)
  if (files.segments.length === 0 && !files.hasCheckpoint) return yield* new SessionNotFound({ id })
  const verified = yield* Load.load(ctx, dir, id, loadOptions(r, caps, "verify"))
  const recovery = verified.loaded.recovery
  const stopped = recovery.stopped
  const cp = verified.checkpoint
  const checkpoint: InspectReport["checkpoint"] = !files.hasCheckpoint
    ? { status: "missing" }
    : cp === null
    ? { status: "broken", detail: verified.brokenCheckpoint ?? "checkpoint unusable" }
    : stopped !== null && (stopped.reason === "checkpoint" || stopped.reason === "missing")
    ? { status: "mismatch", nextSequence: cp.next_sequence, detail: stopped.detail }
    : { status: "ok", nextSequence: cp.next_sequence, detail: null }
  const lockInfo = yield* Lock.inspect(ctx, dir)
  const report: InspectReport = {
    id,
    ok: stopped === null && checkpoint.status !== "broken",
    recovery,
    nextSequence: verified.loaded.state.next_sequence,
    head: JournalState.head(verified.loaded.state),
    checkpoint,
    segments: verified.segments,
    setAside: files.names.filter((n) => n.includes(".damaged-")).sort(),
    lock: lockInfo === null
      ? null
      : {
        holder: lockInfo.problem ??
          (lockInfo.record === null ? "unreadable lock file" : Lock.describe(lockInfo.record)),
        alive: lockInfo.alive
      }
  }
  return report
})

/**
 * Checks a session without changing it and without the lock (safe next to a
 * running writer): the load's recovery report, the checkpoint, and every segment's
 * integrity from the oldest entry. For the command line's `verify`: it should fail
 * when `ok` is false.
 *
 * `caps` (default: 4096 each, as in `JournalState.empty`) matter only when the
 * session's checkpoint is missing or broken, because a session's caps live only
 * in its checkpoint (the segment format carries none): a session created with
 * non-default caps must be opened with the same caps when its checkpoint has to
 * be rebuilt. Other caps evict differently, so the replayed head differs, and with
 * `entry_cap: 0` (every `prev_hash` is ZERO_HASH) the links do not verify at all.
 *
 * @since 0.1.0
 */
export const inspect = (
  options: Options,
  id: string,
  caps?: JournalState.Caps | undefined
): Effect.Effect<InspectReport, StorageError | SessionNotFound> =>
  isSafeSessionId(id)
    ? toDeclaredErrors<InspectReport, StorageError | SessionNotFound>(
      Effect.flatMap(resolveWith(options), (r) => inspectSession(r, id, caps)),
      ["StorageError", "SessionNotFound"],
      "inspect"
    )
    : Effect.fail(invalidId("inspect", id))

/**
 * What `repair` did.
 *
 * @since 0.1.0
 */
export interface RepairReport {
  readonly id: string
  /** The recovery report before the repair (a verify of the whole history). */
  readonly before: Persistence.RecoveryReport
  /** The recovery report after it (`stopped` is null when the session is writable). */
  readonly after: Persistence.RecoveryReport
  /** Files created or renamed to keep the damaged bytes (in the session directory). */
  readonly setAside: ReadonlyArray<string>
  /** Segments cut back to their valid prefix, with the new length. */
  readonly truncated: ReadonlyArray<{ readonly segment: string; readonly length: number }>
  /** Whether the checkpoint was rebuilt from the records (the old one, if any, is set aside). */
  readonly checkpointRebuilt: boolean
  /** Sequences that the session held or claimed and no longer holds, if any. */
  readonly lost: null | { readonly from: number; readonly to: number }
  /** The exported head the session claimed before the repair. */
  readonly previousHead: string
  /** The `recovery` entry appended to the chain, saying what was done (null when nothing was). */
  readonly entry: Entry.Entry | null
  /** Sequence the next entry will get. */
  readonly nextSequence: number
}

/** Kind of the entry every repair appends (followers recognise it: `Follow`). */
export const RECOVERY_KIND = Follow.RECOVERY_KIND

// The recovery entry's timestamp: a clock no stored entry can hold (before 1970,
// past 2^53 s) fails the repair (checked before anything is set aside, and again
// when the entry is built), rather than write an entry every read would refuse.
const recoveryTimestamp = (ctx: Resolved["ctx"]): Effect.Effect<number, StorageError> => {
  const millis = ctx.clock.currentTimeMillisUnsafe()
  const checked = Entry.validateTimestamp(Math.floor(millis / 1000))
  return Result.isSuccess(checked)
    ? Effect.succeed(checked.success)
    : Effect.fail(new StorageError({ operation: "repair", reason: new StorageReason.ClockOutOfRange({ millis }) }))
}

// Runs in a scope that holds the session's lock until it closes.
const repairSession = Effect.fnUntraced(function*(r: Resolved, id: string, caps: JournalState.Caps | undefined) {
  const ctx = r.ctx
  const dir = path.join(ctx.root, id)
  const held = yield* lockSession(r, id, false)
  if (held === null) return yield* new SessionNotFound({ id })
  yield* recoveryTimestamp(ctx)
  const setAside: Array<string> = []
  const truncated: Array<{ segment: string; length: number }> = []
  const before = yield* Load.load(ctx, dir, id, loadOptions(r, caps, "verify"))
  const claimed = yield* Load.load(ctx, dir, id, loadOptions(r, caps, "load"))
  const previousHead = JournalState.head(claimed.loaded.state)
  const claimedNext = Math.max(claimed.loaded.state.next_sequence, before.checkpoint?.next_sequence ?? 0)
  // The records carry their own proof; the checkpoint is only a claim about them.
  // So the cut is decided by the records alone, and the checkpoint is then
  // checked against what remains.
  // The caps live only in the checkpoint, which may be the forged part: the records
  // are replayed under every candidate (the checkpoint's, the given ones, the
  // defaults, entry_cap 0) and the caps under which they verify furthest are used.
  let checkpointCaps = true
  const recordsOnly = (): Load.LoadOptions => ({
    ...loadOptions(r, caps, "verify"),
    ignoreCheckpoint: true,
    checkpointCaps
  })
  let records = yield* Load.load(ctx, dir, id, recordsOnly())
  for (const candidate of [caps, {}, { entry_cap: 0 }]) {
    if (records.loaded.recovery.stopped === null) break
    const tried = yield* Load.load(ctx, dir, id, {
      ...loadOptions(r, candidate, "verify"),
      ignoreCheckpoint: true,
      checkpointCaps: false
    })
    if (tried.storedNext > records.storedNext) {
      records = tried
      caps = candidate
      checkpointCaps = false
    }
  }
  let fullHistory = (records.listing.segments[0]?.base ?? 0) === 0
  // A damaged line that is no entry (a garbled meta or open record, inserted
  // garbage) is set aside alone when the records after it still continue the
  // chain: the entries that verify stay where they are.
  for (let round = 0; fullHistory && round < 64; round++) {
    const stop = records.loaded.recovery.stopped
    if (stop === null || stop.reason !== "corruption") break
    const before = records
    const kept = yield* Session.dropLineIfChainContinues(
      ctx,
      dir,
      stop.segment,
      stop.offset,
      Effect.map(
        Load.load(ctx, dir, id, recordsOnly()),
        (again) => again.storedNext > before.storedNext || again.loaded.recovery.stopped === null
      )
    )
    if (kept === null) break
    setAside.push(kept)
    records = yield* Load.load(ctx, dir, id, recordsOnly())
    fullHistory = (records.listing.segments[0]?.base ?? 0) === 0
  }
  const problem = fullHistory
    ? records.loaded.recovery.stopped
    : claimed.loaded.recovery.stopped !== null && claimed.loaded.recovery.stopped.reason !== "missing" &&
        claimed.loaded.recovery.stopped.reason !== "checkpoint"
    ? claimed.loaded.recovery.stopped
    : null
  const torn = (fullHistory ? records : claimed).loaded.recovery.tornTail
  const cut = problem ?? (torn === null ? null : { segment: torn.segment, offset: torn.offset, sequence: null })
  let lostFrom: number | null = null
  let seenNext = records.storedNext
  for (const s of records.segments) if (s.lastSequence !== null) seenNext = Math.max(seenNext, s.lastSequence + 1)
  if (cut !== null) {
    const name = path.basename(cut.segment)
    const base = Segment.parseName(name)
    if (base !== null && cut.segment === path.join(dir, name)) {
      if (problem !== null) lostFrom = problem.sequence ?? records.storedNext
      // How far the bytes set aside reached, for the report of what is lost.
      for (const s of records.listing.segments) {
        if (s.base < base) continue
        const highest = yield* Session.highestSequence(ctx, path.join(dir, s.name), s.base === base ? cut.offset : 0)
        if (highest !== null) seenNext = Math.max(seenNext, highest + 1)
      }
      if (cut.offset === 0) setAside.push(yield* Writer.moveAside(ctx, dir, name))
      else {
        setAside.push(yield* Replace.copyAside(ctx, dir, name, cut.offset))
        yield* Open.withHandle(Open.openWrite(ctx, cut.segment), (fh) =>
          Effect.andThen(
            Base.call("ftruncate", cut.segment, () => fh.truncate(cut.offset)),
            Base.call("fdatasync", cut.segment, () => fh.datasync())
          ))
        truncated.push({ segment: name, length: cut.offset })
      }
      // Everything after the damaged point is past the valid prefix: keep it aside.
      for (const s of records.listing.segments) {
        if (s.base > base) setAside.push(yield* Writer.moveAside(ctx, dir, s.name))
      }
    }
  }
  let checkpointRebuilt = false
  if (fullHistory) {
    const remaining = yield* Load.load(ctx, dir, id, recordsOnly())
    const check = yield* Load.load(ctx, dir, id, loadOptions(r, caps, "verify"))
    const state = remaining.loaded.state
    if (
      remaining.loaded.recovery.stopped === null && check.listing.hasCheckpoint &&
      (check.loaded.recovery.stopped !== null || check.checkpoint === null)
    ) {
      // The records verify and the checkpoint disagrees with them (or is broken):
      // the checkpoint is what is wrong. Keep it aside, write the truth. (A missing
      // checkpoint is no damage: every load rebuilds it from the records.)
      setAside.push(yield* Writer.moveAside(ctx, dir, Load.CHECKPOINT_FILE))
      yield* Writer.writeCheckpointFile(ctx, dir, state)
      checkpointRebuilt = true
      if (claimedNext > state.next_sequence) lostFrom ??= state.next_sequence
    }
  }
  const lostTo = Math.max(claimedNext, seenNext) - 1
  const lost = lostFrom !== null && lostTo >= lostFrom ? { from: lostFrom, to: lostTo } : null
  let entry: Entry.Entry | null = null
  if (setAside.length > 0 || truncated.length > 0 || checkpointRebuilt) {
    // The chain tells its own history: what was set aside or lost, and the head
    // the session claimed before.
    const writer = new Writer.SegmentWriter(ctx, dir, id, caps, {
      removeCheckpointedSegments: r.removeCheckpointedSegments,
      segmentMinBytes: r.segmentMinBytes,
      turns: r.turns,
      lockCheck: held.check
    })
    entry = yield* Effect.ensuring(
      Effect.gen(function*() {
        const loaded = (yield* writer.load()).loaded
        if (loaded.recovery.stopped === null) {
          const problemText = problem === null
            ? torn !== null ? "torn tail" : "checkpoint disagrees with the stored records"
            : `${problem.reason}: ${problem.detail}`
          const recoveryEntry = JournalState.nextOther(loaded.state, yield* recoveryTimestamp(ctx), RECOVERY_KIND, {
            problem: problemText,
            set_aside: setAside,
            truncated: truncated.map((t) => ({ segment: t.segment, length: t.length })),
            checkpoint_rebuilt: checkpointRebuilt,
            lost,
            previous_head: previousHead,
            previous_next_sequence: claimedNext
          })
          const after = JournalState.fold(loaded.state, recoveryEntry)
          yield* writer.append({
            after: Persistence.tipOf(loaded.state),
            entries: [recoveryEntry],
            head: () => JournalState.head(after)
          })
          return recoveryEntry
        }
        return null
      }),
      writer.close()
    )
  }
  const after = yield* Load.load(ctx, dir, id, loadOptions(r, caps, "load"))
  return {
    id,
    before: before.loaded.recovery,
    after: after.loaded.recovery,
    setAside,
    truncated,
    checkpointRebuilt,
    lost,
    previousHead,
    entry,
    nextSequence: after.loaded.state.next_sequence
  }
})

/**
 * Makes a damaged session writable again without deleting a byte: takes the
 * session's lock (fails with `SessionLocked` while a writer runs), copies the bytes
 * from the point where the valid prefix ends into `<segment>.damaged-<offset>` and
 * cuts the segment back to that prefix, renames every later segment and a broken
 * checkpoint to `<name>.damaged-0`, and reloads. Entries past the damage are not
 * lost (they stay in the side files) but are no longer part of the session. For
 * the command line's `repair`.
 *
 * `caps` (default: 4096 each) are used when the checkpoint is missing or broken
 * and the session is replayed from its segments: a session created with
 * non-default caps must be opened with the same caps when its checkpoint has to
 * be rebuilt. With the wrong caps an `entry_cap: 0` session's links do not verify,
 * and `repair` would set valid entries aside as damage.
 *
 * @since 0.1.0
 */
export const repair = (
  options: Options,
  id: string,
  caps?: JournalState.Caps | undefined
): Effect.Effect<RepairReport, StorageError | SessionLocked | SessionNotFound | CorruptJournal> =>
  isSafeSessionId(id)
    ? toDeclaredErrors<RepairReport, StorageError | SessionLocked | SessionNotFound | CorruptJournal>(
      Effect.flatMap(resolveWith(options), (r) => Effect.scoped(repairSession(r, id, caps))),
      ["StorageError", "SessionLocked", "SessionNotFound", "CorruptJournal"],
      "repair"
    )
    : Effect.fail(invalidId("repair", id))

/**
 * What `unlock` did.
 *
 * @since 0.1.0
 */
export interface UnlockReport {
  readonly id: string
  /** Whether a lock was removed (false: there was none). */
  readonly removed: boolean
  /** The record of the lock removed; null when there was none or it was no lock record. */
  readonly holder: Lock.LockRecord | null
  /** What was proved about the holder, in words. */
  readonly proof: string
  /** True when the holder could not be proved gone and `force` removed the lock anyway. */
  readonly forced: boolean
}

/**
 * Removes a session's stale lock, and only that: the lock is taken over the way a
 * writer takes over the lock of a dead holder (under the takeover claim, after
 * reading it again) and then released, so no lock is left. Fails with
 * `SessionLocked`, saying what was found, while the holder is alive or cannot be
 * proved gone (see `Lock.judgeDeep`: another pid namespace that still has processes
 * or cannot be scanned, another kernel or host);
 * with `force`, a holder that cannot be proved gone loses the lock too (never one
 * proved alive), and if it is in fact alive, it stops before its next write (a
 * writer checks its lock before each batch). Never waits.
 *
 * @since 0.1.0
 */
export const unlock = (
  options: Options,
  id: string,
  unlockOptions?: { readonly force?: boolean | undefined }
): Effect.Effect<UnlockReport, StorageError | SessionLocked | SessionNotFound> =>
  isSafeSessionId(id)
    ? toDeclaredErrors<UnlockReport, StorageError | SessionLocked | SessionNotFound>(
      Effect.flatMap(resolveWith({ ...options, lockWait: 0 }), (r) =>
        Effect.scoped(Effect.gen(function*() {
          const held = yield* lockSession(r, id, false, { force: unlockOptions?.force === true, deep: true }).pipe(
            Effect.catchIf((e): e is SessionLocked => e instanceof SessionLocked, (e) => refusal(r, id, e))
          )
          if (held === null) return yield* new SessionNotFound({ id })
          const over = held.tookOver
          const report: UnlockReport = over === null
            ? { id, removed: false, holder: null, proof: "there was no lock", forced: false }
            : {
              id,
              removed: true,
              holder: over.record,
              proof: over.verdict.reason,
              forced: over.verdict.state !== "gone"
            }
          return report
        }))),
      ["StorageError", "SessionLocked", "SessionNotFound"],
      "unlock"
    )
    : Effect.fail(invalidId("unlock", id))

// The refusal says what was proved about the holder.
const refusal = (r: Resolved, id: string, e: SessionLocked): Effect.Effect<never, SessionLocked> =>
  Effect.flatMap(Lock.inspect(r.ctx, path.join(r.ctx.root, id)), (seen) => {
    const verdict = seen?.record != null ? Lock.judgeDeep(seen.record) : seen?.verdict
    if (verdict === undefined) return Effect.fail(e)
    const why = verdict.state === "alive"
      ? `not removed: the holder is alive (${verdict.reason})`
      : `not removed: the holder cannot be proved gone (${verdict.reason}); with force it is removed anyway, ` +
        `and a holder still running stops before its next write`
    return Effect.fail(new SessionLocked({ id, holder: `${e.holder}; ${why}` }))
  })
