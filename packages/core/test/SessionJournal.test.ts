/**
 * The SessionJournal service on the in-memory adapter: concurrency and group
 * commit, failure semantics (a storage failure drops the state, the next write
 * reloads), races with another writer, guards through `decide`, `changes`,
 * `awaitSequence`, typed errors, metadata, close and delete.
 */
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { TestClock } from "effect/testing"
import { Entry, Guard, JournalState, Persistence, SessionJournal } from "../src/index.ts"
import { toolParams } from "./fixtures.ts"
import * as IP from "./InstrumentedPersistence.ts"

const STRESS = process.env["STRESS"] === "1"

const params = (tool_name: string, extra?: Partial<Entry.ToolParams>): Entry.ToolParams =>
  toolParams(tool_name, { bytes_read: 10, bytes_written: 5, ...extra })

const range = (n: number) => Array.from({ length: n }, (_, i) => i)

const Journal = SessionJournal.SessionJournal

/** Every stored entry of a session, from storage. */
const stored = (id: string) => Journal.use((j) => Stream.runCollect(j.entries(id)))

/** The state that folding the whole stored history gives, with the session's caps. */
const refold = (id: string, caps?: JournalState.Caps) =>
  Effect.map(stored(id), (all) => JournalState.foldAll(JournalState.empty(id, caps), all))

const snapshotJson = (s: JournalState.Snapshot) => JSON.stringify(JournalState.snapshotToJson(s))

/**
 * Storage and the service agree: sequences are 0..n-1 once each, the chain
 * verifies, and the service's snapshot is what folding the stored history gives.
 */
const assertConsistent = (id: string, caps?: JournalState.Caps) =>
  Effect.gen(function*() {
    const j = yield* Journal
    const all = yield* stored(id)
    assert.deepStrictEqual(all.map((e) => e.sequence), range(all.length))
    const report = yield* j.verify(id)
    assert.strictEqual(report.entriesChecked, all.length)
    assert.strictEqual(report.nextSequence, all.length)
    const expected = yield* refold(id, caps)
    assert.strictEqual(snapshotJson(yield* j.snapshot(id)), snapshotJson(JournalState.snapshot(expected)))
    assert.strictEqual(yield* j.head(id), JournalState.head(expected))
    return all
  })

/** A service over `persistence`, living in the current scope. */
const serviceOver = (persistence: Persistence.Persistence["Service"], options?: SessionJournal.Options) =>
  SessionJournal.make(options).pipe(Effect.provideService(Persistence.Persistence, persistence))

const Live = SessionJournal.layer().pipe(Layer.provideMerge(Persistence.layerMemory()))

