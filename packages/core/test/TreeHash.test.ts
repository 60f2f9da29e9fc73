/**
 * The tree's own SHA-256 (one block for a leaf, two for a node, the entry hash decoded
 * from hex into the block) against `@noble/hashes` on random inputs, and `Merkle.builder`
 * (the compact range kept as words) against the immutable compact range and the RFC's
 * recursion.
 */
import { assert, describe, it } from "@effect/vitest"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Merkle } from "@session-journal/core"
import * as fc from "fast-check"
import * as TreeHash from "../src/internal/treeHash.ts"
import { concatBytes } from "./fixtures.ts"

const hex = (b: Uint8Array) => bytesToHex(b)
const bytes32 = fc.uint8Array({ minLength: 32, maxLength: 32 })

describe("the tree's SHA-256", () => {
  it("a leaf hash is SHA-256(0x00 ‖ leaf), from bytes and from hex in either case", () => {
    fc.assert(
      fc.property(bytes32, fc.boolean(), (leaf, upper) => {
        const expected = hex(sha256(concatBytes(new Uint8Array([0]), leaf)))
        assert.strictEqual(hex(TreeHash.leafHash(leaf)), expected)
        const text = upper ? hex(leaf).toUpperCase() : hex(leaf)
        assert.strictEqual(hex(TreeHash.leafHashOfHex(text)!), expected)
        assert.strictEqual(hex(Merkle.entryLeafHash(text)), expected)
        assert.strictEqual(hex(Merkle.leafHash(leaf)), expected)
      }),
      { numRuns: 500 }
    )
  })

  it("a node hash is SHA-256(0x01 ‖ left ‖ right)", () => {
    fc.assert(
      fc.property(bytes32, bytes32, (left, right) => {
        const expected = hex(sha256(concatBytes(new Uint8Array([1]), left, right)))
        assert.strictEqual(hex(TreeHash.nodeHash(left, right)), expected)
        assert.strictEqual(hex(Merkle.nodeHash(left, right)), expected)
      }),
      { numRuns: 500 }
    )
  })

  it("every value of the right child's last byte (the precomputed second blocks)", () => {
    const left = new Uint8Array(32).fill(0xa5)
    for (let byte = 0; byte < 256; byte++) {
      const right = new Uint8Array(32).fill(byte)
      right[0] = 0x5a
      assert.strictEqual(
        hex(TreeHash.nodeHash(left, right)),
        hex(sha256(concatBytes(new Uint8Array([1]), left, right))),
        `last byte ${byte}`
      )
    }
  })

  it("text that is not 32 bytes of hex has no leaf hash", () => {
    const good = "0123456789abcdefABCDEF0123456789abcdef0123456789abcdef0123456789"
    assert.isDefined(TreeHash.leafHashOfHex(good))
    for (const bad of [good.slice(1), good + "0", ""]) assert.isUndefined(TreeHash.leafHashOfHex(bad))
    // Every position, with characters that are not digits: some whose low seven bits
    // are a hex digit ("\u00e1" is "a" + 128, "\u0130" is "0" + 256).
    for (let p = 0; p < 64; p++) {
      for (const c of ["g", "G", " ", "/", ":", "@", "`", "\u00e1", "\u0130", "\u0000"]) {
        const text = good.slice(0, p) + c + good.slice(p + 1)
        assert.isUndefined(TreeHash.leafHashOfHex(text), JSON.stringify(text))
        assert.throws(() => Merkle.entryLeafHash(text))
        assert.throws(() => Merkle.builder().appendEntryHash(text))
      }
    }
  })
})

describe("Merkle.builder", () => {
  it("keeps the same tree as the immutable compact range, from any starting range", () => {
    fc.assert(
      fc.property(fc.array(bytes32, { maxLength: 300 }), fc.nat(300), (leaves, cut) => {
        const start = Math.min(cut, leaves.length)
        const first = Merkle.fromLeaves(leaves.slice(0, start))
        const b = Merkle.builder(first)
        let range = first
        for (let i = start; i < leaves.length; i++) {
          const text = hex(leaves[i]!)
          if (i % 2 === 0) b.appendEntryHash(text)
          else b.appendLeafHash(Merkle.leafHash(leaves[i]!))
          range = Merkle.append(range, leaves[i]!)
          assert.strictEqual(b.size(), i + 1)
        }
        const built = b.range()
        assert.strictEqual(built.size, range.size)
        assert.deepStrictEqual(built.nodes.map(hex), range.nodes.map(hex))
        assert.strictEqual(hex(Merkle.root(built)), hex(Merkle.root(range)))
      }),
      { numRuns: 200 }
    )
  })

  it("refuses to start from something that is not a compact range", () => {
    const node = new Uint8Array(32)
    for (
      const bad of [
        { size: 3, nodes: [node] },
        { size: 1, nodes: [] },
        { size: 2, nodes: [node, node] },
        { size: 1, nodes: [new Uint8Array(31)] },
        { size: -1, nodes: [] },
        { size: 0.5, nodes: [] }
      ]
    ) assert.throws(() => Merkle.builder(bad), TypeError, undefined, JSON.stringify(bad.size))
    assert.strictEqual(Merkle.builder({ size: 3, nodes: [node, node] }).size(), 3)
  })

  it("a failed append changes nothing", () => {
    const b = Merkle.builder()
    b.appendEntryHash("00".repeat(32))
    const before = b.range()
    assert.throws(() => b.appendEntryHash("zz".repeat(32)))
    assert.strictEqual(b.size(), 1)
    assert.deepStrictEqual(b.range().nodes.map(hex), before.nodes.map(hex))
  })
})
