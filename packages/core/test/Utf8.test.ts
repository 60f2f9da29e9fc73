/**
 * `Utf8`: the length of a string without encoding it is `TextEncoder`'s (a lone
 * surrogate is U+FFFD), a value's JSON bytes are those of its JSON text (a string's
 * own bytes), and the strict decoding refuses invalid UTF-8 and drops or keeps a
 * byte-order mark as asked.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { Utf8 } from "../src/index.ts"
import * as A from "./arbitraries.ts"

const SEED = Number(process.env.SEED ?? Math.floor(Math.random() * 2 ** 31))

const unit = fc.oneof(
  fc.integer({ min: 0, max: 0x7f }),
  fc.constantFrom(0x80, 0x7ff, 0x800, 0xd800, 0xdbff, 0xdc00, 0xdfff, 0xfeff, 0xffff),
  fc.integer({ min: 0, max: 0xffff })
)
const anyString = fc.array(unit, { maxLength: 40 }).map((codes) => String.fromCharCode(...codes))

describe(`Utf8 (seed ${SEED})`, () => {
  it("utf8Length is the length TextEncoder writes, for any UTF-16 string", () => {
    fc.assert(
      fc.property(anyString, (s) => Utf8.utf8Length(s) === new TextEncoder().encode(s).length),
      { seed: SEED, numRuns: A.runs(1000) }
    )
  })

  it("jsonBytes counts a string's own bytes, any other value's JSON text, and 0 without one", () => {
    fc.assert(
      fc.property(anyString, (s) => Utf8.jsonBytes(s) === new TextEncoder().encode(s).length),
      { seed: SEED, numRuns: A.runs(200) }
    )
    assert.strictEqual(Utf8.jsonBytes({ a: "é" }), new TextEncoder().encode(`{"a":"é"}`).length)
    assert.strictEqual(Utf8.jsonBytes(undefined), 0)
    assert.strictEqual(Utf8.jsonBytes(1n), 0)
    const cycle: Record<string, unknown> = {}
    cycle["self"] = cycle
    assert.strictEqual(Utf8.jsonBytes(cycle), 0)
  })

  it("decodeStrict gives back what was encoded, refuses invalid UTF-8, and drops a BOM unless kept", () => {
    fc.assert(
      fc.property(anyString, (s) => {
        const text = new TextDecoder().decode(new TextEncoder().encode(s))
        return Utf8.decodeStrict(new TextEncoder().encode(text), { keepBom: true }) === text
      }),
      { seed: SEED, numRuns: A.runs(500) }
    )
    for (const bad of [[0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82]]) {
      assert.throws(() => Utf8.decodeStrict(Uint8Array.from(bad)), TypeError)
    }
    const bom = Uint8Array.from([0xef, 0xbb, 0xbf, 0x61])
    assert.strictEqual(Utf8.decodeStrict(bom), "a")
    assert.strictEqual(Utf8.decodeStrict(bom, { keepBom: true }), "\ufeffa")
    const streamed = Utf8.strictDecoder()
    assert.strictEqual(streamed.decode(Uint8Array.from([0xe2, 0x82]), { stream: true }), "")
    assert.strictEqual(streamed.decode(Uint8Array.from([0xac])), "€")
  })
})
