/**
 * Followers on real segment files (`SessionJournal.follow`, `changes` from
 * storage): an entry edited in place ahead of the follower is never delivered; a
 * cut followed by new writes of equal length is reported as history replaced,
 * never delivered as one chain, and so is a cut alone; a legitimate `repair` that
 * set delivered entries aside is delivered as its recovery entry, and the follower
 * goes on (one that set nothing delivered aside is simply the next entry).
 */
import { assert, describe, it } from "@effect/vitest"
import { type Follow, SessionJournal } from "@session-journal/core"
import { toolParams } from "@session-journal/core/test/fixtures"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { NodePersistence } from "../src/index.ts"
import { tempDir } from "./helpers.ts"

const call = (tool_name: string) => toolParams(tool_name, { bytes_written: 1 })

const journalAt = (root: string) =>
  SessionJournal.layer({ changesFrom: "storage" }).pipe(
    Layer.provide(NodePersistence.layer({ root, pollInterval: "20 millis" }))
  )

const segmentOf = (root: string, id: string): string => {
  const name = fs.readdirSync(path.join(root, id)).find((n) => /^\d{20}\.jsonl$/.test(n))
  assert.isDefined(name)
  return path.join(root, id, name!)
}

// Replaces `from` by `to` (same length) in the segment, in place.
const editInPlace = (root: string, id: string, from: string, to: string) => {
  assert.strictEqual(from.length, to.length)
  const file = segmentOf(root, id)
  const text = fs.readFileSync(file, "latin1")
  assert.include(text, from)
  const fd = fs.openSync(file, "r+")
  fs.writeSync(fd, Buffer.from(to, "latin1"), 0, to.length, text.indexOf(from))
  fs.closeSync(fd)
}

// Byte offset of the line of entry `sequence` in the segment.
const offsetOf = (root: string, id: string, sequence: number): number => {
  const text = fs.readFileSync(segmentOf(root, id), "latin1")
  const at = text.indexOf(`{"k":"entry","v":1,"e":{"sequence":${sequence},`)
  assert.isAbove(at, 0)
  return at
}

const sequences = (events: ReadonlyArray<Follow.Event>) =>
  events.map((e) => `${e._tag === "Entry" ? "" : "R"}${e.entry.sequence}`)

const until = (check: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 500 && !check(); i++) yield* Effect.sleep("20 millis")
    assert.isTrue(check(), what)
  })

