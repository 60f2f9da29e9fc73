/**
 * The RFC 6962 tree: known answers (the eight-leaf test tree of RFC 6962's reference
 * implementations, with its roots at every size and its published inclusion and
 * consistency proofs), a reference `MTH` computed by the RFC's recursion, and property
 * tests that every proof verifies and that a proof for any other leaf, size or root, or
 * with any node changed, added or removed, fails.
 */
import { assert, describe, it } from "@effect/vitest"
import { bytesToHex, hexToBytes } from "@noble/hashes/utils.js"
import { Merkle } from "@session-journal/core"
import * as Result from "effect/Result"
import * as fc from "fast-check"

const h = hexToBytes
const hex = (b: Uint8Array) => bytesToHex(b)

// The test tree: leaves and the roots of the trees of their first 1..8 leaves.
const LEAVES = ["", "00", "10", "2021", "3031", "40414243", "5051525354555657", "606162636465666768696a6b6c6d6e6f"].map(
  h
)
const ROOTS = [
  "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
  "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
  "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
  "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
  "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
  "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
  "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
  "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328"
]
// [leaf index, tree size, proof]
const INCLUSION: ReadonlyArray<readonly [number, number, ReadonlyArray<string>]> = [
  [0, 1, []],
  [0, 8, [
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"
  ]],
  [5, 8, [
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"
  ]],
  [2, 3, ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"]],
  [1, 5, [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"
  ]]
]
// [old size, new size, proof]
const CONSISTENCY: ReadonlyArray<readonly [number, number, ReadonlyArray<string>]> = [
  [1, 1, []],
  [1, 8, [
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"
  ]],
  [6, 8, [
    "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"
  ]],
  [2, 5, [
    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"
  ]],
  [6, 7, [
    "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
    "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"
  ]]
]

// RFC 6962 §2.1's MTH, by its recursion.
const mth = (leaves: ReadonlyArray<Uint8Array>): Uint8Array => {
  if (leaves.length === 0) return Merkle.emptyRoot()
  if (leaves.length === 1) return Merkle.leafHash(leaves[0]!)
  let k = 1
  while (k * 2 < leaves.length) k *= 2
  return Merkle.nodeHash(mth(leaves.slice(0, k)), mth(leaves.slice(k)))
}

const leavesOf = (n: number): Array<Uint8Array> =>
  Array.from({ length: n }, (_, i) => new Uint8Array([i & 0xff, i >> 8, 7]))

// One history for the properties, and the roots of its prefixes by the RFC's recursion.
const MAX = 64
const HISTORY = leavesOf(MAX * 2 + 1)
const PREFIX_ROOTS = HISTORY.map((_, n) => mth(HISTORY.slice(0, n))).concat([mth(HISTORY)])
const rootAt = (n: number) => PREFIX_ROOTS[n]!

const same = (a: ReadonlyArray<Uint8Array>, b: ReadonlyArray<Uint8Array>) =>
  a.length === b.length && a.every((p, i) => Merkle.equals(p, b[i]!))

const ok = <E>(r: Result.Result<unknown, E>) => Result.isSuccess(r)

describe("Merkle: known answers", () => {
  it("the empty tree's root is SHA-256 of nothing", () => {
    assert.strictEqual(
      hex(Merkle.root(Merkle.empty)),
      "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    )
  })

  it("the roots of the test tree at every size, appended one leaf at a time", () => {
    let range = Merkle.empty
    LEAVES.forEach((leaf, i) => {
      range = Merkle.append(range, leaf)
      assert.strictEqual(range.size, i + 1)
      assert.strictEqual(range.nodes.length, (i + 1).toString(2).replace(/0/g, "").length)
      assert.strictEqual(hex(Merkle.root(range)), ROOTS[i], `size ${i + 1}`)
      assert.strictEqual(hex(mth(LEAVES.slice(0, i + 1))), ROOTS[i])
    })
  })

  it("the published inclusion proofs are the ones built, and verify", () => {
    for (const [index, size, proof] of INCLUSION) {
      const built = Merkle.inclusionProof(LEAVES, index, size)!
      assert.deepStrictEqual(built.map(hex), proof, `${index} in ${size}`)
      const r = Merkle.verifyInclusion(index, size, Merkle.leafHash(LEAVES[index]!), proof.map(h), h(ROOTS[size - 1]!))
      assert.isTrue(ok(r), `${index} in ${size}`)
    }
  })

  it("the published consistency proofs are the ones built, and verify", () => {
    for (const [m, n, proof] of CONSISTENCY) {
      const built = Merkle.consistencyProof(LEAVES, m, n)!
      assert.deepStrictEqual(built.map(hex), proof, `${m} to ${n}`)
      const r = Merkle.verifyConsistency(m, n, proof.map(h), h(ROOTS[m - 1]!), h(ROOTS[n - 1]!))
      assert.isTrue(ok(r), `${m} to ${n}`)
    }
  })

  it("sizes that cannot be are refused", () => {
    assert.isUndefined(Merkle.inclusionSpans(0, 0))
    assert.isUndefined(Merkle.inclusionSpans(3, 3))
    assert.isUndefined(Merkle.inclusionSpans(-1, 3))
    assert.isUndefined(Merkle.consistencySpans(4, 3))
    assert.isUndefined(Merkle.inclusionProof(LEAVES, 2, 9), "more leaves than there are")
    assert.isFalse(ok(Merkle.verifyInclusion(0, 0, Merkle.leafHash(LEAVES[0]!), [], Merkle.emptyRoot())))
    assert.isFalse(ok(Merkle.verifyConsistency(2, 1, [], h(ROOTS[1]!), h(ROOTS[0]!))))
    assert.isTrue(ok(Merkle.verifyConsistency(0, 5, [], Merkle.emptyRoot(), h(ROOTS[4]!))))
    assert.isFalse(ok(Merkle.verifyConsistency(0, 5, [h(ROOTS[0]!)], Merkle.emptyRoot(), h(ROOTS[4]!))))
    assert.isFalse(ok(Merkle.verifyConsistency(3, 3, [], h(ROOTS[2]!), h(ROOTS[1]!))), "equal sizes, other roots")
    assert.isFalse(ok(Merkle.verifyConsistency(1, 2, [], h(ROOTS[0]!), h(ROOTS[1]!))), "empty proof")
  })
})

// Every way of getting a proof wrong that does not make it another valid proof.
const flip = (proof: ReadonlyArray<Uint8Array>, i: number, bit: number): Array<Uint8Array> =>
  proof.map((p, j) => {
    if (j !== i) return p
    const q = p.slice()
    q[bit >> 3]! ^= 1 << (bit & 7)
    return q
  })

describe("Merkle: properties", () => {
  const tree = fc.integer({ min: 1, max: MAX }).chain((size) =>
    fc.record({ size: fc.constant(size), index: fc.nat(size - 1), bit: fc.nat(255), pick: fc.nat() })
  )

  it("the compact range's root is the RFC's MTH at every size", () => {
    const leaves = leavesOf(70)
    let range = Merkle.empty
    for (let n = 1; n <= leaves.length; n++) {
      range = Merkle.append(range, leaves[n - 1]!)
      assert.strictEqual(hex(Merkle.root(range)), hex(mth(leaves.slice(0, n))), `size ${n}`)
    }
  })

  it("every inclusion proof verifies; another leaf, index, size, root or any change to the proof fails", () => {
    fc.assert(
      fc.property(tree, ({ bit, index, pick, size }) => {
        const leaves = HISTORY.slice(0, size)
        const root = rootAt(size)
        const proof = Merkle.inclusionProof(leaves, index, size)!
        const leaf = Merkle.leafHash(leaves[index]!)
        assert.isTrue(ok(Merkle.verifyInclusion(index, size, leaf, proof, root)))
        const other = (index + 1 + (pick % size)) % size
        if (other !== index) {
          assert.isFalse(
            ok(Merkle.verifyInclusion(index, size, Merkle.leafHash(leaves[other]!), proof, root)),
            "other leaf"
          )
          assert.isFalse(ok(Merkle.verifyInclusion(other, size, leaf, proof, root)), "other index")
        }
        // The tree of another size (its own root): the proof of this size does not
        // verify there unless it is that size's proof too (the sizes' paths coincide).
        const longer = HISTORY
        for (const s of [size - 1, size + 1, size * 2]) {
          if (s <= index) continue
          const real = Merkle.inclusionProof(longer, index, s)!
          if (same(real, proof)) continue
          assert.isFalse(ok(Merkle.verifyInclusion(index, s, leaf, proof, rootAt(s))), `size ${s}`)
        }
        assert.isFalse(ok(Merkle.verifyInclusion(index, size, leaf, proof, rootAt(size - 1))), "other root")
        if (proof.length > 0) {
          const i = pick % proof.length
          assert.isFalse(ok(Merkle.verifyInclusion(index, size, leaf, flip(proof, i, bit), root)), "a bit flipped")
          assert.isFalse(ok(Merkle.verifyInclusion(index, size, leaf, proof.slice(0, -1), root)), "one node fewer")
          assert.isFalse(ok(Merkle.verifyInclusion(index, size, leaf, proof.slice(1), root)), "first node removed")
        }
        assert.isFalse(ok(Merkle.verifyInclusion(index, size, leaf, [...proof, root], root)), "one node more")
        assert.isFalse(ok(Merkle.verifyInclusion(index, size, leaf, [root, ...proof], root)), "a node before")
      }),
      { numRuns: 200 }
    )
  })

  const pair = fc.integer({ min: 1, max: MAX }).chain((n) =>
    fc.record({ n: fc.constant(n), m: fc.integer({ min: 1, max: n }), bit: fc.nat(255), pick: fc.nat() })
  )

  it("every consistency proof verifies; other sizes, roots or any change to the proof fail", () => {
    fc.assert(
      fc.property(pair, ({ bit, m, n, pick }) => {
        const leaves = HISTORY.slice(0, n)
        const oldRoot = rootAt(m)
        const newRoot = rootAt(n)
        const proof = Merkle.consistencyProof(leaves, m, n)!
        assert.isTrue(ok(Merkle.verifyConsistency(m, n, proof, oldRoot, newRoot)))
        if (m === n) {
          assert.strictEqual(proof.length, 0)
          return
        }
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, proof, newRoot, oldRoot)), "roots swapped")
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, proof, rootAt(m - 1), newRoot)), "other old root")
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, proof, oldRoot, rootAt(n - 1))), "other new root")
        // Trees of other sizes (their own roots): this proof verifies there only if it
        // is their proof too.
        const longer = HISTORY
        for (const [a, b] of [[m - 1, n], [m + 1, n], [m, n + 1], [m, n - 1], [m, n * 2]] as const) {
          if (a < 1 || a >= b || (a === m && b === n)) continue
          const real = Merkle.consistencyProof(longer, a, b)!
          if (same(real, proof)) continue
          const roots = [rootAt(a), rootAt(b)] as const
          assert.isFalse(ok(Merkle.verifyConsistency(a, b, proof, roots[0], roots[1])), `sizes ${a}, ${b}`)
        }
        const i = pick % proof.length
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, flip(proof, i, bit), oldRoot, newRoot)), "a bit flipped")
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, proof.slice(0, -1), oldRoot, newRoot)), "one node fewer")
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, [...proof, oldRoot], oldRoot, newRoot)), "one node more")
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, [proof[0]!, ...proof], oldRoot, newRoot)), "a node repeated")
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, [], oldRoot, newRoot)), "empty")
      }),
      { numRuns: 200 }
    )
  })

  it("a tree that differs in any leaf of the old size has no valid consistency proof from the old root", () => {
    fc.assert(
      fc.property(pair, ({ m, n, pick }) => {
        const leaves = HISTORY.slice(0, n)
        const oldRoot = rootAt(m)
        const changed = leaves.slice()
        changed[pick % m] = new Uint8Array([0xee, pick & 0xff])
        const proof = Merkle.consistencyProof(changed, m, n)!
        assert.isFalse(ok(Merkle.verifyConsistency(m, n, proof, oldRoot, mth(changed))))
      }),
      { numRuns: 200 }
    )
  })

  it("rangeNodes is the number of nodes of the compact range at every size, past 32 bits too", () => {
    const leaves = leavesOf(70)
    let range = Merkle.empty
    assert.strictEqual(Merkle.rangeNodes(0), 0)
    for (let n = 1; n <= leaves.length; n++) {
      range = Merkle.append(range, leaves[n - 1]!)
      assert.strictEqual(Merkle.rangeNodes(n), range.nodes.length, `size ${n}`)
    }
    assert.strictEqual(Merkle.rangeNodes(2 ** 32), 1)
    assert.strictEqual(Merkle.rangeNodes(2 ** 40 + 2 ** 33 + 1), 3)
    assert.strictEqual(Merkle.rangeNodes(Number.MAX_SAFE_INTEGER), 53)
  })

  it("a collector fed a long history keeps one compact range, and its roots are the spans' MTH", () => {
    const leaves = leavesOf(1000)
    const spans = Merkle.consistencySpans(377, 1000)!
    const c = Merkle.collector(spans)
    for (const leaf of leaves) c.push(leaf)
    assert.deepStrictEqual(c.roots()!.map(hex), spans.map((s) => hex(mth(leaves.slice(s.start, s.end)))))
    const short = Merkle.collector(spans)
    for (const leaf of leaves.slice(0, 999)) short.push(leaf)
    assert.isUndefined(short.roots(), "a span not reached has no root")
  })
})
