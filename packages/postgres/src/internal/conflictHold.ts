/**
 * The lock-holding retry of an append that lost a race. A compare-and-append runs in
 * a transaction of its own fiber; when it finds the stored tip moved, that
 * transaction is not rolled back but kept open, still holding the session's row
 * lock, for the writer's reload and retry, which then cannot lose again. Without it
 * two busy writers do not take turns: the winner's next append is always ready
 * before the loser has reloaded, and one writer starves the other. A hold nobody
 * uses is rolled back after `conflictHold`.
 */
import { StorageError, StorageReason } from "@session-journal/core"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import type { Store } from "./store.ts"

/**
 * A transaction kept open after a lost race: it holds the session's row lock until
 * the retry commits through it, or it is released.
 */
export interface Held {
  readonly level: SqlClient.TransactionConnection.Service
  readonly finish: Deferred.Deferred<boolean>
  readonly fiber: Fiber.Fiber<void, SqlError | HoldReleased>
  /** An append or a reload is running on it: the release timer must leave it alone. */
  inUse: boolean
  /** Counts the uses, so a timer armed for an earlier one is void. */
  uses: number
}

/** The hold of one write handle: the transaction its last lost race left open, if any. */
export interface WriterHold {
  held: Held | null
}

class HoldReleased extends Data.TaggedError("HoldReleased")<{}> {}

/** The hold operations over the store's client, releasing idle holds after `conflictHold`. */
export const make = (store: Store, conflictHold: Duration.Duration) => {
  const { names, sql, transaction } = store

  // Opens a transaction in its own fiber (in `scope`) and hands out its connection;
  // the fiber commits when told `true` and rolls back when told `false`. Only an
  // idle hold kept after a lost race is released by time (`releaseLater`): a timer
  // running from BEGIN would roll back, and hand back to the pool, the connection
  // of an append that is merely slow or waiting for the row lock.
  const openHold = (scope: Scope.Scope) =>
    Effect.gen(function*() {
      const ready = yield* Deferred.make<SqlClient.TransactionConnection.Service>()
      const finish = yield* Deferred.make<boolean>()
      const fiber = yield* Effect.forkIn(
        transaction(Effect.gen(function*() {
          const level = yield* Effect.serviceOption(sql.transactionService)
          if (Option.isNone(level)) {
            return yield* Effect.die(new Error("no transaction connection inside a transaction"))
          }
          yield* Deferred.succeed(ready, level.value)
          const commit = yield* Deferred.await(finish)
          if (!commit) return yield* new HoldReleased()
        })),
        scope
      )
      const level = yield* Effect.raceFirst(
        Deferred.await(ready),
        Effect.andThen(Fiber.join(fiber), Effect.never)
      ).pipe(Effect.catchTag("HoldReleased", () => Effect.never))
      const held: Held = { level, finish, fiber, inUse: false, uses: 0 }
      return held
    })

  // Rolls an idle hold back once `conflictHold` has passed without the retry that
  // was to use it. Synchronous check and release, so a retry claiming the hold
  // (also synchronously) and the timer can never both have it.
  const releaseLater = (held: Held, scope: Scope.Scope) => {
    const uses = held.uses
    return Effect.forkIn(
      Effect.andThen(
        Effect.sleep(conflictHold),
        Effect.sync(() => {
          if (!held.inUse && held.uses === uses) Deferred.doneUnsafe(held.finish, Exit.succeed(false))
        })
      ),
      scope
    )
  }

  const finishHold = (held: Held, commit: boolean): Effect.Effect<void, SqlError | StorageError> =>
    Effect.gen(function*() {
      yield* Deferred.succeed(held.finish, commit)
      const exit = yield* Fiber.await(held.fiber)
      if (!commit || Exit.isSuccess(exit)) return
      const error = Exit.findErrorOption(exit)
      if (Option.isSome(error) && error.value._tag === "SqlError") return yield* error.value
      // Rolled back instead (released or interrupted): nothing of the batch is stored.
      return yield* new StorageError({
        operation: "append",
        path: names.entries,
        reason: new StorageReason.NotDurable({ why: "the transaction ended before it could commit" })
      })
    })

  const isLive = (held: Held | null): held is Held =>
    held !== null && !Deferred.isDoneUnsafe(held.finish) && held.fiber.pollUnsafe() === undefined

  return { openHold, releaseLater, finishHold, isLive }
}
