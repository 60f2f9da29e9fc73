/**
 * The service's open sessions: entries of an `RcMap` with idle release, each with
 * one writer fiber (`writer.ts`) draining one `Queue`, and a bound on how many are
 * open.
 *
 * A write holds a reference to its session (`RcMap.get`, in a scope) from its offer
 * until it is answered, so that an idle release or an eviction never happens under
 * it. A caller whose session is open does not take a reference of its own (a scope
 * per write): the first write queued after an idle spell takes one through
 * `RcMap.get` and hands its scope to the session (`reference`); every write queued
 * while it is held joins it, and the writer closes the scope once it finds the
 * queue empty. When `idleTimeToLive` is zero every write takes its own reference,
 * in its own scope, and waits for the release it triggers.
 *
 * `RcMap` bounds the number of entries by failing a new key at its capacity; the
 * bound here releases the session idle the longest instead, so it is kept here:
 * the sessions without a reference, ordered by when they last fell idle, are
 * invalidated (`RcMap.invalidate`) until there is room.
 */
import type * as Cause from "effect/Cause"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as RcMap from "effect/RcMap"
import * as Ref from "effect/Ref"
import * as Scope from "effect/Scope"
import type * as JournalState from "../JournalState.ts"
import type * as Persistence from "../Persistence.ts"
import type * as Hubs from "./hubs.ts"
import * as Writer from "./writer.ts"

/** Failures of opening or loading a session for writing. */
export type OpenError = Writer.OpenError

/** Failures of a write. */
export type WriteError = Writer.WriteError

/** What a request adds: its entries, a metadata change, and its caller's result. */
export type Built<A> = Writer.Built<A>

/** Builds a request's entries against the state the writer holds when it gets there. */
export type Build<A> = Writer.Build<A>

/**
 * An open session: its write handle, its state behind a `Ref` (only the writer fiber
 * sets it; readers `get` it without waiting for a write), and the queue its writer
 * fiber drains.
 */
export interface OpenSession extends Writer.WriterSession {
  /** Completed once the session is released: its writer guarantee is free again. */
  readonly released: Deferred.Deferred<void>
  /**
   * Set once the session is invalidated or its release has begun: writes no longer
   * join it directly, they go through `RcMap.get` (and so wait for the release,
   * then open the session afresh).
   */
  retired: boolean
  /** When the session last fell idle, in the order of the service's sessions (the idlest is evicted first). */
  idleSince: number
}

/** Settings of the open sessions. */
export interface Config {
  readonly persistence: Persistence.Persistence["Service"]
  readonly hubs: Hubs.Hubs
  readonly caps: JournalState.Caps | undefined
  readonly idleTimeToLive: Duration.Duration
  readonly maxOpenSessions: number
  readonly maxBatch: number
  readonly conflictRetries: number
  readonly checkpointMinBytes: number
  readonly windowBytes: number
  readonly keepTree: boolean
}

