/**
 * How long `JournalSessionStore`'s append waits for a session another process
 * holds is measured on Effect's Clock (the clock its sleeps run on): under a test
 * clock, an append to a session that stays locked gives up with `SessionLocked`
 * once the clock has passed `lockWait`, and one whose lock goes in time stores.
 */
import { assert, describe, it } from "@effect/vitest"
import { Persistence, SessionJournal, SessionLocked } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import { TestClock } from "effect/testing"
import { JournalSessionStore } from "../src/index.ts"

const key = { projectKey: "-tmp-work-project", sessionId: "5f8c2a4e-0000-4000-8000-00000000000a" }
const entry = (n: number): JournalSessionStore.SessionStoreEntry => ({
  type: "user",
  uuid: `00000000-0000-4000-8000-${n.toString().padStart(12, "0")}`,
  message: { role: "user", content: `entry ${n}` }
})

/** The journal, with its first `lockedFor` writes failing as if another process held the session. */
const lockedJournal = (lockedFor: number) => {
  let refused = 0
  const layer = Layer.effect(
    SessionJournal.SessionJournal,
    Effect.map(SessionJournal.SessionJournal, (journal) =>
      SessionJournal.SessionJournal.of({
        ...journal,
        writeFrom: (id, plan) =>
          Effect.suspend(() => {
            if (refused >= lockedFor) return journal.writeFrom(id, plan)
            refused++
            return Effect.fail(new SessionLocked({ id, holder: "another process" }))
          })
      }))
  ).pipe(Layer.provide(SessionJournal.layer()), Layer.provide(Persistence.layerMemory()))
  return { layer, refused: () => refused }
}

/** Lets the append run, then moves the test clock on by `ms`, `times` times. */
const advance = (times: number, ms: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < times; i++) {
      yield* Effect.yieldNow
      yield* TestClock.adjust(ms)
    }
    yield* Effect.yieldNow
  })

describe("JournalSessionStore lockWait", () => {
  it.effect("an append to a session that stays locked fails with SessionLocked once the clock passes lockWait", () => {
    const journal = lockedJournal(Number.MAX_SAFE_INTEGER)
    return Effect.gen(function*() {
      const store = yield* JournalSessionStore.make({ lockWait: "1 second" })
      const fiber = yield* Effect.forkChild(store.append(key, [entry(1)]))
      yield* advance(40, 50)
      // Two seconds on the clock: past the bound, the append has given up.
      const exit = fiber.pollUnsafe()
      assert.isDefined(exit)
      const error = exit !== undefined && Exit.isFailure(exit) ? Cause.findErrorOption(exit.cause) : undefined
      assert.strictEqual(error !== undefined && error._tag === "Some" ? error.value._tag : null, "SessionLocked")
      assert.isAbove(journal.refused(), 1)
    }).pipe(Effect.provide(journal.layer))
  })

  it.effect("an append whose session's lock goes within lockWait stores", () => {
    const journal = lockedJournal(3)
    return Effect.gen(function*() {
      const store = yield* JournalSessionStore.make({ lockWait: "1 second" })
      const fiber = yield* Effect.forkChild(store.append(key, [entry(2)]))
      yield* advance(20, 50)
      yield* Fiber.join(fiber)
      assert.strictEqual(journal.refused(), 3)
      assert.deepStrictEqual(yield* store.load(key), [entry(2)])
    }).pipe(Effect.provide(journal.layer))
  })
})
