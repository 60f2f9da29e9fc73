/**
 * Standard base64 (RFC 4648 §4, with padding), strict: a text decodes only when it is
 * the one encoding of its bytes, so a signature or a hash has one spelling.
 */
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
const VALUE = new Map(Array.from(ALPHABET, (c, i) => [c, i] as const))

/** The base64 text of `bytes`. */
export const encode = (bytes: Uint8Array): string => {
  let out = ""
  let i = 0
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + ALPHABET[n & 63]!
  }
  const rest = bytes.length - i
  if (rest === 1) {
    const n = bytes[i]! << 16
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + "=="
  } else if (rest === 2) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8)
    out += ALPHABET[n >> 18]! + ALPHABET[(n >> 12) & 63]! + ALPHABET[(n >> 6) & 63]! + "="
  }
  return out
}

/** The bytes of a canonical base64 text, or `undefined` for anything else. */
export const decode = (text: string): Uint8Array | undefined => {
  if (text.length % 4 !== 0) return undefined
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0
  const out = new Uint8Array((text.length / 4) * 3 - pad)
  let o = 0
  for (let i = 0; i < text.length; i += 4) {
    let n = 0
    for (let j = 0; j < 4; j++) {
      const c = text[i + j]!
      const last = i + 4 === text.length
      if (c === "=" && last && j >= 4 - pad) {
        n <<= 6
        continue
      }
      const v = VALUE.get(c)
      if (v === undefined) return undefined
      n = (n << 6) | v
    }
    out[o++] = n >> 16
    if (o < out.length) out[o++] = (n >> 8) & 0xff
    if (o < out.length) out[o++] = n & 0xff
  }
  // Bits past the last byte must be zero, or two texts would spell the same bytes.
  return encode(out) === text ? out : undefined
}
