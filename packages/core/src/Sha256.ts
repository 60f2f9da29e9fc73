/**
 * The SHA-256 every entry hash and every eviction fold goes through. Core computes it
 * with `@noble/hashes` (it runs anywhere Effect runs); a platform package may install a
 * faster implementation for the whole process — the node package installs
 * `node:crypto`'s. An implementation is only installed after it reproduced the digests
 * of `@noble/hashes` on inputs around every padding boundary, so a chain never depends
 * on which one computed it.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { hexToBytes } from "@noble/hashes/utils.js"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"

/**
 * A SHA-256 implementation: the bytes in, the digest out as 64 lowercase hex characters.
 * It must not keep or modify `bytes` (callers reuse the buffer).
 *
 * @since 0.1.0
 */
export type HexDigest = (bytes: Uint8Array) => string

/**
 * `@noble/hashes`' SHA-256, the implementation core starts with.
 *
 * @since 0.1.0
 */
export const noble: HexDigest = (bytes) => hexOf(sha256(bytes))

// Lowercase hex digits' character codes, and the codes of one digest's hex text.
const DIGITS = Array.from("0123456789abcdef", (c) => c.charCodeAt(0))
const codes = new Array<number>(64).fill(0)

// A 32-byte digest as one flat string: `bytesToHex` concatenates 32 two-character pieces
// into a rope, which every reader of the hash (the next entry's preimage, the fold)
// first has to flatten.
const hexOf = (digest: Uint8Array): string => {
  for (let i = 0; i < 32; i++) {
    const b = digest[i]!
    codes[2 * i] = DIGITS[b >> 4]!
    codes[2 * i + 1] = DIGITS[b & 15]!
  }
  return String.fromCharCode.apply(null, codes)
}

// The implementations installed by live layers, oldest first; the newest one hashes.
// Process-wide because the pure code (the chain, the fold) hashes without an Effect
// context to read a service from; which one hashes never changes a digest (each was
// checked against `@noble/hashes` before it was installed), only the speed. A layer
// removes its own installation when it is released, in whatever order layers go.
interface Installed {
  readonly name: string
  readonly digest: HexDigest
}
const installed: Array<Installed> = []
let active: HexDigest = noble
let activeName = "@noble/hashes"

const activate = (): void => {
  const newest = installed.at(-1)
  active = newest?.digest ?? noble
  activeName = newest?.name ?? "@noble/hashes"
}

/**
 * SHA-256 of `bytes` with the installed implementation, as lowercase hex.
 *
 * @since 0.1.0
 */
export const hex = (bytes: Uint8Array): string => active(bytes)

/**
 * SHA-256 of `bytes` with the installed implementation, as 32 bytes (the Merkle tree's
 * hashes are bytes). With `@noble/hashes` installed its digest is taken as it comes,
 * without the round trip through hex.
 *
 * @since 0.1.0
 */
export const digest = (bytes: Uint8Array): Uint8Array => active === noble ? sha256(bytes) : hexToBytes(active(bytes))

/**
 * The name of the installed implementation (`"@noble/hashes"` unless a platform
 * installed another).
 *
 * @since 0.1.0
 */
export const implementation = (): string => activeName

/**
 * An implementation gave a digest different from `@noble/hashes`' on a known input, so
 * it was not installed.
 *
 * @since 0.1.0
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

// Inputs of these lengths (bytes `(i * 31 + length) & 0xff`): around the one- and
// two-block padding boundaries, typical entry and fold preimages, and multi-block
// inputs, with the digests `@noble/hashes` gives for them (precomputed, so a check
// costs only the candidate's own digests; a test recomputes them with `noble`).
const PROBES: ReadonlyArray<readonly [number, string]> = [
  [0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"],
  [1, "4bf5122f344554c53bde2ebb8cd2b7e3d1600ad631c385a5d7cce23c7785459a"],
  [3, "d71caa65d53e400d34d3c867092f40b207b05bea2e06068409ff8fa5c5d3757f"],
  [55, "0c74b286e2c8b409ed0fd89f5a8344aeb274bda5d9bfbe7b8e537cfc6142736d"],
  [56, "8136496fb4867a08f8c0f1afaf000ef4093ecc2d544f4f808ef9d5945ca4c2fa"],
  [57, "861c42dc0dc72b220fc6518be4a00fff6c981e2be9dc70f5cb090f14c3c11c57"],
  [63, "a7c6fa71b10f6f7bd8ce26f79db5693d265b2cde42e61955077e77c8764bc26f"],
  [64, "3ea97ec766b8247739939247b4d4cb362cf13c100deb0cc2ba5391f762023852"],
  [65, "7fc8e770811fb1035a2279b782a7b04024fe6a2229e9bb11a99686d3ca65f4a7"],
  [119, "6cf3e40eee6bd154b923dbbe0b421de7934af82282113dd285bb895e4bb3f8f7"],
  [120, "696e486e83239a511feef5f0b438da322fa51490489668162c6ed9a9c6ad8055"],
  [144, "7ed973df564505b55ce4f564faf38e2d6866819a864400166c6eddbde416310b"],
  [154, "0d1bc9499dfbf352457679a43d83758488f1c309d55a648e6bf810000e1d08bf"],
  [1000, "44a1b8c5e1f8849fc62fcbfadd4f4ab312021e40f8e16b2a4f9307493ca45102"],
  [4099, "cdaf6c46f4764ccb23e893378bec801e8e301e116e41fc18a9e1b9eb7d7eedea"]
]

/**
 * The probe input of `length` bytes that `check` hashes.
 *
 * @since 0.1.0
 */
