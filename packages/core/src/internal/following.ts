/**
 * A verified follow: `Persistence.follow` read through the checks of `Follow`,
 * for every follower of the service (`follow`, `changes` from storage, and so the
 * command line's `tail --follow` and `serve`'s live updates). A record that does
 * not continue what was shown, or a read that fails as corrupt, makes the follower
 * verify storage from its start and reconcile it with what it showed; the adapter's
 * stream is then opened again after the last entry that still stands.
 */
import type * as Arr from "effect/Array"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as CorruptReason from "../CorruptReason.ts"
import * as Entry from "../Entry.ts"
import { CorruptJournal, HistoryDiverged, IntegrityViolation, SessionNotFound, type StorageError } from "../Errors.ts"
import * as Follow from "../Follow.ts"
import type * as JournalState from "../JournalState.ts"
import type * as Persistence from "../Persistence.ts"
import type * as Recovery from "../Recovery.ts"

/**
 * Failures of a verified follow.
 */
export type FollowError = StorageError | CorruptJournal | IntegrityViolation | SessionNotFound | HistoryDiverged

/** What a verified follow needs from the service. */
export interface Deps {
  readonly persistence: Persistence.Persistence["Service"]
  readonly caps: JournalState.Caps | undefined
  /** The typed failure for where a verify's valid prefix ends. */
  readonly failureOf: (stopped: Recovery.Stopped) => CorruptJournal | IntegrityViolation
}

/** How many of the latest hashes shown a follower keeps to reconcile with. */
const SHOWN = 1024
/** Entries read per page while reconciling. */
const PAGE = 64
/**
 * How long storage may stay unsettled (not verifying, or cut with nothing after
 * the cut) before the follower reports it: a repair cuts, then rebuilds the
 * checkpoint and appends its recovery entry, under its lock, within moments.
 */
const settling = Schedule.spaced("100 millis")
const SETTLE_TRIES = 30
/** Re-reads after which storage that verifies but reads otherwise is reported. */
const INTACT_TRIES = 5

// Why the adapter's stream was left: a record that does not continue what was
// shown, or a read that found damage.
class Discontinuity {
  readonly _tag = "FollowDiscontinuity"
  readonly cause: Follow.Break | CorruptJournal
  constructor(cause: Follow.Break | CorruptJournal) {
    this.cause = cause
  }
}

// Storage as it stands does not settle the question yet; `failure` is what to
// report if it never does.
class Unsettled {
  readonly _tag = "FollowUnsettled"
  readonly failure: FollowError
  constructor(failure: FollowError) {
    this.failure = failure
  }
}

const breakFailure = (id: string, cause: Follow.Break | CorruptJournal): CorruptJournal | IntegrityViolation =>
  cause instanceof CorruptJournal
    ? cause
    : cause.what === "prev_hash" || cause.what === "entry_hash"
    ? new IntegrityViolation({
      index: cause.sequence,
      sequence: cause.sequence,
      what: cause.what,
      expected: cause.expected,
      actual: cause.actual
    })
    : new CorruptJournal({
      segment: id,
      offset: cause.sequence,
      reason: new CorruptReason.HandedOver({
        what: cause.what,
        expected: cause.expected,
        sequence: cause.sequence,
        actual: cause.actual
      })
    })

/**
 * Follows session `id` from `from` on, starting from `state` (loaded and verified
 * by the caller), or after an entry the caller holds (`Follow.startAfter`): every
 * entry is checked before it is delivered; a repair that set
 * entries shown aside is delivered as `Recovered`; any other replacement of
 * history shown fails the stream with `HistoryDiverged`, and damage with the
 * failure a verify reports.
 */
