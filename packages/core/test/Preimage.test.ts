import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { createHash } from "node:crypto"
import * as P from "../src/internal/preimage.ts"
import * as Arb from "./arbitraries.ts"

const sha = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex")

// The scratch-buffer hashers must give exactly the hash of the allocating preimage
// encoders (which Chain.test checks against an independent encoder), whatever the
// order and size of the calls: small, large (buffer growth) and one-off huge inputs.
describe("scratch-buffer hashing", () => {
  it("equals SHA-256 of the preimage encoders on random inputs, interleaved", () => {
    const text = fc.oneof(fc.string({ unit: "grapheme", maxLength: 40 }), fc.string({ unit: "binary", maxLength: 3000 }))
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            sequence: fc.nat(),
            prev_hash: text,
            timestamp_secs: fc.nat(),
            tool_name: text,
            server_id: text,
            agent_id: text,
            bytes_read: fc.maxSafeNat(),
            bytes_written: fc.maxSafeNat(),
            delegation_depth: fc.nat(),
            allowed: fc.boolean(),
            kind: text,
            payload: text
          }),
          { minLength: 1, maxLength: 8 }
        ),
        (calls) => {
          for (const c of calls) {
            assert.strictEqual(P.hashTool(c), sha(P.toolPreimage(c)))
            assert.strictEqual(
              P.hashOther(c.sequence, c.prev_hash, c.timestamp_secs, c.kind, c.payload),
              sha(P.otherPreimage(c.sequence, c.prev_hash, c.timestamp_secs, c.kind, c.payload))
            )
            assert.strictEqual(P.hashFold(c.prev_hash, c.payload), sha(P.foldPreimage(c.prev_hash, c.payload)))
          }
        }
      ),
      { numRuns: Arb.runs(200) }
    )
  })

  it("handles payloads past the shared buffer's limit", () => {
    const big = "é".repeat(700_000)
    assert.strictEqual(P.hashOther(1, "x", 2, "message", big), sha(P.otherPreimage(1, "x", 2, "message", big)))
    assert.strictEqual(P.hashFold("", "a"), sha(P.foldPreimage("", "a")))
  })
})
