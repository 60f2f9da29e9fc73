/**
 * The payload walk (`takePayload`, `internal/jcs.ts` `own`): one pass from the
 * caller's value to the journal's copy, its RFC 8785 text and its JSON text. It
 * refuses exactly what the old path refused, with the same field and reason, and
 * otherwise gives what the old path's clone, `canonicalize` and `toJsonText` gave
 * (`legacyPayload.ts`), on hostile values too: deep nesting, cycles, shared
 * subtrees, lone surrogates, -0, NaN, infinities, `__proto__` and other keys,
 * null prototypes, holes, class instances, getters (throwing ones included).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import { Entry, Persistence, SessionJournal } from "../src/index.ts"
import { own, taken } from "../src/internal/jcs.ts"
import { toJsonText } from "../src/internal/jsonText.ts"
import * as TakenEntry from "../src/internal/takenEntry.ts"
import { guardStateProblem, payloadLimits, takePayload } from "../src/internal/validate.ts"
import * as A from "./arbitraries.ts"
import * as Legacy from "./legacyPayload.ts"
import { deepArray, nest } from "./Payloads.ts"

const reporter = <T>(details: fc.RunDetails<T>): void => {
  if (details.failed) {
    throw new Error(
      `property failed (seed ${details.seed}, path ${details.counterexamplePath}): ${details.errorInstance}`
    )
  }
}

// The walk and the old path agree: the same failure, or the same copy and texts.
const agree = (kind: string, payload: unknown): void => {
  const before = Legacy.take(kind, payload)
  const now = takePayload(kind, payload)
  if (Result.isFailure(before)) {
    assert.isTrue(Result.isFailure(now), `refused before (${before.failure.message}), taken now`)
    if (Result.isFailure(now)) {
      assert.strictEqual(now.failure.field, before.failure.field)
      assert.deepStrictEqual(now.failure.reason, before.failure.reason)
      assert.strictEqual(now.failure.message, before.failure.message)
    }
    return
  }
  assert.isTrue(Result.isSuccess(now), Result.isFailure(now) ? `refused now: ${now.failure.message}` : "")
  if (Result.isFailure(now)) return
  assert.strictEqual(now.success.canonical, before.success.canonical)
  assert.strictEqual(now.success.text, before.success.text)
  assert.deepStrictEqual(now.success.value, before.success.value)
  assert.strictEqual(toJsonText(now.success.value), now.success.text)
  // A copy: no array or object of the caller's is kept.
  if (typeof payload === "object" && payload !== null) assert.isFalse(now.success.value === payload)
}

const key = fc.oneof(
  fc.constantFrom("__proto__", "constructor", "toJSON", "prototype", "a", "b", "B", "", "10", "2", "é", "\u{1f600}"),
  fc.constantFrom("\ud800", "x\udc00"),
  fc.string({ maxLength: 6, unit: "binary" })
)

const leaf: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constantFrom(-0, 0, 1e21, 5e-324, -1.5, Number.MAX_SAFE_INTEGER, null, true, false), weight: 4 },
  { arbitrary: fc.double(), weight: 2 },
  { arbitrary: fc.string({ maxLength: 12, unit: "binary" }), weight: 4 },
  { arbitrary: fc.constantFrom("\ud800", "a\udc00b", "\u{1f600}", "\u2028\"\\\u0000"), weight: 1 },
  { arbitrary: fc.constantFrom(Number.NaN, Infinity, -Infinity, undefined), weight: 1 },
  {
    arbitrary: fc.constantFrom<() => unknown>(
      () => new Date(0),
      () => new Map(),
      () => 1n,
      () => Symbol("s"),
      () => () => 1,
      () =>
        new (class Point {
          x = 1
        })()
    ).map((make) => make()),
    weight: 1
  }
)

type Shape = { readonly _tag: "leaf"; readonly value: unknown } | {
  readonly _tag: "array"
  readonly items: ReadonlyArray<Shape>
  readonly hole: boolean
} | {
  readonly _tag: "object"
  readonly members: ReadonlyArray<readonly [string, Shape]>
  readonly nullProto: boolean
  readonly getter: "none" | "plain" | "throws"
}

const shape: fc.Arbitrary<Shape> = fc.letrec<{ shape: Shape }>((tie) => ({
  shape: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf.map((value): Shape => ({ _tag: "leaf", value })),
    fc.record({
      _tag: fc.constant("array" as const),
      items: fc.array(tie("shape"), { maxLength: 4 }),
      hole: fc.constantFrom(false, false, false, true)
    }),
    fc.record({
      _tag: fc.constant("object" as const),
      members: fc.array(fc.tuple(key, tie("shape")), { maxLength: 4 }),
      nullProto: fc.boolean(),
      getter: fc.constantFrom("none" as const, "none" as const, "plain" as const, "throws" as const)
    })
  )
})).shape

// Builds the value: own data properties (`__proto__` one too, as JSON.parse makes
// it), a getter on the first member where asked, holes where asked; then, where
// `links` ask, a member is replaced by an ancestor (a cycle) or a sibling (sharing).
const build = (s: Shape, ancestors: Array<object>, links: Array<number>): unknown => {
  if (s._tag === "leaf") return s.value
  if (s._tag === "array") {
    const out: Array<unknown> = []
    ancestors.push(out)
    for (const item of s.items) out.push(build(item, ancestors, links))
    if (s.hole && out.length > 0) delete out[0]
    link(out, ancestors, links, (i, v) => (out[i % out.length] = v), out.length)
    ancestors.pop()
    return out
  }
  const out: Record<string, unknown> = s.nullProto ? Object.create(null) : {}
  ancestors.push(out)
  s.members.forEach(([k, v], i) => {
    const value = build(v, ancestors, links)
    if (i === 0 && s.getter !== "none") {
      const throws = s.getter === "throws"
      Object.defineProperty(out, k, {
        get: () => {
          if (throws) throw new Error("no")
          return value
        },
        enumerable: true,
        configurable: true
      })
    } else {
      Object.defineProperty(out, k, { value, writable: true, enumerable: true, configurable: true })
    }
  })
  const names = Object.keys(out)
  link(out, ancestors, links, (i, v) => {
    const name = names[i % names.length]!
    if (Object.getOwnPropertyDescriptor(out, name)?.get === undefined) {
      Object.defineProperty(out, name, { value: v, writable: true, enumerable: true, configurable: true })
    }
  }, names.length)
  ancestors.pop()
  return out
}

const shared: Array<object> = []
const link = (
  self: object,
  ancestors: ReadonlyArray<object>,
  links: Array<number>,
  set: (i: number, v: unknown) => void,
  size: number
): void => {
  shared.push(self)
  const l = links.pop()
  // Most containers link nothing; of the others, half point at an ancestor (a
  // cycle, this value itself included), half at a value made before (sharing).
  if (l === undefined || size === 0 || l % 4 !== 0) return
  if (l % 8 === 0) set(l >> 3, ancestors[(l >> 3) % ancestors.length])
  else set(l >> 3, shared[(l >> 3) % shared.length])
}

const value = fc.tuple(shape, fc.array(fc.nat(), { maxLength: 6 })).map(([s, links]) => {
  shared.length = 0
  return build(s, [], links)
})

const kind = fc.constantFrom("message", "message", "tool.outcome", "guard.state", "tool", "bad kind", "")

describe("the payload walk agrees with the old path", () => {
  it("property: the same failure, or the same copy, RFC 8785 text and JSON text", () => {
    fc.assert(fc.property(kind, value, (k, v) => agree(k, v)), { numRuns: A.runs(3000), reporter })
  })

  it("property: outcomes and states made of JSON, including their byte counts and sizes", () => {
    const json = fc.jsonValue() as fc.Arbitrary<unknown>
    const outcome = fc.record({ bytes_read: fc.oneof(fc.nat(), fc.double(), fc.constant(-0)), x: json }, {
      requiredKeys: []
    })
    fc.assert(
      fc.property(fc.oneof(json, outcome), (v) => {
        agree("tool.outcome", v)
        agree("guard.state", v)
        agree("message", v)
      }),
      { numRuns: A.runs(1000), reporter }
    )
  })

  it("deep nesting around the limit, far past it, and cycles deep down", () => {
    for (const depth of [255, 256, 257, 258, 5_000]) {
      agree("message", nest(depth))
      agree("message", deepArray(depth))
      agree("message", { a: [1, 2, 3], b: nest(depth, -0) })
    }
    const cyclic: Array<unknown> = []
    let deep: Array<unknown> = [cyclic]
    for (let i = 0; i < 20; i++) deep = [deep, { i }]
    cyclic.push(deep)
    agree("message", deep)
  })

  it("sizes at the limits: the payload's and a policy state's", () => {
    // At the payload's size and one past it: one array of a string shared 15 times
    // and one more (size 1 + 15 × 1 Mi + 1 + n).
    const mi = "x".repeat(1024 * 1024 - 1)
    agree("message", [...Array.from({ length: 15 }, () => mi), "x".repeat(1024 * 1024 - 2)])
    agree("message", [...Array.from({ length: 15 }, () => mi), "x".repeat(1024 * 1024 - 1)])
    // A state's tree size and its text's UTF-8 bytes, both at most 64 KiB.
    const half = 64 * 1024
    for (const s of ["a".repeat(half - 7), "a".repeat(half - 6), "é".repeat(half / 2 - 8), "é".repeat(half / 2 - 4)]) {
      agree("guard.state", { s })
      assert.strictEqual(guardStateProblem({ s }), Legacy.guardStateProblem({ s }))
    }
    // Shared subtrees count every time they appear: small graphs, huge written out.
    let v: unknown = ["x".repeat(100)]
    for (let i = 0; i < 60; i++) v = [v, v]
    agree("message", v)
  }, 120_000)
})

describe("the payload walk reads once", () => {
  it("a getter that answers differently the next time: what was checked is what is hashed and stored", () =>
    Effect.gen(function*() {
      // Before, the value was checked, then cloned (the getter read again), so a
      // lone surrogate got past the check into the stored entry, which no reader
      // could then decode.
      let reads = 0
      const payload = {
        get text() {
          return reads++ === 0 ? "fine" : "\ud800"
        }
      }
      const journal = yield* SessionJournal.SessionJournal
      const entry = yield* journal.append("reads-once", "message", payload)
      assert.deepStrictEqual(entry.payload, { text: "fine" })
      assert.strictEqual(reads, 1)
      const stored = yield* Stream.runCollect(journal.entries("reads-once"))
      assert.deepStrictEqual((stored[0] as Entry.OtherEntry).payload, { text: "fine" })
      assert.strictEqual((yield* journal.verify("reads-once")).entriesChecked, 1)
    }).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory())))))

  it("a proxy over JSON is read once and copied, where the clone refused it", () => {
    let gets = 0
    const proxy = new Proxy({ a: 1, b: [2] }, {
      get: (target, name, receiver) => {
        gets++
        return Reflect.get(target, name, receiver)
      }
    })
    const before = Legacy.take("message", proxy)
    assert.isTrue(Result.isFailure(before) && before.failure.reason._tag === "NotCopyable")
    gets = 0
    const now = takePayload("message", proxy)
    assert.isTrue(Result.isSuccess(now))
    if (Result.isSuccess(now)) {
      assert.deepStrictEqual(now.success.value, { a: 1, b: [2] })
      assert.isFalse(now.success.value === proxy)
      assert.strictEqual(now.success.canonical, `{"a":1,"b":[2]}`)
    }
    assert.strictEqual(gets, 2)
  })
})

describe("frozen copies", () => {
  it("a copy taken with freeze is frozen throughout, known, and taken again as it is", () => {
    const first = own({ n: 1, w: [[0, 1], [1, 2]], o: { k: "v" } }, payloadLimits, true)
    assert.strictEqual(first._tag, "Owned")
    if (first._tag !== "Owned") return
    const copy = first.value as { readonly w: ReadonlyArray<unknown>; readonly o: object }
    assert.isTrue(
      Object.isFrozen(copy) && Object.isFrozen(copy.w) && Object.isFrozen(copy.w[0]) && Object.isFrozen(copy.o)
    )
    assert.deepStrictEqual(taken(copy), first)
    // A value made from it shares its frozen parts: they are not copied again.
    const next = own({ ...copy, n: 2 }, payloadLimits, true)
    assert.strictEqual(next._tag, "Owned")
    if (next._tag !== "Owned") return
    const made = next.value as typeof copy
    assert.strictEqual(made.w, copy.w)
    assert.strictEqual(made.o, copy.o)
    assert.strictEqual(next.canonical, `{"n":2,"o":{"k":"v"},"w":[[0,1],[1,2]]}`)
    // Without freeze nothing is frozen or remembered.
    const plain = own({ a: [1] }, payloadLimits)
    assert.isTrue(plain._tag === "Owned" && !Object.isFrozen(plain.value) && taken(plain.value) === undefined)
  })

  it("a frozen part counts its depth and size where it is met again", () => {
    const part = own(nest(200), payloadLimits, true)
    assert.strictEqual(part._tag, "Owned")
    if (part._tag !== "Owned") return
    agree("message", nest(56, part.value))
    const deeper = own(nest(57, part.value), payloadLimits, true)
    assert.strictEqual(deeper._tag, "TooDeep")
  })
})

describe("the entry's text", () => {
  it("property: an entry built from a taken payload has the text of its fresh encoding, taken once", () => {
    fc.assert(
      fc.property(
        fc.jsonValue(),
        fc.nat({ max: 2 ** 40 }),
        fc.constantFrom("message", "x", "a.b:c-d_e"),
        (v, seq, k) => {
          const taken = takePayload(k, v)
          assert.isTrue(Result.isSuccess(taken))
          if (Result.isFailure(taken)) return
          const link = { sequence: seq, prev_hash: Entry.ZERO_HASH, timestamp_secs: seq + 1 }
          const entry = TakenEntry.makeTaken(link, k, taken.success)
          assert.deepStrictEqual(entry, Entry.makeOther(link, k, v as never))
          assert.strictEqual(TakenEntry.payloadText(entry, false), taken.success.text)
          assert.strictEqual(Entry.jsonText(entry), toJsonText(Entry.encode(entry)))
          assert.isUndefined(TakenEntry.payloadText(entry, false))
          assert.strictEqual(Entry.jsonText(entry), toJsonText(Entry.encode(entry)))
        }
      ),
      { numRuns: A.runs(300), reporter }
    )
  })

  it("an entry whose payload was replaced is written out afresh", () => {
    const taken = takePayload("message", { a: 1 })
    assert.isTrue(Result.isSuccess(taken))
    if (Result.isFailure(taken)) return
    const entry = TakenEntry.makeTaken(
      { sequence: 0, prev_hash: Entry.ZERO_HASH, timestamp_secs: 1 },
      "message",
      taken.success
    )
    ;(entry as { payload: unknown }).payload = { a: 2 }
    assert.strictEqual(Entry.jsonText(entry), toJsonText(Entry.encode(entry)))
  })
})
