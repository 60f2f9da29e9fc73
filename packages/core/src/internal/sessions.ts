/**
 * The service's open sessions: entries of an `RcMap` with idle release and a bound
 * on how many are open, each with one writer fiber draining one `Queue`.
 */
import type * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as MutableHashMap from "effect/MutableHashMap"
import * as Queue from "effect/Queue"
import * as RcMap from "effect/RcMap"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as SynchronizedRef from "effect/SynchronizedRef"
import * as Checkpoint from "../Checkpoint.ts"
import type * as Entry from "../Entry.ts"
import {
  CorruptJournal,
  type IntegrityViolation,
  type InvalidRecordField,
  type InvalidSessionId,
  type SequenceConflict,
  type SessionLocked,
  StorageError
} from "../Errors.ts"
import * as JournalState from "../JournalState.ts"
import * as Persistence from "../Persistence.ts"
import type * as SessionMeta from "../SessionMeta.ts"
import type * as Hubs from "./hubs.ts"

/** Failures of opening or loading a session for writing. */
export type OpenError = InvalidSessionId | StorageError | SessionLocked | CorruptJournal | IntegrityViolation

/** Failures of a write. */
export type WriteError = OpenError | InvalidRecordField

/** What a request adds: its entries, a metadata change, and its caller's result. */
export interface Built<A> {
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly meta: SessionMeta.SessionMeta | null
  readonly result: A
}

/** Builds a request's entries against the state the writer holds when it gets there. */
export type Build<A> = (state: JournalState.JournalState, timestampSecs: number, nowMillis: number) => Built<A>

interface Request<A> {
  readonly build: Build<A>
  readonly deferred: Deferred.Deferred<A, WriteError>
}

/** The state of an open session, as the writer keeps it. */
export interface Slot {
  /** `null` after a storage failure: reload before the next write. */
  readonly state: JournalState.JournalState | null
  /** Set when the stored history is damaged: writes refuse until it is repaired. */
  readonly blocked: CorruptJournal | null
  /** Bytes appended since the stored checkpoint, and that checkpoint's size (`Checkpoint.due`). */
  readonly sinceCheckpoint: number
  readonly checkpointBytes: number
}

/**
 * An open session: its write handle, its state behind a `SynchronizedRef` (only the
 * writer fiber modifies it; readers `get` it without waiting for a write), and the
 * queue its writer fiber drains.
 */
export interface OpenSession {
  readonly id: string
  readonly handle: Persistence.WriteHandle
  readonly ref: SynchronizedRef.SynchronizedRef<Slot>
  readonly queue: Queue.Queue<Request<unknown>, Cause.Done>
  /** Completed once the session is released: its writer guarantee is free again. */
  readonly released: Deferred.Deferred<void>
}

/** The damage a load found, as the failure writes and reads report. */
export const blockedBy = (loaded: Persistence.Loaded, id: string): CorruptJournal | null =>
  loaded.recovery.stopped === null ? null : new CorruptJournal({
    segment: loaded.recovery.stopped.segment,
    offset: loaded.recovery.stopped.offset,
    reason: `${loaded.recovery.stopped.reason}: ${loaded.recovery.stopped.detail} (session ${id} needs repair: session-journal repair ${id})`
  })

const slotOf = (loaded: Persistence.Loaded, id: string): Slot => ({
  state: loaded.state,
  blocked: blockedBy(loaded, id),
  sinceCheckpoint: loaded.sinceCheckpointBytes ?? 0,
  checkpointBytes: loaded.checkpointBytes ?? 0
})

const dropped = (slot: Slot): Slot => ({ ...slot, state: null, blocked: null })

/** Settings of the open sessions. */
export interface Config {
  readonly persistence: Persistence.Persistence["Service"]
  readonly hubs: Hubs.Hubs
  readonly caps: JournalState.Caps | undefined
  readonly idleTimeToLive: Duration.Input
  readonly maxOpenSessions: number
  readonly maxBatch: number
  readonly conflictRetries: number
  readonly checkpointMinBytes: number
}

