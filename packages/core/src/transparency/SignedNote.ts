/**
 * Signed notes (C2SP `signed-note`) with Ed25519 (docs/DESIGN.md §14): text signed by one
 * or more keys, each signature a line `— <key name> base64(key ID ‖ signature)` after a
 * blank line. Keys are written as Go's `golang.org/x/mod/sumdb/note` writes them: a
 * signer key `PRIVATE+KEY+<name>+<hex key ID>+base64(0x01 ‖ 32-byte seed)`, a verifier
 * key `<name>+<hex key ID>+base64(type ‖ 32-byte public key)`, the key ID being the
 * first four bytes of `SHA-256(name ‖ 0x0A ‖ type ‖ public key)`.
 *
 * Two signature types are understood: `0x01`, Ed25519 over the note text, and `0x04`,
 * the Ed25519 cosignature of C2SP `tlog-cosignature` (a big-endian `u64` timestamp and
 * an Ed25519 signature over `cosignature/v1\ntime <timestamp>\n` ‖ the note text), which
 * witnesses add to a checkpoint. Opening a note follows the specification: signatures
 * by unknown keys are ignored (and reported), a signature by a known key that does not
 * verify rejects the note, and a note no known key verified is rejected.
 *
 * Pure: Ed25519 is `@noble/curves`', the key ID's SHA-256 the installed `Sha256`.
 *
 * @since 0.1.0
 */
import { ed25519 } from "@noble/curves/ed25519.js"
import { utf8ToBytes } from "@noble/hashes/utils.js"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Base64 from "../internal/base64.ts"
import * as Sha256 from "../Sha256.ts"

/**
 * Signature type of Ed25519 note signatures.
 *
 * @since 0.1.0
 */
export const ED25519 = 0x01

/**
 * Signature type of timestamped Ed25519 checkpoint cosignatures (`tlog-cosignature`).
 *
 * @since 0.1.0
 */
export const COSIGNATURE_V1 = 0x04

/**
 * The signature types this module signs and verifies.
 *
 * @since 0.1.0
 */
export type SignatureType = typeof ED25519 | typeof COSIGNATURE_V1

/**
 * A verifier key: who signs (`name`), the key ID signatures carry, the signature type
 * and the 32-byte Ed25519 public key.
 *
 * @since 0.1.0
 */
export interface Verifier {
  readonly name: string
  readonly keyId: number
  readonly type: SignatureType
  readonly publicKey: Uint8Array
}

/**
 * A signer key: its verifier and the 32-byte Ed25519 seed (RFC 8032's private key).
 *
 * @since 0.1.0
 */
export interface Signer {
  readonly verifier: Verifier
  readonly seed: Uint8Array
}

/**
 * A key text that is not a key: `kind` says which kind was expected.
 *
 * @since 0.1.0
 */
export class InvalidKey extends Schema.TaggedError<InvalidKey>()("InvalidKey", {
  kind: Schema.Literals(["signer", "verifier", "name"]),
  reason: Schema.String
}) {
  override get message(): string {
    return `invalid ${this.kind === "name" ? "key name" : `${this.kind} key`}: ${this.reason}`
  }
}

/**
 * Why a note was not accepted: `malformed` (not a signed note), `unverified` (no known
 * key signed it), `bad_signature` (a known key's signature does not verify).
 *
 * @since 0.1.0
 */
export class NoteRejected extends Schema.TaggedError<NoteRejected>()("NoteRejected", {
  reason: Schema.Literals(["malformed", "unverified", "bad_signature"]),
  detail: Schema.String
}) {
  override get message(): string {
    const what = this.reason === "malformed"
      ? "is not a signed note"
      : this.reason === "unverified"
      ? "is signed by no key it is checked with"
      : "has a signature that does not verify"
    return `the note ${what}: ${this.detail}`
  }
}

/**
 * A valid key name: non-empty, no Unicode space, no `+` (and no control character).
 *
 * @since 0.1.0
 */
export const validName = (name: string): Result.Result<string, InvalidKey> => {
  if (name.length === 0) return Result.fail(new InvalidKey({ kind: "name", reason: "it is empty" }))
  // eslint-disable-next-line no-control-regex
  if (/[\s+\u0000-\u001f\u007f]/u.test(name)) {
    return Result.fail(
      new InvalidKey({ kind: "name", reason: `${JSON.stringify(name)} has a space, a "+" or a control character` })
    )
  }
  return Result.succeed(name)
}

/**
 * The key ID: the first four bytes, big-endian, of `SHA-256(name ‖ 0x0A ‖ type ‖ key)`.
 *
 * @since 0.1.0
 */
