/**
 * Payload shapes and a write-then-reread check shared by the payload-bound tests of
 * every adapter: JSON of every shape `append` should take (deep chains up to and
 * past `Entry.MAX_PAYLOAD_DEPTH` included), and `writeAndReread`, which writes
 * through one service and reads back through a fresh one over the same storage.
 */
import { assert } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import { Entry, InvalidRecordField, Persistence, SessionJournal } from "../src/index.ts"
import * as A from "./arbitraries.ts"

const LIMIT = Entry.MAX_PAYLOAD_DEPTH

/** `depth` levels of arrays and objects (alternating) around a string, built without recursion. */
export const nest = (depth: number, leaf: Schema.Json = "leaf"): Schema.Json => {
  let v: Schema.Json = leaf
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { k: v }
  return v
}

/** `depth` levels of arrays around an empty array. */
export const deepArray = (depth: number): Schema.Json => {
  let v: Schema.Json = []
  for (let i = 1; i < depth; i++) v = [v]
  return v
}

interface Seen {
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly verified: number
  readonly head: string
}

/** Entries, verify report and head of a session, checked to agree with each other. */
const observe = (j: SessionJournal.SessionJournal["Service"], id: string) =>
  Effect.gen(function*() {
    const entries = yield* Stream.runCollect(j.entries(id))
    const report = yield* j.verify(id)
    const head = yield* j.head(id)
    assert.strictEqual(report.head, head)
    return { entries, verified: report.entriesChecked, head } satisfies Seen
  })

/** Text that keeps -0, so entries compare exactly (deepStrictEqual treats -0 and 0 as different). */
const asText = (entries: ReadonlyArray<Entry.Entry>) => entries.map((e) => Entry.toJsonText(Entry.encode(e)))

export type Item =
  | { readonly _tag: "append"; readonly kind: string; readonly payload: unknown }
  | { readonly _tag: "record"; readonly params: Entry.ToolParams }
  | { readonly _tag: "meta"; readonly data: unknown }

/**
 * Writes `items` through one service, then reads the session back through a second
 * service over the same storage. Every write is either refused with
 * InvalidRecordField (and then nothing changes) or reads back exactly.
 */
export const writeAndReread = (
  persistence: Persistence.Persistence["Service"],
  id: string,
  items: ReadonlyArray<Item>,
  // Checkpoints as often as the policy allows, so reads go through the codec.
  options: SessionJournal.Options = { checkpointMinBytes: 1 }
) =>
  Effect.gen(function*() {
    const accepted: Array<Entry.Entry> = []
    let wrote = false
    const first = yield* SessionJournal.make(options).pipe(Effect.provideService(Persistence.Persistence, persistence))
    for (const item of items) {
      const write: Effect.Effect<Entry.Entry | undefined, unknown> = item._tag === "append"
        ? first.append(id, item.kind, item.payload)
        : item._tag === "record"
        ? first.record(id, item.params)
        : Effect.as(first.setMeta(id, { data: item.data as Schema.Json }), undefined)
      const exit = yield* Effect.exit(write)
      if (Exit.isSuccess(exit)) {
        wrote = true
        if (exit.value !== undefined) accepted.push(exit.value)
      } else {
        const failure = exit.cause.reasons.find((r) => r._tag === "Fail")
        assert.isDefined(failure, `a write died instead of failing: ${String(exit.cause)}`)
        const error = failure?._tag === "Fail" ? failure.error : undefined
        assert.instanceOf(error, InvalidRecordField, String(error))
      }
    }
    const before = wrote ? yield* observe(first, id) : null
    yield* first.close(id)
    const second = yield* SessionJournal.make(options).pipe(Effect.provideService(Persistence.Persistence, persistence))
    if (before === null) return accepted
    const after = yield* observe(second, id)
    assert.deepStrictEqual(asText(after.entries), asText(accepted))
    assert.deepStrictEqual(asText(before.entries), asText(accepted))
    assert.strictEqual(after.verified, accepted.length)
    assert.strictEqual(after.head, before.head)
    assert.strictEqual(after.head, accepted.length === 0 ? Entry.ZERO_HASH : accepted.at(-1)!.entry_hash)
    for (const e of after.entries) assert.strictEqual(Entry.computeHash(e), e.entry_hash)
    yield* second.close(id)
    return accepted
  })

/** JSON of every shape append should take: unicode, -0, extreme numbers, empty containers, deep chains. */
export const payload: fc.Arbitrary<Schema.Json> = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 4, stringUnit: "grapheme" }) as fc.Arbitrary<Schema.Json>, weight: 4 },
  {
    arbitrary: fc.constantFrom<Schema.Json>(
      -0,
      [-0],
      { z: -0 },
      0,
      1e308,
      -1e308,
      5e-324,
      Number.MAX_SAFE_INTEGER,
      2 ** 64,
      [],
      {},
      [[]],
      { "": {} },
      "",
      "\u0000\u001f\u2028\u2029\ufeff",
      "😀\ud83d\ude00",
      { __proto__: 1 } as never,
      { "😀": ["é", "e\u0301"] }
    ),
    weight: 2
  },
  {
    arbitrary: fc.tuple(
      fc.oneof(fc.integer({ min: 0, max: LIMIT }), fc.constant(LIMIT), fc.integer({ min: LIMIT - 3, max: LIMIT })),
      fc.jsonValue({ maxDepth: 0 }) as fc.Arbitrary<Schema.Json>
    ).map(([d, leaf]) => nest(d, leaf)),
    weight: 2
  },
  {
    // Past the limit, up to where the old recursive walks overflowed: must be refused.
    arbitrary: fc.integer({ min: LIMIT + 1, max: 20_000 }).map((d) => deepArray(d)),
    weight: 1
  }
)

export const item: fc.Arbitrary<Item> = fc.oneof(
  { arbitrary: fc.record({ _tag: fc.constant("append" as const), kind: A.otherKind, payload }), weight: 6 },
  { arbitrary: fc.record({ _tag: fc.constant("record" as const), params: A.toolParams }), weight: 2 },
  { arbitrary: fc.record({ _tag: fc.constant("meta" as const), data: payload }), weight: 1 }
)