layer(Live)("SessionJournal on memory", (it) => {
  it.effect("records, snapshots and verifies", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const a = yield* j.record("basic", params("read_file"))
      const b = yield* j.append("basic", "message", { role: "user", content: "hi" })
      const c = yield* j.append("basic", "vendor.custom:v2", { any: ["json", 1, null] })
      assert.strictEqual(a.sequence, 0)
      assert.strictEqual(b.sequence, 1)
      assert.strictEqual(c.sequence, 2)
      assert.strictEqual(b.prev_hash, a.entry_hash)
      assert.strictEqual(c.prev_hash, b.entry_hash)
      assert.strictEqual(c.kind, "vendor.custom:v2")
      const snap = yield* j.snapshot("basic")
      assert.strictEqual(snap.entry_count, 3)
      assert.strictEqual(snap.data_flow.total_invocations, 1n)
      assert.strictEqual((yield* j.state("basic")).message_count, 2n)
      const all = yield* assertConsistent("basic")
      assert.deepStrictEqual(all, [a, b, c])
    }))

  it.effect("1,000 concurrent records get sequences 0..999 once each, counters exact", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const n = STRESS ? 20_000 : 1000
      const out = yield* Effect.forEach(
        range(n),
        (i) =>
          j.record("concurrent", params(`t${i % 7}`, { bytes_read: i, bytes_written: 3, delegation_depth: i % 5 })),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(out.map((e) => e.sequence).sort((x, y) => x - y), range(n))
      const all = yield* assertConsistent("concurrent")
      // Every caller got back exactly the entry that was stored at its sequence.
      for (const e of out) assert.deepStrictEqual(all[e.sequence], e)
      const snap = yield* j.snapshot("concurrent")
      assert.strictEqual(snap.data_flow.total_invocations, BigInt(n))
      assert.strictEqual(snap.data_flow.total_bytes_read, BigInt((n - 1) * n / 2))
      assert.strictEqual(snap.data_flow.total_bytes_written, BigInt(3 * n))
      assert.strictEqual(snap.data_flow.max_delegation_depth, 4)
      for (let k = 0; k < 7; k++) {
        const expected = range(n).filter((i) => i % 7 === k).length
        assert.strictEqual(snap.tool_counts.get(`t${k}`), BigInt(expected))
      }
    }))

  it.effect("concurrent writers across several sessions stay separate", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const ids = ["multi-a", "multi-b", "multi-c"]
      yield* Effect.forEach(
        range(150),
        (i): Effect.Effect<Entry.Entry, SessionJournal.WriteError> =>
          i % 2 === 0 ? j.record(ids[i % 3]!, params("x")) : j.append(ids[i % 3]!, "message", { i }),
        { concurrency: "unbounded" }
      )
      for (const id of ids) assert.strictEqual((yield* assertConsistent(id)).length, 50)
    }))

  it.effect("typed errors: bad session id, bad field, missing session, payload not JSON", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      for (const bad of ["../x", "", "a b", "x".repeat(129), "é"]) {
        const e1 = yield* Effect.flip(j.record(bad, params("ok")))
        assert.strictEqual(e1._tag, "InvalidSessionId")
        const e2 = yield* Effect.flip(j.snapshot(bad))
        assert.strictEqual(e2._tag, "InvalidSessionId")
        const e3 = yield* Effect.flip(Stream.runCollect(j.entries(bad)))
        assert.strictEqual(e3._tag, "InvalidSessionId")
        const e4 = yield* Effect.flip(j.awaitSequence(bad, 0))
        assert.strictEqual(e4._tag, "InvalidSessionId")
        const e5 = yield* Effect.flip(j.setMeta(bad, { title: "t" }))
        assert.strictEqual(e5._tag, "InvalidSessionId")
      }
      const fieldOf = (eff: Effect.Effect<unknown, SessionJournal.WriteError>) =>
        Effect.map(Effect.flip(eff), (e) => e._tag === "InvalidRecordField" ? e.field : e._tag)
      assert.strictEqual(yield* fieldOf(j.record("typed", params(" padded"))), "tool_name")
      assert.strictEqual(yield* fieldOf(j.record("typed", params("ok", { server_id: "" }))), "server_id")
      assert.strictEqual(yield* fieldOf(j.record("typed", params("ok", { agent_id: "a\u0085" }))), "agent_id")
      assert.strictEqual(yield* fieldOf(j.record("typed", params("ok", { bytes_read: -1 }))), "bytes_read")
      assert.strictEqual(yield* fieldOf(j.record("typed", params("ok", { bytes_written: 1.5 }))), "bytes_written")
      assert.strictEqual(
        yield* fieldOf(j.record("typed", params("ok", { delegation_depth: 2 ** 32 }))),
        "delegation_depth"
      )
      assert.strictEqual(yield* fieldOf(j.decide("typed", params("\u0000"), Guard.allowList([]))), "tool_name")
      assert.strictEqual(yield* fieldOf(j.append("typed", "tool", {})), "kind")
      assert.strictEqual(yield* fieldOf(j.append("typed", "", {})), "kind")
      assert.strictEqual(yield* fieldOf(j.append("typed", "message", { f: () => 1 })), "payload")
      assert.strictEqual(yield* fieldOf(j.append("typed", "message", { n: Number.NaN })), "payload")
      assert.strictEqual(yield* fieldOf(j.append("typed", "message", 10n)), "payload")
      assert.strictEqual(yield* fieldOf(j.append("typed", "message", new Date(0))), "payload")
      assert.strictEqual(yield* fieldOf(j.append("typed", "message", undefined)), "payload")
      assert.strictEqual(yield* fieldOf(j.setMeta("typed", { data: { bad: Number.POSITIVE_INFINITY } })), "data")
      const writeAllBad = yield* fieldOf(
        j.writeAll("typed", [{ _tag: "Tool", params: params("ok") }, {
          _tag: "Other",
          kind: "message",
          payload: Symbol()
        }])
      )
      assert.strictEqual(writeAllBad, "payload")
      // Nothing of the above reached storage.
      for (const read of [j.snapshot("typed"), j.head("typed"), j.verify("typed"), j.state("typed")]) {
        const e = yield* Effect.flip(read as Effect.Effect<unknown, SessionJournal.ReadError>)
        assert.strictEqual(e._tag, "SessionNotFound")
      }
      const e = yield* Effect.flip(Stream.runCollect(j.entries("typed")))
      assert.strictEqual(e._tag, "SessionNotFound")
      assert.isFalse((yield* j.list).some((s) => s.id === "typed"))
    }))

  it.effect("writeAll stores its items contiguously, all or none", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const ws = yield* Effect.forEach(
        range(10),
        (i) =>
          j.writeAll("write-all", [
            { _tag: "Tool", params: params(`w${i}`) },
            { _tag: "Other", kind: "message", payload: { i } },
            { _tag: "Tool", params: params(`w${i}`) }
          ]),
        { concurrency: "unbounded" }
      )
      for (const w of ws) {
        assert.deepStrictEqual(w.map((e) => e.sequence), [w[0]!.sequence, w[0]!.sequence + 1, w[0]!.sequence + 2])
      }
      assert.strictEqual((yield* assertConsistent("write-all")).length, 30)
    }))

  it.effect("decide is atomic: max 3 invocations admits exactly 3 of 20 racing callers", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const out = yield* Effect.forEach(
        range(20),
        () => j.decide("decide", params("bash"), Guard.maxInvocations(3)),
        { concurrency: "unbounded" }
      )
      const allowed = out.filter((d) => d.verdict._tag === "Allow")
      assert.strictEqual(allowed.length, 3)
      // Each call is followed by its decision entry.
      assert.deepStrictEqual(allowed.map((d) => d.entry.sequence).sort((a, b) => a - b), [0, 2, 4])
      for (const d of out) assert.strictEqual(d.entry.allowed, d.verdict._tag === "Allow")
      const all = yield* assertConsistent("decide")
      assert.strictEqual(all.filter((e) => Entry.isTool(e) && e.allowed).length, 3)
    }))

  it.effect("decide keeps a caller's allowed: false even when the guard allows", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const d = yield* j.decide("decide-false", params("x", { allowed: false }), Guard.allowList(["x"]))
      assert.strictEqual(d.verdict._tag, "Allow")
      assert.isFalse(d.entry.allowed)
    }))

  it.effect("a guard that throws fails its own caller only, not the batch it shares", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "throwing-guard"
      const boom: Guard.Guard = () => {
        throw new Error("guard bug")
      }
      const exits = yield* Effect.forEach(
        range(21),
        (i) =>
          Effect.exit<unknown, SessionJournal.WriteError, never>(
            i === 10 ? j.decide(id, params("x"), boom) : j.record(id, params("y"))
          ),
        { concurrency: "unbounded" }
      )
      const failed = exits.flatMap((e, i) => Exit.isFailure(e) ? [i] : [])
      assert.deepStrictEqual(failed, [10])
      const bad = exits[10]!
      assert.isTrue(Exit.isFailure(bad) && bad.cause.reasons.some((r) => r._tag === "Die"))
      assert.strictEqual((yield* assertConsistent(id)).length, 20)
      assert.strictEqual((yield* j.record(id, params("z"))).sequence, 20)
    }))

  it.effect("changes delivers every committed entry, in order, to two subscribers", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "changes"
      const s1 = yield* j.changes(id)
      const s2 = yield* j.changes(id)
      const f1 = yield* s1.pipe(Stream.take(40), Stream.runCollect, Effect.forkChild)
      const f2 = yield* s2.pipe(Stream.take(40), Stream.runCollect, Effect.forkChild)
      yield* Effect.forEach(
        range(40),
        (i): Effect.Effect<Entry.Entry, SessionJournal.WriteError> =>
          i % 3 === 0 ? j.append(id, "message", { i }) : j.record(id, params(`c${i % 2}`)),
        { concurrency: 8 }
      )
      const all = yield* stored(id)
      for (const got of [yield* Fiber.join(f1), yield* Fiber.join(f2)]) {
        assert.deepStrictEqual(got, all.map((entry) => ({ _tag: "Entry" as const, entry })))
      }
    }))

  it.effect("changes starts at the subscription: earlier entries are not replayed", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "changes-later"
      for (let i = 0; i < 3; i++) yield* j.record(id, params("a"))
      yield* j.close(id)
      const s = yield* j.changes(id)
      const f = yield* s.pipe(Stream.take(2), Stream.runCollect, Effect.forkChild)
      yield* j.record(id, params("b"))
      yield* j.record(id, params("c"))
      const got = yield* Fiber.join(f)
      assert.deepStrictEqual(got.map((c) => c._tag === "Entry" ? c.entry.sequence : -1), [3, 4])
    }))

  it.effect("awaitSequence: already committed completes at once, a future one after its commit", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "await"
      yield* j.record(id, params("a"))
      yield* j.awaitSequence(id, 0)
      const waiter = yield* Effect.forkChild(j.awaitSequence(id, 3))
      yield* j.record(id, params("a"))
      yield* j.record(id, params("a"))
      for (let i = 0; i < 10; i++) yield* Effect.yieldNow
      assert.isUndefined(waiter.pollUnsafe(), "must not complete before entry 3 is committed")
      yield* j.record(id, params("a"))
      yield* Fiber.join(waiter)
      // A session this service does not hold open: what storage holds counts as
      // committed, also entries another service wrote after this one closed it.
      yield* j.close(id)
      yield* j.awaitSequence(id, 3)
      const other = yield* serviceOver(yield* Persistence.Persistence)
      yield* other.record(id, params("b"))
      yield* other.close(id)
      yield* j.awaitSequence(id, 4)
    }))

  it.effect("awaitSequence: no lost wake-up while commits race with many waiters", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "await-race"
      const n = 200
      // Forked one after another from this fiber, so they live as long as the test.
      const waiters = yield* Effect.forEach(range(400), (i) => Effect.forkChild(j.awaitSequence(id, (i * 37) % n)))
      const writers = yield* Effect.forkChild(
        Effect.forEach(range(n), (i) => j.record(id, params(`r${i % 3}`)), { concurrency: 16 })
      )
      // Register more waiters while the commits are under way.
      const late = yield* Effect.forEach(
        range(200),
        (i) => Effect.forkChild(Effect.andThen(Effect.yieldNow, j.awaitSequence(id, n - 1 - (i % 50))))
      )
      yield* Fiber.join(writers)
      yield* Fiber.joinAll([...waiters, ...late])
      assert.strictEqual((yield* stored(id)).length, n)
    }))

  it.effect("setMeta: the latest updated_at wins and survives a reload", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "meta"
      yield* TestClock.setTime(1_000)
      const first = yield* j.setMeta(id, { title: "first", labels: ["a"] })
      assert.deepStrictEqual(first, { created_at: 1_000, updated_at: 1_000, title: "first", labels: ["a"] })
      yield* TestClock.setTime(2_000)
      const second = yield* j.setMeta(id, { title: "second", data: { k: [1, 2] } })
      assert.deepStrictEqual(second, {
        created_at: 1_000,
        updated_at: 2_000,
        title: "second",
        labels: ["a"],
        data: { k: [1, 2] }
      })
      // Metadata alone makes a session exist; it does not touch the chain.
      assert.strictEqual((yield* j.state(id)).next_sequence, 0)
      assert.isTrue((yield* j.list).some((s) => s.id === id))
      yield* j.close(id)
      assert.deepStrictEqual((yield* j.state(id)).meta, second)
      // A writer whose value is older loses; a newer one wins.
      const p = yield* Persistence.Persistence
      yield* Effect.scoped(Effect.gen(function*() {
        const h = yield* p.open(id, { mode: "write" })
        const loaded = yield* h.load
        yield* h.append({
          after: Persistence.tipOf(loaded.state),
          entries: [],
          meta: { updated_at: 1_500, title: "stale" },
          head: () => JournalState.head(loaded.state)
        })
      }))
      assert.strictEqual((yield* j.state(id)).meta?.title, "second")
      yield* Effect.scoped(Effect.gen(function*() {
        const h = yield* p.open(id, { mode: "write" })
        const loaded = yield* h.load
        yield* h.append({
          after: Persistence.tipOf(loaded.state),
          entries: [],
          meta: { updated_at: 5_000, title: "newer" },
          head: () => JournalState.head(loaded.state)
        })
      }))
      assert.strictEqual((yield* j.state(id)).meta?.title, "newer")
      // A writer whose clock is behind still wins over what it patched: updated_at never moves back.
      yield* TestClock.setTime(3_000)
      const behind = yield* j.setMeta(id, { title: "from a slow clock" })
      assert.strictEqual(behind.updated_at, 5_000)
      yield* j.record(id, params("after-meta"))
      yield* j.close(id)
      const reloaded = yield* j.state(id)
      assert.strictEqual(reloaded.meta?.title, "from a slow clock")
      assert.strictEqual(reloaded.next_sequence, 1)
    }))

  it.effect("close releases the writer guarantee: a second service can then write", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const p = yield* Persistence.Persistence
      const id = "handover"
      const other = yield* serviceOver(p)
      yield* j.record(id, params("first"))
      const locked = yield* Effect.flip(other.record(id, params("second")))
      assert.strictEqual(locked._tag, "SessionLocked")
      yield* j.close(id)
      const e = yield* other.record(id, params("second"))
      assert.strictEqual(e.sequence, 1)
      // Now the first service is the one locked out, until the other closes.
      assert.strictEqual((yield* Effect.flip(j.record(id, params("third"))))._tag, "SessionLocked")
      yield* other.close(id)
      assert.strictEqual((yield* j.record(id, params("third"))).sequence, 2)
      yield* assertConsistent(id)
    }))

  it.effect("close while writes are queued: every write lands once, on a fresh opening", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "close-racing"
      const writes = yield* Effect.forkChild(
        Effect.forEach(range(100), (i) => j.record(id, params(`q${i % 2}`)), { concurrency: "unbounded" })
      )
      for (let i = 0; i < 5; i++) {
        yield* Effect.yieldNow
        yield* j.close(id)
      }
      const out = yield* Fiber.join(writes)
      assert.deepStrictEqual(out.map((e) => e.sequence).sort((a, b) => a - b), range(100))
      assert.strictEqual((yield* assertConsistent(id)).length, 100)
    }))

  it.effect("delete removes the session; writing again starts at sequence 0", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "deleted"
      for (let i = 0; i < 3; i++) yield* j.record(id, params("d"))
      const s = yield* j.changes(id)
      const sub = yield* s.pipe(Stream.runCollect, Effect.forkChild)
      const waiter = yield* Effect.forkChild(j.awaitSequence(id, 10))
      yield* Effect.yieldNow
      yield* j.delete(id)
      assert.isFalse((yield* j.list).some((x) => x.id === id))
      assert.strictEqual((yield* Effect.flip(j.snapshot(id)))._tag, "SessionNotFound")
      assert.strictEqual((yield* Effect.flip(Stream.runCollect(j.entries(id))))._tag, "SessionNotFound")
      // Subscribers' streams end and waiters learn the session is gone.
      assert.deepStrictEqual(yield* Fiber.join(sub), [])
      const waited = yield* Fiber.await(waiter)
      assert.isTrue(Exit.isFailure(waited))
      assert.strictEqual((yield* Effect.flip(j.delete(id)))._tag, "SessionNotFound")
      const again = yield* j.record(id, params("d"))
      assert.strictEqual(again.sequence, 0)
      assert.strictEqual(again.prev_hash, Entry.ZERO_HASH)
      yield* assertConsistent(id)
    }))
})

