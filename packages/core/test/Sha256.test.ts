import { assert, describe, it } from "@effect/vitest"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Chain, Sha256 } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as fc from "fast-check"
import { createHash } from "node:crypto"

describe("Sha256", () => {
  it("hashes with @noble/hashes unless something else is installed", () => {
    assert.strictEqual(Sha256.implementation(), "@noble/hashes")
    assert.strictEqual(
      Sha256.hex(new TextEncoder().encode("abc")),
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
  })

  it("the probes' expected digests are @noble/hashes' own", () => {
    assert.strictEqual(Sha256.probes.length, 15)
    for (const [length, digest] of Sha256.probes) assert.strictEqual(Sha256.noble(Sha256.probe(length)), digest)
    assert.isUndefined(Sha256.check("@noble/hashes", Sha256.noble))
  })

  it("writes the digest as @noble/hashes' bytesToHex and node:crypto do, as one flat string", () => {
    // fast-check prints the seed and the shrunk input on failure.
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const hex = Sha256.noble(bytes)
        assert.strictEqual(hex, bytesToHex(sha256(bytes)))
        assert.strictEqual(hex, createHash("sha256").update(bytes).digest("hex"))
        assert.match(hex, /^[0-9a-f]{64}$/)
      }),
      { numRuns: 500 }
    )
  })

  it.effect("layers released out of order leave the implementation of the one still alive, then the default", () =>
    Effect.gen(function*() {
      const a = (bytes: Uint8Array) => Sha256.noble(bytes)
      const b = (bytes: Uint8Array) => Sha256.noble(bytes)
      const scopeA = yield* Scope.make()
      const scopeB = yield* Scope.make()
      yield* Layer.buildWithScope(Sha256.layer("a", a), scopeA)
      yield* Layer.buildWithScope(Sha256.layer("b", b), scopeB)
      assert.strictEqual(Sha256.implementation(), "b")
      // The first one goes while the second is alive: the second stays installed.
      yield* Scope.close(scopeA, Exit.void)
      assert.strictEqual(Sha256.implementation(), "b")
      // Then the second goes: nothing is left installed, so the default is back.
      yield* Scope.close(scopeB, Exit.void)
      assert.strictEqual(Sha256.implementation(), "@noble/hashes")
    }))

  it.effect("installs a byte-identical implementation for the layer's lifetime and restores the previous one", () =>
    Effect.gen(function*() {
      let calls = 0
      const counted: Sha256.HexDigest = (bytes) => {
        calls++
        return Sha256.noble(bytes)
      }
      const before = Chain.foldHash("a".repeat(64), "b".repeat(64))
      yield* Effect.gen(function*() {
        assert.strictEqual(Sha256.implementation(), "counted")
        const probes = calls
        assert.strictEqual(Chain.foldHash("a".repeat(64), "b".repeat(64)), before)
        assert.strictEqual(calls, probes + 1)
        // The bytes digest (the Merkle tree's) goes through the installed one too.
        const abc = new TextEncoder().encode("abc")
        assert.strictEqual(
          Array.from(Sha256.digest(abc), (b) => b.toString(16).padStart(2, "0")).join(""),
          Sha256.noble(abc)
        )
        assert.strictEqual(calls, probes + 2)
      }).pipe(Effect.provide(Sha256.layer("counted", counted)))
      assert.strictEqual(Sha256.implementation(), "@noble/hashes")
    }))

  it.effect("refuses an implementation that differs on any probe, with the input length and both digests", () =>
    Effect.gen(function*() {
      const wrongOnPadding: Sha256.HexDigest = (bytes) => bytes.length === 56 ? "0".repeat(64) : Sha256.noble(bytes)
      const error = yield* Effect.flip(Layer.build(Sha256.layer("broken", wrongOnPadding)).pipe(Effect.scoped))
      assert.strictEqual(error._tag, "Sha256Mismatch")
      assert.strictEqual(error.inputBytes, 56)
      assert.strictEqual(error.actual, "0".repeat(64))
      assert.strictEqual(Sha256.implementation(), "@noble/hashes")
      const throwing: Sha256.HexDigest = () => {
        throw new Error("no")
      }
      assert.isDefined(Sha256.check("throwing", throwing))
    }))
})

describe("Sha256.layerBulk", () => {
  it.effect("loads and checks its implementation on the first bulk use only; one that differs is never used", () =>
    Effect.gen(function*() {
      assert.isNull(Sha256.bulk())
      let loads = 0
      let calls = 0
      const counted: Sha256.HexDigest = (bytes) => {
        calls++
        return Sha256.noble(bytes)
      }
      yield* Effect.gen(function*() {
        assert.strictEqual(loads, 0, "nothing loaded before a bulk use")
        assert.strictEqual(Sha256.implementation(), "@noble/hashes")
        const bulk = Sha256.bulk()
        assert.strictEqual(bulk, counted)
        assert.strictEqual(loads, 1)
        assert.strictEqual(calls, Sha256.probes.length, "checked against @noble/hashes first")
        assert.strictEqual(Sha256.bulk(), counted)
        assert.strictEqual(loads, 1, "loaded once")
      }).pipe(Effect.provide(Sha256.layerBulk("counted", () => {
        loads++
        return counted
      })))
      assert.isNull(Sha256.bulk())
      const wrong: Sha256.HexDigest = (bytes) => Sha256.noble(bytes).replace(/^./, "f")
      yield* Effect.sync(() => assert.isNull(Sha256.bulk())).pipe(
        Effect.provide(Sha256.layerBulk("wrong", () => wrong))
      )
      yield* Effect.sync(() => assert.isNull(Sha256.bulk())).pipe(
        Effect.provide(Sha256.layerBulk("throws", () => {
          throw new Error("no such module")
        }))
      )
    }))
})