export const probe = (length: number): Uint8Array => {
  const bytes = new Uint8Array(length)
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + length) & 0xff
  return bytes
}

/**
 * The probe lengths and the digests `@noble/hashes` gives for them.
 *
 * @since 0.1.0
 */
export const probes: ReadonlyArray<readonly [length: number, digest: string]> = PROBES

/**
 * Checks `digest` against `@noble/hashes`' digests of the probe inputs: `undefined`
 * when every digest matched, otherwise the first mismatch.
 *
 * @since 0.1.0
 */
export const check = (name: string, digest: HexDigest): Sha256Mismatch | undefined => {
  for (const [length, expected] of PROBES) {
    const bytes = probe(length)
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
 * Installs `digest` for the whole process while the layer is alive: the newest
 * live layer's implementation hashes, and when none is left, `@noble/hashes` again. Fails with `Sha256Mismatch`, leaving
 * the installed implementation alone, unless `digest` reproduces `@noble/hashes`.
 *
 * @since 0.1.0
 */
export const layer = (name: string, digest: HexDigest): Layer.Layer<never, Sha256Mismatch> =>
  Layer.effectDiscard(
    Effect.acquireRelease(
      Effect.suspend(() => {
        const mismatch = check(name, digest)
        if (mismatch !== undefined) return Effect.fail(mismatch)
        const own: Installed = { name, digest }
        installed.push(own)
        activate()
        return Effect.succeed(own)
      }),
      (own) =>
        Effect.sync(() => {
          const at = installed.indexOf(own)
          if (at >= 0) installed.splice(at, 1)
          activate()
        })
    )
  )

/**
 * Like `layer`, for an implementation that is only an optimisation: when `digest`
 * does not reproduce `@noble/hashes` the installed implementation stays, and the
 * mismatch is logged as a warning instead of failing the layer. What the node and
 * PostgreSQL adapters install `node:crypto`'s SHA-256 with.
 *
 * @since 0.1.0
 */
export const layerPreferred = (name: string, digest: HexDigest): Layer.Layer<never> =>
  layer(name, digest).pipe(
    Layer.catchTag("Sha256Mismatch", (mismatch) => Layer.effectDiscard(Effect.logWarning(mismatch.message)))
  )

// Implementations for many digests at once, by live layers (`layerBulk`), oldest
// first; each loaded and checked on its first use, then kept (`null`: it did not
// reproduce `@noble/hashes`, or could not be loaded, and is never used).
interface Bulk {
  readonly name: string
  readonly load: () => HexDigest
  loaded: HexDigest | null | undefined
}
const bulks: Array<Bulk> = []

/**
 * The implementation for many digests at once (a Merkle tree rebuilt over
 * thousands of hashes), or null when there is none: the installed one when a
 * platform installed one (`layer`), else the newest bulk one (`layerBulk`),
 * loaded and checked against `@noble/hashes` (`check`) on its first use here and
 * used only when it reproduced it.
 *
 * @since 0.1.0
 */
export const bulk = (): HexDigest | null => {
  if (active !== noble) return active
  const newest = bulks.at(-1)
  if (newest === undefined) return null
  if (newest.loaded === undefined) {
    let loaded: HexDigest | null
    try {
      const candidate = newest.load()
      loaded = check(newest.name, candidate) === undefined ? candidate : null
    } catch {
      loaded = null
    }
    newest.loaded = loaded
  }
  return newest.loaded
}

/**
 * Offers `load`'s implementation for many digests at once only (`bulk`) while the
 * layer is alive: nothing is loaded or checked until a caller has many digests to
 * compute. For a process that hashes a few entries, where loading a faster
 * implementation costs more than it saves, unless a load meets a long session
 * (the node package's hook passes `NodeSha256.layerBulk`).
 *
 * @since 0.1.0
 */
export const layerBulk = (name: string, load: () => HexDigest): Layer.Layer<never> =>
  Layer.effectDiscard(
    Effect.acquireRelease(
      Effect.sync(() => {
        const own: Bulk = { name, load, loaded: undefined }
        bulks.push(own)
        return own
      }),
      (own) =>
        Effect.sync(() => {
          const at = bulks.indexOf(own)
          if (at >= 0) bulks.splice(at, 1)
        })
    )
  )
