/**
 * The byte-budgeted window against the ring it replaced. For random sessions (tool
 * calls, small and large messages, every cap, budgets from nothing to everything),
 * the state that keeps only the retained hashes and the newest entries within
 * `window_bytes` gives, after every entry, the same chio snapshot, head, next link
 * and guard verdicts as the reference model of `legacy.ts`, which keeps every
 * retained entry; its window is the newest of the retained entries and within its
 * budget; and through a checkpoint (the version 2 document, or the version 1
 * document the reference writes) it continues identically. Seeds are printed by
 * fast-check on failure.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { Checkpoint, Entry, Guard, JournalState } from "../src/index.ts"
import * as Window from "../src/internal/window.ts"
import * as A from "./arbitraries.ts"
import * as Legacy from "./legacy.ts"

const bigPayload: fc.Arbitrary<Schema.Json> = fc.oneof(
  fc.record({ role: fc.constantFrom("user", "assistant"), content: fc.string({ maxLength: 3000 }) }),
  fc.array(fc.string({ maxLength: 200 }), { maxLength: 20 })
)

const op: fc.Arbitrary<A.Op> = fc.oneof(
  { arbitrary: A.op, weight: 3 },
  {
    arbitrary: fc.record({
      op: fc.constant("append" as const),
      ts: fc.integer({ min: 1_700_000_000, max: 1_800_000_000 }),
      kind: fc.constantFrom("message", "chat.message"),
      payload: bigPayload
    }),
    weight: 2
  }
)

const budget = fc.oneof(
  fc.constant(0),
  fc.nat(1000),
  fc.nat(20_000),
  fc.constant(JournalState.DEFAULT_WINDOW_BYTES),
  fc.constant(Number.MAX_SAFE_INTEGER)
)

const caps = fc.record({
  entry_cap: fc.oneof(fc.constant(0), fc.constant(1), fc.nat(8), fc.nat(64), fc.constant(4096)),
  tool_counts_cap: fc.oneof(fc.constant(0), fc.nat(4), fc.constant(4096))
})

const names = ["read_file", "write_file", "search", "a", "b"]
const guards: ReadonlyArray<Guard.Guard> = [
  Guard.maxBytesRead(5000),
  Guard.maxBytesWritten(2n ** 60n),
  Guard.maxInvocations(7),
  Guard.maxDelegationDepth(3),
  Guard.maxStreak(2),
  Guard.forbiddenTransitions([["read_file", "write_file"], ["a", "b"]]),
  Guard.requirePredecessors({ write_file: ["read_file"], b: ["a", "search"] }),
  Guard.allowList(["read_file", "search", "a"]),
  Guard.denyList(["b"]),
  // Guards of an application's own that read the rest of the snapshot.
  (s) => s.entry_count > 5 ? Guard.deny("long", "entryCount") : Guard.allow,
  (s, p) => s.tool_sequence.filter((n) => n === p.tool_name).length > 2 ? Guard.deny("often", "recent") : Guard.allow,
  (s) => s.head_hash.startsWith("0") ? Guard.deny("zero", "head") : Guard.allow,
  Guard.any(Guard.maxStreak(1), Guard.all(Guard.allowList(names), Guard.maxInvocations(20)))
]

// The snapshot as chio's JSON, its tool counts in name order (a map has no order).
const snapshotJson = (s: JournalState.Snapshot) => {
  const json = JournalState.snapshotToJson(s)
  const counts = Object.entries(json.tool_counts).sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0)
  return JSON.stringify({ ...json, tool_counts: counts })
}

const agree = (state: JournalState.JournalState, legacy: Legacy.LegacyState, where: string, filled = true) => {
  assert.strictEqual(snapshotJson(JournalState.snapshot(state)), snapshotJson(Legacy.snapshot(legacy)), where)
  assert.strictEqual(JournalState.head(state), Legacy.head(legacy), where)
  assert.strictEqual(JournalState.lastHash(state), Legacy.lastHash(legacy), where)
  assert.strictEqual(state.next_sequence, legacy.next_sequence, where)
  assert.strictEqual(state.evicted_head, legacy.evicted_head, where)
  assert.strictEqual(state.message_count, legacy.message_count, where)
  assert.strictEqual(JournalState.entryCount(state), legacy.entries.length, where)
  assert.deepStrictEqual(JournalState.retainedHashes(state), legacy.entries.map((e) => e.entry_hash), where)
  // The window: the newest retained entries, within the budget, and verifying.
  const window = JournalState.entries(state)
  assert.deepStrictEqual(window, legacy.entries.slice(legacy.entries.length - window.length), where)
  assert.strictEqual(JournalState.windowStart(state), state.next_sequence - window.length, where)
  const weight = window.reduce((n, e) => n + Window.weight(e), 0)
  assert.strictEqual(state.window.bytes, weight, where)
  assert.isAtMost(weight, state.window_bytes, where)
  // Nothing that fits is let go of: the entry before the window would not fit.
  const before = legacy.entries[legacy.entries.length - window.length - 1]
  if (filled && before !== undefined) assert.isAbove(weight + Window.weight(before), state.window_bytes, where)
  assert.isTrue(Result.isSuccess(JournalState.verify(state)), where)
  // The arrays behind the window hold at most about twice it.
  assert.isAtMost(state.window.start, Math.max(window.length, 0) + 1, where)
}

/** Applies `o` to both; a tool call is decided by `guard` on each side's snapshot first. */
const step = (
  state: JournalState.JournalState,
  legacy: Legacy.LegacyState,
  o: A.Op,
  guard: Guard.Guard,
  where: string
): [JournalState.JournalState, Legacy.LegacyState] => {
  let entry: Entry.Entry
  if (o.op === "record") {
    const verdict = guard(JournalState.snapshot(state), o.params)
    assert.deepStrictEqual(verdict, guard(Legacy.snapshot(legacy), o.params), where)
    for (const g of guards) {
      assert.deepStrictEqual(g(JournalState.snapshot(state), o.params), g(Legacy.snapshot(legacy), o.params), where)
    }
    entry = JournalState.nextTool(state, o.ts, { ...o.params, allowed: Guard.isAllowed(verdict) })
  } else {
    entry = JournalState.nextOther(state, o.ts, o.kind, o.payload)
  }
  assert.strictEqual(entry.prev_hash, Legacy.lastHash(legacy), where)
  assert.strictEqual(entry.entry_hash, Entry.computeHash(entry), where)
  return [JournalState.fold(state, entry), Legacy.fold(legacy, entry)]
}

