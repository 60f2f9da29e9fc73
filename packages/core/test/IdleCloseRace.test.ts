/**
 * A `close` (or `delete`) that lands between the writer's idle check and the
 * release it then runs must not leave the session's release waiting on the writer
 * itself (the writer would wait for itself, and the session, its `close` and every
 * later write to it would hang). The scheduler yields at pseudo-random points
 * (seeded), as the operation budget does in production. The time-outs only detect a
 * hang; they bound nothing about speed.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Scheduler from "effect/Scheduler"
import * as Stream from "effect/Stream"
import { Persistence, SessionJournal } from "../src/index.ts"
import { toolParams } from "./fixtures.ts"

const params = toolParams()

const SEED = 12345

// Yields after a pseudo-random number of operations, the same run each time.
class Jittery extends Scheduler.MixedScheduler {
  seed = SEED
  override shouldYield(fiber: Fiber.Fiber<unknown, unknown>) {
    if (fiber.currentOpCount <= 1) return false
    this.seed = (this.seed * 1103515245 + 12345) % 2147483648
    return this.seed / 2147483648 < 0.35
  }
}

describe("idle release racing close", () => {
  it.live(
    `a close at any point of the writer's round completes, and the session opens again (seed ${SEED})`,
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          const persistence = yield* Persistence.makeMemory()
          const j = yield* SessionJournal.make({ idleTimeToLive: "1 hour" }).pipe(
            Effect.provideService(Persistence.Persistence, persistence)
          )
          for (let k = 0; k < 600; k++) {
            const id = `s${k % 7}`
            const first = yield* j.record(id, params).pipe(Effect.timeoutOption("5 seconds"))
            assert.isTrue(Option.isSome(first), `a write to ${id} never completed (round ${k}, seed ${SEED})`)
            const w = yield* Effect.forkChild(j.record(id, params))
            let n = 0
            const c = yield* Effect.forkChild(
              Effect.andThen(
                Effect.whileLoop({ while: () => n++ < k % 40, body: () => Effect.yieldNow, step: () => {} }),
                j.close(id)
              )
            )
            const written = yield* Fiber.join(w).pipe(Effect.timeoutOption("5 seconds"))
            assert.isTrue(
              Option.isSome(written),
              `a concurrent write to ${id} never completed (round ${k}, seed ${SEED})`
            )
            const closed = yield* Fiber.join(c).pipe(Effect.timeoutOption("5 seconds"))
            assert.isTrue(Option.isSome(closed), `close of ${id} never completed (round ${k}, seed ${SEED})`)
          }
        }).pipe(Effect.provideService(Scheduler.Scheduler, new Jittery()))
      ),
    60_000
  )

  it.live(
    `writes, closes and evictions at the bound interleaved at any point all complete, one chain per session (seed ${SEED})`,
    () =>
      Effect.scoped(
        Effect.gen(function*() {
          const persistence = yield* Persistence.makeMemory()
          const j = yield* SessionJournal.make({ idleTimeToLive: "1 hour", maxOpenSessions: 2 }).pipe(
            Effect.provideService(Persistence.Persistence, persistence)
          )
          const written = new Map<string, number>()
          let pick = SEED
          const next = (n: number) => {
            pick = (pick * 1103515245 + 12345) % 2147483648
            return pick % n
          }
          for (let k = 0; k < 300; k++) {
            const ids = [`e${next(5)}`, `e${next(5)}`, `e${next(5)}`]
            const closed = `e${next(5)}`
            const delay = next(30)
            const writes = yield* Effect.forkChild(
              Effect.forEach(ids, (id) => j.record(id, params), { concurrency: "unbounded" })
            )
            let n = 0
            const c = yield* Effect.forkChild(
              Effect.andThen(
                Effect.whileLoop({ while: () => n++ < delay, body: () => Effect.yieldNow, step: () => {} }),
                j.close(closed)
              )
            )
            const done = yield* Fiber.join(writes).pipe(Effect.timeoutOption("5 seconds"))
            assert.isTrue(Option.isSome(done), `writes to ${ids.join(", ")} never completed (round ${k}, seed ${SEED})`)
            for (const id of ids) written.set(id, (written.get(id) ?? 0) + 1)
            const closing = yield* Fiber.join(c).pipe(Effect.timeoutOption("5 seconds"))
            assert.isTrue(Option.isSome(closing), `close of ${closed} never completed (round ${k}, seed ${SEED})`)
          }
          for (const [id, count] of written) {
            const stored = yield* Stream.runCollect(j.entries(id))
            assert.deepStrictEqual(
              stored.map((e) => e.sequence),
              Array.from({ length: count }, (_, i) => i),
              `${id} (seed ${SEED})`
            )
          }
        }).pipe(Effect.provideService(Scheduler.Scheduler, new Jittery()))
      ),
    60_000
  )
})