export const keyId = (name: string, type: SignatureType, publicKey: Uint8Array): number => {
  const n = utf8ToBytes(name)
  const input = new Uint8Array(n.length + 2 + publicKey.length)
  input.set(n, 0)
  input[n.length] = 0x0a
  input[n.length + 1] = type
  input.set(publicKey, n.length + 2)
  return parseInt(Sha256.hex(input).slice(0, 8), 16)
}

const hex8 = (n: number): string => n.toString(16).padStart(8, "0")

/**
 * The verifier of a public key under `name` for signature `type`.
 *
 * @since 0.1.0
 */
export const verifier = (name: string, publicKey: Uint8Array, type: SignatureType = ED25519): Verifier => ({
  name,
  keyId: keyId(name, type, publicKey),
  type,
  publicKey
})

/**
 * The signer of a 32-byte seed under `name` (`type` `COSIGNATURE_V1` for a witness).
 * Draw the seed from a secure random source: `ed25519.utils.randomSecretKey()` or
 * `crypto.getRandomValues`.
 *
 * @since 0.1.0
 */
export const signerFromSeed = (
  name: string,
  seed: Uint8Array,
  type: SignatureType = ED25519
): Result.Result<Signer, InvalidKey> =>
  Result.flatMap(validName(name), (valid) => {
    if (seed.length !== 32) {
      return Result.fail(new InvalidKey({ kind: "signer", reason: "an Ed25519 seed is 32 bytes" }))
    }
    return Result.succeed({ verifier: verifier(valid, ed25519.getPublicKey(seed), type), seed: seed.slice() })
  })

/**
 * A new signer with a random seed (`crypto.getRandomValues`, through `@noble/curves`).
 *
 * @since 0.1.0
 */
export const generate = (name: string, type: SignatureType = ED25519): Result.Result<Signer, InvalidKey> =>
  signerFromSeed(name, ed25519.utils.randomSecretKey(), type)

const withType = (type: SignatureType, key: Uint8Array): Uint8Array => {
  const out = new Uint8Array(1 + key.length)
  out[0] = type
  out.set(key, 1)
  return out
}

/**
 * The verifier key text, `<name>+<hex key ID>+base64(type ‖ public key)`.
 *
 * @since 0.1.0
 */
export const encodeVerifier = (v: Verifier): string =>
  `${v.name}+${hex8(v.keyId)}+${Base64.encode(withType(v.type, v.publicKey))}`

/**
 * The signer key text, `PRIVATE+KEY+<name>+<hex key ID>+base64(type ‖ seed)`. It is the
 * secret: keep it in a file only its owner reads.
 *
 * @since 0.1.0
 */
export const encodeSigner = (s: Signer): string =>
  `PRIVATE+KEY+${s.verifier.name}+${hex8(s.verifier.keyId)}+${Base64.encode(withType(s.verifier.type, s.seed))}`

// name+hash+base64, with the key ID recomputed and compared.
const parseParts = (
  kind: "signer" | "verifier",
  text: string
): Result.Result<{ name: string; id: number; type: SignatureType; key: Uint8Array }, InvalidKey> => {
  const bad = (reason: string) => Result.fail(new InvalidKey({ kind, reason }))
  // The name and the key ID have no "+"; the base64 key may.
  const first = text.indexOf("+")
  const second = first < 0 ? -1 : text.indexOf("+", first + 1)
  if (second < 0) return bad("expected <name>+<key ID>+<key>")
  const name = text.slice(0, first)
  const id = text.slice(first + 1, second)
  const b64 = text.slice(second + 1)
  const valid = validName(name)
  if (Result.isFailure(valid)) return bad(valid.failure.reason)
  if (!/^[0-9a-f]{8}$/.test(id)) return bad("the key ID is not 8 lowercase hex digits")
  const bytes = Base64.decode(b64)
  if (bytes === undefined) return bad("the key is not base64")
  if (bytes.length !== 33) return bad(`the key is ${bytes.length} bytes, an Ed25519 key with its type is 33`)
  const type = bytes[0]
  if (type !== ED25519 && type !== COSIGNATURE_V1) {
    return bad(`unknown signature type 0x${type!.toString(16).padStart(2, "0")}`)
  }
  return Result.succeed({ name, id: parseInt(id, 16), type, key: bytes.slice(1) })
}

/**
 * Reads a verifier key text, checking its key ID and that the key is a point of the curve.
 *
 * @since 0.1.0
 */
export const parseVerifier = (text: string): Result.Result<Verifier, InvalidKey> =>
  Result.flatMap(parseParts("verifier", text.trim()), ({ id, key, name, type }) => {
    const bad = (reason: string) => Result.fail(new InvalidKey({ kind: "verifier", reason }))
    if (!ed25519.utils.isValidPublicKey(key, false)) return bad("the key is not an Ed25519 public key")
    const v = verifier(name, key, type)
    if (v.keyId !== id) return bad(`the key ID ${hex8(id)} is not the key's (${hex8(v.keyId)})`)
    return Result.succeed(v)
  })

