/**
 * What an idle follower costs, counted on an instrumented filesystem layer (no
 * timing): it loads the session once, then waits on a watch of the session
 * directory; each safety poll (moved by `TestClock`, the watch seeing nothing) is
 * one lstat of the segment being read and one listing, never a segment opened
 * again. An entry another writer appends wakes it through the watch alone (the
 * test clock stands still) and is read without a listing.
 */
import { assert, describe, it } from "@effect/vitest"
import { type Follow, SessionJournal } from "@session-journal/core"
import { toolParams } from "@session-journal/core/test/fixtures"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as TestClock from "effect/testing/TestClock"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { NodePersistence } from "../src/index.ts"
import { tempDir } from "./helpers.ts"

const made: Array<string> = []
afterAll(() => {
  for (const d of made.splice(0)) fs.rmSync(d, { recursive: true, force: true })
})

const call = (tool_name: string) => toolParams(tool_name, { bytes_written: 1 })

const SEGMENT = /^\d{20}\.jsonl$/

/** The calls the adapter makes on session `id`'s files, counted. */
const counting = (root: string, id: string) => {
  const dir = path.join(root, id)
  const counts = { segmentOpens: 0, listings: 0, segmentLstats: 0 }
  const fsImpl: NodePersistence.Fs = {
    ...NodePersistence.nodeFs,
    open: (p, flags, mode) => {
      if (path.dirname(p) === dir && SEGMENT.test(path.basename(p))) counts.segmentOpens++
      return NodePersistence.nodeFs.open(p, flags, mode)
    },
    readdir: (p) => {
      if (p === dir) counts.listings++
      return NodePersistence.nodeFs.readdir(p)
    },
    lstat: (p) => {
      if (path.dirname(p) === dir && SEGMENT.test(path.basename(p))) counts.segmentLstats++
      return NodePersistence.nodeFs.lstat(p)
    }
  }
  return { counts, fsImpl }
}

const journalAt = (root: string, fsImpl?: NodePersistence.Fs) => {
  const persistence = fsImpl === undefined
    ? NodePersistence.layer({ root })
    : NodePersistence.layer({ root }).pipe(Layer.provide(NodePersistence.layerFs(fsImpl)))
  return SessionJournal.layer().pipe(Layer.provide(persistence))
}

// Waits in real time (the test clock does not move) for `check`.
const realUntil = (check: () => boolean, what: string) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1000 && !check(); i++) {
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
    }
    assert.isTrue(check(), what)
  })

const write = (root: string, id: string, tools: ReadonlyArray<string>) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      for (const t of tools) yield* journal.record(id, call(t))
    }).pipe(Effect.scoped, Effect.provide(journalAt(root)))
  )

