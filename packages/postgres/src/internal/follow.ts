/**
 * Reading a session's entries without a handle: `history` pages through them by
 * sequence; `follow` pages through them and then waits for more. Followers in any
 * instance learn of commits through LISTEN/NOTIFY (one listening connection per
 * instance, fanned out in-process) and read the new rows themselves, so a lost
 * notification delays an entry until the next notification or poll, never drops it.
 * A follower outlives a server restart: its reads are retried on a lost connection
 * with backoff, for a bounded time, and go on from the entry after the last one
 * delivered.
 */
import {
  type CorruptJournal,
  type Entry,
  type Persistence,
  SessionNotFound,
  type StorageError
} from "@session-journal/core"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { isSqlError, type SqlError } from "effect/sql/SqlError"
import * as Stream from "effect/Stream"
import type { Signal, Store } from "./store.ts"

/** Settings of the readers. */
export interface Config {
  readonly pageSize: number
  readonly pollInterval: Duration.Duration
  /** How long a follower keeps reconnecting after a lost connection. */
  readonly followReconnect: Duration.Duration
  /** Where the listening connection lives: the adapter's layer. */
  readonly layerScope: Scope.Scope
}

/** `history` and `follow` over the store. */
export const make = (store: Store, config: Config) => {
  const { names, pg, readPage, sessionExists, signals, storageError } = store
  const { followReconnect, layerScope, pageSize, pollInterval } = config

  // Backoff from 100 ms, doubling, at most 2 s apart, for `followReconnect` in all.
  const reconnecting = Schedule.min([Schedule.exponential("100 millis"), Schedule.spaced("2 seconds")]).pipe(
    Schedule.upTo({ duration: followReconnect })
  )
  // Only a lost connection is waited out; a query the server rejects, or damage, is reported at once.
  const reconnect = <A, E>(self: Effect.Effect<A, E | SqlError>): Effect.Effect<A, E | SqlError> =>
    Effect.retry(self, {
      schedule: reconnecting,
      while: (e: E | SqlError) => isSqlError(e) && e.reason._tag === "ConnectionError"
    })

  // "<session id> <next sequence>", as the append's pg_notify writes it.
  const parseSignal = (payload: string): Signal | null => {
    const match = /^(.+) (0|[1-9][0-9]{0,15})$/.exec(payload)
    if (match === null) return null
    const next = Number.parseInt(match[2]!, 10)
    return Number.isSafeInteger(next) ? { id: match[1]!, next } : null
  }

  // One LISTEN connection per instance fans notifications out to the followers of
  // this process. After every (re)connect all followers re-read, since commits may
  // have happened while nobody listened.
  const listenOnce = Effect.scoped(Effect.gen(function*() {
    const queue = yield* pg.listen(names.channel)
    yield* PubSub.publish(signals, { id: null, next: 0 })
    while (true) {
      const note = yield* Queue.take(queue)
      const signal = parseSignal(note.payload)
      if (signal !== null) yield* PubSub.publish(signals, signal)
    }
  }))
  let listening = false
  const startListener = Effect.suspend(() => {
    if (listening) return Effect.void
    listening = true
    return Effect.asVoid(Effect.forkIn(
      listenOnce.pipe(
        Effect.catchCause(() => Effect.void),
        Effect.andThen(Effect.sleep(Duration.min(pollInterval, Duration.seconds(1)))),
        Effect.forever
      ),
      layerScope
    ))
  })

  const notFound = (
    id: string
  ): Stream.Stream<Entry.Entry, SessionNotFound | CorruptJournal | StorageError | SqlError> =>
    Stream.fail(new SessionNotFound({ id }))

  const history = (id: string, options?: Persistence.HistoryOptions) =>
    Stream.unwrap(Effect.gen(function*() {
      if (!(yield* sessionExists(id))) return notFound(id)
      const limit = options?.limit ?? Number.POSITIVE_INFINITY
      // Keyset pagination: each page starts after the last sequence read.
      return Stream.paginate({ from: Math.max(0, options?.from ?? 0), left: limit }, (s) =>
        s.left <= 0
          ? Effect.succeed([[], Option.none()] as const)
          : Effect.map(readPage(id, s.from, Math.min(pageSize, s.left), "history"), (page) => {
            const last = page[page.length - 1]
            const more = last !== undefined && page.length === Math.min(pageSize, s.left)
            return [
              page,
              more ? Option.some({ from: last.sequence + 1, left: s.left - page.length }) : Option.none()
            ] as const
          }))
    })).pipe(Stream.catchTag("SqlError", (e) => Stream.fail(storageError("history", names.entries)(e))))

  const follow = (id: string, from: number) =>
    Stream.unwrap(Effect.gen(function*() {
      yield* startListener
      // Subscribe before the first read: a commit signalled after that read is
      // never missed.
      const subscription = yield* PubSub.subscribe(signals)
      if (!(yield* sessionExists(id))) return notFound(id)
      // The next entry to deliver: where a read resumes after a reconnect.
      let next = Math.max(0, from)
      const relevant = (s: Signal) => s.id === null || (s.id === id && s.next > next)
      // Waits for a signal about this session, or the poll interval, whichever
      // comes first; then the caller reads whatever is there.
      const waitForMore: Effect.Effect<void> = Effect.gen(function*() {
        while (true) {
          const signal = yield* Effect.timeoutOption(PubSub.take(subscription), pollInterval)
          if (Option.isNone(signal) || relevant(signal.value)) return
        }
      })
      return Stream.paginate(undefined, () =>
        Effect.gen(function*() {
          const page = yield* reconnect(readPage(id, next, pageSize, "follow"))
          const fresh = page.filter((e) => e.sequence >= next)
          const last = fresh[fresh.length - 1]
          if (last === undefined) {
            // Caught up: a session deleted meanwhile ends the stream instead of
            // being polled forever (its row goes first, in the delete's transaction).
            if (!(yield* reconnect(sessionExists(id)))) return yield* new SessionNotFound({ id })
            yield* waitForMore
            return [[], Option.some(undefined)] as const
          }
          next = last.sequence + 1
          return [fresh, Option.some(undefined)] as const
        }))
    })).pipe(Stream.catchTag("SqlError", (e) => Stream.fail(storageError("follow", names.entries)(e))))

  return { history, follow }
}
