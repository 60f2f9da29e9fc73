/**
 * A storage whose records have a bound (a segment line on the filesystem): a write
 * with a larger entry fails on its own, before it joins a group-committed append;
 * the writes it arrived with are stored. The bound the writer checks first
 * (`RecordBytes.bound`) never says "fits" for an entry whose text does not.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import { type Entry, JournalState, Persistence, SessionJournal, Utf8 } from "../src/index.ts"
import * as RecordBytes from "../src/internal/recordBytes.ts"
import * as A from "./arbitraries.ts"
import * as Payloads from "./Payloads.ts"

const SEED = Number(process.env.SEED ?? Math.floor(Math.random() * 2 ** 31))

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
        assert.include(payload.reason.message, `${BOUND}`)
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
    assert.strictEqual(Utf8.utf8Length("aé€😀"), 1 + 2 + 3 + 4)
    assert.strictEqual(Utf8.utf8Length("\ud800x"), 3 + 1)
  })
})

// Strings of any UTF-16 code units, weighted towards what JSON escapes widest:
// control characters, quotes, backslashes, lone surrogates, characters above U+07FF.
const unit = fc.oneof(
  fc.integer({ min: 0, max: 0x1f }),
  fc.constantFrom(0x22, 0x5c, 0x7f, 0x80, 0x7ff, 0x800, 0x2028, 0xd800, 0xdbff, 0xdc00, 0xdfff, 0xffff),
  fc.integer({ min: 0, max: 0xffff })
)
const anyString = fc.array(unit, { maxLength: 40 }).map((codes) => String.fromCharCode(...codes))

const widePayload: fc.Arbitrary<Schema.Json> = fc.letrec<{ value: Schema.Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constantFrom<Schema.Json>(
      -0,
      0,
      -1.2345678901234567e-308,
      -Number.MAX_VALUE,
      5e-324,
      2 ** 64,
      true,
      false,
      null
    ),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    anyString,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(anyString, tie("value"), { maxKeys: 4 })
  )
})).value

const boundPayload: fc.Arbitrary<Schema.Json> = fc.oneof(widePayload, Payloads.payload, A.json)

describe(`the bound checked before an entry is written out (seed ${SEED})`, () => {
  it("property: the bound is never below the entry's bytes, and over() gives the exact verdict", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.record({ tool: fc.constant(false), kind: A.otherKind, payload: boundPayload }),
          fc.record({ tool: fc.constant(true), params: A.toolParams })
        ),
        fc.integer({ min: -3, max: 3 }),
        fc.nat({ max: 1_000_000 }),
        (made, delta, ts) => {
          const state = JournalState.empty("bound")
          const entry: Entry.Entry = made.tool
            ? JournalState.nextTool(state, ts, made.params)
            : JournalState.nextOther(state, ts, made.kind, made.payload)
          const exact = RecordBytes.recordBytes(entry)
          assert.isAtLeast(RecordBytes.bound(entry, Number.MAX_SAFE_INTEGER), exact)
          for (const max of [exact + delta, exact - 1, exact, 0]) {
            // Stopped early or not, a bound at or below `max` means the entry fits.
            if (RecordBytes.bound(entry, max) <= max) assert.isAtMost(exact, max)
            assert.strictEqual(RecordBytes.over(entry, max), exact > max ? exact : undefined)
          }
        }
      ),
      { seed: SEED, numRuns: A.runs(500) }
    )
  })

  it("a walk that passes the limit stops there, shared subtrees and all", () => {
    // Written out, this would be about 10^12 bytes.
    let shared: Schema.Json = ["x"]
    for (let i = 0; i < 40; i++) shared = [shared, shared]
    const bound = RecordBytes.jsonBound(shared, 1_000)
    assert.isAbove(bound, 1_000)
    assert.isBelow(bound, 2_000)
  })

  it("a long line in a small payload is bounded without its text", () => {
    const line = "\"".repeat(100_000)
    const entry = JournalState.nextOther(JournalState.empty("s"), 1, "claude-code.line", { n: 1, line })
    const bound = RecordBytes.bound(entry, 8 * 1024 * 1024)
    assert.isAtLeast(bound, RecordBytes.recordBytes(entry))
    assert.isAtMost(bound, 6 * line.length + 2_000)
  })
})
