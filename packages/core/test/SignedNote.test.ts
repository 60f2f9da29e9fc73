/**
 * Signed notes and checkpoint bodies: known answers from the reference implementation of
 * signed notes (Go's `golang.org/x/mod/sumdb/note`: its documented signer key, verifier
 * key, text and signature; Ed25519 is deterministic, so signing must reproduce the
 * signature byte for byte) and from the C2SP specification's own examples; every
 * mangling of a key text refused; the opening rules (unknown keys ignored, a known key's
 * bad signature rejects the note, no known key rejects it); cosignatures.
 */
import { assert, describe, it } from "@effect/vitest"
import { ed25519 } from "@noble/curves/ed25519.js"
import { SignedNote, TreeHead } from "@session-journal/core"
import * as Result from "effect/Result"
import * as fc from "fast-check"

const SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
const VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
const TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
const NOTE =
  `${TEXT}\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`
const SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
const SPEC_NOTE =
  "This is an example message.\n\n\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"

const get = <A, E>(r: Result.Result<A, E>): A => {
  if (Result.isFailure(r)) throw new Error(String(r.failure))
  return r.success
}

describe("SignedNote: known answers", () => {
  it("the reference signer key gives the reference verifier key and signs the reference note byte for byte", () => {
    const signer = get(SignedNote.parseSigner(SKEY))
    assert.strictEqual(SignedNote.encodeSigner(signer), SKEY)
    assert.strictEqual(SignedNote.encodeVerifier(signer.verifier), VKEY)
    assert.strictEqual(SignedNote.keyIdHex(signer.verifier.keyId), "c74f20a3")
    assert.strictEqual(get(SignedNote.sign(TEXT, [signer])), NOTE)
    const opened = get(SignedNote.open(NOTE, [get(SignedNote.parseVerifier(VKEY))]))
    assert.strictEqual(opened.text, TEXT)
    assert.strictEqual(opened.verified.length, 1)
    assert.strictEqual(opened.verified[0]!.timestamp, null)
  })

  it("the specification's example verifier key opens its example note", () => {
    const v = get(SignedNote.parseVerifier(SPEC_VKEY))
    assert.strictEqual(v.name, "example.com/foo")
    assert.strictEqual(SignedNote.keyIdHex(v.keyId), "530d903a")
    assert.strictEqual(get(SignedNote.open(SPEC_NOTE, [v])).text, "This is an example message.\n")
  })

  it("every part and every one-byte change of a key text is refused", () => {
    const parsers: ReadonlyArray<readonly [string, (text: string) => Result.Result<unknown, unknown>]> = [
      [VKEY, SignedNote.parseVerifier],
      [SKEY, SignedNote.parseSigner]
    ]
    for (const [text, parse] of parsers) {
      for (let i = 0; i <= text.length; i++) {
        for (let j = i + 1; j <= text.length; j++) {
          if (i === 0 && j === text.length) continue
          const part = text.slice(i, j)
          // Only surrounding white space is forgiven, and a key has none to lose.
          assert.isTrue(Result.isFailure(parse(part)), part)
        }
      }
      for (let i = 0; i < text.length; i++) {
        const changed = text.slice(0, i) + String.fromCharCode(text.charCodeAt(i) + 1) + text.slice(i + 1)
        assert.isTrue(Result.isFailure(parse(changed)), changed)
      }
    }
    // A key of the wrong length and an unknown algorithm, each with a key ID made to match.
    assert.isTrue(
      Result.isFailure(
        SignedNote.parseVerifier("PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==")
      )
    )
    assert.isTrue(
      Result.isFailure(SignedNote.parseVerifier("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"))
    )
  })

  it("the key ID is SHA-256(name ‖ 0x0A ‖ type ‖ key)[:4] and changes with the type", () => {
    const v = get(SignedNote.parseVerifier(VKEY))
    const cosigner = SignedNote.verifier(v.name, v.publicKey, SignedNote.COSIGNATURE_V1)
    assert.notStrictEqual(cosigner.keyId, v.keyId)
    assert.strictEqual(SignedNote.keyId("PeterNeumann", SignedNote.ED25519, v.publicKey), 0xc74f20a3)
  })
})

