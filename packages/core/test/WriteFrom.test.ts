/**
 * `SessionJournal.writeFrom`: a plan decides its items from the state the append
 * builds on, in the writer. Its items and metadata patch land in one append; a plan
 * with nothing to store costs no append; an invalid item fails its caller alone;
 * after another writer took the sequence the plan runs again on the reloaded state.
 */
import { assert, layer } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { JournalState, SessionJournal } from "../src/index.ts"
import * as IP from "./InstrumentedPersistence.ts"

const Journal = SessionJournal.SessionJournal
const probe = IP.makeProbe()
const Live = SessionJournal.layer().pipe(Layer.provideMerge(IP.layerMemory(probe)))

const range = (n: number) => Array.from({ length: n }, (_, i) => i)

// A plan that stores `{ n }` where n is the sequence the entry gets, unless told to skip.
const numbered = (skip: boolean) => (state: JournalState.JournalState) =>
  skip
    ? { items: [], result: -1 }
    : {
      items: [{ _tag: "Other" as const, kind: "message", payload: { n: state.next_sequence } }],
      result: state.next_sequence
    }

layer(Live)("SessionJournal.writeFrom", (it) => {
  it.effect("each plan sees the entries of the plans before it, also within one group commit", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "plans"
      const out = yield* Effect.forEach(range(40), () =>
        Effect.map(j.writeFrom(id, numbered(false)), (p) => {
          assert.deepStrictEqual(p.entries.map((e) => e.sequence), [p.result])
          return p.result
        }), { concurrency: "unbounded" })
      assert.deepStrictEqual([...out].sort((a, b) => a - b), range(40))
      const all = yield* Stream.runCollect(j.entries(id))
      assert.deepStrictEqual(all.map((e) => "payload" in e ? (e.payload as { n: number }).n : -2), range(40))
      assert.isBelow(IP.appendsOf(probe, id), 40)
    }))

  it.effect("a plan with nothing to store is answered without an append; items and meta share one append", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "nothing"
      yield* j.append(id, "message", { first: true })
      const before = IP.appendsOf(probe, id)
      assert.deepStrictEqual(yield* j.writeFrom(id, numbered(true)), { result: -1, entries: [] })
      assert.strictEqual(IP.appendsOf(probe, id), before)
      yield* j.writeFrom(id, (s) => ({
        items: [{ _tag: "Other", kind: "message", payload: { n: s.next_sequence } }],
        meta: { data: { seen: s.next_sequence } },
        result: null
      }))
      assert.strictEqual(IP.appendsOf(probe, id), before + 1)
      const state = yield* j.state(id)
      assert.deepStrictEqual(state.meta?.data, { seen: 1 })
      assert.strictEqual(state.next_sequence, 2)
    }))

  it.effect("an invalid item fails its caller with InvalidRecordField and stores nothing", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "invalid"
      yield* j.append(id, "message", { first: true })
      const exit = yield* Effect.exit(j.writeFrom(id, () => ({
        items: [
          { _tag: "Other", kind: "message", payload: { ok: 1 } },
          {
            _tag: "Tool",
            params: {
              tool_name: " ",
              server_id: "s",
              agent_id: "a",
              bytes_read: 0,
              bytes_written: 0,
              delegation_depth: 0
            }
          }
        ],
        result: null
      })))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) assert.include(String(exit.cause), "InvalidRecordField")
      assert.strictEqual((yield* j.state(id)).next_sequence, 1)
    }))

  it.effect("after another writer took the sequence, the plan runs again on the reloaded state", () =>
    Effect.gen(function*() {
      const j = yield* Journal
      const id = "raced"
      yield* j.append(id, "message", { first: true })
      IP.plan(probe, id, IP.appendsOf(probe, id), { _tag: "Sneak", count: 3 })
      const seen: Array<number> = []
      const got = yield* j.writeFrom(id, (s) => {
        seen.push(s.next_sequence)
        return { items: [{ _tag: "Other", kind: "message", payload: { n: s.next_sequence } }], result: s.next_sequence }
      })
      assert.deepStrictEqual(seen, [1, 4])
      assert.strictEqual(got.result, 4)
      const all = yield* Stream.runCollect(j.entries(id))
      const last = all[4]!
      assert.deepStrictEqual("payload" in last ? last.payload : null, { n: 4 })
      assert.strictEqual(all.length, 5)
    }))
})
