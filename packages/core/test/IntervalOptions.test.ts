/**
 * Interval options: every one is a `Duration.Input`, decoded once by
 * `Persistence.intervalOption`; a value that is no duration, or a negative one, is a
 * typed `StorageError` naming the option, never a defect.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import { Persistence, SessionJournal } from "../src/index.ts"

const invalidOptionOf = (exit: Exit.Exit<unknown, unknown>): string | undefined => {
  if (!Exit.isFailure(exit)) return undefined
  const error = Exit.findErrorOption(exit)
  if (error._tag === "None") return `not a typed failure: ${String(exit)}`
  const e = error.value as { _tag?: string; operation?: string; reason?: { _tag: string; option?: string } }
  return e._tag === "StorageError" && e.operation === "configure" && e.reason?._tag === "InvalidOption"
    ? e.reason.option
    : `another failure: ${String(exit)}`
}

describe("Persistence.intervalOption", () => {
  it("keeps durations, takes the fallback for undefined", () => {
    const ok = (input: Duration.Input | undefined, millis: number) => {
      const r = Persistence.intervalOption("x", input, "2 seconds")
      assert.isTrue(Result.isSuccess(r), String(input))
      if (Result.isSuccess(r)) assert.strictEqual(Duration.toMillis(r.success), millis)
    }
    ok(undefined, 2000)
    ok(0, 0)
    ok(250, 250)
    ok("1 minute", 60_000)
    ok(Duration.seconds(3), 3000)
    ok("Infinity", Infinity)
  })

  it("refuses what is no duration, NaN and negative durations, naming the option", () => {
    const bad: ReadonlyArray<Duration.Input> = ["soon" as Duration.Input, Number.NaN, -1, "-5 millis", "-Infinity"]
    for (const input of bad) {
      const r = Persistence.intervalOption("pollInterval", input, "2 seconds")
      assert.isTrue(Result.isFailure(r), String(input))
      if (Result.isFailure(r)) {
        assert.strictEqual(r.failure.operation, "configure")
        const reason = r.failure.reason
        assert.strictEqual(reason._tag === "InvalidOption" ? reason.option : reason._tag, "pollInterval")
      }
    }
  })
})

describe("SessionJournal interval options", () => {
  it.effect("a bad idleTimeToLive fails the layer with a StorageError naming it, not a defect", () =>
    Effect.gen(function*() {
      for (const idleTimeToLive of ["a while" as Duration.Input, -1]) {
        const exit = yield* Effect.exit(
          Effect.scoped(
            Layer.build(SessionJournal.layer({ idleTimeToLive }).pipe(Layer.provide(Persistence.layerMemory())))
          )
        )
        assert.strictEqual(invalidOptionOf(exit), "idleTimeToLive")
      }
    }))
})
