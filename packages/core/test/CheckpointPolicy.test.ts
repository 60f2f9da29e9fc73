/**
 * The one checkpoint policy: `Checkpoint.due` as a function, and the service
 * applying it with the bytes adapters report, also across idle releases.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { Checkpoint, Persistence, SessionJournal } from "../src/index.ts"
import { nthToolParams } from "./fixtures.ts"

const params = (i: number) => nthToolParams(i, { allowed: true })

const loadedFrom = (persistence: Persistence.Persistence["Service"], id: string) =>
  Effect.scoped(Effect.flatMap(persistence.open(id, { mode: "read" }), (h) => h.load))

describe("Checkpoint.due", () => {
  it("is due at max(floor, a quarter of the checkpoint)", () => {
    assert.isFalse(Checkpoint.due(0, 0))
    assert.isFalse(Checkpoint.due(Checkpoint.MIN_BYTES - 1, 0))
    assert.isTrue(Checkpoint.due(Checkpoint.MIN_BYTES, 0))
    // A 4 MiB checkpoint needs 1 MiB of history before it is rewritten.
    assert.isFalse(Checkpoint.due(Checkpoint.MIN_BYTES, 4 * 1024 * 1024))
    assert.isTrue(Checkpoint.due(1024 * 1024, 4 * 1024 * 1024))
    assert.isTrue(Checkpoint.due(10, 0, 10))
    assert.isFalse(Checkpoint.due(9, 0, 10))
  })
})

describe("the service checkpoints by the bytes appended", () => {
  it.effect("a long session is loaded from a recent checkpoint, not replayed from 0", () =>
    Effect.scoped(Effect.gen(function*() {
      const persistence = yield* Persistence.makeMemory()
      const j = yield* SessionJournal.make({ checkpointMinBytes: 2_000 }).pipe(
        Effect.provideService(Persistence.Persistence, persistence)
      )
      for (let i = 0; i < 200; i++) yield* j.record("long", params(i))
      const loaded = yield* loadedFrom(persistence, "long")
      assert.strictEqual(loaded.state.next_sequence, 200)
      assert.strictEqual(loaded.recovery.checkpoint, "loaded")
      // The checkpoint lags by less than one policy interval (and the entry it ends with).
      assert.isBelow(loaded.recovery.replayed, 40)
      assert.isBelow(loaded.sinceCheckpointBytes ?? 0, 2_000 + (loaded.checkpointBytes ?? 0) / 4)
      assert.strictEqual((yield* j.verify("long")).entriesChecked, 200)
    })))

  it.effect("the count carries over a release: a session written one entry per opening still checkpoints", () =>
    Effect.scoped(Effect.gen(function*() {
      const persistence = yield* Persistence.makeMemory()
      const j = yield* SessionJournal.make({ checkpointMinBytes: 2_000 }).pipe(
        Effect.provideService(Persistence.Persistence, persistence)
      )
      for (let i = 0; i < 60; i++) {
        yield* j.record("bursty", params(i))
        yield* j.close("bursty")
      }
      const loaded = yield* loadedFrom(persistence, "bursty")
      assert.strictEqual(loaded.recovery.checkpoint, "loaded")
      assert.isBelow(loaded.recovery.replayed, 30)
      const all = yield* Stream.runCollect(j.entries("bursty"))
      assert.strictEqual(all.length, 60)
    })))
})
