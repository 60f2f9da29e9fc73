/**
 * SHA-256 and HMAC-SHA-256 (RFC 2104) of whole byte arrays, importing nothing: for
 * code that must load as little as it can, such as the guard's forwarder, which a
 * hook starts once per event and for which loading `node:crypto` would cost more than
 * its whole exchange. Digests are the standard ones (the tests compare them with
 * `node:crypto` on random inputs).
 *
 * @since 0.1.0
 */
// SHA-256's constants, computed as the standard defines them: the first 32 bits of
// the fractional parts of the cube roots of the first 64 primes (round constants)
// and of the square roots of the first 8 (initial hash value). Computed rather than
// imported from the written-out rounds of `internal/sha256Rounds.ts`, whose size
// costs more to load than a few hashes cost to compute (the test compares them).
const PRIMES: Array<number> = []
for (let n = 2; PRIMES.length < 64; n++) if (PRIMES.every((p) => n % p !== 0)) PRIMES.push(n)
const fraction = (x: number): number => ((x - Math.floor(x)) * 0x1_0000_0000) | 0

/**
 * SHA-256's round constants.
 *
 * @since 0.1.0
 */
export const K: Int32Array = Int32Array.from(PRIMES, (p) => fraction(Math.cbrt(p)))

/**
 * SHA-256's initial hash value.
 *
 * @since 0.1.0
 */
export const INITIAL: Int32Array = Int32Array.from(PRIMES.slice(0, 8), (p) => fraction(Math.sqrt(p)))

// The message schedule, the chaining state and the last one or two blocks with the
// padding (calls do not nest).
const W = new Int32Array(64)
const H = new Int32Array(8)
const TAIL = new Uint8Array(128)

// One block of `bytes` from `at` compressed into H: the rounds as a loop (a process
// that hashes a few blocks compiles and runs this faster than written-out rounds).
const block = (bytes: Uint8Array, at: number): void => {
  for (let i = 0; i < 16; i++, at += 4) {
    W[i] = (bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!
  }
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15]!
    const y = W[i - 2]!
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10)
    W[i] = (W[i - 16]! + s0 + W[i - 7]! + s1) | 0
  }
  let a = H[0]!, b = H[1]!, c = H[2]!, d = H[3]!, e = H[4]!, f = H[5]!, g = H[6]!, h = H[7]!
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))
    const t1 = (h + S1 + ((e & f) ^ (~e & g)) + K[i]! + W[i]!) | 0
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))
    const t2 = (S0 + ((a & b) ^ (a & c) ^ (b & c))) | 0
    h = g
    g = f
    f = e
    e = (d + t1) | 0
    d = c
    c = b
    b = a
    a = (t1 + t2) | 0
  }
  H[0] = H[0]! + a
  H[1] = H[1]! + b
  H[2] = H[2]! + c
  H[3] = H[3]! + d
  H[4] = H[4]! + e
  H[5] = H[5]! + f
  H[6] = H[6]! + g
  H[7] = H[7]! + h
}

/**
 * SHA-256 of `bytes`, as 32 bytes. `bytes` is only read.
 *
 * @since 0.1.0
 */
export const sha256 = (bytes: Uint8Array): Uint8Array => {
  H.set(INITIAL)
  const length = bytes.length
  const full = length - (length % 64)
  for (let at = 0; at < full; at += 64) block(bytes, at)
  const rest = length - full
  TAIL.fill(0)
  TAIL.set(bytes.subarray(full), 0)
  TAIL[rest] = 0x80
  const tail = rest < 56 ? 64 : 128
  // The length in bits, big-endian, in the last 8 bytes (at most 2^53 − 1 bits here).
  const bits = length * 8
  const high = Math.floor(bits / 0x1_0000_0000)
  const low = bits >>> 0
  for (let i = 0; i < 4; i++) {
    TAIL[tail - 8 + i] = (high >>> (24 - 8 * i)) & 0xff
    TAIL[tail - 4 + i] = (low >>> (24 - 8 * i)) & 0xff
  }
  block(TAIL, 0)
  if (tail === 128) block(TAIL, 64)
  const digest = new Uint8Array(32)
  for (let i = 0; i < 8; i++) {
    const h = H[i]!
    digest[4 * i] = h >>> 24
    digest[4 * i + 1] = (h >>> 16) & 0xff
    digest[4 * i + 2] = (h >>> 8) & 0xff
    digest[4 * i + 3] = h & 0xff
  }
  return digest
}

/**
 * HMAC-SHA-256 (RFC 2104) of `message` under `key`, as 32 bytes. A key longer than
 * a block (64 bytes) is hashed first, as the RFC says.
 *
 * @since 0.1.0
 */
export const hmacSha256 = (key: Uint8Array, message: Uint8Array): Uint8Array => {
  const k = key.length > 64 ? sha256(key) : key
  const inner = new Uint8Array(64 + message.length)
  const outer = new Uint8Array(64 + 32)
  for (let i = 0; i < 64; i++) {
    const b = i < k.length ? k[i]! : 0
    inner[i] = b ^ 0x36
    outer[i] = b ^ 0x5c
  }
  inner.set(message, 64)
  outer.set(sha256(inner), 64)
  return sha256(outer)
}

/**
 * Lowercase hex of `bytes`.
 *
 * @since 0.1.0
 */
export const toHex = (bytes: Uint8Array): string => {
  let text = ""
  for (let i = 0; i < bytes.length; i++) text += (bytes[i]! < 16 ? "0" : "") + bytes[i]!.toString(16)
  return text
}

/**
 * Whether two byte arrays are equal, in a time that depends on their length only
 * (not on where they differ); arrays of different lengths are unequal at once.
 *
 * @since 0.1.0
 */
export const equalBytes = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  let diff = 0
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!
  return diff === 0
}
