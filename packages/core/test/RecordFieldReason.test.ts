/**
 * `InvalidRecordField`'s reason is one tagged case per rule a field breaks: a
 * caller tells them apart by `_tag` and fields, and the error's message reads as
 * it did when the reason was a string.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { Entry, InvalidRecordField, RecordFieldReason } from "../src/index.ts"

describe("RecordFieldReason", () => {
  it("each case's message reads as the validation's messages did", () => {
    const max = Number.MAX_SAFE_INTEGER
    const cases: ReadonlyArray<readonly [RecordFieldReason.Reason, string]> = [
      [new RecordFieldReason.NotString(), "must be a string"],
      [new RecordFieldReason.Blank(), "must not be empty or only whitespace"],
      [new RecordFieldReason.Padded(), "must not have leading or trailing whitespace"],
      [new RecordFieldReason.ControlCharacter(), "must not contain control characters"],
      [new RecordFieldReason.IllFormed(), "must be well-formed Unicode"],
      [new RecordFieldReason.OutOfRange({ max: 7 }), "must be an integer in 0..7"],
      [new RecordFieldReason.OutOfRange({ max, member: "bytes_read" }), `bytes_read must be an integer in 0..${max}`],
      [new RecordFieldReason.NotBoolean(), "must be a boolean"],
      [new RecordFieldReason.NotStringArray(), "must be an array of strings"],
      [new RecordFieldReason.BadKind(), "must match ^[A-Za-z0-9_.:-]{1,64}$ and not be \"tool\""],
      [new RecordFieldReason.Required(), "is required"],
      [new RecordFieldReason.NotJson({ path: "$.a" }), "not canonical JSON at $.a"],
      [new RecordFieldReason.TooDeep({ depth: 9, limit: 8 }), "nesting depth 9 exceeds the limit of 8"],
      [
        new RecordFieldReason.TooLarge({ limit: 10 }),
        "larger than the limit of 10 (one per value plus the length of every string and key)"
      ],
      [new RecordFieldReason.NotObject({ kind: "tool.outcome" }), "of kind tool.outcome must be an object"],
      [new RecordFieldReason.NotCopyable(), "cannot be copied as plain JSON"],
      [
        new RecordFieldReason.ClockOutOfRange({ nowMillis: -5, max }),
        `the clock reads -5 ms since 1970-01-01, outside 0..${max}: no entry can be stored with it, nothing was written`
      ],
      [
        new RecordFieldReason.RecordTooLarge({ bytes: 9, max: 4 }),
        "makes a record of 9 bytes, more than the storage's bound of 4 bytes per record"
      ]
    ]
    for (const [reason, message] of cases) {
      assert.strictEqual(reason.message, message, reason._tag)
      assert.isTrue(Schema.is(RecordFieldReason.Reason)(reason), reason._tag)
      assert.strictEqual(new InvalidRecordField({ field: "f", reason }).message, `invalid f: ${message}`)
    }
  })

  it("the validation names the rule broken by its tag", () => {
    const tool = { tool_name: "t", server_id: "s", agent_id: "a", bytes_read: 0, bytes_written: 0, delegation_depth: 0 }
    const tagOf = <A>(r: Result.Result<A, InvalidRecordField>) =>
      Result.isFailure(r) ? [r.failure.field, r.failure.reason._tag] : null
    assert.deepStrictEqual(tagOf(Entry.validateToolParams({ ...tool, bytes_read: -1 })), ["bytes_read", "OutOfRange"])
    assert.deepStrictEqual(tagOf(Entry.validatePayload("tool", {})), ["kind", "BadKind"])
    assert.deepStrictEqual(tagOf(Entry.validatePayload("note", undefined)), ["payload", "Required"])
    assert.deepStrictEqual(tagOf(Entry.validatePayload("note", [Number.NaN])), ["payload", "NotJson"])
    assert.deepStrictEqual(tagOf(Entry.validatePayload(Entry.OUTCOME_KIND, 1)), ["payload", "NotObject"])
    assert.deepStrictEqual(
      tagOf(Entry.validatePayload(Entry.OUTCOME_KIND, { bytes_written: 1.5 })),
      ["payload", "OutOfRange"]
    )
    assert.strictEqual(Entry.payloadProblem([Number.NaN]), "not canonical JSON at $[0]")
  })
})
