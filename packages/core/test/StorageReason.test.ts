/**
 * `StorageError`'s reason is one tagged case per kind of failure: a caller tells
 * them apart by `_tag` and fields, and the error's message reads as it did when
 * the reason was a string.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Schema from "effect/Schema"
import {
  CorruptJournal,
  CorruptReason,
  InvalidSessionId,
  SessionLocked,
  StorageError,
  StorageReason,
  UndeclaredError
} from "../src/index.ts"

describe("StorageReason", () => {
  it("each case's message reads as the adapters' messages did", () => {
    const cases: ReadonlyArray<readonly [StorageReason.Reason, string]> = [
      [new StorageReason.Io({ code: "ENOENT", message: "no such file" }), "no such file"],
      [new StorageReason.RefusedPath({ why: "a symbolic link" }), "refused: a symbolic link"],
      [new StorageReason.RefusedPath({ path: "/j/x", why: "a symbolic link" }), "refused /j/x: a symbolic link"],
      [
        new StorageReason.InvalidOption({ option: "tablePrefix", message: "invalid table prefix \"X\"" }),
        "invalid table prefix \"X\""
      ],
      [new StorageReason.RecordTooLarge({ bytes: 10, limit: 4 }), "record of 10 bytes exceeds the bound of 4 bytes"],
      [
        new StorageReason.RecordTooLarge({ bytes: 10, limit: 4, bound: "line bound" }),
        "record of 10 bytes exceeds the line bound of 4 bytes"
      ],
      [
        new StorageReason.FileTooLarge({ bytes: 9, limit: 8, bound: "read bound" }),
        "file is 9 bytes, above the read bound of 8 bytes"
      ],
      [new StorageReason.Truncated({ bytes: 3, expected: 5 }), "ended at 3 bytes, 5 expected"],
      [
        new StorageReason.NotDurable({ why: "the transaction ended before it could commit" }),
        "the transaction ended before it could commit; nothing was stored"
      ],
      [
        new StorageReason.Contended({ sequence: 7, retries: 3 }),
        "another writer kept winning sequence 7 after 3 retries"
      ],
      [new StorageReason.NoFreeName(), "no free name: the directory keeps changing"],
      [
        new StorageReason.NeedsRepair({ problem: "corruption: bad line" }),
        "the stored history stops early (corruption: bad line); repair the session first"
      ],
      [
        new StorageReason.Undecodable({ table: "t", column: "c", detail: "bad" }),
        "a row of t does not decode (column c): bad"
      ]
    ]
    for (const [reason, message] of cases) {
      assert.strictEqual(reason.message, message, reason._tag)
      assert.isTrue(Schema.is(StorageReason.Reason)(reason), reason._tag)
      const error = new StorageError({ operation: "append", path: "/j/s", reason })
      assert.strictEqual(error.message, `storage append failed (/j/s): ${message}`)
      assert.strictEqual(error._tag, "StorageError")
    }
  })

  it("StorageError.io classifies an underlying error by its code and keeps it as the cause", () => {
    const cause = Object.assign(new Error("ENOSPC: no space left on device, write"), { code: "ENOSPC" })
    const error = StorageError.io("write", cause, "/j/s/seg")
    assert.deepStrictEqual([error.reason._tag, error.reason._tag === "Io" ? error.reason.code : undefined], [
      "Io",
      "ENOSPC"
    ])
    assert.strictEqual(error.cause, cause)
    assert.strictEqual(error.message, "storage write failed (/j/s/seg): ENOSPC: no space left on device, write")
    const plain = StorageError.io("connect", "refused")
    assert.strictEqual(plain.message, "storage connect failed: refused")
    assert.isFalse("code" in plain.reason)
  })

  it("an error its operation does not declare is the StorageError's reason itself", () => {
    const carried = [
      new InvalidSessionId({ id: "a/b" }),
      new SessionLocked({ id: "s", holder: "pid 7 on h" }),
      new CorruptJournal({ segment: "/j/s/seg", offset: 3, reason: new CorruptReason.LineTooLong({ bound: 8 }) })
    ]
    for (const reason of carried) {
      assert.isTrue(Schema.is(UndeclaredError)(reason), reason._tag)
      assert.isFalse(Schema.is(StorageReason.Reason)(reason), reason._tag)
      const error = new StorageError({ operation: "inspect", reason, cause: reason })
      assert.strictEqual(error.reason._tag, reason._tag)
      assert.strictEqual(error.message, `storage inspect failed: ${reason.message}`)
    }
  })
})
