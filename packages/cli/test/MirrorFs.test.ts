/**
 * The mirror's reading of one stored entry (`entryHashAt`): damage it meets (a
 * line above the read bound) is a storage failure of the mirror whose reason is
 * the `CorruptJournal` itself, matched by its tag and fields, with the message
 * it always had.
 */
import { assert, describe, it } from "@effect/vitest"
import { CorruptJournal, SessionJournal, StorageError } from "@session-journal/core"
import { Files, NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as path from "node:path"
import { afterAll } from "vitest"
import { entryHashAt } from "../src/internal/mirrorFs.ts"
import { cleanup, tempDir } from "./Run.ts"

afterAll(cleanup)

describe("mirrorFs.entryHashAt", () => {
  it.live("a line above the bound fails with a StorageError whose reason is the CorruptJournal", () =>
    Effect.gen(function*() {
      const root = path.join(tempDir(), "journal")
      yield* Effect.scoped(Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        // Larger than any chunk the reader takes at once.
        yield* journal.append("s", "note", { text: "x".repeat(4 * 1024 * 1024) })
      })).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root })))))
      const dir = path.join(root, "s")
      // Read with the whole bound, the entry is there; with a bound below its line, it is damage.
      assert.match((yield* entryHashAt("mirror: read copy", Files.context(root), dir, 0))!, /^[0-9a-f]{64}$/)
      const error = yield* Effect.flip(
        entryHashAt("mirror: read copy", { ...Files.context(root), maxLineBytes: 1024 * 1024 }, dir, 0)
      )
      assert.instanceOf(error, StorageError)
      assert.strictEqual(error.path, dir)
      const reason = error.reason
      assert.strictEqual(reason._tag, "CorruptJournal")
      if (reason._tag !== "CorruptJournal") return
      assert.instanceOf(reason, CorruptJournal)
      assert.strictEqual(reason.segment, path.join(dir, "00000000000000000000.jsonl"))
      assert.strictEqual(error.cause, reason)
      assert.strictEqual(error.message, `storage mirror: read copy failed (${dir}): ${reason.message}`)
    }))
})
