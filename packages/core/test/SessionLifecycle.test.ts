/**
 * The lifecycle of open sessions and change hubs, as Effect's structures carry it:
 * a session falls idle through its `RcMap` entry's time to live (and writes in a
 * row keep it open), the bound on open sessions releases the idlest session
 * first and never one whose writes are in flight, and a change hub lives exactly
 * as long as the scopes of its listeners. The writer guarantee is what tells an
 * open session from a released one: a second service over the same storage gets
 * `SessionLocked` for the first and writes to the second.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { TestClock } from "effect/testing"
import { Entry, JournalState, Persistence, SessionJournal } from "../src/index.ts"
import * as Hubs from "../src/internal/hubs.ts"
import { toolParams } from "./fixtures.ts"

const params = toolParams()

/**
 * The memory adapter, counting the write openings of each session; an append of a
 * session with a gate waits until the gate opens.
 */
const counted = Effect.gen(function*() {
  const inner = yield* Persistence.makeMemory()
  const opens = new Map<string, number>()
  const gates = new Map<string, Deferred.Deferred<void>>()
  const persistence = Persistence.Persistence.of({
    ...inner,
    open: Persistence.makeOpen({
      read: (id, caps) => inner.open(id, { mode: "read", caps }),
      write: (id, caps) =>
        Effect.map(inner.open(id, { mode: "write", caps }), (handle): Persistence.WriteHandle => {
          opens.set(id, (opens.get(id) ?? 0) + 1)
          return {
            ...handle,
            append: (request) =>
              Effect.suspend(() => {
                const gate = gates.get(id)
                return gate === undefined
                  ? handle.append(request)
                  : Effect.andThen(Deferred.await(gate), handle.append(request))
              })
          }
        })
    })
  })
  const service = (options?: SessionJournal.Options) =>
    SessionJournal.make(options).pipe(Effect.provideService(Persistence.Persistence, persistence))
  return { opens, gates, service }
})

/** The tag of a write's failure, or "written". */
const outcome = (write: Effect.Effect<unknown, SessionJournal.WriteError>) =>
  Effect.map(Effect.exit(write), (exit) =>
    Exit.isSuccess(exit)
      ? "written"
      : exit.cause.reasons.map((r) => r._tag === "Fail" ? r.error._tag : r._tag).join(","))

/** Lets every runnable fiber run (releases are a few fiber steps each). */
const settle = Effect.forEach(Array.from({ length: 50 }), () => Effect.yieldNow, { discard: true })

describe("session lifecycle on Effect's structures", () => {
  it.effect("a session is released once idle for its time to live; writes in a row keep it open", () =>
    Effect.scoped(Effect.gen(function*() {
      const { service } = yield* counted
      const j = yield* service({ idleTimeToLive: "1 second" })
      const other = yield* service({ idleTimeToLive: "1 second" })
      for (let i = 0; i < 5; i++) {
        yield* j.record("s", params)
        yield* TestClock.adjust("600 millis")
        yield* settle
      }
      // Three seconds since the first write, but never a second idle.
      assert.strictEqual(yield* outcome(other.record("s", params)), "SessionLocked")
      yield* TestClock.adjust("1 second")
      yield* settle
      assert.strictEqual(yield* outcome(other.record("s", params)), "written")
      assert.strictEqual((yield* other.state("s")).next_sequence, 6)
    })))

  it.effect("at the bound the session idle the longest is released first", () =>
    Effect.scoped(Effect.gen(function*() {
      const { opens, service } = yield* counted
      const j = yield* service({ idleTimeToLive: "1 hour", maxOpenSessions: 2 })
      const other = yield* service({ idleTimeToLive: "1 hour" })
      yield* j.record("a", params)
      yield* j.record("b", params)
      // Opening c releases a, the idlest.
      yield* j.record("c", params)
      assert.strictEqual(yield* outcome(other.record("a", params)), "written")
      assert.strictEqual(yield* outcome(other.record("b", params)), "SessionLocked")
      yield* other.close("a")
      // b written again: c is now the idlest, and opening a releases it.
      yield* j.record("b", params)
      yield* j.record("a", params)
      assert.strictEqual(yield* outcome(other.record("c", params)), "written")
      assert.strictEqual(yield* outcome(other.record("b", params)), "SessionLocked")
      assert.strictEqual(opens.get("b"), 1)
    })))

  it.effect("a session whose write is in flight is not released for the bound; the bound is exceeded instead", () =>
    Effect.scoped(Effect.gen(function*() {
      const { gates, opens, service } = yield* counted
      const j = yield* service({ idleTimeToLive: "1 hour", maxOpenSessions: 1 })
      const other = yield* service({ idleTimeToLive: "1 hour" })
      yield* j.record("a", params)
      const gate = yield* Deferred.make<void>()
      gates.set("a", gate)
      const inFlight = yield* Effect.forkChild(j.record("a", params))
      yield* settle
      // b opens over the bound: a's write holds it.
      yield* j.record("b", params)
      assert.strictEqual(yield* outcome(other.record("a", params)), "SessionLocked")
      gates.delete("a")
      yield* Deferred.succeed(gate, undefined)
      assert.strictEqual((yield* Fiber.join(inFlight)).sequence, 1)
      // a stayed open all along: its next write needs no new opening.
      assert.strictEqual((yield* j.record("a", params)).sequence, 2)
      assert.strictEqual(opens.get("a"), 1)
      // Idle now, a is released for the next opening (b is idler still: it goes first).
      yield* j.record("c", params)
      assert.strictEqual(yield* outcome(other.record("b", params)), "written")
    })))

  it.effect("with a zero time to live a write returns once the session it opened is released", () =>
    Effect.scoped(Effect.gen(function*() {
      const { opens, service } = yield* counted
      const j = yield* service({ idleTimeToLive: 0 })
      const other = yield* service({ idleTimeToLive: 0 })
      for (let i = 0; i < 3; i++) {
        yield* j.record("z", params)
        // Released already: the other service writes at once, and lets go as well.
        assert.strictEqual(yield* outcome(other.record("z", params)), "written")
      }
      // Concurrent writes share openings; once the last returns, the session is released.
      const before = opens.get("z") ?? 0
      const written = yield* Effect.forEach(Array.from({ length: 20 }), () => j.record("z", params), {
        concurrency: "unbounded"
      })
      assert.deepStrictEqual(
        written.map((e) => e.sequence).sort((a, b) => a - b),
        Array.from({ length: 20 }, (_, i) => i + 6)
      )
      assert.isBelow((opens.get("z") ?? 0) - before, 20)
      assert.strictEqual(yield* outcome(other.record("z", params)), "written")
      assert.strictEqual((yield* j.state("z")).next_sequence, 27)
    })))

  it.effect("a close during a run of writes lands once they are answered; later writes open the session afresh", () =>
    Effect.scoped(Effect.gen(function*() {
      const { opens, service } = yield* counted
      const j = yield* service({ idleTimeToLive: "1 hour" })
      const writes = yield* Effect.forkChild(Effect.forEach(Array.from({ length: 50 }), () => j.record("r", params)))
      yield* Effect.yieldNow
      yield* j.close("r")
      const written = yield* Fiber.join(writes)
      assert.deepStrictEqual(written.map((e) => e.sequence), Array.from({ length: 50 }, (_, i) => i))
      assert.isTrue((opens.get("r") ?? 0) >= 1)
      assert.deepStrictEqual(
        (yield* Stream.runCollect(j.entries("r"))).map((e) => e.sequence),
        written.map((e) => e.sequence)
      )
    })))
})

