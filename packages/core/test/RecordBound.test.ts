/**
 * A storage whose records have a bound (a segment line on the filesystem): a write
 * with a larger entry fails on its own, before it joins a group-committed append;
 * the writes it arrived with are stored.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Stream from "effect/Stream"
import { type Entry, Persistence, SessionJournal } from "../src/index.ts"
import * as RecordBytes from "../src/internal/recordBytes.ts"

const BOUND = 2_000

const params = (tool_name: string) => ({
  tool_name,
  server_id: "srv",
  agent_id: "agent",
  bytes_read: 1,
  bytes_written: 2,
  delegation_depth: 0
})

// Entries per append, to see that the writes were group-committed.
const appendSizes: Array<number> = []

// The memory adapter with a bound, its write handles counting entries per append
// (and keeping every other field, the bound included).
const bounded = Effect.map(Persistence.makeMemory({ maxRecordBytes: BOUND }), (inner) =>
  Persistence.Persistence.of({
    ...inner,
    open: Persistence.makeOpen({
      read: (id, caps) => inner.open(id, { mode: "read", caps }),
      write: (id, caps) =>
        Effect.map(inner.open(id, { mode: "write", caps }), (h): Persistence.WriteHandle => ({
          ...h,
          append: (request) =>
            Effect.suspend(() => {
              appendSizes.push(request.entries.length)
              return h.append(request)
            })
        }))
    })
  }))

const journal = Effect.flatMap(
  bounded,
  (persistence) => SessionJournal.make().pipe(Effect.provideService(Persistence.Persistence, persistence))
)

const failureOf = <A, E>(exit: Exit.Exit<A, E>): E | undefined =>
  Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined

describe("a bound on each stored record", () => {
  it.effect("an oversized record among concurrent good ones fails alone; the others are stored", () =>
    Effect.scoped(Effect.gen(function*() {
      const j = yield* journal
      const id = "bounded"
      yield* j.append(id, "message", { text: "first" })
      appendSizes.length = 0
      // Offered in one go: they share one batch.
      const exits = yield* Effect.forEach(
        Array.from({ length: 21 }, (_, i) => i),
        (i): Effect.Effect<Exit.Exit<Entry.Entry, SessionJournal.WriteError>> =>
          Effect.exit<Entry.Entry, SessionJournal.WriteError, never>(
            i === 10
              ? j.append(id, "message", { text: "x".repeat(BOUND) })
              : i === 15
              ? j.record(id, params("t".repeat(BOUND)))
              : i % 2 === 0
              ? j.append(id, "message", { text: `good ${i}` })
              : j.record(id, params(`tool-${i}`))
          ),
        { concurrency: "unbounded" }
      )
      // The good writes went into one append: the oversized ones were in their batch.
      assert.isAtLeast(Math.max(...appendSizes), 10, `entries per append: ${appendSizes.join(", ")}`)
      const payload = failureOf(exits[10]!)
      assert.strictEqual(payload?._tag, "InvalidRecordField")
      if (payload?._tag === "InvalidRecordField") {
        assert.strictEqual(payload.field, "payload")
        assert.include(payload.reason, `${BOUND}`)
      }
      const tool = failureOf(exits[15]!)
      assert.strictEqual(tool?._tag, "InvalidRecordField")
      if (tool?._tag === "InvalidRecordField") assert.strictEqual(tool.field, "tool_name")
      const good = exits.filter((_, i) => i !== 10 && i !== 15)
      assert.isTrue(good.every(Exit.isSuccess), "every other write is stored")
      const stored = yield* Stream.runCollect(j.entries(id))
      assert.strictEqual(stored.length, 20)
      assert.deepStrictEqual(stored.map((e) => e.sequence), Array.from({ length: 20 }, (_, i) => i))
      assert.isTrue(stored.every((e) => RecordBytes.recordBytes(e) <= BOUND))
      assert.strictEqual((yield* j.verify(id)).entriesChecked, 20)
      // The session goes on: the next write is stored.
      assert.strictEqual((yield* j.append(id, "message", { text: "after" })).sequence, 20)
    })))

  it.effect("writeAll with one oversized item stores none of its items, and fails alone", () =>
    Effect.scoped(Effect.gen(function*() {
      const j = yield* journal
      const id = "bounded-all"
      const [all, single] = yield* Effect.all([
        Effect.exit(j.writeAll(id, [
          { _tag: "Other", kind: "message", payload: { text: "small" } },
          { _tag: "Other", kind: "message", payload: { text: "y".repeat(BOUND * 2) } }
        ])),
        Effect.exit(j.append(id, "message", { text: "alone" }))
      ], { concurrency: "unbounded" })
      assert.strictEqual(failureOf(all)?._tag, "InvalidRecordField")
      assert.isTrue(Exit.isSuccess(single))
      const stored = yield* Stream.runCollect(j.entries(id))
      assert.deepStrictEqual(stored.map((e) => e.kind === "message" ? e.payload : null), [{ text: "alone" }])
    })))

  it("measures UTF-8 bytes of the entry's JSON text", () => {
    assert.strictEqual(RecordBytes.utf8Length("aé€😀"), 1 + 2 + 3 + 4)
    assert.strictEqual(RecordBytes.utf8Length("\ud800x"), 3 + 1)
  })
})
