/**
 * A session being released is still this service's until its writer guarantee is
 * free: a write or a `close` that arrives while the storage's release is under way
 * waits for it instead of finding the guarantee held by this very process.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import { Persistence, SessionJournal } from "../src/index.ts"
import { toolParams } from "./fixtures.ts"

const params = toolParams()

// The memory adapter, with a write handle whose release takes a while (as a lock
// file's removal does on a loaded disk).
const slowRelease = Effect.map(Persistence.makeMemory(), (inner) =>
  Persistence.Persistence.of({
    ...inner,
    open: Persistence.makeOpen({
      read: (id, caps) => inner.open(id, { mode: "read", caps }),
      write: (id, caps) =>
        Effect.tap(inner.open(id, { mode: "write", caps }), () => Effect.addFinalizer(() => Effect.sleep("100 millis")))
    })
  }))

describe("release races", () => {
  it.live("a write during a release waits for it and succeeds; delete after close succeeds", () =>
    Effect.scoped(Effect.gen(function*() {
      const persistence = yield* slowRelease
      const j = yield* SessionJournal.make().pipe(Effect.provideService(Persistence.Persistence, persistence))
      yield* j.record("s", params)
      const closing = yield* Effect.forkChild(j.close("s"))
      yield* Effect.sleep("20 millis")
      // The release is under way: this write must wait for it, then reopen.
      const entry = yield* j.record("s", params)
      assert.strictEqual(entry.sequence, 1)
      yield* Fiber.join(closing)
      // A close while a release is under way waits for it: the delete then succeeds.
      const second = yield* Effect.forkChild(j.close("s"))
      yield* Effect.sleep("20 millis")
      yield* j.close("s")
      yield* Fiber.join(second)
      yield* j.delete("s")
      assert.isTrue((yield* Effect.exit(Stream.runCollect(j.entries("s"))))._tag === "Failure")
    })))
})
