/**
 * The RFC 6962 Merkle tree over a session's chain (docs/DESIGN.md §14): its leaves are
 * the entries' `entry_hash` bytes in sequence order, a leaf hashes as
 * `SHA-256(0x00 ‖ leaf)` and an inner node as `SHA-256(0x01 ‖ left ‖ right)`, the empty
 * tree's root is `SHA-256("")`. The chain, its entry hashes and its head are untouched:
 * the tree is a second commitment to the same entries, one that proves cheaply that an
 * entry is in the journal (inclusion) and that an older tree is a prefix of a newer one
 * (consistency), as transparency logs do.
 *
 * Everything here works on plain bytes and is pure, but for the two accumulators,
 * `Builder` and `Collector`, each changed in place by its one owner. A tree is kept as
 * its compact range (the roots of the perfect subtrees its size decomposes into, `O(log n)` hashes);
 * its 33- and 65-byte inputs are hashed by the tree's own SHA-256 on 32-bit words;
 * proofs are built by a `Collector` fed the leaves in order, which holds one compact
 * range at a time, so a proof from a stored history costs `O(n)` hashing and
 * `O(log n)` memory. Verification follows RFC 9162 §2.1.3.2 and §2.1.4.2.
 *
 * @since 0.1.0
 */
import { hexToBytes } from "@noble/hashes/utils.js"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as TreeHash from "./internal/treeHash.ts"
import * as Sha256 from "./Sha256.ts"

/**
 * Bytes of every hash in the tree (SHA-256).
 *
 * @since 0.1.0
 */
export const HASH_BYTES = 32

const digest = Sha256.digest

/**
 * The root of the empty tree, `SHA-256("")`.
 *
 * @since 0.1.0
 */
export const emptyRoot = (): Uint8Array => digest(new Uint8Array(0))

/**
 * `SHA-256(0x00 ‖ leaf)`: the hash of one leaf. A 32-byte leaf (an entry hash) is
 * hashed by the tree's own one-block SHA-256, any other through the installed one.
 *
 * @since 0.1.0
 */
export const leafHash = (leaf: Uint8Array): Uint8Array => {
  if (leaf.length === HASH_BYTES) return TreeHash.leafHash(leaf)
  const input = new Uint8Array(1 + leaf.length)
  input[0] = 0x00
  input.set(leaf, 1)
  return digest(input)
}

/**
 * `SHA-256(0x01 ‖ left ‖ right)`: the hash of an inner node. Two 32-byte children (every
 * node of the tree) are hashed by the tree's own two-block SHA-256.
 *
 * @since 0.1.0
 */
export const nodeHash = (left: Uint8Array, right: Uint8Array): Uint8Array => {
  if (left.length === HASH_BYTES && right.length === HASH_BYTES) return TreeHash.nodeHash(left, right)
  const input = new Uint8Array(1 + left.length + right.length)
  input[0] = 0x01
  input.set(left, 1)
  input.set(right, 1 + left.length)
  return digest(input)
}

/**
 * The leaf of an entry: its `entry_hash` (64 lowercase hex characters) as 32 bytes.
 *
 * @since 0.1.0
 */
export const entryLeaf = (entryHash: string): Uint8Array => hexToBytes(entryHash)

/**
 * The leaf hash of an entry, `leafHash(entryLeaf(entryHash))`, decoded from the hex
 * straight into the hashed block. Throws, as `entryLeaf` does, unless `entryHash` is 64
 * hex characters (with a `TypeError`).
 *
 * @since 0.1.0
 */
export const entryLeafHash = (entryHash: string): Uint8Array => {
  const hash = TreeHash.leafHashOfHex(entryHash)
  if (hash === undefined) throw notAHash(entryHash)
  return hash
}

const notAHash = (text: string) => new TypeError(`not a 32-byte hex hash: ${JSON.stringify(text.slice(0, 80))}`)

/**
 * Whether two hashes are the same bytes.
 *
 * @since 0.1.0
 */
export const equals = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

// ---------------------------------------------------------------------------
// Compact ranges

/**
 * A tree of `size` leaves as its compact range: the roots of the perfect subtrees that
 * the binary decomposition of `size` gives, largest (leftmost) first — one hash per bit
 * set in `size`. Enough to append to the tree and to compute its root.
 *
 * @since 0.1.0
 */
