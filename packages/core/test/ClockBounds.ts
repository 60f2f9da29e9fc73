/**
 * A writer whose clock no stored entry can hold (before 1970, past 2^53) must not
 * acknowledge anything: every later read would refuse the entry. Each adapter's
 * test file calls `suite(name, makeLayer)`; `makeLayer` builds the service over a
 * storage that later layers from the same call share (the same directory, the
 * same memory), so a second service can read what the first wrote.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { TestClock } from "effect/testing"
import { Entry, type Persistence, SessionJournal } from "../src/index.ts"
import { toolParams } from "./fixtures.ts"
import { freshId } from "./PersistenceContract.ts"

const params: Entry.ToolParams = toolParams("read_file", { bytes_written: 2 })

const GOOD = 1_700_000_000_000

/** Clock readings (milliseconds since the epoch) that no stored entry can hold. */
export const badClocks: ReadonlyArray<readonly [string, number]> = [
  ["a millisecond before 1970", -1],
  ["in 1969", -86_400_000 * 200],
  ["past 2^53 seconds", (Entry.MAX_U53 + 1) * 1000]
]

type Journal = SessionJournal.SessionJournal | Persistence.Persistence

const refused = (effect: Effect.Effect<unknown, SessionJournal.WriteError>) =>
  Effect.gen(function*() {
    const error = yield* Effect.flip(effect)
    assert.strictEqual(error._tag, "InvalidRecordField")
    assert.strictEqual(error._tag === "InvalidRecordField" ? error.field : undefined, "timestamp_secs")
    assert.include(error.message, "nothing was written")
  })

/**
 * The suite: with each bad clock, `record`, `append`, `writeAll` and `setMeta`
 * fail with `InvalidRecordField` on `timestamp_secs`; the entries acknowledged
 * before stay, the session reads and verifies in this service and in a new one,
 * and writing resumes once the clock is good.
 */
export const suite = (name: string, makeLayer: () => () => Layer.Layer<Journal, unknown>) =>
  describe(name, () => {
    for (const [label, millis] of badClocks) {
      it.effect(`a clock ${label} is refused with a typed error; nothing acknowledged is lost`, () => {
        const layerOf = makeLayer()
        const id = freshId("clock")
        const check = (expected: number) =>
          Effect.gen(function*() {
            const j = yield* SessionJournal.SessionJournal
            const entries = yield* Stream.runCollect(j.entries(id))
            assert.deepStrictEqual(entries.map((e) => e.sequence), Array.from({ length: expected }, (_, i) => i))
            const report = yield* j.verify(id)
            assert.strictEqual(report.nextSequence, expected)
            assert.strictEqual((yield* j.state(id)).next_sequence, expected)
          })
        return Effect.gen(function*() {
          yield* Effect.scoped(
            Effect.gen(function*() {
              const j = yield* SessionJournal.SessionJournal
              yield* TestClock.setTime(GOOD)
              yield* j.record(id, params)
              yield* j.append(id, "message", { n: 1 })
              yield* TestClock.setTime(millis)
              yield* refused(j.record(id, params))
              yield* refused(j.append(id, "message", { n: 2 }))
              yield* refused(j.writeAll(id, [{ _tag: "Tool", params }, { _tag: "Other", kind: "message", payload: 3 }]))
              yield* refused(j.setMeta(id, { title: "from a bad clock" }))
              // The session still reads and verifies in this service.
              yield* check(2)
              yield* j.close(id)
              yield* check(2)
            }).pipe(Effect.provide(layerOf()))
          )
          // A new service over the same storage reads it, and writes once the clock is good.
          yield* Effect.scoped(
            Effect.gen(function*() {
              const j = yield* SessionJournal.SessionJournal
              yield* check(2)
              yield* refused(j.record(id, params))
              yield* TestClock.setTime(GOOD + 1000)
              const next = yield* j.record(id, params)
              assert.strictEqual(next.sequence, 2)
              assert.strictEqual(next.timestamp_secs, GOOD / 1000 + 1)
              yield* check(3)
              assert.isNull((yield* j.state(id)).meta)
            }).pipe(Effect.provide(layerOf()))
          )
        })
      })
    }
  })

/** A service layer over `storage`, built fresh each call (the storage shared). */
export const serviceOver = <E>(storage: Layer.Layer<Persistence.Persistence, E>) => () =>
  SessionJournal.layer().pipe(Layer.provideMerge(storage))
