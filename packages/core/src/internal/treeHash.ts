/**
 * SHA-256 for the two inputs of the RFC 6962 tree (docs/DESIGN.md §14), on 32-bit words:
 * a leaf hash `SHA-256(0x00 ‖ 32 bytes)` is one block and a node hash
 * `SHA-256(0x01 ‖ 32 bytes ‖ 32 bytes)` two, their padding known in advance. The message
 * schedule is filled straight from the hash words (no input buffer, no padding pass, no
 * hasher object) and an entry hash is decoded from its hex into the block, so keeping a
 * tree costs its compressions and little else. Digests are the standard SHA-256 of those
 * inputs: the tests compare them with `@noble/hashes` on random inputs.
 */
import * as Rounds from "./sha256Rounds.ts"

// The message schedule and the chaining state, reused by every call (calls do not nest).
const W = new Int32Array(16)
const H = new Int32Array(8)
// The 32 bytes of a leaf, as 8 big-endian words, and a node's two children.
const A = new Int32Array(8)
const B = new Int32Array(8)

// SHA-256's initial hash value into H.
const initial = (): void => {
  H[0] = 0x6a09e667
  H[1] = 0xbb67ae85 | 0
  H[2] = 0x3c6ef372
  H[3] = 0xa54ff53a | 0
  H[4] = 0x510e527f
  H[5] = 0x9b05688c | 0
  H[6] = 0x1f83d9ab
  H[7] = 0x5be0cd19
}

// One compression of the block in W into H.
const compress = (): void => Rounds.compress(W, 0, H)

// The second block of a node hash is the right child's last byte, then constant
// padding: its message schedule is one of 256, computed once (with the round
// constants added, as `compressScheduled` takes it).
const LAST_BLOCK = new Int32Array(256 * 64)
{
  const block = new Int32Array(16)
  block[15] = 520
  for (let byte = 0; byte < 256; byte++) {
    block[0] = (byte << 24) | 0x800000
    Rounds.premix(block, 0, LAST_BLOCK, 64 * byte)
  }
}

const readWords = (bytes: Uint8Array, into: Int32Array): void => {
  for (let i = 0, j = 0; i < 8; i++, j += 4) {
    into[i] = (bytes[j]! << 24) | (bytes[j + 1]! << 16) | (bytes[j + 2]! << 8) | bytes[j + 3]!
  }
}

const digestOut = (): Uint8Array => {
  const out = new Uint8Array(32)
  for (let i = 0, j = 0; i < 8; i++, j += 4) {
    const h = H[i]!
    out[j] = h >>> 24
    out[j + 1] = h >>> 16
    out[j + 2] = h >>> 8
    out[j + 3] = h
  }
  return out
}

// SHA-256(0x00 ‖ A): one block, 33 bytes, then 0x80, zeros and the length 264 bits.
const leafOfA = (): Uint8Array => {
  leafOfAIntoH()
  return digestOut()
}

const leafOfAIntoH = (): void => {
  W[0] = A[0]! >>> 8
  for (let i = 1; i < 8; i++) W[i] = (A[i - 1]! << 24) | (A[i]! >>> 8)
  W[8] = (A[7]! << 24) | 0x800000
  W[9] =
    W[10] =
    W[11] =
    W[12] =
    W[13] =
    W[14] =
      0
  W[15] = 264
  initial()
  compress()
}

/**
 * `SHA-256(0x00 ‖ leaf)` for a 32-byte leaf.
 */
export const leafHash = (leaf: Uint8Array): Uint8Array => {
  readWords(leaf, A)
  return leafOfA()
}

// The byte of two hex digits (lowercase or uppercase), both below 128, at
// `(first << 7) | second`; -1 when either is not a hex digit.
const PAIRS = new Int16Array(1 << 14).fill(-1)
{
  const digit = (c: number) =>
    c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1
  for (let x = 0; x < 128; x++) {
    for (let y = 0; y < 128; y++) {
      if (digit(x) >= 0 && digit(y) >= 0) PAIRS[(x << 7) | y] = digit(x) * 16 + digit(y)
    }
  }
}

/**
 * `SHA-256(0x00 ‖ leaf)` for the leaf given as 64 hex characters (an `entry_hash`), or
 * `undefined` when the text is not 32 bytes of hex.
 */
export const leafHashOfHex = (hex: string): Uint8Array | undefined => leafOfHexIntoH(hex) ? digestOut() : undefined

// The leaf hash of 64 hex characters into H; false when they are not hex.
const leafOfHexIntoH = (hex: string): boolean => {
  if (hex.length !== 64) return false
  // Every character code is or-ed into `chars` and every byte into `bytes`: all of them
  // below 128 and no -1 means 32 bytes of hex.
  let chars = 0
  let bytes = 0
  for (let i = 0, p = 0; i < 8; i++, p += 8) {
    const c0 = hex.charCodeAt(p), c1 = hex.charCodeAt(p + 1), c2 = hex.charCodeAt(p + 2), c3 = hex.charCodeAt(p + 3)
    const c4 = hex.charCodeAt(p + 4), c5 = hex.charCodeAt(p + 5), c6 = hex.charCodeAt(p + 6), c7 = hex.charCodeAt(p + 7)
    chars |= c0 | c1 | c2 | c3 | c4 | c5 | c6 | c7
    const b0 = PAIRS[((c0 << 7) | c1) & 0x3fff]!, b1 = PAIRS[((c2 << 7) | c3) & 0x3fff]!
    const b2 = PAIRS[((c4 << 7) | c5) & 0x3fff]!, b3 = PAIRS[((c6 << 7) | c7) & 0x3fff]!
    bytes |= b0 | b1 | b2 | b3
    A[i] = (b0 << 24) | (b1 << 16) | (b2 << 8) | b3
  }
  if (chars >= 128 || bytes < 0) return false
  leafOfAIntoH()
  return true
}