// Guards through the service, each at its boundary; entry_cap 2 so that streaks
// outgrow the ring and tool_counts_cap 3 so that tool_counts overflows.
const caps = { entry_cap: 2, tool_counts_cap: 3 }
const Capped = SessionJournal.layer({ caps }).pipe(Layer.provideMerge(Persistence.layerMemory()))

layer(Capped)("guards through decide", (it) => {
  /** Runs `decide` for each call in order and checks each verdict (or deny reason). */
  const expectVerdicts = (
    id: string,
    guard: Guard.Guard,
    calls: ReadonlyArray<readonly [Entry.ToolParams, "allow" | string]>
  ) =>
    Effect.gen(function*() {
      const j = yield* Journal
      for (const [i, [p, expected]] of calls.entries()) {
        const d = yield* j.decide(id, p, guard)
        const got = d.verdict._tag === "Allow" ? "allow" : d.verdict.reason
        assert.strictEqual(got, expected, `call ${i} (${p.tool_name})`)
        assert.strictEqual(d.entry.allowed, expected === "allow")
        assert.strictEqual(d.entry.tool_name, p.tool_name)
      }
      yield* assertConsistent(id, caps)
    })

  it.effect("max bytes read", () =>
    expectVerdicts("g-read", Guard.maxBytesRead(100), [
      [params("r", { bytes_read: 60 }), "allow"],
      [params("r", { bytes_read: 40 }), "allow"],
      [params("r", { bytes_read: 1 }), "bytes read would exceed 100"],
      // The denied call's bytes were recorded too.
      [params("r", { bytes_read: 0 }), "bytes read would exceed 100"]
    ]))

  it.effect("max bytes written", () =>
    expectVerdicts("g-written", Guard.maxBytesWritten(10), [
      [params("w", { bytes_written: 10 }), "allow"],
      [params("w", { bytes_written: 1 }), "bytes written would exceed 10"],
      [params("w", { bytes_written: 0 }), "bytes written would exceed 10"]
    ]))

  it.effect("max invocations (denied calls count too)", () =>
    expectVerdicts("g-invocations", Guard.maxInvocations(3), [
      [params("a"), "allow"],
      [params("b"), "allow"],
      [params("c"), "allow"],
      [params("d"), "invocations would exceed 3"],
      [params("e"), "invocations would exceed 3"]
    ]))

  it.effect("max delegation depth", () =>
    expectVerdicts("g-depth", Guard.maxDelegationDepth(2), [
      [params("a", { delegation_depth: 2 }), "allow"],
      [params("a", { delegation_depth: 3 }), "delegation depth 3 exceeds 2"],
      [params("a", { delegation_depth: 0 }), "allow"]
    ]))

  it.effect("max streak, still denying after the streak outgrew entry_cap", () =>
    Effect.gen(function*() {
      yield* expectVerdicts("g-streak", Guard.maxStreak(5), [
        ...range(5).map(() => [params("bash"), "allow"] as const),
        [params("bash"), "bash would run more than 5 times in a row"],
        [params("bash"), "bash would run more than 5 times in a row"],
        [params("ls"), "allow"],
        [params("bash"), "allow"]
      ])
      const j = yield* Journal
      // The ring holds 2 entries, the streak counter is what the guard read.
      const before = yield* j.snapshot("g-streak")
      assert.strictEqual(before.entry_count, 2)
      assert.deepStrictEqual(before.tool_sequence, ["ls", "bash"])
      for (let i = 0; i < 4; i++) yield* j.record("g-streak", params("bash"))
      // Still after a reload from storage (the streak comes back from the fold).
      yield* j.close("g-streak")
      const d = yield* j.decide("g-streak", params("bash"), Guard.maxStreak(5))
      assert.deepStrictEqual(d.verdict, Guard.deny("bash would run more than 5 times in a row", "maxStreak(5)"))
      assert.strictEqual((yield* j.snapshot("g-streak")).current_streak_len, 6n)
    }))

  it.effect("forbidden transitions", () =>
    expectVerdicts("g-transitions", Guard.forbiddenTransitions([["read_secret", "web_fetch"]]), [
      [params("web_fetch"), "allow"],
      [params("read_secret"), "allow"],
      [params("web_fetch"), "web_fetch may not follow read_secret"],
      // The denied call is recorded, so it is now the last tool.
      [params("web_fetch"), "allow"],
      [params("read_secret"), "allow"],
      [params("read_file"), "allow"],
      [params("web_fetch"), "allow"]
    ]))

  it.effect("required predecessors, failing closed for names past tool_counts_cap", () =>
    Effect.gen(function*() {
      const guard = Guard.requirePredecessors({ deploy: ["test", "build"] })
      yield* expectVerdicts("g-pred", guard, [
        [params("deploy"), "deploy requires test first"],
        [params("test"), "allow"],
        [params("deploy"), "deploy requires build first"],
        [params("build"), "allow"],
        [params("deploy"), "allow"]
      ])
      // tool_counts_cap is 3: a, b, c fill it, so "test" is never counted.
      yield* expectVerdicts("g-pred-overflow", guard, [
        [params("a"), "allow"],
        [params("b"), "allow"],
        [params("c"), "allow"],
        [params("test"), "allow"],
        [params("build"), "allow"],
        [params("deploy"), "deploy requires test first"]
      ])
    }))

  it.effect("allow and deny lists", () =>
    Effect.gen(function*() {
      yield* expectVerdicts("g-allow", Guard.allowList(["read_file", "grep"]), [
        [params("read_file"), "allow"],
        [params("bash"), "bash is not on the allow list"],
        [params("grep"), "allow"]
      ])
      yield* expectVerdicts("g-deny", Guard.denyList(["rm"]), [
        [params("rm"), "rm is on the deny list"],
        [params("rmdir"), "allow"]
      ])
    }))

  it.effect("all and any", () =>
    Effect.gen(function*() {
      const both = Guard.all(Guard.denyList(["rm"]), Guard.maxInvocations(2))
      yield* expectVerdicts("g-all", both, [
        [params("rm"), "rm is on the deny list"],
        [params("ls"), "allow"],
        [params("rm"), "rm is on the deny list"],
        [params("ls"), "invocations would exceed 2"]
      ])
      const either = Guard.any(Guard.allowList(["ls"]), Guard.maxDelegationDepth(0))
      yield* expectVerdicts("g-any", either, [
        [params("ls", { delegation_depth: 3 }), "allow"],
        [params("cat", { delegation_depth: 0 }), "allow"],
        [params("cat", { delegation_depth: 1 }), "cat is not on the allow list; delegation depth 1 exceeds 0"]
      ])
      yield* expectVerdicts("g-any-empty", Guard.any(), [[params("ls"), "no guard allows"]])
    }))

  it.effect("caps of a session survive a reload before any checkpoint", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      for (let i = 0; i < 5; i++) yield* j.record("caps-reload", params(`k${i}`))
      const before = yield* j.snapshot("caps-reload")
      yield* j.close("caps-reload")
      // A service with other (default) caps reads and continues the session with its own.
      const other = yield* serviceOver(yield* Persistence.Persistence)
      const after = yield* other.state("caps-reload")
      assert.strictEqual(after.entry_cap, 2)
      assert.strictEqual(after.tool_counts_cap, 3)
      assert.strictEqual(snapshotJson(JournalState.snapshot(after)), snapshotJson(before))
      yield* other.record("caps-reload", params("k5"))
      assert.strictEqual((yield* other.snapshot("caps-reload")).entry_count, 2)
      yield* other.close("caps-reload")
      yield* assertConsistent("caps-reload", caps)
    }))
})

