/**
 * SHA-256 for the two inputs of the RFC 6962 tree (docs/DESIGN.md §14), on 32-bit words:
 * a leaf hash `SHA-256(0x00 ‖ 32 bytes)` is one block and a node hash
 * `SHA-256(0x01 ‖ 32 bytes ‖ 32 bytes)` two, their padding known in advance. The message
 * schedule is filled straight from the hash words (no input buffer, no padding pass, no
 * hasher object) and an entry hash is decoded from its hex into the block, so keeping a
 * tree costs its compressions and little else. Digests are the standard SHA-256 of those
 * inputs: the tests compare them with `@noble/hashes` on random inputs.
 */

// SHA-256's round constants.
// dprint-ignore
const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
])

// The message schedule and the chaining state, reused by every call (calls do not nest).
const W = new Int32Array(64)
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

// Extends the block in w[o..o+15] to its 64-word message schedule.
const schedule = (w: Int32Array, o: number): void => {
  for (let i = o + 16; i < o + 64; i++) {
    const w15 = w[i - 15]!
    const w2 = w[i - 2]!
    const s0 = ((w15 >>> 7) | (w15 << 25)) ^ ((w15 >>> 18) | (w15 << 14)) ^ (w15 >>> 3)
    const s1 = ((w2 >>> 17) | (w2 << 15)) ^ ((w2 >>> 19) | (w2 << 13)) ^ (w2 >>> 10)
    w[i] = (s1 + w[i - 7]! + s0 + w[i - 16]!) | 0
  }
}

// One compression of the block in W[0..15] into H.
const compress = (): void => {
  schedule(W, 0)
  rounds(W, 0)
}

// The second block of a node hash is the right child's last byte, then constant
// padding: its message schedule is one of 256, computed once.
const LAST_BLOCK = new Int32Array(256 * 64)
for (let byte = 0; byte < 256; byte++) {
  LAST_BLOCK[64 * byte] = (byte << 24) | 0x800000
  LAST_BLOCK[64 * byte + 15] = 520
  schedule(LAST_BLOCK, 64 * byte)
}

// The 64 rounds over the schedule w[o..o+63], into H.
const rounds = (w: Int32Array, o: number): void => {
  let a = H[0]!, b = H[1]!, c = H[2]!, d = H[3]!, e = H[4]!, f = H[5]!, g = H[6]!, h = H[7]!
  let t = 0
  // Eight rounds a step, the roles of the eight words rotating instead of their values.
  for (let i = 0; i < 64; i += 8) {
    t = (h + (((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))) + (g ^ (e & (f ^ g))) +
      K[i + 0]! + w[o + i]!) | 0
    d = (d + t) | 0
    h = (t + (((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))) +
      ((a & b) ^ (c & (a ^ b)))) | 0
    t = (g + (((d >>> 6) | (d << 26)) ^ ((d >>> 11) | (d << 21)) ^ ((d >>> 25) | (d << 7))) + (f ^ (d & (e ^ f))) +
      K[i + 1]! + w[o + i + 1]!) | 0
    c = (c + t) | 0
    g = (t + (((h >>> 2) | (h << 30)) ^ ((h >>> 13) | (h << 19)) ^ ((h >>> 22) | (h << 10))) +
      ((h & a) ^ (b & (h ^ a)))) | 0
    t = (f + (((c >>> 6) | (c << 26)) ^ ((c >>> 11) | (c << 21)) ^ ((c >>> 25) | (c << 7))) + (e ^ (c & (d ^ e))) +
      K[i + 2]! + w[o + i + 2]!) | 0
    b = (b + t) | 0
    f = (t + (((g >>> 2) | (g << 30)) ^ ((g >>> 13) | (g << 19)) ^ ((g >>> 22) | (g << 10))) +
      ((g & h) ^ (a & (g ^ h)))) | 0
    t = (e + (((b >>> 6) | (b << 26)) ^ ((b >>> 11) | (b << 21)) ^ ((b >>> 25) | (b << 7))) + (d ^ (b & (c ^ d))) +
      K[i + 3]! + w[o + i + 3]!) | 0
    a = (a + t) | 0
    e = (t + (((f >>> 2) | (f << 30)) ^ ((f >>> 13) | (f << 19)) ^ ((f >>> 22) | (f << 10))) +
      ((f & g) ^ (h & (f ^ g)))) | 0
    t = (d + (((a >>> 6) | (a << 26)) ^ ((a >>> 11) | (a << 21)) ^ ((a >>> 25) | (a << 7))) + (c ^ (a & (b ^ c))) +
      K[i + 4]! + w[o + i + 4]!) | 0
    h = (h + t) | 0
    d = (t + (((e >>> 2) | (e << 30)) ^ ((e >>> 13) | (e << 19)) ^ ((e >>> 22) | (e << 10))) +
      ((e & f) ^ (g & (e ^ f)))) | 0
    t = (c + (((h >>> 6) | (h << 26)) ^ ((h >>> 11) | (h << 21)) ^ ((h >>> 25) | (h << 7))) + (b ^ (h & (a ^ b))) +
      K[i + 5]! + w[o + i + 5]!) | 0
    g = (g + t) | 0
    c = (t + (((d >>> 2) | (d << 30)) ^ ((d >>> 13) | (d << 19)) ^ ((d >>> 22) | (d << 10))) +
      ((d & e) ^ (f & (d ^ e)))) | 0
    t = (b + (((g >>> 6) | (g << 26)) ^ ((g >>> 11) | (g << 21)) ^ ((g >>> 25) | (g << 7))) + (a ^ (g & (h ^ a))) +
      K[i + 6]! + w[o + i + 6]!) | 0
    f = (f + t) | 0
    b = (t + (((c >>> 2) | (c << 30)) ^ ((c >>> 13) | (c << 19)) ^ ((c >>> 22) | (c << 10))) +
      ((c & d) ^ (e & (c ^ d)))) | 0
    t = (a + (((f >>> 6) | (f << 26)) ^ ((f >>> 11) | (f << 21)) ^ ((f >>> 25) | (f << 7))) + (h ^ (f & (g ^ h))) +
      K[i + 7]! + w[o + i + 7]!) | 0
    e = (e + t) | 0
    a = (t + (((b >>> 2) | (b << 30)) ^ ((b >>> 13) | (b << 19)) ^ ((b >>> 22) | (b << 10))) +
      ((b & c) ^ (d & (b ^ c)))) | 0
  }
  H[0] = (H[0]! + a) | 0
  H[1] = (H[1]! + b) | 0
  H[2] = (H[2]! + c) | 0
  H[3] = (H[3]! + d) | 0
  H[4] = (H[4]! + e) | 0
  H[5] = (H[5]! + f) | 0
  H[6] = (H[6]! + g) | 0
  H[7] = (H[7]! + h) | 0
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
  rounds(LAST_BLOCK, 64 * (y[r + 7]! & 0xff))
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
