/**
 * Hooked sessions' counter rule (docs/DESIGN.md §13): an outcome entry adds its
 * bytes to the data-flow counters and nothing else, its payload is validated, and
 * `decide`'s `beside` entries are stored with the call in one append or not at all.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { Entry, Guard, JournalState, Persistence, SessionJournal } from "../src/index.ts"
import { toolParams } from "./fixtures.ts"

const layer = SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory()))
const payloadOf = (e: Entry.Entry): unknown => (Entry.isTool(e) ? null : e.payload)
const call = toolParams("Read", { server_id: "s", agent_id: "main", bytes_read: 0, bytes_written: 5 })

describe("outcomes", () => {
  it("validatePayload refuses an outcome whose counts are not u53", () => {
    for (const bad of [[], 1, { bytes_read: -1 }, { bytes_written: 1.5 }, { bytes_read: "3" }]) {
      assert.isTrue(Result.isFailure(Entry.validatePayload(Entry.OUTCOME_KIND, bad)), JSON.stringify(bad))
    }
    assert.isTrue(Result.isSuccess(Entry.validatePayload(Entry.OUTCOME_KIND, { bytes_read: 3 })))
    // Other kinds keep their freedom.
    assert.isTrue(Result.isSuccess(Entry.validatePayload("claude-code.x", { bytes_read: -1 })))
  })

  it("fold adds an outcome's bytes and no other counter", () => {
    let s = JournalState.empty("s")
    s = JournalState.fold(s, JournalState.nextTool(s, 1, { ...call, allowed: true }))
    s = JournalState.fold(s, JournalState.nextOther(s, 1, Entry.OUTCOME_KIND, { bytes_read: 7, bytes_written: 2 }))
    s = JournalState.fold(s, JournalState.nextOther(s, 1, "other", { bytes_read: 100 }))
    assert.deepStrictEqual(s.data_flow, {
      total_bytes_read: 7n,
      total_bytes_written: 7n,
      total_invocations: 1n,
      max_delegation_depth: 0
    })
    assert.strictEqual(s.current_streak_len, 1n)
    assert.strictEqual(s.message_count, 2n)
  })

  it.effect("decide writes beside entries right after the call, and a guard sees an outcome's bytes", () =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const d = yield* journal.decide("o", call, Guard.maxBytesRead(10), (verdict, entry) => [
        { kind: "why", payload: { verdict: verdict._tag, sequence: entry.sequence } }
      ])
      // The beside entry does not record the decision, so core's decision entry follows it.
      assert.deepStrictEqual(d.beside.map((e) => [e.sequence, e.payload]), [[1, { verdict: "Allow", sequence: 0 }]])
      yield* journal.append("o", Entry.OUTCOME_KIND, { bytes_read: 11 })
      const second = yield* journal.decide("o", call, Guard.maxBytesRead(10))
      assert.strictEqual(second.verdict._tag, "Deny")
      assert.deepStrictEqual(second.beside, [])
      // An invalid entry beside fails the call and writes nothing.
      const before = (yield* journal.state("o")).next_sequence
      const failed = yield* Effect.exit(journal.decide("o", call, () => Guard.allow, () => [
        { kind: "tool", payload: {} }
      ]))
      assert.isTrue(Exit.isFailure(failed))
      assert.strictEqual((yield* journal.state("o")).next_sequence, before)
      const kinds = (yield* Stream.runCollect(journal.entries("o"))).map((e) => e.kind)
      assert.deepStrictEqual(kinds, [
        "tool",
        "why",
        Guard.DECISION_KIND,
        Entry.OUTCOME_KIND,
        "tool",
        Guard.DECISION_KIND
      ])
    }).pipe(Effect.provide(layer)))

  it.effect("every decision is on the chain with its guard and reason, once", () =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const policy = Guard.denyList(["deploy"])
      const denied = yield* journal.decide("d", { ...call, tool_name: "deploy" }, policy)
      const allowed = yield* journal.decide("d", call, policy)
      // A caller that records the decision itself gets no second record.
      const own = yield* journal.decide("d", { ...call, tool_name: "deploy" }, policy, (verdict, entry) => [
        { kind: "host.decision", payload: { ...Guard.decisionPayload(verdict, entry.sequence), host: "h" } }
      ])
      const entries = yield* Stream.runCollect(journal.entries("d"))
      assert.deepStrictEqual(entries.map((e) => [e.sequence, e.kind]), [
        [0, "tool"],
        [1, Guard.DECISION_KIND],
        [2, "tool"],
        [3, Guard.DECISION_KIND],
        [4, "tool"],
        [5, "host.decision"]
      ])
      assert.deepStrictEqual(payloadOf(entries[1]!), {
        tool_sequence: denied.entry.sequence,
        verdict: "deny",
        guard: "denyList([\"deploy\"])",
        reason: denied.verdict._tag === "Deny" ? denied.verdict.reason : ""
      })
      assert.deepStrictEqual(payloadOf(entries[3]!), {
        tool_sequence: allowed.entry.sequence,
        verdict: "allow",
        guard: null,
        reason: null
      })
      assert.strictEqual(own.beside.length, 1)
      assert.strictEqual(own.record, own.beside[0])
      assert.strictEqual(denied.record.sequence, 1)
    }).pipe(Effect.provide(layer)))
})