describe("SignedNote: opening", () => {
  const peter = get(SignedNote.parseSigner(SKEY))
  const other = get(SignedNote.signerFromSeed("other.example/key", new Uint8Array(32).fill(7)))

  it("a signature by an unknown key is ignored, and reported", () => {
    const note = get(SignedNote.sign(TEXT, [other, peter]))
    const opened = get(SignedNote.open(note, [peter.verifier]))
    assert.strictEqual(opened.verified.length, 1)
    assert.deepStrictEqual(opened.unknown.map((s) => s.name), ["other.example/key"])
  })

  it("no known key: unverified; a known key's bad signature: bad_signature; an edit: bad_signature", () => {
    const note = get(SignedNote.sign(TEXT, [other]))
    const r1 = SignedNote.open(note, [peter.verifier])
    assert.isTrue(Result.isFailure(r1) && r1.failure.reason === "unverified")
    // Same name and key ID, another key: the signature is checked and fails.
    const impostor = { ...other.verifier, name: peter.verifier.name, keyId: peter.verifier.keyId }
    const sigBytes = TreeHead.fromBase64(NOTE.trim().split(" ").pop()!)!
    sigBytes[10] = sigBytes[10]! ^ 1
    const r2 = SignedNote.open(`${TEXT}\n\u2014 PeterNeumann ${TreeHead.base64(sigBytes)}\n`, [peter.verifier])
    assert.isTrue(Result.isFailure(r2) && r2.failure.reason === "bad_signature")
    const r3 = SignedNote.open(NOTE.replace("answer", "Answer"), [peter.verifier])
    assert.isTrue(Result.isFailure(r3) && r3.failure.reason === "bad_signature")
    const r4 = SignedNote.open(NOTE, [impostor])
    assert.isTrue(Result.isFailure(r4) && r4.failure.reason === "bad_signature")
  })

  it("malformed notes are refused", () => {
    for (
      const bad of [
        TEXT,
        `${TEXT}\n`,
        `${TEXT}\n\u2014 PeterNeumann\n`,
        `${TEXT}\n- PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`,
        NOTE.slice(0, -1),
        NOTE.replace("problem,", "problem,\t"),
        NOTE.replace("x08go", "x08go=")
      ]
    ) {
      const r = SignedNote.open(bad, [peter.verifier])
      assert.isTrue(Result.isFailure(r) && r.failure.reason === "malformed", JSON.stringify(bad))
    }
  })

  it("a cosignature signs cosignature/v1, the time and the text, and opens with its time", () => {
    const witness = get(
      SignedNote.signerFromSeed("witness.example/w1", new Uint8Array(32).fill(9), SignedNote.COSIGNATURE_V1)
    )
    const note = get(SignedNote.sign(TEXT, [peter, witness], { timestamp: 1679315147n }))
    const opened = get(SignedNote.open(note, [peter.verifier, witness.verifier]))
    assert.deepStrictEqual(opened.verified.map((v) => [v.verifier.name, v.timestamp]), [["PeterNeumann", null], [
      "witness.example/w1",
      1679315147n
    ]])
    // Checked independently: key ID ‖ u64 time ‖ Ed25519 over the message of the specification.
    const bytes = TreeHead.fromBase64(note.trim().split("\n").pop()!.split(" ").pop()!)!
    assert.strictEqual(bytes.length, 4 + 8 + 64)
    assert.strictEqual(new DataView(bytes.buffer).getBigUint64(4), 1679315147n)
    const message = new TextEncoder().encode(`cosignature/v1\ntime 1679315147\n${TEXT}`)
    assert.isTrue(ed25519.verify(bytes.slice(12), message, witness.verifier.publicKey))
    // The same key as a plain signer is another key (another ID): it does not open it.
    const plain = SignedNote.verifier(witness.verifier.name, witness.verifier.publicKey)
    assert.isTrue(Result.isFailure(SignedNote.open(get(SignedNote.sign(TEXT, [witness])), [plain])))
  })

  it("round trip: any text signed by any key opens with that key and no other", () => {
    const name = fc.stringMatching(/^[a-z0-9./_-]{1,30}$/)
    const line = fc.string({ unit: fc.constantFrom(..."ab cdé—😀+="), maxLength: 20 })
    fc.assert(
      fc.property(
        name,
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.array(line, { minLength: 1, maxLength: 4 }),
        (n, seed, lines) => {
          const text = lines.map((l) => `${l}\n`).join("")
          const s = get(SignedNote.signerFromSeed(n, seed))
          assert.strictEqual(get(SignedNote.parseSigner(SignedNote.encodeSigner(s))).verifier.keyId, s.verifier.keyId)
          const v = get(SignedNote.parseVerifier(SignedNote.encodeVerifier(s.verifier)))
          const note = get(SignedNote.sign(text, [s]))
          assert.strictEqual(get(SignedNote.open(note, [v])).text, text)
          assert.isTrue(Result.isFailure(SignedNote.open(note, [peter.verifier])))
        }
      ),
      { numRuns: 50 }
    )
  })
})

describe("TreeHead", () => {
  it("reads the specification's checkpoint and writes it back the same", () => {
    const text = "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    const head = get(TreeHead.parse(text))
    assert.strictEqual(head.origin, "example.com/behind-the-sofa")
    assert.strictEqual(head.size, 20852163)
    assert.strictEqual(head.root.length, 32)
    assert.strictEqual(TreeHead.text(head), text)
    assert.strictEqual(TreeHead.text(get(TreeHead.parse(`${text}ext line\n`))), `${text}ext line\n`)
  })

  it("base64 is strict: every byte string round-trips, and no other spelling of it decodes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 70 }), fc.nat(), (bytes, pick) => {
        const text = TreeHead.base64(bytes)
        assert.strictEqual(text, Buffer.from(bytes).toString("base64"))
        assert.deepStrictEqual(TreeHead.fromBase64(text), bytes)
        if (text.length === 0) return
        // A last character with non-zero bits past the data, a missing pad, a stray character.
        const last = text.replace(/=+$/, "")
        const i = last.length - 1
        const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        const other = alphabet[(alphabet.indexOf(last[i]!) + 1 + (pick % 63)) % 64]!
        const respelled = `${last.slice(0, i)}${other}${text.slice(last.length)}`
        const decoded = TreeHead.fromBase64(respelled)
        if (decoded !== undefined) assert.notDeepEqual(decoded, bytes)
        if (text.endsWith("=")) assert.isUndefined(TreeHead.fromBase64(text.slice(0, -1)))
        assert.isUndefined(TreeHead.fromBase64(`${text.slice(0, 1)}*${text.slice(2)}`))
      }),
      { numRuns: 300 }
    )
  })

  it("refuses what is not a checkpoint body", () => {
    const root = "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I="
    for (
      const bad of [
        `o\n1\n${root}`,
        `o\n1\n`,
        `\n1\n${root}\n`,
        `o\n01\n${root}\n`,
        `o\n-1\n${root}\n`,
        `o\n1.0\n${root}\n`,
        `o\n99999999999999999999\n${root}\n`,
        `o\n1\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2=\n`,
        `o\n1\n${root.slice(4)}\n`,
        `o\n1\n${root}\n\n`
      ]
    ) assert.isTrue(Result.isFailure(TreeHead.parse(bad)), JSON.stringify(bad))
  })
})
