/**
 * `CorruptJournal`'s reason is one tagged case per kind of damage: a caller tells
 * them apart by `_tag` and fields, and the error's message reads as it did when
 * the reason was a string.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { CorruptJournal, CorruptReason } from "../src/index.ts"

describe("CorruptReason", () => {
  it("each case's message reads as the adapters' messages did", () => {
    const cases: ReadonlyArray<readonly [CorruptReason.Reason, string]> = [
      [new CorruptReason.Stopped({ reason: "corruption", detail: "bad line" }), "corruption: bad line"],
      [
        new CorruptReason.Stopped({ reason: "gap", detail: "missing 3", advice: "run repair first" }),
        "gap: missing 3 (run repair first)"
      ],
      [new CorruptReason.LineTooLong({ bound: 64 }), "line longer than the bound of 64 bytes"],
      [
        new CorruptReason.Cut({ size: 10, read: 20 }),
        "the segment is 10 bytes, shorter than the 20 already read from it: it was cut"
      ],
      [
        new CorruptReason.OutOfSequence({ expected: 4, found: 6 }),
        "record of sequence 6 where sequence 4 was expected"
      ],
      [
        new CorruptReason.Damaged({ detail: "unparsable line", followedBy: "more data" }),
        "unparsable line, followed by more data"
      ],
      [
        new CorruptReason.SegmentGap({ segment: "seg-9", base: 9, expected: 7 }),
        "segment seg-9 starts at 9, expected 7"
      ],
      [new CorruptReason.InvalidRow({ what: "meta", detail: "not an object" }), "invalid meta: not an object"],
      [new CorruptReason.BrokenChain(), "stored entries do not continue one chain"],
      [
        new CorruptReason.HandedOver({ what: "sequence", expected: "5", sequence: 5, actual: "7" }),
        "a follower expected sequence 5 at sequence 5, storage handed over 7"
      ]
    ]
    for (const [reason, message] of cases) {
      assert.strictEqual(reason.message, message, reason._tag)
      assert.isTrue(Schema.is(CorruptReason.Reason)(reason), reason._tag)
      const error = new CorruptJournal({ segment: "seg", offset: 12, reason })
      assert.strictEqual(error.message, `corrupt journal in seg at offset 12: ${message}`)
    }
  })

  it("a CorruptJournal encodes to JSON and decodes to the same case", () => {
    const codec = Schema.toCodecJson(CorruptJournal)
    const error = new CorruptJournal({
      segment: "seg",
      offset: 3,
      reason: new CorruptReason.OutOfSequence({ expected: 1, found: 2 })
    })
    const back = Schema.decodeUnknownSync(codec)(JSON.parse(JSON.stringify(Schema.encodeSync(codec)(error))))
    assert.strictEqual(back.reason._tag, "OutOfSequence")
    assert.strictEqual(back.message, error.message)
  })

  it("a Stopped case's reason is one of the recovery's stop reasons, not any text", () => {
    const codec = Schema.toCodecJson(CorruptJournal)
    const stopped = new CorruptJournal({
      segment: "seg",
      offset: 0,
      reason: new CorruptReason.Stopped({ reason: "gap", detail: "missing 3" })
    })
    const encoded = JSON.parse(JSON.stringify(Schema.encodeSync(codec)(stopped))) as {
      reason: { reason: string }
    }
    assert.strictEqual(Schema.decodeUnknownSync(codec)(encoded).reason._tag, "Stopped")
    encoded.reason.reason = "whatever"
    assert.isTrue(Result.isFailure(Schema.decodeUnknownResult(codec)(encoded)))
  })
})
