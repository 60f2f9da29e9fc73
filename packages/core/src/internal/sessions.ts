/**
 * The service's open sessions: entries of an `RcMap` with idle release and a bound
 * on how many are open, each with one writer fiber (`writer.ts`) draining one
 * `Queue`.
 *
 * A write holds a reference to its session from its offer until it is answered, so
 * that an idle release or an eviction never happens under it. A caller whose
 * session is open does not take that reference through `RcMap.get` (a scope per
 * write), but through the session: the first write queued after an idle spell
 * counts one reference on the session's `RcMap` entry for every write queued until
 * the writer finds the queue empty again, and the writer lets it go then. Opening a
 * session, and every write when `idleTimeToLive` is zero (the caller then waits for
 * the release its write triggers), go through `RcMap.get`.
 */
import type * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as MutableHashMap from "effect/MutableHashMap"
import * as Queue from "effect/Queue"
import * as RcMap from "effect/RcMap"
import * as Scope from "effect/Scope"
import * as SynchronizedRef from "effect/SynchronizedRef"
import type * as JournalState from "../JournalState.ts"
import type * as Persistence from "../Persistence.ts"
import type * as Hubs from "./hubs.ts"
import * as Writer from "./writer.ts"

export {
  /** The damage a load found, as the failure writes and reads report. */
  blockedBy
} from "./writer.ts"

/** Failures of opening or loading a session for writing. */
export type OpenError = Writer.OpenError

/** Failures of a write. */
export type WriteError = Writer.WriteError

/** What a request adds: its entries, a metadata change, and its caller's result. */
export type Built<A> = Writer.Built<A>

/** Builds a request's entries against the state the writer holds when it gets there. */
export type Build<A> = Writer.Build<A>

/**
 * An open session: its write handle, its state behind a `SynchronizedRef` (only the
 * writer fiber modifies it; readers `get` it without waiting for a write), and the
 * queue its writer fiber drains.
 */
