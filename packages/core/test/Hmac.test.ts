import { assert, describe, it } from "@effect/vitest"
import * as Hmac from "@session-journal/core/Hmac"
import * as fc from "fast-check"
import { createHash, createHmac } from "node:crypto"
import * as Rounds from "../src/internal/sha256Rounds.ts"

const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

describe("Hmac", () => {
  it("computes SHA-256's constants as the written-out rounds hold them", () => {
    assert.deepStrictEqual([...Hmac.K], [...Rounds.K])
    assert.deepStrictEqual(
      [...Hmac.INITIAL],
      [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19].map((x) => x | 0)
    )
  })

  it("SHA-256 of the FIPS 180-2 examples", () => {
    const text = (s: string) => new TextEncoder().encode(s)
    assert.strictEqual(hex(Hmac.sha256(text(""))), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    assert.strictEqual(
      hex(Hmac.sha256(text("abc"))),
      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    )
    assert.strictEqual(
      hex(Hmac.sha256(text("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
      "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
    )
  })

  it("HMAC-SHA-256 of RFC 4231's test cases 1, 2 and 6 (a key longer than a block)", () => {
    const text = (s: string) => new TextEncoder().encode(s)
    assert.strictEqual(
      hex(Hmac.hmacSha256(new Uint8Array(20).fill(0x0b), text("Hi There"))),
      "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
    )
    assert.strictEqual(
      hex(Hmac.hmacSha256(text("Jefe"), text("what do ya want for nothing?"))),
      "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    )
    assert.strictEqual(
      hex(
        Hmac.hmacSha256(
          new Uint8Array(131).fill(0xaa),
          text("Test Using Larger Than Block-Size Key - Hash Key First")
        )
      ),
      "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
    )
  })

  it("gives node:crypto's digests and MACs on random inputs around every padding boundary", () => {
    // fast-check prints the seed and the shrunk input on failure.
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), fc.uint8Array({ maxLength: 150 }), (message, key) => {
        assert.strictEqual(hex(Hmac.sha256(message)), createHash("sha256").update(message).digest("hex"))
        assert.strictEqual(Hmac.toHex(Hmac.sha256(message)), createHash("sha256").update(message).digest("hex"))
        assert.strictEqual(
          hex(Hmac.hmacSha256(key, message)),
          createHmac("sha256", key).update(message).digest("hex")
        )
      }),
      { numRuns: 1000 }
    )
  })

  it("compares bytes: equal only when the lengths and every byte are", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), fc.uint8Array({ maxLength: 40 }), (a, b) => {
        assert.strictEqual(Hmac.equalBytes(a, b), Buffer.from(a).equals(Buffer.from(b)))
        assert.isTrue(Hmac.equalBytes(a, a.slice()))
      })
    )
  })
})
