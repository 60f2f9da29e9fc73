/**
 * RFC 8785 canonical JSON (internal/jcs.ts): the RFC's own examples, its number
 * serialization table, key order by UTF-16 code units, and refusal of anything that
 * is not JSON RFC 8785 can canonicalize.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { canonicalize, firstInvalid, type Json } from "../src/internal/jcs.ts"
import * as A from "./arbitraries.ts"

const fromBits = (hex: string): number => {
  const view = new DataView(new ArrayBuffer(8))
  view.setBigUint64(0, BigInt(`0x${hex}`))
  return view.getFloat64(0)
}

describe("JCS: RFC 8785 examples", () => {
  it("§3.2.2: the sample object", () => {
    const input = JSON.parse(
      String
        .raw`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`
    )
    assert.strictEqual(
      canonicalize(input),
      String
        .raw`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
    )
  })

  it("§3.2.3: keys sort by UTF-16 code units (a non-BMP key sorts before U+FB33)", () => {
    const input = JSON.parse(
      String
        .raw`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`
    )
    const out = canonicalize(input)
    assert.strictEqual(
      out,
      "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\ud83d\ude00\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
    )
    // By code point U+FB33 would come before U+1F600; by UTF-16 code units it is after.
    assert.isBelow(out.indexOf("Emoji"), out.indexOf("Hebrew"))
  })

  it("Appendix B: number serialization", () => {
    const table: ReadonlyArray<readonly [string, string]> = [
      ["0000000000000000", "0"],
      ["8000000000000000", "0"],
      ["0000000000000001", "5e-324"],
      ["8000000000000001", "-5e-324"],
      ["7fefffffffffffff", "1.7976931348623157e+308"],
      ["ffefffffffffffff", "-1.7976931348623157e+308"],
      ["4340000000000000", "9007199254740992"],
      ["c340000000000000", "-9007199254740992"],
      ["4430000000000000", "295147905179352830000"],
      ["44b52d02c7e14af5", "9.999999999999997e+22"],
      ["44b52d02c7e14af6", "1e+23"],
      ["44b52d02c7e14af7", "1.0000000000000001e+23"],
      ["444b1ae4d6e2ef4e", "999999999999999700000"],
      ["444b1ae4d6e2ef4f", "999999999999999900000"],
      ["444b1ae4d6e2ef50", "1e+21"],
      ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
      ["3eb0c6f7a0b5ed8d", "0.000001"],
      ["41b3de4355555553", "333333333.3333332"],
      ["41b3de4355555554", "333333333.33333325"],
      ["41b3de4355555555", "333333333.3333333"],
      ["41b3de4355555556", "333333333.3333334"],
      ["41b3de4355555557", "333333333.33333343"],
      ["becbf647612f3696", "-0.0000033333333333333333"],
      ["43143ff3c1cb0959", "1424953923781206.2"]
    ]
    for (const [bits, text] of table) assert.strictEqual(canonicalize(fromBits(bits)), text, bits)
  })

  it("number forms: 1e21, 1e-7, -0, 333333333.33333329, integers", () => {
    assert.strictEqual(canonicalize(1e21), "1e+21")
    assert.strictEqual(canonicalize(1e20), "100000000000000000000")
    assert.strictEqual(canonicalize(1e-7), "1e-7")
    assert.strictEqual(canonicalize(1e-6), "0.000001")
    assert.strictEqual(canonicalize(-0), "0")
    assert.strictEqual(canonicalize([-0]), "[0]")
    // oxlint-disable-next-line no-loss-of-precision -- the literal is the RFC 8785 example as written
    assert.strictEqual(canonicalize(333333333.33333329), "333333333.3333333")
    assert.strictEqual(canonicalize(4.5), "4.5")
    assert.strictEqual(canonicalize(-1), "-1")
    assert.strictEqual(canonicalize(Number.MAX_SAFE_INTEGER), "9007199254740991")
  })

  it("string escapes: the short forms, \\u00xx lowercase for other controls, nothing else", () => {
    assert.strictEqual(canonicalize("\b\t\n\f\r"), String.raw`"\b\t\n\f\r"`)
    assert.strictEqual(canonicalize("\u0000\u0001\u000b\u000e\u001f"), String.raw`"\u0000\u0001\u000b\u000e\u001f"`)
    assert.strictEqual(canonicalize(`"\\`), String.raw`"\"\\"`)
    assert.strictEqual(canonicalize("/"), `"/"`)
    assert.strictEqual(canonicalize("\u007f\u0080\u2028\u2029\ufeff"), "\"\u007f\u0080\u2028\u2029\ufeff\"")
    assert.strictEqual(canonicalize("€😀"), "\"€😀\"")
  })

  it("literals, empty containers, nesting, no whitespace, arrays keep their order", () => {
    assert.strictEqual(canonicalize(null), "null")
    assert.strictEqual(canonicalize(true), "true")
    assert.strictEqual(canonicalize(false), "false")
    assert.strictEqual(canonicalize([]), "[]")
    assert.strictEqual(canonicalize({}), "{}")
    assert.strictEqual(
      canonicalize({ b: [3, 1, { z: 1, a: [] }], a: { d: null, c: "x" } }),
      `{"a":{"c":"x","d":null},"b":[3,1,{"a":[],"z":1}]}`
    )
  })

  it("integer-like keys sort as strings, not by the engine's numeric key order", () => {
    assert.strictEqual(canonicalize({ "9": 1, "10": 2, a: 3, "1": 4 }), `{"1":4,"10":2,"9":1,"a":3}`)
  })

  it("objects without a prototype and __proto__ own keys are canonicalized like any other key", () => {
    const bare = Object.create(null) as Record<string, Json>
    bare.b = 1
    bare.a = 2
    assert.strictEqual(canonicalize(bare), `{"a":2,"b":1}`)
    assert.strictEqual(canonicalize(JSON.parse(`{"z":0,"__proto__":[1]}`)), `{"__proto__":[1],"z":0}`)
  })
})

// A second rendering written independently: keys compared code unit by code unit.
const compareUnits = (a: string, b: string): number => {
  const n = Math.min(a.length, b.length)
  for (let i = 0; i < n; i++) {
    const d = a.charCodeAt(i) - b.charCodeAt(i)
    if (d !== 0) return d
  }
  return a.length - b.length
}
const reference = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(reference).join(",")}]`
  if (v !== null && typeof v === "object") {
    const keys = Object.keys(v).sort(compareUnits)
    return `{${keys.map((k) => `${JSON.stringify(k)}:${reference((v as Record<string, unknown>)[k])}`).join(",")}}`
  }
  return JSON.stringify(v)
}

const shuffleKeys = (v: unknown, seed: number): unknown => {
  if (Array.isArray(v)) return v.map((x) => shuffleKeys(x, seed))
  if (v !== null && typeof v === "object") {
    const entries = Object.entries(v)
    const rotated = entries.map((_, i) => entries[(i + seed) % entries.length]!)
    const out: Record<string, unknown> = {}
    for (const [k, x] of rotated.reverse()) {
      Object.defineProperty(out, k, { value: shuffleKeys(x, seed + 1), enumerable: true })
    }
    return out
  }
  return v
}

describe("JCS: properties", () => {
  it("property: agrees with an independent rendering and is a fixed point of parse", () => {
    fc.assert(
      fc.property(A.json, (v) => {
        const out = canonicalize(v)
        assert.strictEqual(out, reference(v))
        assert.strictEqual(canonicalize(JSON.parse(out)), out)
      })
    )
  })

  it("property: key insertion order does not matter", () => {
    fc.assert(
      fc.property(A.json, fc.nat(7), (v, seed) => {
        assert.strictEqual(canonicalize(shuffleKeys(v, seed) as Json), canonicalize(v))
      })
    )
  })

  it("property: everything that canonicalizes passes firstInvalid", () => {
    fc.assert(fc.property(A.json, (v) => assert.isUndefined(firstInvalid(v))))
  })
})

describe("JCS: firstInvalid refuses what is not JSON", () => {
  class Point {
    x = 1
  }
  const cases: ReadonlyArray<readonly [string, unknown, string]> = [
    ["NaN", NaN, "$"],
    ["Infinity", Infinity, "$"],
    ["-Infinity", { a: [1, -Infinity] }, "$.a[1]"],
    ["a lone high surrogate", "a\ud800", "$"],
    ["a lone low surrogate inside an array", ["ok", "\udc00b"], "$[1]"],
    ["reversed surrogates", "\udc00\ud800", "$"],
    ["a lone surrogate in a key", { "k\ud800": 1 }, "$.<key>"],
    ["undefined", undefined, "$"],
    ["an undefined property", { a: 1, b: undefined }, "$.b"],
    // oxlint-disable-next-line no-sparse-arrays -- the hole is what the case is about
    ["a hole in an array", [1, , 3], "$[1]"],
    ["a function", { f: () => 1 }, "$.f"],
    ["a symbol", [Symbol("s")], "$[0]"],
    ["a bigint", { n: 1n }, "$.n"],
    ["a class instance", { p: new Point() }, "$.p"],
    ["a Date", new Date(0), "$"],
    ["a Map", { m: new Map() }, "$.m"],
    ["a RegExp", /x/, "$"],
    ["a boxed string", { s: new String("x") }, "$.s"],
    ["deep nesting", { a: [{ b: { c: NaN } }] }, "$.a[0].b.c"]
  ]
  for (const [name, value, path] of cases) {
    it(name, () => assert.strictEqual(firstInvalid(value), path))
  }

  it("cycles are refused at the point of return", () => {
    const o: Record<string, unknown> = { a: 1 }
    o.self = o
    assert.strictEqual(firstInvalid(o), "$.self")
    const arr: Array<unknown> = [1]
    arr.push({ back: arr })
    assert.strictEqual(firstInvalid(arr), "$[1].back")
  })

  it("a value shared in two places is not a cycle", () => {
    const shared = { x: [1, 2] }
    const v = { a: shared, b: [shared, shared] }
    assert.isUndefined(firstInvalid(v))
    assert.strictEqual(canonicalize(v as Json), `{"a":{"x":[1,2]},"b":[{"x":[1,2]},{"x":[1,2]}]}`)
  })

  it("well-formed values pass, including surrogate pairs and prototype-less objects", () => {
    for (const v of [null, 0, -0, 1e308, "", "😀", [], {}, Object.create(null), { "😀": ["\ud83d\ude00"] }]) {
      assert.isUndefined(firstInvalid(v))
    }
  })
})
