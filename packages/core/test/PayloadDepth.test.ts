/**
 * Payload bounds (Entry.MAX_PAYLOAD_DEPTH, Entry.MAX_PAYLOAD_SIZE): a payload at the
 * limit is accepted and reads back after a checkpoint; one past it, however deep, is
 * refused with InvalidRecordField before anything is appended; a stored value past
 * it decodes to a typed failure. Every walk over a payload is iterative, so none of
 * this depends on the call stack. The property: whatever `append` accepts reads back
 * identically through a fresh service after a checkpoint.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as fc from "fast-check"
import {
  Checkpoint,
  Entry,
  InvalidRecordField,
  JournalState,
  Persistence,
  RecordFieldReason,
  SessionJournal
} from "../src/index.ts"
import { canonicalize, check, depthOf, firstInvalid } from "../src/internal/jcs.ts"
import * as A from "./arbitraries.ts"
import * as Legacy from "./legacy.ts"
import { deepArray, item, nest, writeAndReread } from "./Payloads.ts"

const LIMIT = Entry.MAX_PAYLOAD_DEPTH

const link: Entry.Link = { sequence: 0, prev_hash: Entry.ZERO_HASH, timestamp_secs: 1_764_400_000 }

const refusedPayload = (r: Result.Result<unknown, InvalidRecordField>, depth: number) => {
  assert.isTrue(Result.isFailure(r))
  if (Result.isFailure(r)) {
    assert.instanceOf(r.failure, InvalidRecordField)
    assert.strictEqual(r.failure.field, "payload")
    assert.deepStrictEqual(r.failure.reason, new RecordFieldReason.TooDeep({ depth, limit: LIMIT }))
    assert.include(r.failure.message, `depth ${depth}`)
  }
}

describe("payload depth: validation", () => {
  it("the limit is 256 and counts levels of arrays and objects", () => {
    assert.strictEqual(LIMIT, 256)
    assert.strictEqual(depthOf("x"), 0)
    assert.strictEqual(depthOf([]), 1)
    assert.strictEqual(depthOf({ a: [1] }), 2)
    assert.strictEqual(depthOf(nest(LIMIT)), LIMIT)
  })

  it("depth = limit is accepted; limit + 1 is refused with InvalidRecordField naming limit and depth", () => {
    assert.isTrue(Result.isSuccess(Entry.validatePayload("message", nest(LIMIT))))
    assert.isTrue(Result.isSuccess(Entry.validatePayload("message", deepArray(LIMIT))))
    refusedPayload(Entry.validatePayload("message", nest(LIMIT + 1)), LIMIT + 1)
    refusedPayload(Entry.validatePayload("message", deepArray(LIMIT + 1)), LIMIT + 1)
    // Deep in one branch only, behind wide siblings.
    refusedPayload(
      Entry.validatePayload("message", { a: Array.from({ length: 1000 }, (_, i) => i), b: [nest(LIMIT)] }),
      LIMIT + 2
    )
  })

  it("depth 100,000 and 1,000,000 are refused as values, never a stack overflow", () => {
    refusedPayload(Entry.validatePayload("message", deepArray(100_000)), 100_000)
    refusedPayload(Entry.validatePayload("message", nest(1_000_000)), 1_000_000)
  }, 60_000)

  it("a cycle past the limit is still refused, and a cycle within it is not JSON", () => {
    const cyclic: Array<unknown> = []
    cyclic.push(cyclic)
    const r = Entry.validatePayload("message", cyclic)
    assert.isTrue(Result.isFailure(r) && r.failure.reason._tag === "NotJson")
    let deep: Array<unknown> = cyclic
    for (let i = 0; i < 10_000; i++) deep = [deep]
    assert.isTrue(Result.isFailure(Entry.validatePayload("message", deep)))
  })

  it("a small graph that is huge written out is refused quickly (shared subtrees are walked once)", () => {
    let v: Schema.Json = ["x".repeat(100)]
    for (let i = 0; i < 60; i++) v = [v, v]
    const started = Date.now()
    const r = Entry.validatePayload("message", v)
    assert.isTrue(Result.isFailure(r) && r.failure.field === "payload" && r.failure.reason._tag === "TooLarge")
    assert.isBelow(Date.now() - started, 2000)
    // Shared subtrees that stay small are fine, and count as often as they appear.
    let small: Schema.Json = [1]
    for (let i = 0; i < 10; i++) small = [small, small]
    assert.isTrue(Result.isSuccess(Entry.validatePayload("message", small)))
    assert.strictEqual(check(small, { maxDepth: 11, maxSize: 2047 + 1024 - 1 })?._tag, "TooLarge")
    assert.isUndefined(check(small, { maxDepth: 11, maxSize: 2047 + 1024 }))
    assert.strictEqual(check(small, { maxDepth: 10, maxSize: Infinity })?._tag, "TooDeep")
  })

  it("a getter that throws makes the payload invalid, not a defect", () => {
    const hostile = {
      get a(): number {
        throw new Error("boom")
      }
    }
    const r = Entry.validatePayload("message", hostile)
    assert.isTrue(Result.isFailure(r) && r.failure.field === "payload")
  })

  it("session metadata: setMeta-style validation and the SessionMeta schema bound `data` the same way", () => {
    refusedPayload(Entry.validatePayload("meta", nest(LIMIT + 1)), LIMIT + 1)
  })
})

describe("payload depth: every walk is iterative", () => {
  it("canonicalize, firstInvalid, depthOf and toJsonText handle 100,000 levels", () => {
    const d = 100_000
    const v = deepArray(d)
    assert.strictEqual(canonicalize(v), "[".repeat(d) + "]".repeat(d))
    assert.isUndefined(firstInvalid(v))
    assert.strictEqual(depthOf(v), d)
    const text = Entry.toJsonText(v)
    assert.strictEqual(text, "[".repeat(d) + "]".repeat(d))
    const withZero = nest(d, -0)
    const back: unknown = JSON.parse(Entry.toJsonText(withZero))
    assert.strictEqual(depthOf(back), d)
    assert.strictEqual(
      Entry.toJsonText({ a: [nest(600, -0), undefined], b: undefined }),
      `{"a":[${JSON.stringify(nest(600, 0)).replace(/0/, "-0")},null]}`
    )
  })

  it("canonicalize agrees with the reference on random JSON (keys sorted, -0 written as 0)", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => {
        const sorted = (x: unknown): unknown =>
          Array.isArray(x) ? x.map(sorted) : x !== null && typeof x === "object"
            ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, sorted((x as Record<string, unknown>)[k])]))
            : x
        // JSON.stringify keeps insertion order, which for these keys is the sorted order
        // only when no key is an array index; compare the parsed values instead.
        assert.deepStrictEqual(JSON.parse(canonicalize(v as Schema.Json)), JSON.parse(JSON.stringify(sorted(v))))
      }),
      { numRuns: A.runs(300) }
    )
  })
})

describe("payload depth: stored values past the limit decode to typed failures", () => {
  const entryWith = (payload: unknown) => ({ ...Entry.encode(Entry.makeOther(link, "message", "x")), payload })

  it("Entry.decode, decodeSchema and decodeJson fail (no throw) at limit + 1 and at 100,000", () => {
    for (const depth of [LIMIT + 1, 100_000]) {
      const raw = entryWith(deepArray(depth))
      assert.isTrue(Result.isFailure(Entry.decode(raw)))
      assert.isTrue(Result.isFailure(Entry.decodeSchema(raw)))
      const line = JSON.stringify({ ...raw, payload: null }).replace("null", "[".repeat(depth) + "]".repeat(depth))
      const r = Entry.decodeJson(line)
      assert.isTrue(Result.isFailure(r))
      if (Result.isFailure(r)) assert.include(r.failure.message, `depth ${depth}`)
    }
    const ok = Entry.makeOther(link, "message", nest(LIMIT))
    const back = Entry.decodeJson(Entry.toJsonText(Entry.encode(ok)))
    assert.isTrue(Result.isSuccess(back))
    if (Result.isSuccess(back)) assert.strictEqual(Entry.computeHash(back.success), ok.entry_hash)
  })

  it("Checkpoint.decode fails with a reason on a deep payload or deep metadata", () => {
    let s = JournalState.empty("cp")
    s = JournalState.fold(s, JournalState.nextOther(s, 1_764_400_000, "message", nest(LIMIT)))
    const good = JSON.parse(JSON.stringify(Checkpoint.encode(s)))
    assert.isTrue(Result.isSuccess(Checkpoint.decode(good)))
    // A version 1 document (earlier releases) holds the entries themselves.
    const v1 = JSON.parse(JSON.stringify(Legacy.encodeV1(Legacy.foldAll("cp", undefined, JournalState.entries(s)))))
    assert.isTrue(Result.isSuccess(Checkpoint.decode(v1)))
    for (const depth of [LIMIT + 1, 100_000]) {
      const doc = structuredClone(v1)
      doc.entries[0].payload = deepArray(depth)
      const r = Checkpoint.decode(doc)
      assert.isTrue(Result.isFailure(r))
      if (Result.isFailure(r)) assert.include(r.failure, `depth ${depth}`)
      const withMeta = { ...good, meta: { updated_at: 1, data: deepArray(depth) } }
      const m = Checkpoint.decode(withMeta)
      assert.isTrue(Result.isFailure(m))
      if (Result.isFailure(m)) assert.include(m.failure, `depth ${depth}`)
    }
  })
})

// ---------------------------------------------------------------------------
// Through the service: the in-memory adapter, checkpointing as often as the policy allows.

const run = <A, E>(effect: Effect.Effect<A, E, import("effect/Scope").Scope>) =>
  Effect.runPromise(Effect.scoped(effect))

describe("payload depth: through SessionJournal on the memory adapter (checkpoints as often as the policy allows)", () => {
  it("depth = limit is appended and reads back after a checkpoint; limit + 1 and 100,000 are refused", async () => {
    await run(Effect.gen(function*() {
      const persistence = yield* Persistence.makeMemory()
      const accepted = yield* writeAndReread(persistence, "edge", [
        { _tag: "append", kind: "message", payload: nest(LIMIT) },
        { _tag: "append", kind: "message", payload: deepArray(LIMIT + 1) },
        { _tag: "append", kind: "message", payload: deepArray(100_000) },
        { _tag: "meta", data: deepArray(LIMIT + 1) },
        { _tag: "meta", data: nest(LIMIT) },
        { _tag: "append", kind: "message", payload: { after: deepArray(LIMIT - 1) } }
      ])
      assert.strictEqual(accepted.length, 2)
      const j = yield* SessionJournal.make().pipe(Effect.provideService(Persistence.Persistence, persistence))
      const state = yield* j.state("edge")
      assert.strictEqual(depthOf(state.meta?.data), LIMIT)
      const refused = yield* Effect.flip(j.append("edge", "message", deepArray(100_000)))
      assert.instanceOf(refused, InvalidRecordField)
      assert.strictEqual((refused as InvalidRecordField).field, "payload")
      const meta = yield* Effect.flip(j.setMeta("edge", { data: deepArray(100_000) }))
      assert.instanceOf(meta, InvalidRecordField)
    }))
  })

  it("property: whatever append accepts reads back through a fresh service after a checkpoint", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(item, { minLength: 1, maxLength: 8 }), (items) =>
        run(Effect.gen(function*() {
          const persistence = yield* Persistence.makeMemory()
          yield* writeAndReread(persistence, "prop", items)
        }))),
      {
        numRuns: A.runs(60),
        reporter: (details) => {
          if (details.failed) {
            throw new Error(
              `property failed (seed ${details.seed}, path ${details.counterexamplePath}): ${details.errorInstance}`
            )
          }
        }
      }
    )
  }, 60_000)
})
