/**
 * The service's change hubs: entries of an `RcMap` keyed by session id, each a
 * sliding `PubSub` of committed entries and the committed mark as a
 * `SubscriptionRef`. A `changes` subscriber holds its session's hub for as long as
 * its scope lasts, an `awaitSequence` caller while it waits; the hub is closed
 * when the last of them lets go (not when the session's writer, which comes and
 * goes with idle release, does).
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as RcMap from "effect/RcMap"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Entry from "../Entry.ts"
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

/**
 * The committed mark of a hub: the next sequence this service will publish once
 * known (`null` before), or `Ended` once the session is deleted.
 */
type Mark = number | null | typeof Ended

interface Hub {
  readonly pubsub: PubSub.PubSub<Entry.Entry | typeof Ended>
  readonly committed: SubscriptionRef.SubscriptionRef<Mark>
}

const nextOf = (mark: Mark): number | null => typeof mark === "number" ? mark : null

/**
 * The hubs of one service, closed with the scope they are made in. `knownNext`
 * tells where a new listener starts: what the service has committed, or what
 * storage holds.
 */
export const make = Effect.fnUntraced(function*(
  capacity: number,
  history?: (
    id: string,
    options: { readonly from: number; readonly limit: number }
  ) => Stream.Stream<Entry.Entry, unknown>
) {
  // The hubs open now, by session, for the writers to publish to without taking a
  // reference (a scope per batch): a hub enters when its RcMap entry is acquired
  // and leaves when the entry's scope closes, or when its session is deleted.
  const open = new Map<string, Hub>()

  const hubs = yield* RcMap.make({
    lookup: (id: string) =>
      Effect.gen(function*() {
        const pubsub = yield* Effect.acquireRelease(
          PubSub.sliding<Entry.Entry | typeof Ended>(capacity),
          PubSub.shutdown
        )
        const committed = yield* SubscriptionRef.make<Mark>(null)
        const hub: Hub = { pubsub, committed }
        open.set(id, hub)
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            if (open.get(id) === hub) open.delete(id)
          })
        )
        return hub
      })
  })

  // Moves the hub's committed mark forward; its waiters see the change.
  const advance = (hub: Hub, next: number): Effect.Effect<void> =>
    SubscriptionRef.updateSome(
      hub.committed,
      (mark) => mark === Ended || (typeof mark === "number" && next <= mark) ? Option.none() : Option.some(next)
    )

  /**
   * Publishes committed entries to the session's listeners, if it has any: moves
   * the committed mark (waiters wake), then hands the entries to the `changes`
   * subscribers. An entry published before a subscription would not reach it
   * anyway (its stream reports it as missed).
   */
  const publish = (id: string, entries: ReadonlyArray<Entry.Entry>): Effect.Effect<void> => {
    const hub = open.get(id)
    const last = entries[entries.length - 1]
    if (hub === undefined || last === undefined) return Effect.void
    return Effect.andThen(advance(hub, last.sequence + 1), PubSub.publishAll(hub.pubsub, entries))
  }

  /**
   * After a (re)load: entries that storage holds beyond what this service published
   * (written by a failed append that reached storage after all, or by another
   * writer) are committed too; publishes those still retained (at most the hub's
   * capacity, more would slide out anyway), so subscribers get them, and lets a
   * "missed" marker cover the rest. Those the state's window holds come from it;
   * older ones are read from storage and published only when they are the retained
   * entries the load verified (each hashes to itself and to the retained hash at its
   * sequence); a read that fails or differs publishes what verified before it.
   * `committed`, when the writer knows it, is the next sequence it had committed
   * before the reload: the start when nothing was published since the hub opened
   * (its subscribers started at or before it).
   */
  const catchUp = (id: string, state: JournalState.JournalState, committed?: number): Effect.Effect<void> =>
    Effect.suspend(() => {
      const hub = open.get(id)
      if (hub === undefined) return Effect.void
      const from = nextOf(SubscriptionRef.getUnsafe(hub.committed)) ?? committed ?? state.next_sequence
      if (state.next_sequence <= from) return advance(hub, state.next_sequence)
      const inWindow = JournalState.entries(state).filter((e) => e.sequence >= from)
      const windowStart = JournalState.windowStart(state)
      const first = Math.max(from, state.next_sequence - JournalState.entryCount(state), state.next_sequence - capacity)
      const publishAll = (older: ReadonlyArray<Entry.Entry>) => {
        const unseen = older.length === 0 ? inWindow : [...older, ...inWindow]
        return unseen.length > 0 ? publish(id, unseen) : advance(hub, state.next_sequence)
      }
      if (history === undefined || first >= windowStart) return publishAll([])
      const older: Array<Entry.Entry> = []
      return history(id, { from: first, limit: windowStart - first }).pipe(
        Stream.takeWhile((entry) => {
          const ok = entry.sequence === first + older.length && entry.sequence < windowStart &&
            JournalState.retainedHashAt(state, entry.sequence) === entry.entry_hash &&
            Entry.computeHash(entry) === entry.entry_hash
          if (ok) older.push(entry)
          return ok
        }),
        Stream.runDrain,
        Effect.ignore,
        Effect.andThen(Effect.suspend(() => publishAll(older)))
      )
    })

  /** Whether the session has listeners now (`changes` subscribers or `awaitSequence` waiters). */
  const subscribed = (id: string): boolean => open.has(id)

  /** The next sequence the service has published, when it has. */
  const published = (id: string): number | null => {
    const hub = open.get(id)
    return hub === undefined ? null : nextOf(SubscriptionRef.getUnsafe(hub.committed))
  }

  /**
   * Subscribes to the session's hub, for as long as the scope lasts. `known` is
   * where the subscriber starts (read before subscribing: an entry published in
   * between shows up as "missed", never as silently skipped).
   */
  const changes = <E>(
    id: string,
    knownNext: (published: number | null) => Effect.Effect<number, E>
  ): Effect.Effect<Stream.Stream<Change>, E, Scope.Scope> =>
    Effect.gen(function*() {
      const hub = yield* RcMap.get(hubs, id)
      const mark = nextOf(SubscriptionRef.getUnsafe(hub.committed))
      const known = yield* knownNext(mark)
      let expected = Math.max(known, mark ?? 0)
      const subscription = yield* PubSub.subscribe(hub.pubsub)
      // Deleted before the subscription existed: the stream it would have ended.
      if (SubscriptionRef.getUnsafe(hub.committed) === Ended) return Stream.empty
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

  /**
   * Completes once entry `sequence` is committed (see `SessionJournal.awaitSequence`).
   * It waits on the changes of the committed mark, which start with its value when
   * the wait starts: no commit can fall between a check and the wait.
   */
  const awaitSequence = <E>(
    id: string,
    sequence: number,
    knownNext: (published: number | null) => Effect.Effect<number, E>
  ): Effect.Effect<void, E | SessionNotFound> =>
    Effect.scoped(Effect.gen(function*() {
      const hub = yield* RcMap.get(hubs, id)
      yield* advance(hub, yield* knownNext(nextOf(SubscriptionRef.getUnsafe(hub.committed))))
      const last = yield* SubscriptionRef.changes(hub.committed).pipe(
        Stream.takeUntil((mark) => mark === Ended || (typeof mark === "number" && sequence < mark)),
        Stream.runLast
      )
      if (Option.isSome(last) && last.value === Ended) return yield* new SessionNotFound({ id })
    }))

  /**
   * A deleted session: its streams end and its waiters fail; its sequences start
   * again at 0 if it is written again (its next listener gets a new hub).
   */
  const end = (id: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const hub = open.get(id)
      if (hub === undefined) return Effect.void
      open.delete(id)
      return SubscriptionRef.set(hub.committed, Ended).pipe(
        Effect.andThen(PubSub.publish(hub.pubsub, Ended)),
        Effect.andThen(RcMap.invalidate(hubs, id))
      )
    })

  return { publish, subscribed, catchUp, published, changes, awaitSequence, end }
})

/** The hubs of one service. */
export type Hubs = Effect.Success<ReturnType<typeof make>>