/**
 * Reads a signer key text, checking its key ID against the public key its seed gives.
 *
 * @since 0.1.0
 */
export const parseSigner = (text: string): Result.Result<Signer, InvalidKey> => {
  const t = text.trim()
  if (!t.startsWith("PRIVATE+KEY+")) {
    return Result.fail(new InvalidKey({ kind: "signer", reason: "it does not start with PRIVATE+KEY+" }))
  }
  return Result.flatMap(
    parseParts("signer", t.slice("PRIVATE+KEY+".length)),
    ({ id, key, name, type }) =>
      Result.flatMap(signerFromSeed(name, key, type), (s) =>
        s.verifier.keyId === id
          ? Result.succeed(s)
          : Result.fail(
            new InvalidKey({
              kind: "signer",
              reason: `the key ID ${hex8(id)} is not the key's (${hex8(s.verifier.keyId)})`
            })
          ))
  )
}

// ---------------------------------------------------------------------------
// Notes

/**
 * One signature line of a note: the key name, the key ID and the signature bytes after it.
 *
 * @since 0.1.0
 */
export interface Signature {
  readonly name: string
  readonly keyId: number
  readonly signature: Uint8Array
}

/**
 * A note taken apart: its text (ending in a newline) and its signatures, in order.
 *
 * @since 0.1.0
 */
export interface Note {
  readonly text: string
  readonly signatures: ReadonlyArray<Signature>
}

/**
 * At most this many signatures are read from a note (the specification asks for at
 * least 16), and a note is at most `MAX_NOTE_BYTES`.
 *
 * @since 0.1.0
 */
export const MAX_SIGNATURES = 100

/**
 * The largest note read, in UTF-8 bytes.
 *
 * @since 0.1.0
 */
export const MAX_NOTE_BYTES = 1 << 20

const EM_DASH = "\u2014"

// eslint-disable-next-line no-control-regex
const hasControl = (s: string): boolean => /[\u0000-\u0009\u000b-\u001f]/.test(s)

/**
 * Whether `text` can be the text of a note: non-empty, ending in a newline, without
 * control characters other than newlines.
 *
 * @since 0.1.0
 */
export const validText = (text: string): Result.Result<string, NoteRejected> => {
  if (!text.endsWith("\n")) {
    return Result.fail(new NoteRejected({ reason: "malformed", detail: "its text does not end with a newline" }))
  }
  if (hasControl(text)) {
    return Result.fail(new NoteRejected({ reason: "malformed", detail: "its text has a control character" }))
  }
  if (utf8ToBytes(text).length > MAX_NOTE_BYTES) {
    return Result.fail(new NoteRejected({ reason: "malformed", detail: "it is too long" }))
  }
  return Result.succeed(text)
}

const signatureLine = (name: string, id: number, signature: Uint8Array): string => {
  const bytes = new Uint8Array(4 + signature.length)
  new DataView(bytes.buffer).setUint32(0, id)
  bytes.set(signature, 4)
  return `${EM_DASH} ${name} ${Base64.encode(bytes)}\n`
}

const cosignedMessage = (timestamp: bigint, text: string): Uint8Array =>
  utf8ToBytes(`cosignature/v1\ntime ${timestamp}\n${text}`)

/**
 * One signature line by `signer` over `text` (`— name base64(key ID ‖ signature)\n`).
 * A cosigner (type `COSIGNATURE_V1`) signs as of `timestamp` (POSIX seconds; required).
 *
 * @since 0.1.0
 */
export const signatureFor = (signer: Signer, text: string, timestamp?: bigint): string => {
  const v = signer.verifier
  if (v.type === ED25519) return signatureLine(v.name, v.keyId, ed25519.sign(utf8ToBytes(text), signer.seed))
  const ts = timestamp ?? 0n
  const bytes = new Uint8Array(8 + 64)
  new DataView(bytes.buffer).setBigUint64(0, ts)
  bytes.set(ed25519.sign(cosignedMessage(ts, text), signer.seed), 8)
  return signatureLine(v.name, v.keyId, bytes)
}

/**
 * The signed note of `text` by `signers`, in order. Cosigners sign as of
 * `options.timestamp` (POSIX seconds, 0 when not given).
 *
 * @since 0.1.0
 */
export const sign = (
  text: string,
  signers: ReadonlyArray<Signer>,
  options?: { readonly timestamp?: bigint | undefined }
): Result.Result<string, NoteRejected> =>
  Result.map(validText(text), (t) => `${t}\n${signers.map((s) => signatureFor(s, t, options?.timestamp)).join("")}`)