/** The open sessions of one service; closed with the scope it is made in. */
export const make = Effect.fnUntraced(function*(config: Config) {
  const { hubs, maxBatch, conflictRetries } = config
  // Sessions open now (also while one is being released), to read their state
  // without taking a reference, and so that a new opening waits for the release
  // of the previous one: its writer guarantee is not free before.
  const live = new Map<string, OpenSession>()

  // Opens a session as an entry of the RcMap (its scope is the entry's): waits for
  // the release of a previous opening, takes the writer guarantee, loads, and forks
  // the one writer fiber. Released when idle (or evicted, or closed): the queue is
  // ended, the writer commits what is queued, then the handle lets go.
  const openSession = (id: string): Effect.Effect<OpenSession, OpenError, Scope.Scope> =>
    Effect.gen(function*() {
      const previous = live.get(id)
      if (previous !== undefined) yield* Deferred.await(previous.released)
      const released = yield* Deferred.make<void>()
      // Registered first, so it runs last: the session leaves `live` only once its
      // writer guarantee is free, so an opening meanwhile waits for `released`
      // instead of finding the guarantee still held by this very process.
      let opened: OpenSession | undefined
      yield* Effect.addFinalizer(() =>
        Effect.andThen(
          Effect.sync(() => {
            if (opened !== undefined && live.get(id) === opened) live.delete(id)
          }),
          Deferred.succeed(released, undefined)
        )
      )
      const handle = yield* config.persistence.open(id, { mode: "write", caps: config.caps })
      const loaded = yield* handle.load
      yield* hubs.catchUp(id, loaded.state)
      const ref = yield* SynchronizedRef.make<Slot>(slotOf(loaded, id))
      const queue = yield* Queue.unbounded<Request<unknown>, Cause.Done>()
      const session: OpenSession = { id, handle, ref, queue, released }
      live.set(id, session)
      opened = session
      const writer = yield* Effect.forkDetach(writerLoop(session))
      yield* Effect.addFinalizer(() => Effect.andThen(Queue.end(queue), Fiber.await(writer)))
      return session
    })

  const sessions = yield* RcMap.make({ lookup: openSession, idleTimeToLive: config.idleTimeToLive })

  // Below the bound, opens (or shares) the session; at the bound, first releases
  // the sessions idle the longest. A session with a reference (a write in flight)
  // is never released.
  const evictIdle: Effect.Effect<void> = Effect.suspend((): Effect.Effect<void> => {
    if (sessions.state._tag !== "Open" || live.size < config.maxOpenSessions) return Effect.void
    const map = sessions.state.map
    let victim: string | null = null
    let oldest = Number.POSITIVE_INFINITY
    for (const id of live.keys()) {
      const entry = MutableHashMap.get(map, id)
      if (entry._tag === "Some" && entry.value.refCount === 0 && entry.value.expiresAt < oldest) {
        oldest = entry.value.expiresAt
        victim = id
      }
    }
    return victim === null ? Effect.void : Effect.andThen(RcMap.invalidate(sessions, victim), evictIdle)
  })

  const acquire = (id: string): Effect.Effect<OpenSession, OpenError, Scope.Scope> =>
    Effect.andThen(
      live.has(id) ? Effect.void : evictIdle,
      // A failed opening is not kept: the next write tries again.
      Effect.tapError(RcMap.get(sessions, id), () => RcMap.invalidate(sessions, id))
    )

  const reload = (session: OpenSession, previous: Slot): Effect.Effect<Slot, OpenError> =>
    Effect.flatMap(session.handle.load, (loaded) =>
      Effect.as(
        hubs.catchUp(session.id, loaded.state),
        // A reload after a failure keeps the larger count: the writer's own, or what
        // the adapter reports as stored since its checkpoint.
        { ...slotOf(loaded, session.id), sinceCheckpoint: Math.max(previous.sinceCheckpoint, loaded.sinceCheckpointBytes ?? 0) }
      ))

  const answer = (request: Request<unknown>, result: Effect.Effect<unknown, WriteError>) => {
    Deferred.doneUnsafe(request.deferred, result)
  }

  const failAll = (batch: ReadonlyArray<Request<unknown>>, error: WriteError) =>
    Effect.sync(() => {
      for (const r of batch) answer(r, Effect.fail(error))
    })

  const toWriteError = (error: StorageError | SequenceConflict): StorageError =>
    error._tag === "SequenceConflict"
      ? new StorageError({
        operation: "append",
        reason: `another writer kept winning sequence ${error.sequence} after ${conflictRetries} retries`,
        cause: error
      })
      : error

  // Whether the policy wants a checkpoint of this slot now.
  const isDue = (slot: Slot): boolean =>
    slot.state !== null && slot.blocked === null &&
    Checkpoint.due(slot.sinceCheckpoint, slot.checkpointBytes, config.checkpointMinBytes)

  // Stores the checkpoint the policy asked for. Its failure fails no one: the
  // entries are durable, and the next append asks again.
  const checkpoint = (session: OpenSession): Effect.Effect<void> =>
    Effect.gen(function*() {
      const slot = yield* SynchronizedRef.get(session.ref)
      if (slot.state === null) return
      const stored = yield* Effect.result(session.handle.checkpoint(Checkpoint.encode(slot.state)))
      if (Result.isSuccess(stored)) {
        yield* SynchronizedRef.update(session.ref, (s) => ({ ...s, sinceCheckpoint: 0, checkpointBytes: stored.success }))
      }
    })

  // The session's one writer: takes every queued request (group commit: whatever
  // arrived during the previous append is the next batch), builds their entries in
  // order against the state, stores them with one compare-and-append, answers each
  // caller, checkpoints when due, and repeats until the queue is ended and empty.
  // The only fiber that modifies `ref`.
  const writerLoop = (session: OpenSession): Effect.Effect<void> =>
    Effect.gen(function*() {
      for (;;) {
        // Let callers that are already runnable enqueue first: with a backend that
        // answers without suspending, batches would otherwise hold one request each.
        yield* Effect.yieldNow
        const taken = yield* Effect.result(Queue.takeBetween(session.queue, 1, maxBatch))
        if (Result.isFailure(taken)) return
        const batch = taken.success
        const [after, due] = yield* SynchronizedRef.modifyEffect(session.ref, (slot) =>
          commitBatch(session, slot, batch).pipe(
            Effect.map(([after, next]) => [[after, isDue(next)] as const, next] as const),
            // Any other defect answers its batch instead of leaving the callers waiting;
            // the append may or may not have happened, so the state is re-read.
            Effect.catchCause((cause) =>
              Effect.sync(() => {
                for (const r of batch) if (!Deferred.isDoneUnsafe(r.deferred)) answer(r, Effect.failCause(cause))
                return [[Effect.void, false] as const, dropped(slot)] as const
              })
            )
          ))
        // Neither answering nor a checkpoint may end the writer: a defect there
        // would leave every later write of the session waiting.
        yield* Effect.catchCause(after, () => Effect.void)
        if (due) yield* Effect.catchCause(checkpoint(session), () => Effect.void)
      }
    }).pipe(Effect.uninterruptible)

  const commitBatch = (
    session: OpenSession,
    current: Slot,
    batch: ReadonlyArray<Request<unknown>>
  ): Effect.Effect<readonly [Effect.Effect<void>, Slot]> =>
    Effect.gen(function*() {
      let slot = current
      for (let attempt = 0;; attempt++) {
        if (slot.state === null) {
          const reloaded = yield* Effect.result(reload(session, slot))
          if (Result.isFailure(reloaded)) {
            yield* failAll(batch, reloaded.failure)
            return [Effect.void, slot] as const
          }
          slot = reloaded.success
        }
        if (slot.blocked !== null) {
          yield* failAll(batch, slot.blocked)
          return [Effect.void, slot] as const
        }
        const nowMillis = yield* Clock.currentTimeMillis
        const timestampSecs = Math.floor(nowMillis / 1000)
        const before: JournalState.JournalState = slot.state!
        let state = before
        const entries: Array<Entry.Entry> = []
        const accepted: Array<{ readonly request: Request<unknown>; readonly result: unknown }> = []
        let meta: SessionMeta.SessionMeta | undefined
        for (const request of batch) {
          if (Deferred.isDoneUnsafe(request.deferred)) continue
          let built: Built<unknown>
          try {
            built = request.build(state, timestampSecs, nowMillis)
          } catch (defect) {
            // A throwing guard fails its own caller only, not the batch it shares.
            answer(request, Effect.die(defect))
            continue
          }
          for (const entry of built.entries) {
            entries.push(entry)
            state = JournalState.fold(state, entry)
          }
          if (built.meta !== null) {
            meta = built.meta
            state = JournalState.applyMeta(state, built.meta)
          }
          accepted.push({ request, result: built.result })
        }
        if (accepted.length === 0) return [Effect.void, slot] as const
        const stored = yield* Effect.result(
          session.handle.append({ after: Persistence.tipOf(before), entries, meta, head: () => JournalState.head(state) })
        )
        if (Result.isSuccess(stored)) {
          // Answered (and published) once the ref holds the new state, so a caller
          // that reads right after its write sees it.
          const answerAll = Effect.andThen(
            Effect.sync(() => {
              for (const a of accepted) answer(a.request, Effect.succeed(a.result))
            }),
            hubs.publish(session.id, entries)
          )
          return [answerAll, { ...slot, state, sinceCheckpoint: slot.sinceCheckpoint + stored.success.bytes }] as const
        }
        // Storage is the truth after any failure: drop the state, reload before the
        // next write. A lost race for a sequence is retried against the new state.
        if (stored.failure._tag === "SequenceConflict" && attempt < conflictRetries) {
          slot = dropped(slot)
          continue
        }
        yield* failAll(accepted.map((a) => a.request), toWriteError(stored.failure))
        return [Effect.void, dropped(slot)] as const
      }
    })

  /**
   * Queues a write. It takes a reference to the open session for as long as its
   * caller waits, so an idle release or an eviction never happens under it. Once
   * offered, a request is committed or failed by the writer, never abandoned, even
   * when its caller is interrupted (the release waits for the queue to drain).
   */
  const submit = <A>(id: string, build: Build<A>): Effect.Effect<A, WriteError> =>
    Effect.scoped(Effect.gen(function*() {
      const session = yield* acquire(id)
      const request: Request<unknown> = { build, deferred: Deferred.makeUnsafe<unknown, WriteError>() }
      yield* Queue.offer(session.queue, request)
      return (yield* Deferred.await(request.deferred)) as A
    }))

  /**
   * Releases the session now if nothing is writing, otherwise once the writes in
   * flight are answered; either way its queue is drained first. Waits for the
   * release: afterwards the writer guarantee is free for another process.
   */
  const close = (id: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const session = live.get(id)
      if (session === undefined) return Effect.void
      return Effect.andThen(RcMap.invalidate(sessions, id), Deferred.await(session.released))
    })

  /** The session open now, if it is. */
  const opened = (id: string): OpenSession | undefined => live.get(id)

  return { submit, close, opened }
})