export interface CompactRange {
  readonly size: number
  readonly nodes: ReadonlyArray<Uint8Array>
}

/**
 * The compact range of the empty tree.
 *
 * @since 0.1.0
 */
export const empty: CompactRange = { size: 0, nodes: [] }

/**
 * The tree with one more leaf, given as its leaf hash (`leafHash`): the new leaf is
 * merged with the subtrees of equal height to its left, as the carries of `size + 1`.
 *
 * @since 0.1.0
 */
export const appendLeafHash = (range: CompactRange, hash: Uint8Array): CompactRange => {
  const nodes = range.nodes.slice()
  carry(nodes, range.size, hash, nodeHash)
  return { size: range.size + 1, nodes }
}

// Appends the leaf hash `hash` to the `nodes` of a tree of `size` leaves, in place,
// joining nodes with `join`: each trailing one bit of `size` is a perfect subtree of
// the height the new node has.
const carry = (
  nodes: Array<Uint8Array>,
  size: number,
  hash: Uint8Array,
  join: (left: Uint8Array, right: Uint8Array) => Uint8Array
): void => {
  let node = hash
  for (let s = size; s % 2 === 1; s = Math.floor(s / 2)) node = join(nodes.pop()!, node)
  nodes.push(node)
}

/**
 * The tree with one more leaf (hashed with `leafHash`).
 *
 * @since 0.1.0
 */
export const append = (range: CompactRange, leaf: Uint8Array): CompactRange => appendLeafHash(range, leafHash(leaf))

/**
 * The root of the tree: its subtrees folded from the right, `emptyRoot` when it has no
 * leaf.
 *
 * @since 0.1.0
 */
export const root = (range: CompactRange): Uint8Array => {
  const n = range.nodes.length
  if (n === 0) return emptyRoot()
  let r = range.nodes[n - 1]!
  for (let i = n - 2; i >= 0; i--) r = nodeHash(range.nodes[i]!, r)
  return r
}

/**
 * The tree over `leaves`, in order.
 *
 * @since 0.1.0
 */
export const fromLeaves = (leaves: Iterable<Uint8Array>): CompactRange => {
  let range = empty
  for (const leaf of leaves) range = append(range, leaf)
  return range
}

/**
 * How many nodes the compact range of a tree of `size` leaves has: one per bit set in
 * `size` (the roots of its perfect subtrees). `size` is a leaf count (a non-negative
 * safe integer); it is counted by division, as sizes may exceed 32 bits.
 *
 * @since 0.1.0
 */
export const rangeNodes = (size: number): number => {
  let bits = 0
  for (let s = size; s > 0; s = Math.floor(s / 2)) bits += s % 2
  return bits
}

// One 32-byte node per bit set in the size.
const isCompactRange = (range: CompactRange): boolean =>
  isSize(range.size) && range.nodes.length === rangeNodes(range.size) && wellFormed(range.nodes)

/**
 * A compact range that grows in place: what keeps a session's tree as entries come,
 * without allocating per leaf (its hashes are kept as 32-bit words and only turned into
 * bytes by `range`). Not shared between fibers: one owner appends.
 *
 * @since 0.1.0
 */
export interface Builder {
  /** How many leaves the tree has. */
  readonly size: () => number
  /** Appends the leaf of an entry (its `entry_hash`, 64 hex characters; throws a `TypeError` otherwise). */
  readonly appendEntryHash: (entryHash: string) => void
  /** Appends a leaf by its leaf hash (`leafHash`). */
  readonly appendLeafHash: (hash: Uint8Array) => void
  /** The tree as it is now. */
  readonly range: () => CompactRange
}

/**
 * A builder starting from the tree `from` (the empty tree when not given). Throws a
 * `TypeError` unless `from` has one 32-byte node per bit set in its size.
 *
 * @since 0.1.0
 */