layer(SessionJournal.layer({ changesCapacity: 4 }).pipe(Layer.provideMerge(Persistence.layerMemory())))(
  "changes with a small hub",
  (it) => {
    it.effect("a slow subscriber is told how many entries it missed, then continues in order", () =>
      Effect.gen(function*() {
        const j = yield* Journal
        const id = "slow"
        yield* j.record(id, params("before"))
        const slow = yield* j.changes(id)
        const fast = yield* j.changes(id)
        const fastFiber = yield* fast.pipe(Stream.take(60), Stream.runCollect, Effect.forkChild)
        // 50 entries commit while the slow consumer does not pull.
        for (let i = 0; i < 50; i++) yield* j.record(id, params(`s${i % 3}`))
        const slowFiber = yield* slow.pipe(Stream.take(6), Stream.runCollect, Effect.forkChild)
        for (let i = 0; i < 10; i++) yield* j.append(id, "message", { i })
        const got = yield* Fiber.join(slowFiber)
        // The hub keeps the newest 4 of sequences 1..50: 47..50.
        assert.deepStrictEqual(got[0], { _tag: "Missed", count: 46, fromSequence: 1 })
        assert.deepStrictEqual(got.slice(1).map((c) => c._tag === "Entry" ? c.entry.sequence : -1), [
          47,
          48,
          49,
          50,
          51
        ])
        // The fast subscriber, pulling all along, missed nothing.
        const all = yield* Fiber.join(fastFiber)
        assert.isTrue(all.every((c) => c._tag === "Entry"))
        assert.deepStrictEqual(all.map((c) => c._tag === "Entry" ? c.entry.sequence : -1), range(60).map((i) => i + 1))
      }))
  }
)

