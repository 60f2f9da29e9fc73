import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { Entry, Guard, JournalState, Persistence, SessionJournal } from "../src/index.ts"

const params = (tool_name: string, extra?: Partial<Entry.ToolParams>): Entry.ToolParams => ({
  tool_name,
  server_id: "srv",
  agent_id: "agent",
  bytes_read: 10,
  bytes_written: 5,
  delegation_depth: 0,
  ...extra
})

const Live = SessionJournal.layer().pipe(Layer.provideMerge(Persistence.layerMemory()))

layer(Live)("SessionJournal on memory", (it) => {
  it.effect("records, snapshots and verifies", () =>
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      const a = yield* j.record("basic", params("read_file"))
      const b = yield* j.append("basic", "message", { role: "user", content: "hi" })
      assert.strictEqual(a.sequence, 0)
      assert.strictEqual(b.sequence, 1)
      assert.strictEqual(b.prev_hash, a.entry_hash)
      const snap = yield* j.snapshot("basic")
      assert.strictEqual(snap.entry_count, 2)
      assert.strictEqual(snap.data_flow.total_invocations, 1n)
      const report = yield* j.verify("basic")
      assert.strictEqual(report.entriesChecked, 2)
      assert.strictEqual(report.head, yield* j.head("basic"))
    }))

  it.effect("1,000 concurrent records get sequences 0..999 once each", () =>
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      const out = yield* Effect.forEach(
        Array.from({ length: 1000 }, (_, i) => i),
        (i) => j.record("concurrent", params(`t${i % 7}`, { bytes_read: i })),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(out.map((e) => e.sequence).sort((x, y) => x - y), Array.from({ length: 1000 }, (_, i) => i))
      const snap = yield* j.snapshot("concurrent")
      assert.strictEqual(snap.data_flow.total_invocations, 1000n)
      assert.strictEqual(snap.data_flow.total_bytes_read, BigInt((999 * 1000) / 2))
      yield* j.verify("concurrent")
    }))

  it.effect("decide is atomic: max 3 invocations admits exactly 3 of 20 racing callers", () =>
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      const out = yield* Effect.forEach(
        Array.from({ length: 20 }, (_, i) => i),
        () => j.decide("decide", params("bash"), Guard.maxInvocations(3)),
        { concurrency: "unbounded" }
      )
      assert.strictEqual(out.filter((d) => d.verdict._tag === "Allow").length, 3)
      assert.strictEqual(out.filter((d) => d.entry.allowed).length, 3)
    }))

  it.effect("changes delivers committed entries in order", () =>
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      const stream = yield* j.changes("changes")
      const fiber = yield* stream.pipe(Stream.take(5), Stream.runCollect, Effect.forkChild)
      for (let i = 0; i < 5; i++) yield* j.record("changes", params("grep"))
      const got = yield* Fiber.join(fiber)
      assert.deepStrictEqual(got.map((c) => c._tag === "Entry" ? c.entry.sequence : -1), [0, 1, 2, 3, 4])
    }))

  it.effect("invalid input is a typed error and nothing is stored", () =>
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      const bad = yield* Effect.exit(j.record("invalid", params(" padded")))
      assert.isTrue(Exit.isFailure(bad))
      const badId = yield* Effect.exit(j.record("../x", params("ok")))
      assert.isTrue(Exit.isFailure(badId))
      const missing = yield* Effect.exit(j.snapshot("invalid"))
      assert.isTrue(Exit.isFailure(missing))
      assert.isTrue(Result.isSuccess(Entry.validateSessionId("ok")))
      assert.strictEqual(JournalState.DEFAULT_ENTRY_CAP, 4096)
    }))
})