export const builder = (from: CompactRange = empty): Builder => {
  if (!isCompactRange(from)) {
    throw new TypeError(`not a compact range: ${from.nodes.length} nodes for size ${from.size}`)
  }
  const words = new TreeHash.Words()
  words.reset(from.size, from.nodes)
  return {
    size: () => words.size,
    appendEntryHash: (entryHash) => {
      if (!words.appendEntryHash(entryHash)) throw notAHash(entryHash)
    },
    appendLeafHash: (hash) => words.appendLeafHash(hash),
    range: () => ({ size: words.size, nodes: words.roots() })
  }
}

/**
 * The compact range over the entries whose `entry_hash`es are `hashes` (64 lowercase
 * hex characters each; throws a `TypeError` otherwise), every leaf and node hashed
 * with `digest` (`Sha256.bulk`): the same range as `builder` gives, for a caller
 * with many hashes and a faster implementation than the tree's own.
 *
 * @since 0.1.0
 */
export const fromEntryHashes = (hashes: ReadonlyArray<string>, digest: Sha256.HexDigest): CompactRange => {
  const nodes: Array<Uint8Array> = []
  const leaf = new Uint8Array(1 + HASH_BYTES)
  const node = new Uint8Array(1 + 2 * HASH_BYTES)
  node[0] = 0x01
  const join = (left: Uint8Array, right: Uint8Array): Uint8Array => {
    node.set(left, 1)
    node.set(right, 1 + HASH_BYTES)
    return hexToBytes(digest(node))
  }
  for (let i = 0; i < hashes.length; i++) {
    const h = hashes[i]!
    if (!HEX_HASH.test(h)) throw notAHash(h)
    leaf.set(hexToBytes(h), 1)
    carry(nodes, i, hexToBytes(digest(leaf)), join)
  }
  return { size: hashes.length, nodes }
}

const HEX_HASH = /^[0-9a-f]{64}$/

// ---------------------------------------------------------------------------
// Proofs as ranges of leaves

/**
 * The leaves `[start, end)`: every node of a proof is the root of such a range (a
 * subtree of the tree).
 *
 * @since 0.1.0
 */
export interface Span {
  readonly start: number
  readonly end: number
}

// The largest power of two smaller than n (n > 1).
const split = (n: number): number => {
  let k = 1
  while (k * 2 < n) k *= 2
  return k
}

const isSize = (n: number): boolean => Number.isSafeInteger(n) && n >= 0

/**
 * The spans whose roots make the inclusion proof of leaf `index` in the tree of `size`
 * leaves, in proof order (RFC 6962 §2.1.1 `PATH`: the sibling nearest the leaf first).
 * Empty for a one-leaf tree; `undefined` unless `0 ≤ index < size`.
 *
 * @since 0.1.0
 */
export const inclusionSpans = (index: number, size: number): ReadonlyArray<Span> | undefined => {
  if (!isSize(index) || !isSize(size) || index >= size) return undefined
  const out: Array<Span> = []
  // Walk down from the root; the siblings met are the proof in reverse.
  let start = 0
  let end = size
  while (end - start > 1) {
    const k = split(end - start)
    if (index < start + k) {
      out.push({ start: start + k, end })
      end = start + k
    } else {
      out.push({ start, end: start + k })
      start = start + k
    }
  }
  return out.reverse()
}

/**
 * The spans whose roots make the consistency proof from the tree of `oldSize` leaves
 * to the tree of `newSize` leaves, in proof order (RFC 6962 §2.1.2 `PROOF`). Empty when
 * `oldSize` is 0 or equals `newSize`; `undefined` unless `0 ≤ oldSize ≤ newSize`.
 *
 * @since 0.1.0
 */
export const consistencySpans = (oldSize: number, newSize: number): ReadonlyArray<Span> | undefined => {
  if (!isSize(oldSize) || !isSize(newSize) || oldSize > newSize) return undefined
  if (oldSize === 0 || oldSize === newSize) return []
  const out: Array<Span> = []
  // SUBPROOF(m, D[start:end], b), unrolled: each step appends one node after the
  // nodes of the subproof it descends into, so they are collected in reverse.
  let m = oldSize
  let start = 0
  let end = newSize
  let complete = true
  while (m !== end - start) {
    const k = split(end - start)
    if (m <= k) {
      out.push({ start: start + k, end })
      end = start + k
    } else {
      out.push({ start, end: start + k })
      start = start + k
      m -= k
      complete = false
    }
  }
  if (!complete) out.push({ start, end })
  return out.reverse()
}