describe("an idle follower", () => {
  it.effect(
    "loads once, then for N safety polls makes N listings and opens no segment again; a write wakes it through the watch",
    () =>
      Effect.gen(function*() {
        const root = tempDir("follow-idle")
        made.push(root)
        yield* Effect.promise(() => write(root, "s", ["a", "b", "c", "d"]))
        // What one load costs, to tell a follower that loads once from one that loads twice.
        const load = counting(root, "s")
        yield* Effect.flatMap(SessionJournal.SessionJournal, (journal) => journal.state("s")).pipe(
          Effect.scoped,
          Effect.provide(journalAt(root, load.fsImpl))
        )
        assert.isAtLeast(load.counts.segmentOpens, 1)
        const { counts, fsImpl } = counting(root, "s")
        const events: Array<Follow.Event> = []
        const fiber = yield* Effect.gen(function*() {
          const journal = yield* SessionJournal.SessionJournal
          yield* journal.follow("s", { last: 2 }).pipe(
            Stream.runForEach((e) => Effect.sync(() => void events.push(e)))
          )
        }).pipe(Effect.scoped, Effect.provide(journalAt(root, fsImpl)), Effect.forkChild)
        yield* realUntil(() => events.length === 2, "the last two entries are delivered")
        assert.deepStrictEqual(events.map((e) => e.entry.sequence), [2, 3])
        // Give the follower the real time to reach its wait (reading to the end, one listing there).
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
        // One load, and the reader's one open of the segment: the session is not loaded twice.
        assert.strictEqual(counts.segmentOpens, load.counts.segmentOpens + 1)

        const idle = { ...counts }
        // N safety polls; a period may pass before the follower is back in its wait
        // (its lstat and listing are real I/O), so the periods are counted too.
        const N = 5
        let periods = 0
        while (counts.listings < idle.listings + N && periods < 50) {
          yield* TestClock.adjust(NodePersistence.FOLLOW_SAFETY_POLL)
          periods++
          const before = counts.listings
          for (let i = 0; i < 50 && counts.listings === before; i++) {
            yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
          }
          yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        }
        const polls = counts.listings - idle.listings
        assert.strictEqual(polls, N)
        assert.isAtMost(polls, periods)
        assert.deepStrictEqual(
          { opens: counts.segmentOpens - idle.segmentOpens, lstats: counts.segmentLstats - idle.segmentLstats },
          { opens: 0, lstats: N }
        )

        // Another writer appends; the test clock stands still, so only the watch can wake it.
        const before = { ...counts }
        yield* Effect.promise(() => write(root, "s", ["e"]))
        yield* realUntil(() => events.length === 3, "the new entry is delivered")
        assert.strictEqual(events[2]!.entry.sequence, 4)
        assert.strictEqual(counts.listings - before.listings, 0)
        assert.isAtLeast(counts.segmentOpens - before.segmentOpens, 1)
        yield* Fiber.interrupt(fiber)
      }).pipe(Effect.provide(TestClock.layer())),
    30_000
  )

  it.effect("where the watch misses an event, the safety poll finds the entry", () =>
    Effect.gen(function*() {
      const root = tempDir("follow-safety")
      made.push(root)
      // The session as a writer elsewhere left it: two entries, of which the follower
      // first sees one (the segment cut after it).
      const source = tempDir("follow-safety-source")
      made.push(source)
      yield* Effect.promise(() => write(source, "m", ["a", "b"]))
      fs.cpSync(path.join(source, "m"), path.join(root, "m"), { recursive: true })
      fs.rmSync(path.join(root, "m", "checkpoint.json"), { force: true })
      for (const n of fs.readdirSync(path.join(root, "m"))) if (n === "lock") fs.rmSync(path.join(root, "m", n))
      const segment = fs.readdirSync(path.join(root, "m")).find((n) => SEGMENT.test(n))!
      const full = fs.readFileSync(path.join(source, "m", segment), "latin1")
      const cut = full.indexOf(`{"k":"entry","v":1,"e":{"sequence":1,`)
      assert.isAbove(cut, 0)
      fs.truncateSync(path.join(root, "m", segment), cut)
      const events: Array<Follow.Event> = []
      const fiber = yield* Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        yield* journal.follow("m", 0).pipe(Stream.runForEach((e) => Effect.sync(() => void events.push(e))))
      }).pipe(Effect.scoped, Effect.provide(journalAt(root)), Effect.forkChild)
      yield* realUntil(() => events.length === 1, "the first entry is delivered")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      // An append the watch cannot see: written through a hard link outside the
      // session directory, as a writer on another machine sharing a network
      // filesystem shows up (or not) to a watch.
      const outside = path.join(root, "elsewhere")
      fs.linkSync(path.join(root, "m", segment), outside)
      fs.appendFileSync(outside, full.slice(cut), "latin1")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 200)))
      assert.strictEqual(events.length, 1, "nothing is read before the safety poll")
      yield* TestClock.adjust(NodePersistence.FOLLOW_SAFETY_POLL)
      yield* realUntil(() => events.length === 2, "the safety poll delivers the entry")
      assert.strictEqual(events[1]!.entry.sequence, 1)
      yield* Fiber.interrupt(fiber)
    }).pipe(Effect.provide(TestClock.layer())), 30_000)
})