export interface OpenSession extends Writer.Target {
  /** Completed once the session is released: its writer guarantee is free again. */
  readonly released: Deferred.Deferred<void>
  /** The session's entry in the `RcMap`, while it is the current one. */
  rc: RcMap.State.Entry<OpenSession, OpenError> | undefined
  /**
   * Set once the session's `RcMap` entry is invalidated or its release has begun:
   * writes no longer join it directly, they go through `RcMap.get` (and so wait
   * for the release, then open the session afresh).
   */
  retired: boolean
}

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
  const { hubs } = config
  // With a zero time to live a session is released as soon as its last write is
  // answered, and the caller waits for that release: every write takes its
  // reference through `RcMap.get`, in its own scope.
  const direct = !Duration.isZero(Duration.fromInputUnsafe(config.idleTimeToLive))
  // Sessions open now (also while one is being released), to read their state
  // without taking a reference, and so that a new opening waits for the release
  // of the previous one: its writer guarantee is not free before.
  const live = new Map<string, OpenSession>()

  // Whether `rc` is the session's current entry in the RcMap.
  const isCurrent = (id: string, rc: RcMap.State.Entry<OpenSession, OpenError>): boolean => {
    if (sessions.state._tag !== "Open") return false
    const found = MutableHashMap.get(sessions.state.map, id)
    return found._tag === "Some" && found.value === rc
  }

  // Lets go of the reference a session's queued writes held, once its writer found
  // the queue empty. While the entry is current that only starts the idle
  // countdown (the time to live is not zero here), in this fiber; a release that
  // may close the session runs in a fiber of its own, since closing waits for this
  // writer.
  const idle = (target: Writer.Target): Effect.Effect<void> => {
    const session = target as OpenSession
    // A write queued since the writer looked finds the reference still held (it took
    // none, `pending` being set): keep it for that write.
    if (Queue.sizeUnsafe(session.queue) > 0) return Effect.void
    session.pending = false
    const rc = session.rc
    if (rc === undefined) return Effect.void
    if (rc.refCount > 1) {
      rc.refCount--
      return Effect.void
    }
    return !session.retired && isCurrent(session.id, rc)
      ? rc.finalizer
      : Effect.asVoid(Effect.forkDetach(rc.finalizer))
  }

  const writers = Writer.make({
    hubs,
    maxBatch: config.maxBatch,
    conflictRetries: config.conflictRetries,
    checkpointMinBytes: config.checkpointMinBytes,
    idle
  })

  // Opens a session as an entry of the RcMap (its scope is the entry's): waits for
  // the release of a previous opening, takes the writer guarantee, loads, and forks
  // the one writer fiber. Released when idle (or evicted, or closed): the queue is
  // ended, the writer commits what is queued, then the handle lets go.
  const openSession = (id: string): Effect.Effect<OpenSession, OpenError, Scope.Scope> =>
    Effect.gen(function*() {
      const previous = live.get(id)
      if (previous !== undefined) yield* Deferred.await(previous.released)
      const scope = yield* Scope.Scope
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
      const ref = yield* SynchronizedRef.make<Writer.Slot>(Writer.slotOf(loaded, id))
      const queue = yield* Queue.unbounded<Writer.Request<unknown>, Cause.Done>()
      // This opening's RcMap entry, unless it was invalidated while it opened.
      const found = sessions.state._tag === "Open" ? MutableHashMap.get(sessions.state.map, id) : undefined
      const rc = found !== undefined && found._tag === "Some" && found.value.scope === scope ? found.value : undefined
      const session: OpenSession = {
        id,
        handle,
        ref,
        queue,
        released,
        rc,
        retired: rc === undefined,
        pending: false
      }
      live.set(id, session)
      opened = session
      const writer = yield* Effect.forkDetach(writers.run(session))
      // The release can run in the writer itself: a `close` landing between the
      // writer's idle check and the release it then runs leaves the last reference to
      // it. Nothing is queued then (the session is retired and held no other
      // reference), and the writer ends at its next take; waiting for it there would
      // wait forever.
      yield* Effect.addFinalizer(() =>
        Effect.andThen(
          Effect.sync(() => {
            session.retired = true
          }),
          Effect.andThen(Queue.end(queue), Effect.withFiber((fiber) => fiber === writer ? Effect.void : Fiber.await(writer)))
        )
      )
      return session
    })

  const sessions = yield* RcMap.make({ lookup: openSession, idleTimeToLive: config.idleTimeToLive })

  // Removes a session's entry from the RcMap (it is released once no write holds
  // it); its writes from now on open it afresh.
  const invalidate = (id: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const session = live.get(id)
      if (session !== undefined && session.rc !== undefined && isCurrent(id, session.rc)) session.retired = true
      return RcMap.invalidate(sessions, id)
    })

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
    return victim === null ? Effect.void : Effect.andThen(invalidate(victim), evictIdle)
  })

  const acquire = (id: string): Effect.Effect<OpenSession, OpenError, Scope.Scope> =>
    Effect.andThen(
      live.has(id) ? Effect.void : evictIdle,
      // A failed opening is not kept: the next write tries again.
      Effect.tapError(RcMap.get(sessions, id), () => invalidate(id))
    )

  // Offers a request without waiting. Unless every write takes its own reference,
  // the first write queued after an idle spell takes one for all that follow it.
  const enqueue = (session: OpenSession, request: Writer.Request<unknown>): boolean => {
    if (!Queue.offerUnsafe(session.queue, request)) return false
    if (direct && !session.pending && session.rc !== undefined) {
      session.pending = true
      session.rc.refCount++
    }
    return true
  }

  // Through `RcMap.get`: opens the session if needed, or waits for the release of
  // one being released. A write that holds the reference only while it is queued
  // (see `enqueue`) lets the scope go once it is offered.
  const submitOpening = (id: string, request: Writer.Request<unknown>): Effect.Effect<unknown, WriteError> =>
    Effect.scoped(Effect.flatMap(acquire(id), (session) => {
      if (!enqueue(session, request)) {
        // The service is closing: its RcMap closes every session, referenced or not.
        return Effect.interrupt
      }
      return direct ? Effect.void : Deferred.await(request.deferred)
    }))

  /**
   * Queues a write and waits for its answer. Once offered, a request is committed
   * or failed by the writer, never abandoned, even when its caller is interrupted
   * (a release waits for the queue to drain).
   */
  const submit = <A>(id: string, build: Writer.Build<A>): Effect.Effect<A, WriteError> =>
    Effect.suspend(() => submitNow(id, build))

  /**
   * `submit` for a caller that is already running an effect's body: queues the
   * write now when the session is open (and returns the wait for its answer), or
   * returns the opening path.
   */
  const submitNow = <A>(id: string, build: Writer.Build<A>): Effect.Effect<A, WriteError> => {
    const request: Writer.Request<unknown> = { build, deferred: Deferred.makeUnsafe<unknown, WriteError>() }
    const session = live.get(id)
    const wait = Deferred.await(request.deferred) as Effect.Effect<A, WriteError>
    if (direct && session !== undefined && !session.retired && enqueue(session, request)) return wait
    return Effect.andThen(submitOpening(id, request), wait)
  }

  /**
   * Releases the session now if nothing is writing, otherwise once the writes in
   * flight are answered; either way its queue is drained first. Waits for the
   * release: afterwards the writer guarantee is free for another process.
   */
  const close = (id: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const session = live.get(id)
      if (session === undefined) return Effect.void
      return Effect.andThen(invalidate(id), Deferred.await(session.released))
    })

  /** The session open now, if it is. */
  const opened = (id: string): OpenSession | undefined => live.get(id)

  return { submit, submitNow, close, opened }
})