// Counting and failing storage: a wrapper over the real memory adapter.
const probe = IP.makeProbe()
const Instrumented = SessionJournal.layer({ checkpointMinBytes: 16 * 300 }).pipe(
  Layer.provideMerge(IP.layerMemory(probe))
)

layer(Instrumented)("SessionJournal on instrumented storage", (it) => {
  it.effect("group commit: 64 concurrent callers share far fewer than 64 appends", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "group"
      yield* j.record(id, params("warm-up"))
      const before = IP.appendsOf(probe, id)
      const out = yield* Effect.forEach(range(64), (i) => j.record(id, params(`g${i % 4}`)), {
        concurrency: "unbounded"
      })
      const appends = IP.appendsOf(probe, id) - before
      assert.isAtMost(appends, 4, `64 callers took ${appends} appends`)
      assert.deepStrictEqual(out.map((e) => e.sequence).sort((a, b) => a - b), range(64).map((i) => i + 1))
      assert.strictEqual((yield* assertConsistent(id)).length, 65)
    }))

  it.effect("group commit batches writers that arrive while an append is in flight", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "group-waves"
      // Appends of this session take a while, as a real sync does.
      probe.slow.add(id)
      const out = yield* Effect.forEach(
        range(256),
        (i) => Effect.andThen(Effect.yieldNow, j.append(id, "message", { i })),
        { concurrency: 32 }
      )
      const appends = IP.appendsOf(probe, id)
      assert.isAtMost(appends, 256 / 8, `256 writes from 32 fibers took ${appends} appends`)
      assert.strictEqual(new Set(out.map((e) => e.sequence)).size, 256)
      yield* assertConsistent(id)
    }))

  it.effect("verify while writes commit: storage ahead of the state read is not corruption", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "verify-racing"
      probe.slow.add(id)
      yield* j.record(id, params("v"))
      const writes = yield* Effect.forkChild(
        Effect.forEach(range(200), (i) => j.record(id, params(`v${i % 2}`)), { concurrency: 4 })
      )
      let verified = 0
      while (writes.pollUnsafe() === undefined) {
        const report = yield* j.verify(id)
        assert.isAtLeast(report.entriesChecked, 1)
        verified++
      }
      yield* Fiber.join(writes)
      assert.isAtLeast(verified, 2, "verify ran while writes were committing")
      assert.strictEqual((yield* assertConsistent(id)).length, 201)
    }))

  for (const mode of ["FailBefore", "FailAfter"] as const) {
    it.effect(`append #2 fails (${mode}): the caller gets StorageError, the next write reloads`, () =>
      Effect.gen(function*() {
        const j = yield* Journal
        const id = `fail-${mode}`
        yield* j.record(id, params("a"))
        yield* j.record(id, params("b"))
        const changes = yield* j.changes(id)
        const seen = yield* changes.pipe(Stream.take(mode === "FailAfter" ? 2 : 1), Stream.runCollect, Effect.forkChild)
        IP.plan(probe, id, 2, { _tag: mode })
        const error = yield* Effect.flip(j.record(id, params("c")))
        assert.strictEqual(error._tag, "StorageError")
        const loads = IP.loadsOf(probe, id)
        const next = yield* j.record(id, params("d"))
        assert.strictEqual(IP.loadsOf(probe, id), loads + 1, "the next write reloads from storage")
        // Storage is the truth: an append that stored before failing is kept, once.
        const expectedSequence = mode === "FailAfter" ? 3 : 2
        assert.strictEqual(next.sequence, expectedSequence)
        const all = yield* assertConsistent(id)
        assert.strictEqual(all.length, expectedSequence + 1)
        assert.deepStrictEqual(all[expectedSequence], next)
        assert.deepStrictEqual(
          all.map((e) => Entry.isTool(e) ? e.tool_name : ""),
          mode === "FailAfter" ? ["a", "b", "c", "d"] : ["a", "b", "d"]
        )
        const snap = yield* j.snapshot(id)
        assert.strictEqual(snap.data_flow.total_invocations, BigInt(all.length))
        // Subscribers get what storage holds, in order, with no gap.
        const got = yield* Fiber.join(seen)
        assert.deepStrictEqual(got, all.slice(2).map((entry) => ({ _tag: "Entry" as const, entry })))
        yield* j.awaitSequence(id, expectedSequence)
      }))
  }

  it.effect("a subscriber that joined while the writer was idle gets what a failed append stored", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "fail-idle-subscriber"
      yield* j.record(id, params("a"))
      yield* j.record(id, params("b"))
      // The writer has answered everything and waits: nothing is published after
      // the subscription below until the failed append.
      for (let i = 0; i < 20; i++) yield* Effect.yieldNow
      const changes = yield* j.changes(id)
      const seen = yield* changes.pipe(Stream.take(2), Stream.runCollect, Effect.forkChild)
      IP.plan(probe, id, 2, { _tag: "FailAfter" })
      assert.strictEqual((yield* Effect.flip(j.record(id, params("c"))))._tag, "StorageError")
      yield* j.record(id, params("d"))
      const all = yield* assertConsistent(id)
      assert.deepStrictEqual(
        all.map((e) => Entry.isTool(e) ? e.tool_name : ""),
        ["a", "b", "c", "d"]
      )
      const got = yield* Fiber.join(seen)
      assert.deepStrictEqual(got, all.slice(2).map((entry) => ({ _tag: "Entry" as const, entry })))
    }))

  it.effect("failed appends under concurrency: nothing duplicated or skipped", () =>
    Effect.gen(function*() {
      const p = yield* Persistence.Persistence
      const j = yield* serviceOver(p, { maxBatch: 8 })
      const id = "fail-concurrent"
      IP.plan(probe, id, 2, { _tag: "FailBefore" })
      IP.plan(probe, id, 4, { _tag: "FailAfter" })
      IP.plan(probe, id, 5, { _tag: "FailAfter" })
      IP.plan(probe, id, 7, { _tag: "FailBefore" })
      const exits = yield* Effect.forEach(
        range(80),
        (i) => Effect.exit(j.record(id, params(`f${i % 5}`, { bytes_read: i }))),
        { concurrency: "unbounded" }
      )
      const sizes = probe.entriesPerAppend.get(id)!
      const ok = exits.filter(Exit.isSuccess).map((e) => e.value)
      const failed = exits.filter(Exit.isFailure)
      assert.strictEqual(failed.length, sizes[2]! + sizes[4]! + sizes[5]! + sizes[7]!)
      for (const f of failed) assert.include(String(f.cause), "StorageError")
      const all = yield* Stream.runCollect(j.entries(id))
      assert.deepStrictEqual(all.map((e) => e.sequence), range(all.length))
      assert.strictEqual(all.length, ok.length + sizes[4]! + sizes[5]!)
      assert.strictEqual(new Set(ok.map((e) => e.sequence)).size, ok.length)
      for (const e of ok) assert.deepStrictEqual(all[e.sequence], e)
      const report = yield* j.verify(id)
      assert.strictEqual(report.entriesChecked, all.length)
      const expected = JournalState.foldAll(JournalState.empty(id), all)
      assert.strictEqual(snapshotJson(yield* j.snapshot(id)), snapshotJson(JournalState.snapshot(expected)))
      yield* j.close(id)
    }))

  it.effect("another writer sneaks entries in: the service reloads, retries, one chain", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "sneak"
      yield* j.record(id, params("mine"))
      const changes = yield* j.changes(id)
      const seen = yield* changes.pipe(Stream.take(4), Stream.runCollect, Effect.forkChild)
      IP.plan(probe, id, 1, { _tag: "Sneak", count: 3 })
      const e = yield* j.record(id, params("mine"))
      const sneaked = probe.sneaked.get(id)!
      assert.deepStrictEqual(sneaked.map((x) => x.sequence), [1, 2, 3])
      assert.strictEqual(e.sequence, 4)
      assert.strictEqual(e.prev_hash, sneaked[2]!.entry_hash)
      const all = yield* assertConsistent(id)
      assert.deepStrictEqual(all.slice(1, 4), sneaked)
      assert.strictEqual((yield* j.snapshot(id)).tool_counts.get("intruder"), 2n)
      // Subscribers see the other writer's entries too, in order.
      const got = yield* Fiber.join(seen)
      assert.deepStrictEqual(got, all.slice(1).map((entry) => ({ _tag: "Entry" as const, entry })))
    }))

  it.effect("a writer that keeps losing the race gives up with StorageError, then recovers", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "sneak-forever"
      yield* j.record(id, params("mine"))
      // Default conflictRetries is 8: the first attempt and 8 retries all lose.
      for (let n = 1; n <= 9; n++) IP.plan(probe, id, n, { _tag: "Sneak", count: 1 })
      const error = yield* Effect.flip(j.record(id, params("mine")))
      assert.strictEqual(error._tag, "StorageError")
      assert.strictEqual(
        error._tag === "StorageError" ? (error.cause as { _tag: string })._tag : "",
        "SequenceConflict"
      )
      const e = yield* j.record(id, params("mine"))
      assert.strictEqual(e.sequence, 10)
      const all = yield* assertConsistent(id)
      assert.strictEqual(all.filter((x) => Entry.isTool(x) && x.tool_name === "mine").length, 2)
    }))
})

