/**
 * Telling other instances that sessions grew, after the appends have committed
 * (DESIGN §8, "Notified after the commit"). PostgreSQL keeps notifications in
 * commit order by taking a lock that is one for the whole server before a
 * notifying transaction commits, and holding it until that commit is on disk: an
 * append that notified inside its own transaction could not share a WAL flush
 * with an append to any other session. So the append's transaction notifies
 * nobody; its commit marks the session here (its newest count, one mark per
 * session however many appends), and one fiber per adapter instance sends every
 * marked session in one statement of its own, at most one such statement per
 * `TICK` (so a session appended to a thousand times a second costs a hundred
 * notifying statements, not a thousand). That statement commits asynchronously (`synchronous_commit` off for
 * its transaction alone): it holds the lock only while it commits, not while the
 * disk flushes, and what it announces is already durable.
 *
 * A notification is a hint, never the record: it may be lost (a crash between the
 * append's commit and the send, a failed send, more marked sessions than the
 * bound), and followers re-read every `pollInterval` all the same.
 */
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import type { Store } from "./store.ts"

/**
 * Most sessions marked and not yet sent. A session id is at most 128 ASCII
 * characters, so the marks stay under about 600 KiB; a mark beyond the bound is
 * dropped, and its followers find the entries at their next poll.
 */
export const MAX_PENDING = 4096

/**
 * How long the first mark waits for others before they are sent together: the
 * delay a notification adds to the commit, and the least time between two sends.
 */
export const TICK = "10 millis"

/** How long closing the adapter waits for the last marks to be sent. */
const FINAL_SEND = "1 second"

/** The notifier of one adapter instance. */
export interface Notifier {
  /** Marks session `id` as now ending before `next`; sent soon, in the background. */
  readonly mark: (id: string, next: number) => void
}

// A string constant of the statement, quotes doubled.
const literal = (text: string): string => `'${text.replaceAll(`'`, `''`)}'`

/**
 * Starts the sending fiber in `scope` (the adapter's layer); what is marked when
 * the scope closes is sent once more, for at most a second.
 */
export const make = Effect.fnUntraced(function*(store: Store, scope: Scope.Scope) {
  const { names, retryLostConnection, sql } = store
  // One notification per session, each "<id> <next>" as `follow` parses it; the
  // transaction's commit is not waited for on disk.
  const text = `SELECT set_config('synchronous_commit', 'off', true) AS c,` +
    ` pg_notify(${literal(names.channel)}, p) FROM unnest($1::text[]) AS p`
  let pending = new Map<string, number>()
  // Holds at most one wake-up: marks made while the fiber waits out the tick or
  // sends are all taken by the next send.
  const wake = yield* Queue.dropping<void>(1)

  const send: Effect.Effect<void> = Effect.suspend(() => {
    if (pending.size === 0) return Effect.void
    const batch = pending
    pending = new Map()
    const payloads: Array<string> = []
    for (const [id, next] of batch) payloads.push(`${id} ${next}`)
    // A send that fails is not repeated beyond the lost-connection retry: the
    // followers' poll covers it.
    return Effect.ignore(retryLostConnection(sql.unsafe(text, [payloads])))
  })

  yield* Effect.forkIn(
    Effect.forever(Effect.andThen(Queue.take(wake), Effect.andThen(Effect.sleep(TICK), send))),
    scope
  )
  // Added after the fork, so it runs first when the scope closes.
  yield* Scope.addFinalizer(scope, Effect.ignore(Effect.timeout(send, FINAL_SEND)))

  const mark = (id: string, next: number): void => {
    const known = pending.get(id)
    if (known === undefined) {
      if (pending.size >= MAX_PENDING) return
      pending.set(id, next)
    } else if (next > known) pending.set(id, next)
    Queue.offerUnsafe(wake, undefined)
  }
  const notifier: Notifier = { mark }
  return notifier
})