/**
 * Takes a note apart without checking any signature: the text is everything up to the
 * last blank line, every line after it must be a signature line.
 *
 * @since 0.1.0
 */
export const parse = (note: string): Result.Result<Note, NoteRejected> => {
  const bad = (detail: string) => Result.fail(new NoteRejected({ reason: "malformed", detail }))
  if (utf8ToBytes(note).length > MAX_NOTE_BYTES) return bad("it is too long")
  if (hasControl(note)) return bad("it has a control character")
  if (note.includes("\ufffd")) return bad("it is not valid UTF-8")
  const split = note.lastIndexOf("\n\n")
  if (split < 0) return bad("it has no blank line before its signatures")
  const text = note.slice(0, split + 1)
  const block = note.slice(split + 2)
  if (block.length === 0 || !block.endsWith("\n")) return bad("its signature lines do not end with a newline")
  const lines = block.slice(0, -1).split("\n")
  if (lines.length > MAX_SIGNATURES) return bad(`it has more than ${MAX_SIGNATURES} signatures`)
  const signatures: Array<Signature> = []
  for (const line of lines) {
    const m = /^\u2014 (\S+) (\S+)$/u.exec(line)
    if (m === null) return bad(`${JSON.stringify(line.slice(0, 80))} is not a signature line`)
    const name = m[1]!
    if (Result.isFailure(validName(name))) return bad(`${JSON.stringify(name)} is not a key name`)
    const bytes = Base64.decode(m[2]!)
    if (bytes === undefined || bytes.length < 5) {
      return bad(`the signature of ${name} is not base64 of a key ID and a signature`)
    }
    signatures.push({ name, keyId: new DataView(bytes.buffer).getUint32(0), signature: bytes.slice(4) })
  }
  return Result.succeed({ text, signatures })
}

/**
 * A signature that verified: whose, and for a cosignature the time it states.
 *
 * @since 0.1.0
 */
export interface Verified {
  readonly verifier: Verifier
  /** POSIX seconds a cosignature states; `null` for a plain signature. */
  readonly timestamp: bigint | null
}

/**
 * An opened note: its text, the signatures that verified (at least one), and the
 * signatures by keys it was not checked with, which say nothing.
 *
 * @since 0.1.0
 */
export interface Opened {
  readonly text: string
  readonly verified: ReadonlyArray<Verified>
  readonly unknown: ReadonlyArray<Signature>
}

const check = (v: Verifier, sig: Signature, text: string): Verified | undefined => {
  if (v.type === ED25519) {
    if (sig.signature.length !== 64) return undefined
    return ed25519.verify(sig.signature, utf8ToBytes(text), v.publicKey, { zip215: false })
      ? { verifier: v, timestamp: null }
      : undefined
  }
  if (sig.signature.length !== 72) return undefined
  const ts = new DataView(sig.signature.buffer, sig.signature.byteOffset).getBigUint64(0)
  if (ts > 2n ** 63n - 1n) return undefined
  return ed25519.verify(sig.signature.slice(8), cosignedMessage(ts, text), v.publicKey, { zip215: false })
    ? { verifier: v, timestamp: ts }
    : undefined
}

/**
 * Opens a note with the keys it is checked with: every signature by a known key (name
 * and key ID) must verify, at least one must, and the others are listed as unknown.
 *
 * @since 0.1.0
 */
export const open = (note: string, verifiers: ReadonlyArray<Verifier>): Result.Result<Opened, NoteRejected> =>
  Result.flatMap(parse(note), ({ signatures, text }) => {
    const verified: Array<Verified> = []
    const unknown: Array<Signature> = []
    for (const sig of signatures) {
      const v = verifiers.find((k) => k.name === sig.name && k.keyId === sig.keyId)
      if (v === undefined) {
        unknown.push(sig)
        continue
      }
      const ok = check(v, sig, text)
      if (ok === undefined) {
        return Result.fail(
          new NoteRejected({ reason: "bad_signature", detail: `the signature of ${sig.name} (key ${hex8(sig.keyId)})` })
        )
      }
      verified.push(ok)
    }
    if (verified.length === 0) {
      const names = signatures.map((s) => `${s.name} (key ${hex8(s.keyId)})`).join(", ")
      return Result.fail(new NoteRejected({ reason: "unverified", detail: `it is signed by ${names}` }))
    }
    return Result.succeed({ text, verified, unknown })
  })

/**
 * The key ID as the 8 lowercase hex digits key texts use.
 *
 * @since 0.1.0
 */
export const keyIdHex = hex8
