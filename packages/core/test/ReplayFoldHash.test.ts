/**
 * The eviction fold of a long replay (`replayFoldHash`, which writes only the
 * characters of two hashes into a fixed 144-byte preimage) gives exactly
 * `Chain.foldHash` on every pair of strings: hashes, the first fold's "", other
 * lengths, and characters outside ASCII in either string.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { Chain } from "../src/index.ts"
import { replayFoldHash } from "../src/internal/replayFold.ts"

const hex64 = fc.string({ unit: fc.constantFrom(..."0123456789abcdef"), minLength: 64, maxLength: 64 })
// A hash with one character replaced by any code unit (upper case, non-ASCII, a lone surrogate).
const near64 = fc.tuple(hex64, fc.nat(63), fc.integer({ min: 0, max: 0xffff })).map(([h, i, c]) =>
  h.slice(0, i) + String.fromCharCode(c) + h.slice(i + 1)
)
const anyString = fc.oneof(
  hex64,
  near64,
  fc.constant(""),
  fc.string({ minLength: 0, maxLength: 70 }),
  fc.string({ unit: "binary", minLength: 64, maxLength: 64 })
)

describe("replayFoldHash", () => {
  it("equals Chain.foldHash on any pair of strings", () => {
    const seed = Number.isSafeInteger(Number(process.env["SEED"]))
      ? Number(process.env["SEED"])
      : Math.floor(Math.random() * 2 ** 31)
    console.log(`replayFoldHash vs Chain.foldHash: seed ${seed}`)
    fc.assert(
      fc.property(fc.oneof(hex64, anyString), fc.oneof(hex64, anyString), (p, h) => {
        assert.strictEqual(replayFoldHash(p, h), Chain.foldHash(p, h))
      }),
      { seed, numRuns: 3000 }
    )
  }, 120_000)

  it("a chain of folds over hashes equals Chain.foldHash's", () => {
    let a = ""
    let b = ""
    for (let i = 0; i < 300; i++) {
      const h = Chain.foldHash(String(i), "x")
      a = replayFoldHash(a, h)
      b = Chain.foldHash(b, h)
      assert.strictEqual(a, b)
    }
  })
})