/** The open sessions of one service; closed with the scope it is made in. */
export const make = Effect.fnUntraced(function*(config: Config) {
  const { hubs } = config
  // With a zero time to live a session is released as soon as its last write is
  // answered, and the caller waits for that release: every write takes its
  // reference through `RcMap.get`, in its own scope. Every session open then has a
  // write in flight (or is being released), so none is evicted either.
  const keepsIdleSessions = !Duration.isZero(config.idleTimeToLive)
  // Sessions open now (also while one is being released), to read their state
  // without taking a reference, to queue writes to a session whose reference is
  // held, and so that a new opening waits for the release of the previous one: its
  // writer guarantee is not free before.
  const live = new Map<string, OpenSession>()
  // Orders the sessions by when they last fell idle.
  let idleClock = 0

  // Lets go of the reference a session's queued writes held, once its writer found
  // the queue empty: the RcMap starts its idle countdown, or, when the session was
  // invalidated meanwhile, releases it (in this fiber: the release does not wait
  // for the writer it runs in).
  const idle = (target: Writer.WriterSession): Effect.Effect<void> => {
    const session = target as OpenSession
    // A write queued since the writer looked joined the reference: keep it for that
    // write.
    if (Queue.sizeUnsafe(session.queue) > 0) return Effect.void
    const reference = session.reference
    if (reference === undefined) return Effect.void
    session.reference = undefined
    session.idleSince = ++idleClock
    return Scope.close(reference, Exit.void)
  }

  const writers = Writer.make({
    hubs,
    maxBatch: config.maxBatch,
    conflictRetries: config.conflictRetries,
    checkpointMinBytes: config.checkpointMinBytes,
    windowBytes: config.windowBytes,
    keepTree: config.keepTree,
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
      const loaded = yield* Writer.load(handle, "write")
      yield* hubs.catchUp(id, loaded.state)
      const ref = yield* Ref.make<Writer.WriterState>(
        Writer.writerStateOf(loaded, id, config.windowBytes, config.keepTree)
      )
      const queue = yield* Queue.unbounded<Writer.Request<unknown>, Cause.Done>()
      const session: OpenSession = {
        id,
        handle,
        ref,
        queue,
        released,
        retired: false,
        reference: undefined,
        busy: false,
        idleSince: ++idleClock
      }
      live.set(id, session)
      opened = session
      const writer = yield* Effect.forkDetach(writers.run(session))
      // The release can run in the writer itself: when the session was invalidated
      // while its queued writes held their reference, the writer's closing that
      // reference releases it. Nothing is queued then (the session is retired and
      // held no other reference), and the writer ends at its next take; waiting for
      // it there would wait forever.
      yield* Effect.addFinalizer(() =>
        Effect.andThen(
          Effect.sync(() => {
            session.retired = true
          }),
          Effect.andThen(
            Queue.end(queue),
            Effect.withFiber((fiber) => fiber === writer ? Effect.void : Fiber.await(writer))
          )
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
      if (session !== undefined) session.retired = true
      return RcMap.invalidate(sessions, id)
    })

  // Whether a write of the session is queued or being committed. A session whose
  // writer answered everything but has not let go of its queued writes' reference
  // yet (it does once the callers it answered have run) has none in flight.
  const inFlight = (session: OpenSession): boolean =>
    session.reference !== undefined && (session.busy || Queue.sizeUnsafe(session.queue) > 0)

  // Below the bound, opens (or shares) the session; at the bound, first releases
  // the sessions idle the longest (one still holding its reference was written
  // last), waiting for each release. A session with a write in flight is never
  // released: the bound is exceeded instead.
  const evictIdle: Effect.Effect<void> = Effect.suspend((): Effect.Effect<void> => {
    if (!keepsIdleSessions || live.size < config.maxOpenSessions) return Effect.void
    let victim: OpenSession | undefined
    let oldest = Number.POSITIVE_INFINITY
    for (const session of live.values()) {
      if (session.retired || inFlight(session)) continue
      const since = session.reference === undefined ? session.idleSince : Number.MAX_SAFE_INTEGER
      if (victim === undefined || since < oldest) {
        victim = session
        oldest = since
      }
    }
    if (victim === undefined) return Effect.void
    return Effect.andThen(invalidate(victim.id), Effect.andThen(Deferred.await(victim.released), evictIdle))
  })

  const acquire = (id: string): Effect.Effect<OpenSession, OpenError, Scope.Scope> =>
    Effect.andThen(
      live.has(id) ? Effect.void : evictIdle,
      // A failed opening is not kept: the next write tries again.
      Effect.tapError(RcMap.get(sessions, id), () => invalidate(id))
    )

  // Through `RcMap.get`: opens the session if needed, or waits for the release of
  // one being released. The reference is taken in a scope of its own, which the
  // session keeps for the writes queued after this one if it holds none (the
  // writer closes it when the queue is empty), and which is closed at once
  // otherwise.
  const submitHeld = (id: string, request: Writer.Request<unknown>): Effect.Effect<void, WriteError> =>
    Effect.suspend(() => {
      const scope = Scope.makeUnsafe()
      let handed = false
      return Effect.onExit(
        Effect.flatMap(Scope.provide(acquire(id), scope), (session) => {
          if (session.reference === undefined) {
            session.reference = scope
            handed = true
          }
          if (Queue.offerUnsafe(session.queue, request)) return Effect.void
          // The service is closing: its RcMap closes every session, referenced or not.
          if (handed) {
            session.reference = undefined
            handed = false
          }
          return Effect.interrupt
        }),
        (exit) => handed ? Effect.void : Scope.close(scope, exit)
      )
    })

  // A write's own reference, held until it is answered (and the release it
  // triggers is done) when the time to live is zero.
  const submitOwn = (id: string, request: Writer.Request<unknown>): Effect.Effect<unknown, WriteError> =>
    Effect.scoped(Effect.flatMap(acquire(id), (session) =>
      // The service is closing: its RcMap closes every session, referenced or not.
      Queue.offerUnsafe(session.queue, request) ? Deferred.await(request.deferred) : Effect.interrupt))

  /**
   * Queues a write and waits for its answer. Once offered, a request is committed
   * or failed by the writer, never abandoned, even when its caller is interrupted
   * (a release waits for the queue to drain).
   */
  const submit = <A>(id: string, build: Writer.Build<A>): Effect.Effect<A, WriteError> =>
    Effect.suspend(() => submitNow(id, build))

  /**
   * `submit` for a caller that is already running an effect's body: queues the
   * write now when the session is open with its queued writes' reference held (and
   * returns the wait for its answer), or returns the path through `RcMap.get`.
   */
  const submitNow = <A>(id: string, build: Writer.Build<A>): Effect.Effect<A, WriteError> => {
    const request: Writer.Request<unknown> = { build, deferred: Deferred.makeUnsafe<unknown, WriteError>() }
    const wait = Deferred.await(request.deferred) as Effect.Effect<A, WriteError>
    if (!keepsIdleSessions) return Effect.andThen(submitOwn(id, request), wait)
    const session = live.get(id)
    if (
      session !== undefined && session.reference !== undefined && !session.retired &&
      Queue.offerUnsafe(session.queue, request)
    ) return wait
    return Effect.andThen(submitHeld(id, request), wait)
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