const windowProbe = IP.makeProbe()
const NoWindow = SessionJournal.layer({ windowBytes: 0 }).pipe(Layer.provideMerge(IP.layerMemory(windowProbe)))

layer(NoWindow)("SessionJournal with no entries in memory (windowBytes 0)", (it) => {
  it.effect("a failed append that stored its batch reaches subscribers after the reload, read from storage", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "window-catch-up"
      yield* j.record(id, params("a"))
      const changes = yield* j.changes(id)
      const seen = yield* changes.pipe(Stream.take(6), Stream.runCollect, Effect.forkChild)
      IP.plan(windowProbe, id, 1, { _tag: "FailAfter" })
      // Heavier together than any window: the reload's state holds at most the last.
      const items = Array.from(
        { length: 5 },
        (_, i) => ({ _tag: "Other" as const, kind: "message", payload: { i, pad: "x".repeat(100_000) } })
      )
      assert.strictEqual((yield* Effect.flip(j.writeAll(id, items)))._tag, "StorageError")
      const next = yield* j.record(id, params("b"))
      assert.strictEqual(next.sequence, 6)
      const state = yield* j.state(id)
      assert.deepStrictEqual(JournalState.entries(state), [])
      assert.strictEqual(JournalState.entryCount(state), 7)
      const all = yield* assertConsistent(id)
      const got = yield* Fiber.join(seen)
      assert.deepStrictEqual(got, all.slice(1).map((entry) => ({ _tag: "Entry" as const, entry })))
    }))
})