/**
 * `SHA-256(0x01 ‖ left ‖ right)` for two 32-byte hashes: 65 bytes, two blocks.
 */
export const nodeHash = (left: Uint8Array, right: Uint8Array): Uint8Array => {
  readWords(left, A)
  readWords(right, B)
  nodeInto(A, 0, B, 0)
  return digestOut()
}

// SHA-256(0x01 ‖ left ‖ right) into H, the children being the 8 words of `x` at `l` and
// of `y` at `r`.
const nodeInto = (x: Int32Array, l: number, y: Int32Array, r: number): void => {
  // Block 1: 0x01, the 32 bytes of left, the first 31 of right.
  W[0] = (1 << 24) | (x[l]! >>> 8)
  for (let i = 1; i < 8; i++) W[i] = (x[l + i - 1]! << 24) | (x[l + i]! >>> 8)
  W[8] = (x[l + 7]! << 24) | (y[r]! >>> 8)
  for (let i = 1; i < 8; i++) W[8 + i] = (y[r + i - 1]! << 24) | (y[r + i]! >>> 8)
  initial()
  compress()
  // Block 2: the last byte of right, 0x80, zeros and the length 520 bits.
  Rounds.compressScheduled(LAST_BLOCK, 64 * (y[r + 7]! & 0xff), H)
}

const C = new Int32Array(8)
const L = new Int32Array(8)

/**
 * The compact range `nodes` (of `size` leaves) with the leaf of an entry hash (64 hex
 * characters) appended, as a new array (`nodes` is not changed), its merged node the
 * one hash allocated; `undefined` when the text is not 32 bytes of hex.
 */
export const appendEntryHashTo = (
  size: number,
  nodes: ReadonlyArray<Uint8Array>,
  hex: string
): Array<Uint8Array> | undefined => {
  if (!leafOfHexIntoH(hex)) return undefined
  for (let k = 0; k < 8; k++) C[k] = H[k]!
  let top = nodes.length
  // Each trailing one bit of `size` is a perfect subtree of the new node's height.
  for (let s = size; s % 2 === 1; s = Math.floor(s / 2)) {
    top--
    readWords(nodes[top]!, L)
    nodeInto(L, 0, C, 0)
    for (let k = 0; k < 8; k++) C[k] = H[k]!
  }
  const out = nodes.slice(0, top)
  for (let k = 0; k < 8; k++) H[k] = C[k]!
  out.push(digestOut())
  return out
}

/**
 * A compact range kept as 32-bit words, appended to without allocating: the hashes of
 * its perfect subtrees, largest first, 8 big-endian words each.
 */
export class Words {
  size = 0
  count = 0
  // 8 words per subtree root: one per bit of a size below 2^53, and one being merged.
  readonly nodes = new Int32Array(8 * 55)

  /** Sets the range to `nodes`, the 32-byte roots of a compact range of `size` leaves. */
  reset(size: number, nodes: ReadonlyArray<Uint8Array>): void {
    this.size = size
    this.count = nodes.length
    for (let i = 0; i < nodes.length; i++) {
      readWords(nodes[i]!, A)
      this.nodes.set(A, 8 * i)
    }
  }

  /** Appends the leaf whose hash is the 8 words of `from`. */
  private push(from: Int32Array): void {
    const nodes = this.nodes
    let top = this.count
    for (let k = 0, at = 8 * top; k < 8; k++) nodes[at + k] = from[k]!
    // Each trailing one bit of `size` is a perfect subtree of the new node's height.
    for (let s = this.size; s % 2 === 1; s = Math.floor(s / 2)) {
      top--
      nodeInto(nodes, 8 * top, nodes, 8 * top + 8)
      for (let k = 0, at = 8 * top; k < 8; k++) nodes[at + k] = H[k]!
    }
    this.count = top + 1
    this.size++
  }

  /** Appends a leaf by its leaf hash. */
  appendLeafHash(hash: Uint8Array): void {
    readWords(hash, A)
    this.push(A)
  }

  /** Appends the leaf of an entry hash (64 hex characters); false, appending nothing, otherwise. */
  appendEntryHash(hex: string): boolean {
    if (!leafOfHexIntoH(hex)) return false
    this.push(H)
    return true
  }

  /** The subtree roots as 32-byte hashes, largest first. */
  roots(): Array<Uint8Array> {
    const out: Array<Uint8Array> = []
    for (let i = 0; i < this.count; i++) {
      for (let k = 0; k < 8; k++) H[k] = this.nodes[8 * i + k]!
      out.push(digestOut())
    }
    return out
  }
}