/**
 * Computes the roots of some spans of a tree from its leaves, fed once, in order, with
 * `push` (the leaf bytes; `pushLeafHash` when already hashed). It holds the compact
 * range of one span at a time (spans of a proof do not overlap), so memory is
 * `O(log n)` whatever the history's length. `roots` answers once every span has ended:
 * the spans' roots in the order the spans were given, or `undefined` when the leaves
 * fed stopped short of a span's end.
 *
 * @since 0.1.0
 */
export interface Collector {
  readonly push: (leaf: Uint8Array) => void
  readonly pushLeafHash: (hash: Uint8Array) => void
  /** How many leaves were fed. */
  readonly count: () => number
  readonly roots: () => ReadonlyArray<Uint8Array> | undefined
}

/**
 * A collector for `spans` (non-overlapping, as the spans of one proof are).
 *
 * @since 0.1.0
 */
export const collector = (spans: ReadonlyArray<Span>): Collector => {
  const order = spans.map((span, i) => ({ span, i })).sort((a, b) => a.span.start - b.span.start)
  const roots: Array<Uint8Array | undefined> = spans.map(() => undefined)
  let next = 0
  let current: CompactRange = empty
  let count = 0
  const pushLeafHash = (hash: Uint8Array) => {
    const index = count++
    const at = order[next]
    if (at === undefined || index < at.span.start) return
    current = appendLeafHash(current, hash)
    if (index + 1 === at.span.end) {
      roots[at.i] = root(current)
      current = empty
      next++
    }
  }
  return {
    push: (leaf) => pushLeafHash(leafHash(leaf)),
    pushLeafHash,
    count: () => count,
    roots: () => roots.every((r) => r !== undefined) ? roots as ReadonlyArray<Uint8Array> : undefined
  }
}

/**
 * The inclusion proof of leaf `index` in the tree over `leaves` (all of them, in order),
 * or `undefined` when `index` is not a leaf of it.
 *
 * @since 0.1.0
 */
export const inclusionProof = (
  leaves: Iterable<Uint8Array>,
  index: number,
  size: number
): ReadonlyArray<Uint8Array> | undefined => rootsOf(leaves, inclusionSpans(index, size), size)

/**
 * The consistency proof from the tree of `oldSize` to the tree of `newSize` over
 * `leaves`, or `undefined` when the sizes are not `0 ≤ oldSize ≤ newSize ≤` the leaves.
 *
 * @since 0.1.0
 */
export const consistencyProof = (
  leaves: Iterable<Uint8Array>,
  oldSize: number,
  newSize: number
): ReadonlyArray<Uint8Array> | undefined => rootsOf(leaves, consistencySpans(oldSize, newSize), newSize)

const rootsOf = (leaves: Iterable<Uint8Array>, spans: ReadonlyArray<Span> | undefined, size: number) => {
  if (spans === undefined) return undefined
  const c = collector(spans)
  for (const leaf of leaves) {
    if (c.count() >= size) break
    c.push(leaf)
  }
  return c.count() < size ? undefined : c.roots()
}

// ---------------------------------------------------------------------------
// Verification

/**
 * Why a proof did not verify.
 *
 * @since 0.1.0
 */
export class ProofFailed extends Schema.TaggedError<ProofFailed>()("ProofFailed", {
  proof: Schema.Literals(["inclusion", "consistency"]),
  reason: Schema.String
}) {
  override get message(): string {
    return `the ${this.proof} proof does not verify: ${this.reason}`
  }
}

const wellFormed = (proof: ReadonlyArray<Uint8Array>): boolean => proof.every((p) => p.length === HASH_BYTES)
const odd = (n: number): boolean => n % 2 === 1
const half = (n: number): number => Math.floor(n / 2)

/**
 * The root that an inclusion proof gives for leaf `index` (its leaf hash
 * `leafHashValue`) in a tree of `size` leaves (RFC 9162 §2.1.3.2), or why it cannot.
 *
 * @since 0.1.0
 */
