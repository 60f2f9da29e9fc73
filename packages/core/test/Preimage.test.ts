import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import * as P from "../src/internal/preimage.ts"
import * as Arb from "./arbitraries.ts"
import { lp, sha, u32, u64 } from "./reference.ts"

const refTool = (c: P.ToolFields) =>
  Buffer.concat([
    u64(c.sequence),
    lp(c.prev_hash),
    u64(c.timestamp_secs),
    lp(c.tool_name),
    lp(c.server_id),
    lp(c.agent_id),
    u64(c.bytes_read),
    u64(c.bytes_written),
    u32(c.delegation_depth),
    Buffer.from([c.allowed ? 1 : 0])
  ])
const refOther = (sequence: number, prev: string, ts: number, kind: string, payload: string) =>
  Buffer.concat([u64(sequence), lp(prev), u64(ts), u64(2n ** 64n - 1n), lp(kind), lp(payload)])

// The encoders share one scratch buffer that grows on demand and is bypassed for very
// large inputs; whatever the order and size of the calls, every hash and every
// preimage must equal the independent encoding.
describe("preimages in the shared scratch buffer", () => {
  it("equal the independent encoding on random inputs of mixed sizes, interleaved", () => {
    const text = fc.oneof(
      fc.string({ unit: "grapheme", maxLength: 40 }),
      fc.string({ unit: "binary", maxLength: 3000 })
    )
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
            const other = refOther(c.sequence, c.prev_hash, c.timestamp_secs, c.kind, c.payload)
            assert.strictEqual(P.hashTool(c), sha(refTool(c)))
            assert.deepStrictEqual(Buffer.from(P.toolPreimage(c)), refTool(c))
            assert.strictEqual(P.hashOther(c.sequence, c.prev_hash, c.timestamp_secs, c.kind, c.payload), sha(other))
            assert.strictEqual(P.hashFold(c.prev_hash, c.payload), sha(Buffer.concat([lp(c.prev_hash), lp(c.payload)])))
          }
        }
      ),
      { numRuns: Arb.runs(200) }
    )
  })

  it("handles inputs past the shared buffer's limit, and a preimage is a copy", () => {
    const big = "é".repeat(700_000)
    assert.strictEqual(P.hashOther(1, "x", 2, "message", big), sha(refOther(1, "x", 2, "message", big)))
    const first = P.foldPreimage("", "a")
    P.foldPreimage("zz", "yy")
    assert.deepStrictEqual(Buffer.from(first), Buffer.concat([lp(""), lp("a")]))
  })

  it("strings that start as ASCII and go on with other characters encode as UTF-8 does", () => {
    const cases = [
      "read_file",
      "read_fileé",
      "a".repeat(255) + "€",
      "a".repeat(256) + "€",
      "a".repeat(257),
      "abc\u{1F600}def",
      "abc\uD800def",
      "\uDC00",
      ""
    ]
    for (const s of cases) {
      assert.strictEqual(P.hashFold(s, "x" + s), sha(Buffer.concat([lp(s), lp("x" + s)])), JSON.stringify(s))
    }
  })
})
