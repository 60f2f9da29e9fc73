/**
 * The service's change hubs: one sliding `PubSub` per session with `changes`
 * subscribers or `awaitSequence` waiters, living as long as they do (not as long
 * as the session's writer, which comes and goes with idle release).
 */
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Entry from "../Entry.ts"
import { SessionNotFound } from "../Errors.ts"
import * as JournalState from "../JournalState.ts"

/** Published when a session is deleted, so its subscribers' streams end. */
const Ended = { _tag: "Ended" } as const

/**
 * One element of `changes`: a committed entry, or the number of entries this
 * subscriber missed because it fell more than the stream capacity behind.
 */
export type Change =
  | { readonly _tag: "Entry"; readonly entry: Entry.Entry }
  | { readonly _tag: "Missed"; readonly count: number; readonly fromSequence: number }

interface Hub {
  readonly pubsub: PubSub.PubSub<Entry.Entry | typeof Ended>
  /** Next sequence this service will publish, once known. */
  next: number | null
  readonly waiters: Array<{ readonly sequence: number; readonly deferred: Deferred.Deferred<void, SessionNotFound> }>
  /** Subscribers of `changes`; the hub lives while it has subscribers or waiters. */
  subscribers: number
}

/**
 * The hubs of one service. `knownNext` tells where a new listener starts: what the
 * service has committed, or what storage holds.
 */