export const follow = (
  deps: Deps,
  id: string,
  state: JournalState.JournalState,
  from: number | { readonly after: Follow.Anchor }
): Stream.Stream<Follow.Event, FollowError> =>
  Stream.suspend(() => {
    const { caps, failureOf, persistence } = deps
    // Continuing an entry the caller holds: storage must still hold it.
    const started = typeof from === "number"
      ? Result.succeed(Follow.start(state, from))
      : Follow.startAfter(state, from.after)
    if (Result.isFailure(started)) {
      const { sequence, expected, found } = started.failure
      return Stream.fail(new HistoryDiverged({ id, sequence, expected, found, shownTo: sequence }))
    }
    let cursor = started.success
    const anchor = typeof from === "number" ? null : from.after
    const showFrom = typeof from === "number" ? Math.max(0, from) : from.after.sequence + 1
    const shown = new Follow.Shown(SHOWN)
    if (anchor !== null) shown.push(anchor.sequence, anchor.hash)
    else if (cursor.linked && cursor.lastHash !== null && cursor.next > 0) shown.push(cursor.next - 1, cursor.lastHash)
    let intactAt = -1
    let intactTries = 0

    const deliver = (chunk: Arr.NonEmptyReadonlyArray<Entry.Entry>): Stream.Stream<Follow.Event, Discontinuity> => {
      const events: Array<Follow.Event> = []
      for (const entry of chunk) {
        const checked = Follow.check(cursor, entry)
        if (Result.isFailure(checked)) {
          return Stream.concat(Stream.fromArray(events), Stream.fail(new Discontinuity(checked.failure)))
        }
        cursor = checked.success
        shown.push(entry.sequence, entry.entry_hash)
        if (entry.sequence >= showFrom) events.push({ _tag: "Entry", entry })
      }
      return Stream.fromArray(events)
    }

    // The stored entries over the range shown, compared a page at a time (memory
    // bounded by the page, not by the range).
    const compareStored: Effect.Effect<Follow.Reconciled, StorageError | CorruptJournal | SessionNotFound> = Effect.gen(
      function*() {
        // Linked chains that agree on the last entry shown agree on every one before it.
        const last = shown.end - 1
        if (cursor.linked && last >= shown.first) {
          const stored = yield* Stream.runCollect(persistence.history(id, { from: last, limit: 1 }))
          if (Follow.compareAt(shown, true, last, stored[0]?.sequence === last ? stored[0] : undefined) === null) {
            return { _tag: "Intact" }
          }
        }
        for (let s = shown.first; s < shown.end; s += PAGE) {
          const page = yield* Stream.runCollect(
            persistence.history(id, { from: s, limit: Math.min(PAGE, shown.end - s) })
          )
          for (let q = s; q < Math.min(shown.end, s + PAGE); q++) {
            const here = page[q - s]
            const r = Follow.compareAt(shown, cursor.linked, q, here?.sequence === q ? here : undefined)
            if (r !== null) return r
          }
        }
        return { _tag: "Intact" }
      }
    )

    const settle: Effect.Effect<ReadonlyArray<Follow.Event>, FollowError | Unsettled> = Effect.gen(function*() {
      const verified = yield* Effect.scoped(
        Effect.flatMap(persistence.open(id, { mode: "read", caps }), (h) => h.verify)
      )
      if (!verified.exists) return yield* new SessionNotFound({ id })
      const stopped = verified.recovery.stopped
      if (stopped !== null) return yield* Effect.fail(new Unsettled(failureOf(stopped)))
      // The caps the session was stored with decide whether its entries link.
      const linked = verified.state.entry_cap > 0
      if (linked !== cursor.linked) {
        cursor = { ...cursor, linked, lastHash: linked ? shown.hashAt(cursor.next - 1) ?? null : Entry.ZERO_HASH }
      }
      const reconciled = yield* compareStored
      switch (reconciled._tag) {
        case "Intact":
          return []
        case "Recovered": {
          const entry = reconciled.entry
          shown.truncate(entry.sequence)
          shown.push(entry.sequence, entry.entry_hash)
          cursor = {
            next: entry.sequence + 1,
            lastHash: cursor.linked ? entry.entry_hash : Entry.ZERO_HASH,
            linked: cursor.linked,
            confirm: null
          }
          return [reconciled]
        }
        case "Diverged": {
          const diverged = new HistoryDiverged({
            id,
            sequence: reconciled.sequence,
            expected: reconciled.expected,
            found: reconciled.found,
            shownTo: reconciled.shownTo
          })
          // Cut with nothing after the cut: a repair may be about to append its entry.
          return yield* reconciled.found === null ? Effect.fail(new Unsettled(diverged)) : Effect.fail(diverged)
        }
      }
    })

    const resync = (d: Discontinuity): Effect.Effect<ReadonlyArray<Follow.Event>, FollowError> =>
      settle.pipe(
        Effect.retry({ schedule: settling, times: SETTLE_TRIES, while: (e) => e instanceof Unsettled }),
        Effect.catch((e) => Effect.fail(e instanceof Unsettled ? e.failure : e)),
        Effect.flatMap((events) => {
          if (events.length > 0) {
            intactTries = 0
            return Effect.succeed(events)
          }
          // Storage holds everything shown, yet reading on broke: read again, and
          // report the break if it persists at the same place.
          if (intactAt === cursor.next) intactTries++
          else {
            intactAt = cursor.next
            intactTries = 1
          }
          return intactTries >= INTACT_TRIES
            ? Effect.fail(breakFailure(id, d.cause))
            : Effect.as(Effect.sleep("100 millis"), events)
        })
      )

    const loop = (): Stream.Stream<Follow.Event, FollowError> =>
      persistence.follow(id, cursor.next).pipe(
        Stream.catchTag("CorruptJournal", (e) => Stream.fail(new Discontinuity(e))),
        Stream.chunks,
        Stream.flatMap(deliver),
        Stream.catchTag(
          "FollowDiscontinuity",
          (d) =>
            Stream.unwrap(
              Effect.map(resync(d), (events) => Stream.concat(Stream.fromArray(events), Stream.suspend(loop)))
            )
        )
      )
    // Entries that do not link (`entry_cap` 0) never say which entry they follow,
    // and the state retains no hash to compare: storage itself must hold the entry
    // continued (the first record of a linked chain links to it, or breaks).
    const held: Effect.Effect<void, FollowError> = anchor === null || cursor.linked
      ? Effect.void
      : Effect.flatMap(
        Stream.runCollect(persistence.history(id, { from: anchor.sequence, limit: 1 })),
        (stored) => {
          const found = stored[0]?.sequence === anchor.sequence ? stored[0].entry_hash : null
          return found === anchor.hash
            ? Effect.void
            : Effect.fail(
              new HistoryDiverged({
                id,
                sequence: anchor.sequence,
                expected: anchor.hash,
                found,
                shownTo: anchor.sequence
              })
            )
        }
      )
    return Stream.unwrap(Effect.as(held, Stream.suspend(loop)))
  })
