/**
 * The SHA-256 every entry hash and every eviction fold goes through. Core computes it
 * with `@noble/hashes` (it runs anywhere Effect runs); a platform package may install a
 * faster implementation for the whole process — the node package installs
 * `node:crypto`'s. An implementation is only installed after it reproduced the digests
 * of `@noble/hashes` on inputs around every padding boundary, so a chain never depends
 * on which one computed it.
 *
 * @since 0.3.0
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"

/**
 * A SHA-256 implementation: the bytes in, the digest out as 64 lowercase hex characters.
 * It must not keep or modify `bytes` (callers reuse the buffer).
 *
 * @since 0.3.0
 */
export type HexDigest = (bytes: Uint8Array) => string

/**
 * `@noble/hashes`' SHA-256, the implementation core starts with.
 *
 * @since 0.3.0
 */
export const noble: HexDigest = (bytes) => bytesToHex(sha256(bytes))

let active: HexDigest = noble
let activeName = "@noble/hashes"

/**
 * SHA-256 of `bytes` with the installed implementation, as lowercase hex.
 *
 * @since 0.3.0
 */
export const hex = (bytes: Uint8Array): string => active(bytes)

/**
 * The name of the installed implementation (`"@noble/hashes"` unless a platform
 * installed another).
 *
 * @since 0.3.0
 */
export const implementation = (): string => activeName

/**
 * An implementation gave a digest different from `@noble/hashes`' on a known input, so
 * it was not installed.
 *
 * @since 0.3.0
 */
export class Sha256Mismatch extends Schema.TaggedError<Sha256Mismatch>()("Sha256Mismatch", {
  implementation: Schema.String,
  inputBytes: Schema.Number,
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message(): string {
    return `SHA-256 implementation ${this.implementation} is not byte-identical to @noble/hashes: ` +
      `on ${this.inputBytes} input bytes it gave ${this.actual}, expected ${this.expected}; it was not installed`
  }
}

// Lengths around the one- and two-block padding boundaries, typical entry and fold
// preimages, and a multi-block input.
const PROBE_LENGTHS = [0, 1, 3, 55, 56, 57, 63, 64, 65, 119, 120, 144, 154, 1000, 4099]

const probe = (length: number): Uint8Array => {
  const bytes = new Uint8Array(length)
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + length) & 0xff
  return bytes
}

/**
 * Checks `digest` against `@noble/hashes` on known inputs: `undefined` when every
 * digest matched, otherwise the first mismatch.
 *
 * @since 0.3.0
 */
export const check = (name: string, digest: HexDigest): Sha256Mismatch | undefined => {
  for (const length of PROBE_LENGTHS) {
    const bytes = probe(length)
    const expected = noble(bytes)
    let actual: string
    try {
      actual = digest(bytes)
    } catch (cause) {
      actual = `a thrown ${cause instanceof Error ? cause.name : typeof cause}`
    }
    if (actual !== expected) return new Sha256Mismatch({ implementation: name, inputBytes: length, expected, actual })
  }
  return undefined
}

/**
 * Installs `digest` for the whole process while the layer is alive (the previous
 * implementation comes back when it is released). Fails with `Sha256Mismatch`, leaving
 * the installed implementation alone, unless `digest` reproduces `@noble/hashes`.
 *
 * @since 0.3.0
 */
export const layer = (name: string, digest: HexDigest): Layer.Layer<never, Sha256Mismatch> =>
  Layer.effectDiscard(
    Effect.acquireRelease(
      Effect.suspend(() => {
        const mismatch = check(name, digest)
        if (mismatch !== undefined) return Effect.fail(mismatch)
        const previous = { digest: active, name: activeName }
        active = digest
        activeName = name
        return Effect.succeed(previous)
      }),
      (previous) =>
        Effect.sync(() => {
          active = previous.digest
          activeName = previous.name
        })
    )
  )
