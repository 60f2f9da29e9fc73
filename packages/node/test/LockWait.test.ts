/**
 * The lock waiter's retries run on the fiber's `Clock`, `Random` and a
 * `Schedule`: under `TestClock` the tries happen at the delays `lockBackoff`
 * gives (5 ms doubling up to 250 ms, each scaled by [0.5, 1.5)), the last wait is
 * cut to the bound, and past the bound the waiter fails with `SessionLocked`
 * saying how long it waited; when the lock file goes, it tries again at once
 * (after its short settle).
 */
import { SessionLocked } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as TestClock from "effect/testing/TestClock"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { Lock } from "../src/index.ts"
import { lockBackoff, waitFor } from "../src/internal/adapter.ts"
import { tempDir } from "./helpers.ts"

const made: Array<string> = []
afterAll(() => {
  for (const d of made.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

const cap = (n: number) => Math.min(250, 5 * 2 ** n)

describe("lockBackoff", () => {
  it("5 ms doubling up to 250 ms, each scaled by a factor in [0.5, 1.5) drawn from Random", async () => {
    const delays = await Effect.runPromise(
      Effect.gen(function*() {
        const step = yield* Schedule.toStep(lockBackoff)
        const out: Array<number> = []
        for (let n = 0; n < 12; n++) out.push(Duration.toMillis((yield* step(0, undefined))[1]))
        return out
      }).pipe(Random.withSeed("lock-wait"))
    )
    delays.forEach((d, n) => {
      expect(d).toBeGreaterThanOrEqual(cap(n) * 0.5)
      expect(d).toBeLessThan(cap(n) * 1.5)
    })
    // The same seed gives the same delays: the jitter is Random's, not Math.random's.
    const again = await Effect.runPromise(
      Effect.gen(function*() {
        const step = yield* Schedule.toStep(lockBackoff)
        const out: Array<number> = []
        for (let n = 0; n < 12; n++) out.push(Duration.toMillis((yield* step(0, undefined))[1]))
        return out
      }).pipe(Random.withSeed("lock-wait"))
    )
    expect(again).toEqual(delays)
  })
})

describe("claimBackoff", () => {
  it("waits 5 ms plus up to 10 ms drawn from Random while another process takes a stale lock over", async () => {
    const delays = (seed: string) =>
      Effect.runPromise(
        Effect.gen(function*() {
          const step = yield* Schedule.toStep(Lock.claimBackoff)
          const out: Array<number> = []
          for (let n = 0; n < 20; n++) out.push(Duration.toMillis((yield* step(0, undefined))[1]))
          return out
        }).pipe(Random.withSeed(seed))
      )
    const first = await delays("claim")
    for (const d of first) {
      expect(d).toBeGreaterThanOrEqual(5)
      expect(d).toBeLessThan(15)
    }
    expect(await delays("claim")).toEqual(first)
  })
})

describe("waitFor under TestClock", () => {
  it("tries at the schedule's delays, cuts the last wait to the bound, then gives up saying how long it waited", async () => {
    const dir = tempDir("lock-wait-clock")
    made.push(dir)
    const result = await Effect.runPromise(
      Effect.gen(function*() {
        const tries: Array<number> = []
        const attempt = Effect.flatMap(Clock.currentTimeMillis, (now) => {
          tries.push(now)
          return Effect.fail(new SessionLocked({ id: "s", holder: "pid 1 on elsewhere" }))
        })
        const fiber = yield* Effect.forkChild(waitFor(attempt, dir, "s", 1000))
        // Time moves only when the test moves it; a millisecond at a time.
        for (let t = 0; t < 1100 && fiber.pollUnsafe() === undefined; t++) yield* TestClock.adjust("1 millis")
        const error = yield* Effect.flip(Fiber.join(fiber))
        return { tries, error }
      }).pipe(Effect.provide(TestClock.layer()), Random.withSeed("lock-wait-clock"))
    )
    const { error, tries } = result
    expect(error).toBeInstanceOf(SessionLocked)
    expect(error.message).toContain("gave up after waiting 1.00 s")
    expect(tries[0]).toBe(0)
    expect(tries[tries.length - 1]).toBe(1000)
    const gaps = tries.slice(1).map((t, i) => t - tries[i]!)
    gaps.forEach((gap, n) => {
      if (n === gaps.length - 1) {
        // The last wait is what was left of the bound.
        expect(gap).toBeLessThan(cap(n) * 1.5 + 1)
      } else {
        // A millisecond of slack: the test clock moves a millisecond at a time.
        expect(gap).toBeGreaterThanOrEqual(Math.floor(cap(n) * 0.5))
        expect(gap).toBeLessThan(cap(n) * 1.5 + 1)
      }
    })
    // 5, 10, 20, 40, 80, 160, then 250 a try (each jittered): a handful of tries in a second.
    expect(tries.length).toBeGreaterThanOrEqual(6)
    expect(tries.length).toBeLessThanOrEqual(16)
  })

  it("tries again as soon as the lock file goes, long before the backoff's delay", async () => {
    const dir = tempDir("lock-wait-release")
    made.push(dir)
    const lockPath = path.join(dir, Lock.LOCK_FILE)
    fs.writeFileSync(lockPath, "{}\n")
    const tries = await Effect.runPromise(
      Effect.gen(function*() {
        const tries: Array<number> = []
        const attempt = Effect.flatMap(Clock.currentTimeMillis, (now) => {
          tries.push(now)
          return tries.length < 8
            ? Effect.fail(new SessionLocked({ id: "s", holder: "pid 1" }))
            : Effect.succeed("taken")
        })
        const fiber = yield* Effect.forkChild(waitFor(attempt, dir, "s", 60_000))
        // Let the backoff grow to its cap: seven refusals, with time moving.
        while (tries.length < 7) yield* TestClock.adjust("1 millis")
        // Real time for the waiter to set up its watch (test time stands still).
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        // The seventh refusal now waits at least 125 ms of test time, which stands still
        // while the lock goes. A watch of the test's own sees the removal in the same
        // turn of the event loop as the waiter's.
        yield* Effect.promise(() =>
          new Promise<void>((resolve) => {
            const w = fs.watch(dir, { persistent: false }, () => {
              w.close()
              setTimeout(resolve, 50)
            })
            fs.unlinkSync(lockPath)
          })
        )
        // Only the waiter's settle (under 10 ms) is left to run.
        for (let t = 0; t < 40 && tries.length === 7; t++) {
          yield* TestClock.adjust("1 millis")
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 1)))
        }
        // Were it not woken, its backoff ends it anyway (and the assertion below fails).
        for (let t = 0; t < 400 && tries.length === 7; t++) yield* TestClock.adjust("1 millis")
        expect(yield* Fiber.join(fiber)).toBe("taken")
        return tries
      }).pipe(Effect.provide(TestClock.layer()))
    )
    expect(tries).toHaveLength(8)
    expect(tries[7]! - tries[6]!).toBeLessThanOrEqual(12)
  })
})
