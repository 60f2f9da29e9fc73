/**
 * Memory bounded in bytes on the filesystem adapter: a session of chat messages
 * keeps the hashes of its retained entries and a byte-budgeted window of recent
 * ones, and its checkpoint holds the hashes, not the entries (a few tens of bytes
 * per entry, whatever a message weighs); every entry is still read from the
 * segments. A checkpoint as earlier releases wrote it (version 1, the retained
 * entries in full) still loads: the same head, snapshot and verify, and the next
 * checkpoint is of the current version.
 */
import { assert, describe, it } from "@effect/vitest"
import { Checkpoint, JournalState, SessionJournal } from "@session-journal/core"
import * as Legacy from "@session-journal/core/test/legacy"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { NodePersistence } from "../src/index.ts"
import { tempDir } from "./helpers.ts"

const ID = "chat-1"
// A full default ring under STRESS (8 MB of messages), 400 entries otherwise.
const COUNT = process.env["STRESS"] === "1" ? 4096 : 400
const message = (i: number) => ({ role: i % 2 === 0 ? "user" : "assistant", content: `${i} ` + "m".repeat(2000) })

const withJournal = <A, E>(
  root: string,
  program: Effect.Effect<A, E, SessionJournal.SessionJournal>,
  windowBytes?: number
) =>
  Effect.runPromise(
    program.pipe(
      Effect.provide(SessionJournal.layer({ windowBytes }).pipe(Layer.provide(NodePersistence.layer({ root })))),
      Effect.scoped
    ) as Effect.Effect<A, unknown>
  )

const write = (from: number, to: number) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    for (let i = from; i < to; i += 50) {
      yield* journal.writeAll(
        ID,
        Array.from(
          { length: Math.min(50, to - i) },
          (_, k) => ({ _tag: "Other" as const, kind: "message", payload: message(i + k) })
        )
      )
    }
  })

const checkpointOf = (root: string) => {
  const file = path.join(root, ID, "checkpoint.json")
  const text = fs.readFileSync(file, "utf8")
  return { file, bytes: Buffer.byteLength(text), doc: JSON.parse(text) }
}

const snapshotJson = (s: JournalState.Snapshot) => JSON.stringify(JournalState.snapshotToJson(s))

describe("a session of 2 KB chat messages", () => {
  it("keeps hashes and a window within its budget; its checkpoint holds hashes, not 2 KB per entry", async () => {
    const root = tempDir("window")
    const budget = 64 * 1024
    const [state, stored] = await withJournal(
      root,
      Effect.gen(function*() {
        yield* write(0, COUNT)
        const journal = yield* SessionJournal.SessionJournal
        return [yield* journal.state(ID), yield* Stream.runCollect(journal.entries(ID))] as const
      }),
      budget
    )
    assert.strictEqual(stored.length, COUNT)
    assert.strictEqual(JournalState.entryCount(state), COUNT)
    const window = JournalState.entries(state)
    assert.isAbove(window.length, 0)
    assert.isBelow(window.length, COUNT)
    assert.isAtMost(state.window.bytes, budget)
    assert.deepStrictEqual(window, stored.slice(COUNT - window.length))
    assert.deepStrictEqual(JournalState.retainedHashes(state), stored.map((e) => e.entry_hash))
    const legacy = Legacy.foldAll(ID, undefined, stored)
    assert.strictEqual(snapshotJson(JournalState.snapshot(state)), snapshotJson(Legacy.snapshot(legacy)))

    // Over 800 KB of messages were appended: a checkpoint was taken, and it holds the
    // retained hashes (a ring of the entries would be as large as the messages).
    const cp = checkpointOf(root)
    assert.strictEqual(cp.doc.v, Checkpoint.VERSION)
    assert.isUndefined(cp.doc.entries)
    assert.isAtLeast(cp.doc.next_sequence, 128)
    assert.strictEqual(cp.doc.hashes.length, cp.doc.next_sequence)
    assert.isBelow(cp.bytes, 100 * cp.doc.next_sequence + 2048)
    assert.isBelow(cp.bytes, 1_000_000)
    assert.isBelow(
      cp.bytes,
      JSON.stringify(Legacy.encodeV1(Legacy.foldAll(ID, undefined, stored.slice(0, cp.doc.next_sequence)))).length / 10
    )
  })

  it("a checkpoint written by an earlier release (version 1, entries in full) loads, verifies and is replaced by the current version", async () => {
    const root = tempDir("window-v1")
    const stored = await withJournal(
      root,
      Effect.gen(function*() {
        yield* write(0, 300)
        return yield* Stream.runCollect((yield* SessionJournal.SessionJournal).entries(ID))
      })
    )
    // The checkpoint an earlier release would have written at sequence 300.
    const legacy = Legacy.foldAll(ID, undefined, stored)
    const { file } = checkpointOf(root)
    fs.rmSync(file)
    fs.writeFileSync(file, JSON.stringify(Legacy.encodeV1(legacy)), { mode: 0o600 })
    assert.strictEqual(checkpointOf(root).doc.v, 1)

    await withJournal(
      root,
      Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        assert.strictEqual(yield* journal.head(ID), Legacy.head(legacy))
        assert.strictEqual(snapshotJson(yield* journal.snapshot(ID)), snapshotJson(Legacy.snapshot(legacy)))
        const report = yield* journal.verify(ID)
        assert.strictEqual(report.entriesChecked, 300)
        yield* write(300, 600)
        const all = yield* Stream.runCollect(journal.entries(ID))
        assert.strictEqual(yield* journal.head(ID), Legacy.head(Legacy.foldAll(ID, undefined, all)))
      })
    )
    const cp = checkpointOf(root)
    assert.strictEqual(cp.doc.v, Checkpoint.VERSION)
    assert.isAbove(cp.doc.next_sequence, 300)
  })
})