describe("change hubs live as long as their listeners' scopes", () => {
  const entries = (n: number): Array<Entry.Entry> => {
    const out: Array<Entry.Entry> = []
    let state = JournalState.empty("h")
    for (let i = 0; i < n; i++) {
      const valid = Entry.validateToolParams(params)
      if (valid._tag === "Failure") throw new Error("invalid params")
      const entry = JournalState.nextTool(state, 0, valid.success)
      out.push(entry)
      state = JournalState.fold(state, entry)
    }
    return out
  }

  it.effect("a subscriber holds its hub until its scope closes; a waiter while it waits", () =>
    Effect.scoped(Effect.gen(function*() {
      const hubs = yield* Hubs.make(16)
      const all = entries(3)
      const first = yield* Scope.make()
      const second = yield* Scope.make()
      const stream = yield* hubs.changes("h", () => Effect.succeed(0)).pipe(Scope.provide(first))
      yield* hubs.changes("h", () => Effect.succeed(0)).pipe(Scope.provide(second))
      assert.isTrue(hubs.subscribed("h"))
      yield* hubs.publish("h", all.slice(0, 1))
      yield* Scope.close(second, Exit.void)
      // The first subscriber still holds the hub.
      assert.isTrue(hubs.subscribed("h"))
      assert.strictEqual(hubs.published("h"), 1)
      const got = yield* Effect.forkChild(Stream.runCollect(Stream.take(stream, 1)))
      assert.deepStrictEqual((yield* Fiber.join(got)).map((c) => c._tag === "Entry" ? c.entry.sequence : -1), [0])
      yield* Scope.close(first, Exit.void)
      assert.isFalse(hubs.subscribed("h"))
      // Publishing to a session without listeners hands nothing to anyone.
      yield* hubs.publish("h", all.slice(1, 2))
      assert.strictEqual(hubs.published("h"), null)
      const waiter = yield* Effect.forkChild(hubs.awaitSequence("h", 2, () => Effect.succeed(2)))
      yield* settle
      assert.isTrue(hubs.subscribed("h"))
      yield* hubs.publish("h", all.slice(2, 3))
      yield* Fiber.join(waiter)
      assert.isFalse(hubs.subscribed("h"))
    })))

  it.effect("a deleted session's waiters fail and its subscribers end; its next listener gets a new hub", () =>
    Effect.scoped(Effect.gen(function*() {
      const hubs = yield* Hubs.make(16)
      const all = entries(2)
      const stream = yield* hubs.changes("h", () => Effect.succeed(0))
      const collected = yield* Effect.forkChild(Stream.runCollect(stream))
      const waiter = yield* Effect.forkChild(Effect.exit(hubs.awaitSequence("h", 5, () => Effect.succeed(0))))
      yield* settle
      yield* hubs.publish("h", all)
      yield* hubs.end("h")
      assert.deepStrictEqual((yield* Fiber.join(collected)).map((c) => c._tag === "Entry" ? c.entry.sequence : -1), [
        0,
        1
      ])
      const waited = yield* Fiber.join(waiter)
      assert.isTrue(
        Exit.isFailure(waited) &&
          waited.cause.reasons.some((r) => r._tag === "Fail" && r.error._tag === "SessionNotFound")
      )
      // The subscriber's scope still holds the old hub; a new listener starts afresh.
      yield* Effect.scoped(Effect.gen(function*() {
        yield* hubs.changes("h", () => Effect.succeed(0))
        assert.strictEqual(hubs.published("h"), null)
      }))
    })))
})