export const make = (capacity: number) => {
  const hubs = new Map<string, Hub>()

  const hubFor = (id: string): Effect.Effect<Hub> =>
    Effect.suspend(() => {
      const existing = hubs.get(id)
      if (existing !== undefined) return Effect.succeed(existing)
      return Effect.map(PubSub.sliding<Entry.Entry | typeof Ended>(capacity), (pubsub) => {
        // Re-check: another fiber may have created the hub while this one yielded.
        const raced = hubs.get(id)
        if (raced !== undefined) return raced
        const hub: Hub = { pubsub, next: null, waiters: [], subscribers: 0 }
        hubs.set(id, hub)
        return hub
      })
    })

  const dropIfUnused = (id: string, hub: Hub) => {
    if (hub.subscribers === 0 && hub.waiters.length === 0 && hubs.get(id) === hub) hubs.delete(id)
  }

  // Moves the hub's committed mark forward and wakes the waiters it passes. Runs
  // synchronously, as does awaitSequence's check-and-register, so no wake-up is lost.
  const advance = (hub: Hub, next: number) => {
    if (hub.next !== null && next <= hub.next) return
    hub.next = next
    const ready = hub.waiters.filter((w) => w.sequence < next)
    if (ready.length > 0) {
      const keep = hub.waiters.filter((w) => w.sequence >= next)
      hub.waiters.length = 0
      hub.waiters.push(...keep)
      for (const w of ready) Deferred.doneUnsafe(w.deferred, Effect.void)
    }
  }

  /**
   * Publishes committed entries to the session's listeners, if any. The committed
   * mark moves (and waiters wake) at once, when this is called; the returned effect
   * hands the entries to the `changes` subscribers. With no subscriber there is
   * nothing to hand over: a subscriber counts itself before it subscribes, and an
   * entry published before its subscription would not reach it anyway (its stream
   * reports it as missed).
   */
  const publish = (id: string, entries: ReadonlyArray<Entry.Entry>): Effect.Effect<void> => {
    const hub = hubs.get(id)
    const last = entries[entries.length - 1]
    if (hub === undefined || last === undefined) return Effect.void
    advance(hub, last.sequence + 1)
    return hub.subscribers === 0 ? Effect.void : Effect.asVoid(PubSub.publishAll(hub.pubsub, entries))
  }

  /**
   * After a (re)load: entries that storage holds beyond what this service published
   * (written by a failed append that reached storage after all, or by another
   * writer) are committed too; publishes those still in the ring, so subscribers
   * get them, and lets a "missed" marker cover the rest.
   */
  const catchUp = (id: string, state: JournalState.JournalState): Effect.Effect<void> =>
    Effect.suspend(() => {
      const hub = hubs.get(id)
      if (hub === undefined) return Effect.void
      const from = hub.next ?? state.next_sequence
      if (state.next_sequence <= from) return Effect.sync(() => advance(hub, state.next_sequence))
      const unseen = JournalState.entries(state).filter((e) => e.sequence >= from)
      return unseen.length > 0 ? publish(id, unseen) : Effect.sync(() => advance(hub, state.next_sequence))
    })

  /** Whether the session has `changes` subscribers now. */
  const subscribed = (id: string): boolean => (hubs.get(id)?.subscribers ?? 0) > 0

  /** The next sequence the service has published, when it has. */
  const published = (id: string): number | null => hubs.get(id)?.next ?? null

  /**
   * Subscribes to the session's hub. `known` is where the subscriber starts (read
   * before subscribing: an entry published in between shows up as "missed", never
   * as silently skipped).
   */
  const changes = <E>(
    id: string,
    knownNext: (published: number | null) => Effect.Effect<number, E>
  ): Effect.Effect<Stream.Stream<Change>, E, Scope.Scope> =>
    Effect.gen(function*() {
      const hub = yield* hubFor(id)
      const known = yield* knownNext(hub.next)
      let expected = Math.max(known, hub.next ?? 0)
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          hub.subscribers++
        }),
        () =>
          Effect.sync(() => {
            hub.subscribers--
            dropIfUnused(id, hub)
          })
      )
      const subscription = yield* PubSub.subscribe(hub.pubsub)
      return Stream.fromSubscription(subscription).pipe(
        Stream.takeWhile((item): item is Entry.Entry => item !== Ended),
        Stream.flatMap((entry) => {
          if (entry.sequence < expected) return Stream.empty
          const missed = entry.sequence - expected
          const fromSequence = expected
          expected = entry.sequence + 1
          const item: Change = { _tag: "Entry", entry }
          return missed > 0
            ? Stream.make<Array<Change>>({ _tag: "Missed", count: missed, fromSequence }, item)
            : Stream.succeed(item)
        })
      )
    })

  /** Completes once entry `sequence` is committed (see `SessionJournal.awaitSequence`). */
  const awaitSequence = <E>(
    id: string,
    sequence: number,
    knownNext: (published: number | null) => Effect.Effect<number, E>
  ): Effect.Effect<void, E | SessionNotFound> =>
    Effect.gen(function*() {
      const hub = yield* hubFor(id)
      advance(hub, yield* knownNext(hub.next))
      const deferred = Deferred.makeUnsafe<void, SessionNotFound>()
      // Check and register in one synchronous step: commits publish synchronously
      // too, so no commit can fall between the check and the wait.
      const done = yield* Effect.sync(() => {
        if (sequence < (hub.next ?? 0)) return true
        hub.waiters.push({ sequence, deferred })
        return false
      })
      if (!done) {
        yield* Deferred.await(deferred).pipe(Effect.ensuring(Effect.sync(() => {
          const at = hub.waiters.findIndex((w) => w.deferred === deferred)
          if (at >= 0) hub.waiters.splice(at, 1)
        })))
      }
      dropIfUnused(id, hub)
    })

  /**
   * A deleted session: its streams end and its waiters fail; its sequences start
   * again at 0 if it is written again.
   */
  const end = (id: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const hub = hubs.get(id)
      if (hub === undefined) return Effect.void
      hubs.delete(id)
      for (const w of hub.waiters) Deferred.doneUnsafe(w.deferred, Effect.fail(new SessionNotFound({ id })))
      hub.waiters.length = 0
      return Effect.asVoid(PubSub.publish(hub.pubsub, Ended))
    })

  return { publish, subscribed, catchUp, published, changes, awaitSequence, end }
}

/** The hubs of one service. */
export type Hubs = ReturnType<typeof make>