describe("the byte-budgeted window against the ring", () => {
  it("property: same snapshot, head, links and guard verdicts as the ring, after every entry", () => {
    fc.assert(
      fc.property(caps, budget, fc.array(op, { maxLength: 60 }), fc.nat(guards.length - 1), (c, bytes, list, g) => {
        let state = JournalState.withWindowBytes(JournalState.empty("w", c), bytes)
        let legacy = Legacy.empty("w", c)
        agree(state, legacy, "empty")
        list.forEach((o, i) => {
          ;[state, legacy] = step(state, legacy, o, guards[g]!, `after ${i}`)
          agree(state, legacy, `after ${i + 1}`)
        })
      }),
      { numRuns: A.runs(150) }
    )
  })

  it("property: through a checkpoint (version 4, or version 1 as the ring wrote it) a session continues identically", () => {
    fc.assert(
      fc.property(
        caps,
        budget,
        fc.array(op, { maxLength: 40 }),
        fc.array(op, { maxLength: 20 }),
        fc.nat(guards.length - 1),
        (c, bytes, first, then, g) => {
          let state = JournalState.withWindowBytes(JournalState.empty("w", c), bytes)
          let legacy = Legacy.empty("w", c)
          first.forEach((o, i) => {
            ;[state, legacy] = step(state, legacy, o, guards[g]!, `first ${i}`)
          })
          const v2 = Checkpoint.toJsonText(state)
          const v1 = JSON.stringify(Legacy.encodeV1(legacy))
          // No bigger than the entries' document, but for the tree's compact range and the guard state.
          const treeText = `,"tree":${JSON.stringify(Checkpoint.encode(state).tree)}`.length +
            `,"guard_state":${JSON.stringify(state.guard_state)}`.length
          assert.isAtMost(v2.length, v1.length + 16 + treeText)
          for (const text of [v2, v1]) {
            let back = JournalState.withWindowBytes(Result.getOrThrow(Checkpoint.decode(JSON.parse(text))), bytes)
            // A version 1 document (written before guard states) shows only those among
            // its retained entries (Checkpoint.test.ts): the rest of the state is compared.
            if (text === v1) back = { ...back, guard_state: state.guard_state }
            let ref = legacy
            agree(back, ref, "decoded", false)
            // A version 1 document knows the tree only when its entries reach back to 0.
            assert.strictEqual(back.tree === null, text === v1 && state.evicted_head !== null)
            assert.strictEqual(
              Checkpoint.toJsonText(back),
              back.tree === null ? Checkpoint.toJsonText(JournalState.withoutTree(state)) : v2
            )
            then.forEach((o, i) => {
              ;[back, ref] = step(back, ref, o, guards[g]!, `then ${i}`)
              agree(back, ref, `then ${i + 1}`, false)
            })
          }
        }
      ),
      { numRuns: A.runs(100) }
    )
  })

  it("a smaller budget lets go of the oldest entries at once; a larger one keeps more from then on", () => {
    const payload = { content: "x".repeat(1000) }
    const w = Window.weight(JournalState.nextOther(JournalState.empty("w"), 1, "message", payload))
    let state = JournalState.withWindowBytes(JournalState.empty("w"), 10 * w)
    for (let i = 0; i < 20; i++) state = JournalState.fold(state, JournalState.nextOther(state, 1, "message", payload))
    assert.strictEqual(JournalState.entries(state).length, 10)
    assert.strictEqual(JournalState.windowStart(state), 10)
    state = JournalState.withWindowBytes(state, 3 * w)
    assert.deepStrictEqual(JournalState.entries(state).map((e) => e.sequence), [17, 18, 19])
    state = JournalState.withWindowBytes(state, 5 * w)
    for (let i = 0; i < 3; i++) state = JournalState.fold(state, JournalState.nextOther(state, 1, "message", payload))
    assert.deepStrictEqual(JournalState.entries(state).map((e) => e.sequence), [18, 19, 20, 21, 22])
    assert.strictEqual(JournalState.entryCount(state), 23)
    assert.strictEqual(JournalState.entryAt(state, 20)?.sequence, 20)
    assert.isUndefined(JournalState.entryAt(state, 17))
    assert.strictEqual(JournalState.retainedHashAt(state, 17), JournalState.retainedHashes(state)[17])
    assert.isUndefined(JournalState.retainedHashAt(state, 23))
  })

  it("an entry heavier than the budget is not kept, and lets go of the others", () => {
    let state = JournalState.withWindowBytes(JournalState.empty("w"), 4096)
    for (let i = 0; i < 3; i++) state = JournalState.fold(state, JournalState.nextOther(state, 1, "message", i))
    assert.strictEqual(JournalState.entries(state).length, 3)
    state = JournalState.fold(state, JournalState.nextOther(state, 1, "message", "y".repeat(5000)))
    assert.deepStrictEqual(JournalState.entries(state), [])
    assert.strictEqual(state.window.items.length, 0)
    state = JournalState.fold(state, JournalState.nextOther(state, 1, "message", 4))
    assert.deepStrictEqual(JournalState.entries(state).map((e) => e.sequence), [4])
    assert.strictEqual(JournalState.entryCount(state), 5)
  })
})