export const rootFromInclusion = (
  index: number,
  size: number,
  leafHashValue: Uint8Array,
  proof: ReadonlyArray<Uint8Array>
): Result.Result<Uint8Array, ProofFailed> => {
  const fail = (reason: string) => Result.fail(new ProofFailed({ proof: "inclusion", reason }))
  if (!isSize(index) || !isSize(size) || index >= size) return fail(`leaf ${index} is not in a tree of ${size}`)
  if (leafHashValue.length !== HASH_BYTES || !wellFormed(proof)) return fail(`a hash is not ${HASH_BYTES} bytes`)
  let fn = index
  let sn = size - 1
  let r = leafHashValue
  for (const p of proof) {
    if (sn === 0) return fail(`it has too many nodes (${proof.length}) for leaf ${index} of ${size}`)
    if (odd(fn) || fn === sn) {
      r = nodeHash(p, r)
      while (!odd(fn) && fn !== 0) {
        fn = half(fn)
        sn = half(sn)
      }
    } else {
      r = nodeHash(r, p)
    }
    fn = half(fn)
    sn = half(sn)
  }
  if (sn !== 0) return fail(`it has too few nodes (${proof.length}) for leaf ${index} of ${size}`)
  return Result.succeed(r)
}

/**
 * Verifies that leaf `index`, with leaf hash `leafHashValue`, is in the tree of `size`
 * leaves whose root is `expectedRoot`.
 *
 * @since 0.1.0
 */
export const verifyInclusion = (
  index: number,
  size: number,
  leafHashValue: Uint8Array,
  proof: ReadonlyArray<Uint8Array>,
  expectedRoot: Uint8Array
): Result.Result<void, ProofFailed> =>
  Result.flatMap(rootFromInclusion(index, size, leafHashValue, proof), (r) =>
    equals(r, expectedRoot)
      ? Result.void
      : Result.fail(new ProofFailed({ proof: "inclusion", reason: "it leads to another root" })))

/**
 * Verifies that the tree of `oldSize` leaves with root `oldRoot` is a prefix of the tree
 * of `newSize` leaves with root `newRoot` (RFC 9162 §2.1.4.2). Equal sizes need an empty
 * proof and equal roots; an old size of 0 an empty proof.
 *
 * @since 0.1.0
 */
export const verifyConsistency = (
  oldSize: number,
  newSize: number,
  proof: ReadonlyArray<Uint8Array>,
  oldRoot: Uint8Array,
  newRoot: Uint8Array
): Result.Result<void, ProofFailed> => {
  const fail = (reason: string) => Result.fail(new ProofFailed({ proof: "consistency", reason }))
  if (!isSize(oldSize) || !isSize(newSize) || oldSize > newSize) {
    return fail(`a tree of ${newSize} cannot extend one of ${oldSize}`)
  }
  if (!wellFormed(proof)) return fail(`a hash is not ${HASH_BYTES} bytes`)
  if (oldSize === 0 || oldSize === newSize) {
    if (proof.length > 0) return fail("it must be empty for these sizes")
    if (oldSize === newSize && !equals(oldRoot, newRoot)) return fail("the roots of trees of equal size differ")
    return Result.void
  }
  if (proof.length === 0) return fail("it is empty")
  // A perfect old tree is a node of the new one, so its root starts the path.
  let fn = oldSize - 1
  let sn = newSize - 1
  while (odd(fn)) {
    fn = half(fn)
    sn = half(sn)
  }
  const path = fn === 0 ? [oldRoot, ...proof] : proof
  let fr = path[0]!
  let sr = path[0]!
  for (let i = 1; i < path.length; i++) {
    const c = path[i]!
    if (sn === 0) return fail("it has too many nodes")
    if (odd(fn) || fn === sn) {
      fr = nodeHash(c, fr)
      sr = nodeHash(c, sr)
      while (!odd(fn) && fn !== 0) {
        fn = half(fn)
        sn = half(sn)
      }
    } else {
      sr = nodeHash(sr, c)
    }
    fn = half(fn)
    sn = half(sn)
  }
  if (sn !== 0) return fail("it has too few nodes")
  if (!equals(fr, oldRoot)) return fail("it does not lead to the old root")
  if (!equals(sr, newRoot)) return fail("it does not lead to the new root")
  return Result.void
}