layer(Persistence.layerMemory(), { excludeTestServices: true })("two services racing on one session", (it) => {
  it.effect("with the single-writer flag bypassed, storage's sequence check keeps one chain", () =>
    Effect.gen(function*() {
      const memory = yield* Persistence.Persistence
      const scope = yield* Scope.make()
      const shared = IP.shareWriters(memory, scope)
      const a = yield* serviceOver(shared, { conflictRetries: 1000 })
      const b = yield* serviceOver(shared, { conflictRetries: 1000 })
      const id = "two-writers"
      const n = 100
      const out = yield* Effect.forEach(
        range(2 * n),
        (i) => (i % 2 === 0 ? a : b).record(id, params(i % 2 === 0 ? "from-a" : "from-b", { bytes_read: i })),
        { concurrency: "unbounded" }
      )
      assert.deepStrictEqual(out.map((e) => e.sequence).sort((x, y) => x - y), range(2 * n))
      const all = yield* Stream.runCollect(a.entries(id))
      for (const e of out) assert.deepStrictEqual(all[e.sequence], e)
      const expected = JournalState.foldAll(JournalState.empty(id), all)
      // Each service's own state only knows what it committed or reloaded: verify
      // the stored chain after both let go of the session.
      yield* a.close(id)
      yield* b.close(id)
      for (const j of [a, b]) {
        const report = yield* j.verify(id)
        assert.strictEqual(report.entriesChecked, 2 * n)
        assert.strictEqual(report.head, JournalState.head(expected))
      }
      assert.strictEqual(expected.data_flow.total_bytes_read, BigInt((2 * n - 1) * n))
      yield* Scope.close(scope, Exit.void)
    }))
})
