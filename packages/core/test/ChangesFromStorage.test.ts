import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { Persistence, SessionJournal } from "../src/index.ts"
import { toolParams } from "./fixtures.ts"

const call = (tool_name: string) => toolParams(tool_name, { bytes_written: 1 })

it.live("changesFrom storage: a subscriber on one service sees what another service commits", () =>
  Effect.gen(function*() {
    // Two services over one storage stand for two app instances sharing sessions.
    const storage = yield* Persistence.makeMemory()
    const writer = yield* Effect.provideService(SessionJournal.make(), Persistence.Persistence, storage)
    const watcher = yield* Effect.provideService(
      SessionJournal.make({ changesFrom: "storage" }),
      Persistence.Persistence,
      storage
    )
    yield* writer.record("shared", call("before"))
    const changes = yield* watcher.changes("shared")
    const fiber = yield* changes.pipe(Stream.take(5), Stream.runCollect, Effect.forkChild)
    for (let i = 0; i < 5; i++) yield* writer.record("shared", call(`t${i}`))
    const got = yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds"))
    assert.deepStrictEqual(got.map((c) => c._tag === "Entry" ? c.entry.sequence : -1), [1, 2, 3, 4, 5])

    // The default ("service") sees only its own commits: an entry another instance
    // wrote in between is reported as missed, never silently skipped.
    const local = yield* Effect.provideService(SessionJournal.make(), Persistence.Persistence, storage)
    const localChanges = yield* local.changes("shared")
    const localFiber = yield* localChanges.pipe(Stream.take(1), Stream.runCollect, Effect.forkChild)
    yield* writer.record("shared", call("not-seen-locally"))
    yield* writer.close("shared")
    const own = yield* local.record("shared", call("own"))
    const seen = yield* Fiber.join(localFiber).pipe(Effect.timeout("10 seconds"))
    assert.strictEqual(seen[0]?._tag, "Missed")
    assert.strictEqual(own.sequence, 7)
  }).pipe(Effect.scoped))

it.live("changesFrom storage: a record that does not continue the chain delivered is never delivered", () =>
  Effect.gen(function*() {
    const storage = yield* Persistence.makeMemory()
    // Storage that hands followers an edited copy of sequence 3; what it stores,
    // verifies and reads as history is genuine.
    const forging = Persistence.Persistence.of({
      ...storage,
      follow: (id, from) =>
        storage.follow(id, from).pipe(
          Stream.map((e) => e.sequence === 3 ? { ...e, timestamp_secs: e.timestamp_secs + 1 } : e)
        )
    })
    const writer = yield* Effect.provideService(SessionJournal.make(), Persistence.Persistence, storage)
    const watcher = yield* Effect.provideService(
      SessionJournal.make({ changesFrom: "storage" }),
      Persistence.Persistence,
      forging
    )
    yield* writer.record("forged", call("t0"))
    const changes = yield* watcher.changes("forged")
    for (let i = 1; i < 6; i++) yield* writer.record("forged", call(`t${i}`))
    const delivered: Array<number> = []
    const result = yield* changes.pipe(
      Stream.runForEach((c) => Effect.sync(() => void delivered.push(c._tag === "Entry" ? c.entry.sequence : -1))),
      Effect.timeout("5 seconds"),
      Effect.result
    )
    assert.deepStrictEqual(delivered, [1, 2])
    assert.isTrue(result._tag === "Failure" && result.failure._tag === "IntegrityViolation", String(result))
    if (result._tag === "Failure" && result.failure._tag === "IntegrityViolation") {
      assert.strictEqual(result.failure.sequence, 3)
      assert.strictEqual(result.failure.what, "entry_hash")
    }
  }).pipe(Effect.scoped))
