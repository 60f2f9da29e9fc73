/**
 * `decide` with a context (docs/DESIGN.md §16): the guard sees the call, the anchors,
 * the Clock's time, the tokens, whether someone can be asked and the policy's state;
 * an ask is recorded allowed and becomes a denial where no one can be asked; a
 * changed state is stored as a `guard.state` entry after the decision, and folded
 * into `guard_state`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { Entry, Guard, JournalState, Persistence, SessionJournal } from "../src/index.ts"
import { ReplayFold } from "../src/internal/replayFold.ts"
import * as A from "./arbitraries.ts"

const layer = SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory()))
const call = {
  tool_name: "Bash",
  server_id: "srv",
  agent_id: "a",
  bytes_read: 0,
  bytes_written: 0,
  delegation_depth: 0
}

const payloads = (entries: ReadonlyArray<Entry.Entry>) =>
  entries.map((e) => Entry.isTool(e) ? ["tool", e.allowed] : [e.kind, e.payload])

describe("Guard context", () => {
  it.effect("the guard sees the call, the anchors, the Clock, the tokens, canAsk and the state", () =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      yield* TestClock.setTime(1_764_400_000_000)
      const seen: Array<Guard.GuardContext | undefined> = []
      const guard: Guard.Guard = (_s, _p, c) => {
        seen.push(c)
        return Guard.allow
      }
      const sent = { tool_name: "Bash", tool_input: { command: "ls" }, cwd: "/w" }
      yield* journal.decide("c", call, guard, undefined, {
        call: sent,
        where: { projectDir: "/w" },
        tokens: 12n,
        canAsk: true
      })
      yield* journal.decide("c", call, guard)
      assert.deepStrictEqual(seen, [
        {
          call: sent,
          where: { projectDir: "/w" },
          nowMillis: 1_764_400_000_000,
          tokens: 12n,
          canAsk: true,
          state: null
        },
        { call: null, where: {}, nowMillis: 1_764_400_000_000, tokens: null, canAsk: false, state: null }
      ])
    }).pipe(Effect.provide(layer)))

  it.effect("an ask is recorded allowed with verdict ask; where no one can be asked it is a denial", () =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const asking: Guard.Guard = () => Guard.ask("pushes need a look", "ask(\"Bash(git push *)\")")
      const asked = yield* journal.decide("a", call, asking, undefined, { canAsk: true, tokens: 5n })
      assert.strictEqual(asked.verdict._tag, "Ask")
      assert.isFalse(Guard.isAllowed(asked.verdict))
      const refused = yield* journal.decide("a", call, asking)
      assert.deepStrictEqual(refused.verdict, {
        _tag: "Deny",
        reason: "approval was needed (pushes need a look) and no one could be asked",
        guard: "ask(\"Bash(git push *)\")"
      })
      const entries = yield* Stream.runCollect(journal.entries("a"))
      assert.deepStrictEqual(payloads(entries), [
        ["tool", true],
        [Guard.DECISION_KIND, {
          tool_sequence: 0,
          verdict: "ask",
          guard: "ask(\"Bash(git push *)\")",
          reason: "pushes need a look",
          tokens: 5
        }],
        ["tool", false],
        [Guard.DECISION_KIND, {
          tool_sequence: 2,
          verdict: "deny",
          guard: "ask(\"Bash(git push *)\")",
          reason: "approval was needed (pushes need a look) and no one could be asked"
        }]
      ])
    }).pipe(Effect.provide(layer)))

  it.effect("a changed state is stored after the decision and folded; the state given back unchanged is not stored", () =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const counting: Guard.Guard = (_s, _p, c) => {
        const n = typeof c?.state?.["n"] === "number" ? c.state["n"] : 0
        // The state it was given, when unchanged: `decide` stores what differs from it.
        return { _tag: "Allow", state: n >= 2 && c?.state != null ? c.state : { n: n + 1 } }
      }
      for (let i = 0; i < 3; i++) yield* journal.decide("st", call, counting)
      const entries = yield* Stream.runCollect(journal.entries("st"))
      assert.deepStrictEqual(entries.map((e) => e.kind), [
        "tool",
        Guard.DECISION_KIND,
        Guard.STATE_KIND,
        "tool",
        Guard.DECISION_KIND,
        Guard.STATE_KIND,
        "tool",
        Guard.DECISION_KIND
      ])
      assert.deepStrictEqual((yield* journal.state("st")).guard_state, { n: 2 })
      // A state over the bound fails the call and writes nothing.
      const before = (yield* journal.state("st")).next_sequence
      const huge: Guard.Guard = () => ({ _tag: "Allow", state: { big: "x".repeat(Guard.MAX_STATE_BYTES) } })
      assert.isTrue(Exit.isFailure(yield* Effect.exit(journal.decide("st", call, huge))))
      assert.strictEqual((yield* journal.state("st")).next_sequence, before)
    }).pipe(Effect.provide(layer)))

  it("fold keeps the newest valid state and ignores one that is not an object or is over the bound", () => {
    let s = JournalState.empty("f")
    const put = (payload: unknown) => {
      s = JournalState.fold(s, JournalState.nextOther(s, 1, Guard.STATE_KIND, payload as never))
    }
    put({ a: 1 })
    assert.deepStrictEqual(s.guard_state, { a: 1 })
    put([1, 2])
    put("text")
    put(null)
    put({ big: "é".repeat(Guard.MAX_STATE_BYTES / 2) })
    assert.deepStrictEqual(s.guard_state, { a: 1 })
    put({ b: "é".repeat(Guard.MAX_STATE_BYTES / 2 - 20) })
    assert.deepStrictEqual(Object.keys(s.guard_state ?? {}), ["b"])
    assert.isDefined(Guard.stateProblem({ big: "é".repeat(Guard.MAX_STATE_BYTES / 2) }))
  })

  it("property: fold and a replay keep the same newest valid state, whatever the guard.state payloads", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.jsonValue({ maxDepth: 2 }),
            fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
            fc.constant({ big: "x".repeat(Guard.MAX_STATE_BYTES) })
          ),
          { maxLength: 8 }
        ),
        (payloads) => {
          let s = JournalState.empty("r")
          const replay = new ReplayFold(s)
          let expected: unknown = null
          for (const payload of payloads) {
            const e = JournalState.nextOther(s, 1, Guard.STATE_KIND, JSON.parse(JSON.stringify(payload)))
            s = JournalState.fold(s, e)
            replay.fold(e)
            if (Guard.stateProblem(e.payload) === undefined) expected = e.payload
          }
          assert.deepStrictEqual(s.guard_state, expected)
          assert.deepStrictEqual(replay.state().guard_state, expected)
        }
      ),
      { numRuns: A.runs(100) }
    )
  })
})
