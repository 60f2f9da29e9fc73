import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as TestClock from "effect/testing/TestClock"
import { Persistence, SessionJournal } from "../src/index.ts"
import { suite } from "./PersistenceContract.ts"

suite("memory", Persistence.layerMemory())

describe("makeAbsent", () => {
  it.effect("lists nothing, reads every session as absent, refuses to write or delete with the reason", () =>
    Effect.gen(function*() {
      const p = yield* Persistence.makeAbsent("there is no journal at /x")
      assert.deepStrictEqual(yield* p.list, [])
      const loaded = yield* Effect.scoped(Effect.flatMap(p.open("s1", { mode: "read" }), (h) => h.load))
      assert.isFalse(loaded.exists)
      const write = yield* Effect.flip(Effect.scoped(p.open("s1", { mode: "write" })))
      assert.strictEqual(write._tag, "StorageError")
      assert.strictEqual(write._tag === "StorageError" ? write.reason._tag : "", "Obstructed")
      assert.include(write.message, "there is no journal at /x")
      const removed = yield* Effect.flip(p.delete("s1"))
      assert.strictEqual(removed._tag, "StorageError")
      assert.deepStrictEqual(yield* p.list, [])
    }))
})

describe("layerMemory", () => {
  it.effect("a session's updatedAt is the time of the fiber's Clock when it was written, not the process's clock", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("90 minutes")
      const journal = yield* SessionJournal.SessionJournal
      yield* journal.record("s1", {
        tool_name: "t",
        server_id: "s",
        agent_id: "a",
        bytes_read: 0,
        bytes_written: 0,
        delegation_depth: 0
      })
      const p = yield* Persistence.Persistence
      const [info] = yield* p.list
      assert.strictEqual(info?.updatedAt, 90 * 60_000)
    }).pipe(Effect.provide(Layer.provideMerge(SessionJournal.layer(), Persistence.layerMemory()))))
})