describe("followers on the filesystem", () => {
  it.live("an entry edited in place ahead of the follower is never delivered: it stops at the entry before", () => {
    const root = tempDir("follow-edit")
    return Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      for (let i = 0; i < 10; i++) yield* journal.record("s", call(`t${i}`))
      // Subscribed at 10; the stream reads nothing until it runs.
      const changes = yield* journal.changes("s")
      for (let i = 10; i < 15; i++) yield* journal.record("s", call(`t${i}`))
      yield* journal.close("s")
      editInPlace(root, "s", "\"tool_name\":\"t12\"", "\"tool_name\":\"x12\"")
      const delivered: Array<string> = []
      const result = yield* changes.pipe(
        Stream.runForEach((c) =>
          Effect.sync(() =>
            void delivered.push(
              c._tag === "Missed"
                ? "missed"
                : c.entry.kind === "tool" && "tool_name" in c.entry
                ? c.entry.tool_name
                : c.entry.kind
            )
          )
        ),
        Effect.timeout("20 seconds"),
        Effect.result
      )
      assert.deepStrictEqual(delivered, ["t10", "t11"])
      assert.strictEqual(result._tag, "Failure")
      if (result._tag === "Failure") {
        assert.strictEqual(result.failure._tag, "IntegrityViolation", String(result.failure))
        if (result.failure._tag === "IntegrityViolation") {
          assert.strictEqual(result.failure.sequence, 12)
          assert.strictEqual(result.failure.what, "entry_hash")
        }
      }
    }).pipe(Effect.scoped, Effect.provide(journalAt(root)))
  }, 30_000)

  it.live("a cut back to entry 80 and 40 new writes of equal length: history replaced, never one chain", () => {
    const root = tempDir("follow-cut")
    return Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const pad = (i: number) => String(i).padStart(2, "0")
      for (let i = 0; i < 100; i++) yield* journal.record("c", call(`old-${pad(i)}`))
      const events: Array<Follow.Event> = []
      const fiber = yield* journal.follow("c", 0).pipe(
        Stream.runForEach((e) => Effect.sync(() => void events.push(e))),
        Effect.result,
        Effect.forkChild
      )
      yield* until(() => events.length === 100, "the follower shows 0..99")
      yield* journal.close("c")
      // Whoever can write the files: the checkpoint goes, the segment is cut at
      // entry 80, and 40 entries as long as the old ones are written after it.
      fs.rmSync(path.join(root, "c", "checkpoint.json"))
      fs.truncateSync(segmentOf(root, "c"), offsetOf(root, "c", 80))
      for (let i = 80; i < 120; i++) yield* journal.record("c", call(`new-${i < 100 ? pad(i) : i}`))
      const result = yield* Fiber.join(fiber).pipe(Effect.timeout("20 seconds"))
      assert.deepStrictEqual(sequences(events), Array.from({ length: 100 }, (_, i) => String(i)))
      for (const e of events) assert.notInclude(JSON.stringify(e.entry), "new-")
      assert.strictEqual(result._tag, "Failure")
      if (result._tag === "Failure") {
        assert.strictEqual(result.failure._tag, "HistoryDiverged", String(result.failure))
        if (result.failure._tag === "HistoryDiverged") {
          assert.strictEqual(result.failure.sequence, 80)
          assert.strictEqual(result.failure.shownTo, 99)
          assert.strictEqual(result.failure.expected, events[80]!.entry.entry_hash)
          const stored = yield* journal.entries("c", { from: 80, limit: 1 }).pipe(Stream.runCollect)
          assert.strictEqual(result.failure.found, stored[0]!.entry_hash)
        }
      }
    }).pipe(Effect.scoped, Effect.provide(journalAt(root)))
  }, 60_000)

  it.live(
    "a legitimate repair: the follower delivers its recovery entry, with the range set aside, and goes on",
    () => {
      const root = tempDir("follow-repair")
      return Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        for (let i = 0; i < 10; i++) yield* journal.record("r", call(`t${i}`))
        const events: Array<Follow.Event> = []
        const fiber = yield* journal.follow("r", 0).pipe(
          Stream.runForEach((e) => Effect.sync(() => void events.push(e))),
          Effect.forkChild
        )
        yield* until(() => events.length === 10, "the follower shows 0..9")
        yield* journal.close("r")
        // Entry 5 is damaged at rest after it was shown; repair sets 5..9 aside.
        editInPlace(root, "r", "\"tool_name\":\"t5\"", "\"tool_name\":\"x5\"")
        const report = yield* NodePersistence.repair({ root }, "r")
        assert.strictEqual(report.entry?.sequence, 5)
        assert.deepStrictEqual(report.lost, { from: 5, to: 9 })
        yield* until(() => events.length === 11, "the follower reports the repair")
        for (let i = 0; i < 3; i++) yield* journal.record("r", call(`after${i}`))
        yield* until(() => events.length === 14, "the follower goes on after it")
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(sequences(events), [
          "0",
          "1",
          "2",
          "3",
          "4",
          "5",
          "6",
          "7",
          "8",
          "9",
          "R5",
          "6",
          "7",
          "8"
        ])
        const recovered = events[10]!
        assert.strictEqual(recovered._tag, "Recovered")
        if (recovered._tag === "Recovered") {
          assert.deepStrictEqual(recovered.replaced, { from: 5, to: 9 })
          assert.strictEqual(recovered.entry.entry_hash, report.entry!.entry_hash)
          assert.strictEqual(recovered.entry.prev_hash, events[4]!.entry.entry_hash)
        }
        assert.deepStrictEqual(events.slice(11).map((e) => "tool_name" in e.entry ? e.entry.tool_name : ""), [
          "after0",
          "after1",
          "after2"
        ])
        assert.strictEqual((yield* journal.verify("r")).nextSequence, 9)
      }).pipe(Effect.scoped, Effect.provide(journalAt(root)))
    },
    60_000
  )

  it.live(
    "a repair that sets aside nothing delivered (a torn tail): its recovery entry is the next entry, and following goes on",
    () => {
      const root = tempDir("follow-torn")
      return Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        for (let i = 0; i < 3; i++) yield* journal.record("t", call(`t${i}`))
        const events: Array<Follow.Event> = []
        const fiber = yield* journal.follow("t", 0).pipe(
          Stream.runForEach((e) => Effect.sync(() => void events.push(e))),
          Effect.forkChild
        )
        yield* until(() => events.length === 3, "the follower shows 0..2")
        yield* journal.close("t")
        fs.appendFileSync(segmentOf(root, "t"), "{\"k\":\"entry\",\"v\":1,\"e\":{\"seq")
        const report = yield* NodePersistence.repair({ root }, "t")
        assert.strictEqual(report.entry?.sequence, 3)
        yield* journal.record("t", call("after"))
        yield* until(() => events.length === 5, "the follower goes on")
        yield* Fiber.interrupt(fiber)
        assert.deepStrictEqual(sequences(events), ["0", "1", "2", "3", "4"])
        assert.strictEqual(events[3]!.entry.kind, "recovery")
      }).pipe(Effect.scoped, Effect.provide(journalAt(root)))
    },
    60_000
  )

  it.live(
    "a cut with nothing written after it: the follower reports the entries shown that storage no longer holds",
    () => {
      const root = tempDir("follow-cut-only")
      return Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        for (let i = 0; i < 10; i++) yield* journal.record("k", call(`t${i}`))
        const events: Array<Follow.Event> = []
        const fiber = yield* journal.follow("k", 0).pipe(
          Stream.runForEach((e) => Effect.sync(() => void events.push(e))),
          Effect.result,
          Effect.forkChild
        )
        yield* until(() => events.length === 10, "the follower shows 0..9")
        yield* journal.close("k")
        fs.rmSync(path.join(root, "k", "checkpoint.json"))
        fs.truncateSync(segmentOf(root, "k"), offsetOf(root, "k", 6))
        const result = yield* Fiber.join(fiber).pipe(Effect.timeout("20 seconds"))
        assert.strictEqual(result._tag, "Failure")
        if (result._tag === "Failure") {
          assert.strictEqual(result.failure._tag, "HistoryDiverged", String(result.failure))
          if (result.failure._tag === "HistoryDiverged") {
            assert.include(result.failure, { sequence: 6, found: null, shownTo: 9 })
            assert.strictEqual(result.failure.expected, events[6]!.entry.entry_hash)
          }
        }
      }).pipe(Effect.scoped, Effect.provide(journalAt(root)))
    },
    60_000
  )
})
