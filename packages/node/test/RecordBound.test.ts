/**
 * The filesystem adapter advertises its line bound to the service: a record whose
 * segment line would be too long fails alone, before it joins a group-committed
 * append, and the records written with it are stored. The adapter itself refuses an
 * append holding a line above the bound, naming that line's size, and takes a batch
 * of lines each within it however long the batch.
 */
import { Entry, JournalState, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { describe, expect, it } from "vitest"
import * as Segment from "../src/internal/segment.ts"
import { adapter, chain, requestOf, run, tempDir, withWriter } from "./helpers.ts"

const MAX_LINE = 4_096

describe("the node line bound reaches the service", () => {
  it("an entry line is the entry's JSON text plus ENTRY_LINE_OVERHEAD bytes", () => {
    for (const entry of chain(JournalState.empty("overhead"), 3).entries) {
      const line = Buffer.byteLength(Segment.entryLine(entry))
      const json = Buffer.byteLength(Entry.toJsonText(Entry.encode(entry)))
      expect(line - json).toBe(Segment.ENTRY_LINE_OVERHEAD)
    }
  })

  it("an oversized record among concurrent good ones fails alone with InvalidRecordField", async () => {
    const root = tempDir("record-bound")
    const layer = SessionJournal.layer().pipe(Layer.provide(adapter({ root, maxLineBytes: MAX_LINE })))
    const program = Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      const id = "bounded"
      yield* j.append(id, "message", { text: "first" })
      const writes = Array.from(
        { length: 9 },
        (_, i) =>
          i === 4
            ? j.append(id, "message", { text: "x".repeat(MAX_LINE) })
            : j.append(id, "message", { text: `ok ${i}` })
      )
      const exits = yield* Effect.all(writes.map(Effect.exit), { concurrency: "unbounded" })
      const failed = exits.flatMap((exit, i) => Exit.isFailure(exit) ? [i] : [])
      expect(failed).toEqual([4])
      const exit = exits[4]!
      const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
      expect(error?._tag).toBe("InvalidRecordField")
      const state = yield* j.state(id)
      expect(state.next_sequence).toBe(9)
      const verified = yield* j.verify(id)
      expect(verified.nextSequence).toBe(9)
    })
    await Effect.runPromise(Effect.scoped(Effect.provide(program, layer)))
  })

  it("the adapter refuses a line above the bound by its size; a long batch of short lines is stored", async () => {
    const root = tempDir("line-bound")
    const empty = JournalState.empty("lines")
    // Each line well within the bound, the batch about four times the bound.
    let state = empty
    const short: Array<Entry.Entry> = []
    for (let i = 0; i < 40; i++) {
      const e = JournalState.nextOther(state, 1, "message", { text: "s".repeat(300), i })
      short.push(e)
      state = JournalState.fold(state, e)
    }
    const long = JournalState.nextOther(state, 1, "message", { text: "\u0001".repeat(MAX_LINE) })
    const exit = await run(
      { root, maxLineBytes: MAX_LINE },
      withWriter("lines", (h) =>
        Effect.gen(function*() {
          yield* h.append(requestOf(empty, short))
          return yield* Effect.exit(h.append(requestOf(state, [long])))
        }))
    )
    const error = Exit.isFailure(exit) ? exit.cause.reasons.find((r) => r._tag === "Fail")?.error : undefined
    expect(error?._tag).toBe("StorageError")
    const reason = (error as { reason?: { _tag: string; bytes: number; limit: number } } | undefined)?.reason
    expect(reason?._tag).toBe("RecordTooLarge")
    expect(reason?.bytes).toBe(Buffer.byteLength(Segment.entryLine(long)))
    expect(reason?.limit).toBe(MAX_LINE)
    const stored = await run({ root, maxLineBytes: MAX_LINE }, withWriter("lines", (h) => h.load))
    expect(stored.state.next_sequence).toBe(40)
  })
})
