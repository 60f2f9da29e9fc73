/**
 * `SessionJournal.follow` after an entry the caller holds: it continues that
 * entry when storage still holds it, and fails with `HistoryDiverged` when
 * storage holds another entry there or ends before it, whether the loaded state
 * still retains that entry (at once) or not (at the first record read).
 */
import { assert, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Stream from "effect/Stream"
import type { JournalState } from "../src/index.ts"
import { Persistence, SessionJournal } from "../src/index.ts"
import { toolParams } from "./fixtures.ts"

const sequences = (events: ReadonlyArray<{ readonly _tag: string; readonly entry: { readonly sequence: number } }>) =>
  events.map((e) => e.entry.sequence)

// Two sessions of `n` calls each in one memory storage: "kept" is followed, "other"
// is another chain whose entries stand for what a caller may wrongly hold.
const twoSessions = (n: number, caps?: Partial<JournalState.Caps>) =>
  Effect.gen(function*() {
    const storage = yield* Persistence.makeMemory()
    const journal = yield* Effect.provideService(SessionJournal.make({ caps }), Persistence.Persistence, storage)
    for (let i = 0; i < n; i++) yield* journal.record("kept", toolParams(`k${i}`))
    for (let i = 0; i < n; i++) yield* journal.record("other", toolParams(`o${i}`))
    const kept = yield* journal.entries("kept").pipe(Stream.runCollect)
    const other = yield* journal.entries("other").pipe(Stream.runCollect)
    return { journal, kept, other }
  })

// How a follow of "kept" after (sequence, hash) fails.
const failureAfter = (journal: SessionJournal.SessionJournal["Service"], sequence: number, hash: string) =>
  journal.follow("kept", { after: { sequence, hash } }).pipe(
    Stream.runCollect,
    Effect.flip,
    Effect.timeout("10 seconds")
  )

it.live("follow after an entry held: continues it, or fails where storage holds another chain", () =>
  Effect.gen(function*() {
    const { journal, kept, other } = yield* twoSessions(6)

    // The entry held is stored: the follow delivers what comes after it, and new writes.
    const fiber = yield* journal.follow("kept", { after: { sequence: 3, hash: kept[3]!.entry_hash } }).pipe(
      Stream.take(3),
      Stream.runCollect,
      Effect.forkChild
    )
    yield* journal.record("kept", toolParams("k6"))
    const got = yield* Fiber.join(fiber).pipe(Effect.timeout("10 seconds"))
    assert.deepStrictEqual(sequences(got as never), [4, 5, 6])

    // Another chain's entry at 3: storage holds another, and the follow fails at once.
    const diverged = yield* failureAfter(journal, 3, other[3]!.entry_hash)
    assert.strictEqual(diverged._tag, "HistoryDiverged")
    assert.include(diverged, { sequence: 3, expected: other[3]!.entry_hash, found: kept[3]!.entry_hash })

    // An entry storage does not hold.
    const beyond = yield* failureAfter(journal, 9, other[3]!.entry_hash)
    assert.include(beyond, { _tag: "HistoryDiverged", sequence: 9, found: null })
  }).pipe(Effect.scoped))

it.live("follow after an entry the loaded state no longer retains: another chain's entry fails at the first record", () =>
  Effect.gen(function*() {
    const { journal, other } = yield* twoSessions(8, { entry_cap: 2 })
    const diverged = yield* failureAfter(journal, 2, other[2]!.entry_hash)
    assert.strictEqual(diverged._tag, "HistoryDiverged")
    assert.include(diverged, { sequence: 2, expected: other[2]!.entry_hash })
  }).pipe(Effect.scoped))

it.live("follow after an entry held in a session whose entries do not link (entry_cap 0): another chain's entry fails", () =>
  Effect.gen(function*() {
    const { journal, kept, other } = yield* twoSessions(8, { entry_cap: 0 })
    // No entry links to the one before it, and the state retains none: storage itself
    // must still hold the entry continued, at the first entry, in the middle and at the end.
    for (const sequence of [0, 3, 7]) {
      const diverged = yield* failureAfter(journal, sequence, other[sequence]!.entry_hash)
      assert.include(diverged, {
        _tag: "HistoryDiverged",
        sequence,
        expected: other[sequence]!.entry_hash,
        found: kept[sequence]!.entry_hash
      })
    }
    // The entry held is stored: the follow delivers what comes after it.
    const got = yield* journal.follow("kept", { after: { sequence: 3, hash: kept[3]!.entry_hash } }).pipe(
      Stream.take(4),
      Stream.runCollect,
      Effect.timeout("10 seconds")
    )
    assert.deepStrictEqual(sequences(got as never), [4, 5, 6, 7])
  }).pipe(Effect.scoped))
