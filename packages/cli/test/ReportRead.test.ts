/**
 * A page or report shows only what its verification saw: the history read after
 * the verification is checked entry by entry (sequence, link, own hash) up to the
 * state loaded after it, and storage that changed between the reads fails the
 * read with `ChangedWhileRead` instead of showing the changed entries as
 * verified. The change is made between the reads by a storage wrapper on a real
 * journal directory: the verification reads the files, the history comes through
 * the wrapper.
 */
import { assert, it } from "@effect/vitest"
import { type Entry, type JournalState, Persistence, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as ReportModel from "../src/viewer/ReportModel.ts"

const params = (tool_name: string) => ({
  tool_name,
  server_id: "s",
  agent_id: "a",
  bytes_read: 1,
  bytes_written: 0,
  delegation_depth: 0,
  allowed: true
})

// A journal of 6 entries, then the overview read through storage whose history is `change`d.
const overviewThrough = (
  change: <E>(history: Stream.Stream<Entry.Entry, E>) => Stream.Stream<Entry.Entry, E>,
  options?: { readonly caps?: JournalState.Caps; readonly retention?: boolean }
) =>
  Effect.gen(function*() {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-report-read-"))
    const retention = options?.retention === true
    const real = yield* NodePersistence.make({ root: dir, removeCheckpointedSegments: retention })
    const writer = yield* Effect.provideService(
      SessionJournal.make({ caps: options?.caps, checkpointMinBytes: 0 }),
      Persistence.Persistence,
      real
    )
    // Every append checkpoints (with retention, removing the segments it covers).
    for (let i = 0; i < 6; i++) yield* writer.record("r", params(`t${i}`))
    yield* writer.close("r")
    const changed = Persistence.Persistence.of({ ...real, history: (id, o) => change(real.history(id, o)) })
    const reader = yield* Effect.provideService(SessionJournal.make(), Persistence.Persistence, changed)
    return yield* ReportModel.overview("r", { dir, postgres: undefined, removeCheckpointedSegments: retention }).pipe(
      Effect.provideService(SessionJournal.SessionJournal, reader),
      Effect.provideService(Persistence.Persistence, changed),
      Effect.result,
      Effect.ensuring(Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
    )
  }).pipe(Effect.scoped)

it.effect("an entry edited after the verification (its hash kept) fails the read at it", () =>
  Effect.gen(function*() {
    const r = yield* overviewThrough(
      Stream.map((e: Entry.Entry) => e.sequence === 3 ? { ...e, timestamp_secs: e.timestamp_secs + 1 } : e)
    )
    assert.isTrue(r._tag === "Failure")
    if (r._tag === "Failure") assert.include(r.failure, { _tag: "ChangedWhileRead", sequence: 3, what: "entry_hash" })
  }))

it.effect("a history cut after the verification fails the read at the entry the state ended with", () =>
  Effect.gen(function*() {
    const r = yield* overviewThrough(Stream.filter((e: Entry.Entry) => e.sequence < 4))
    assert.isTrue(r._tag === "Failure")
    if (r._tag === "Failure") assert.include(r.failure, { _tag: "ChangedWhileRead", sequence: 5, what: "confirmed" })
  }))

it.effect("the history as verified reads as before", () =>
  Effect.gen(function*() {
    const r = yield* overviewThrough((s) => s)
    assert.isTrue(r._tag === "Success")
    if (r._tag === "Success") {
      assert.strictEqual(r.success.last, 5)
      assert.strictEqual(r.success.summary.entries, 6)
    }
  }))

it.effect("a session whose checkpointed segments were removed (retention) reads from its oldest kept entry", () =>
  Effect.gen(function*() {
    const r = yield* overviewThrough((s) => s, { retention: true })
    assert.isTrue(r._tag === "Success", r._tag === "Failure" ? String(r.failure) : "")
    if (r._tag === "Success") {
      assert.isTrue(r.success.verify?.ok)
      assert.isAbove(r.success.first!, 0)
      assert.strictEqual(r.success.last, 5)
    }
  }))

it.effect("with retention too, a history cut after the verification fails the read", () =>
  Effect.gen(function*() {
    const r = yield* overviewThrough(Stream.filter((e: Entry.Entry) => e.sequence < 5), { retention: true })
    assert.isTrue(r._tag === "Failure")
    if (r._tag === "Failure") assert.include(r.failure, { _tag: "ChangedWhileRead", sequence: 5 })
  }))

it.effect("a session whose entries do not link (entry_cap 0) cut after the verification fails the read", () =>
  Effect.gen(function*() {
    const r = yield* overviewThrough(Stream.filter((e: Entry.Entry) => e.sequence < 4), { caps: { entry_cap: 0 } })
    assert.isTrue(r._tag === "Failure")
    if (r._tag === "Failure") assert.include(r.failure, { _tag: "ChangedWhileRead", sequence: 5, what: "sequence" })
  }))

it.effect("a session whose entries do not link (entry_cap 0) reads as verified", () =>
  Effect.gen(function*() {
    const r = yield* overviewThrough((s) => s, { caps: { entry_cap: 0 } })
    assert.isTrue(r._tag === "Success")
    if (r._tag === "Success") assert.strictEqual(r.success.last, 5)
  }))
