/**
 * The mutable fold of verify-mode replays gives exactly `JournalState.fold`'s state:
 * after every entry, every field `Recovery.firstDifference` compares, the head, the
 * retained entries and what `retainedAt` and `lastHash` answer; and counters past
 * 2^53 − 1 stay exact and saturate at 2^64 − 1 as the fold's do.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { Checkpoint, Entry, JournalState, Recovery } from "../src/index.ts"
import { ReplayFold } from "../src/internal/replayFold.ts"
import * as A from "./arbitraries.ts"

const same = (expected: JournalState.JournalState, actual: JournalState.JournalState): void => {
  const d = Recovery.firstDifference(expected, actual)
  assert.isNull(d, d === null ? "" : `${d.field}: ${d.claimed} vs ${d.actual}`)
  assert.strictEqual(JournalState.head(actual), JournalState.head(expected))
  assert.deepStrictEqual(JournalState.retainedHashes(actual), JournalState.retainedHashes(expected))
  // A replay keeps no window (its state is read for the head, counters and hashes).
  assert.deepStrictEqual(JournalState.entries(actual), [])
  assert.deepStrictEqual(actual.data_flow, expected.data_flow)
  assert.deepStrictEqual([...actual.tool_counts].sort(), [...expected.tool_counts].sort())
  assert.strictEqual(actual.session_id, expected.session_id)
  assert.strictEqual(actual.meta, expected.meta)
  // Both encode to the same checkpoint document, up to the order of tool counts.
  const doc = (s: JournalState.JournalState) => {
    const d = Checkpoint.encode(s) as unknown as Record<string, unknown>
    return JSON.stringify({
      ...d,
      tool_counts: [...(d["tool_counts"] as Array<unknown>)].map((x) => JSON.stringify(x)).sort()
    })
  }
  assert.strictEqual(doc(actual), doc(expected))
}

describe("ReplayFold", () => {
  it("equals JournalState.fold after every entry", () => {
    fc.assert(
      fc.property(A.caps, A.ops(60), (caps, ops) => {
        const h = A.run(caps, ops)
        const fold = new ReplayFold(h.states[0]!)
        same(h.states[0]!, fold.state())
        h.entries.forEach((entry, i) => {
          const before = h.states[i]!
          assert.strictEqual(fold.lastHash(), JournalState.lastHash(before))
          fold.fold(entry)
          const after = h.states[i + 1]!
          assert.strictEqual(fold.nextSequence, after.next_sequence)
          assert.strictEqual(fold.evictedHead, after.evicted_head)
          const retained = JournalState.retainedHashes(after)
          const first = after.next_sequence - retained.length
          for (let s = Math.max(0, first - 2); s < after.next_sequence + 2; s++) {
            assert.strictEqual(
              fold.retainedAt(s),
              s >= first && s < after.next_sequence ? retained[s - first] : undefined
            )
          }
          same(after, fold.state())
        })
      }),
      { numRuns: A.runs(200) }
    )
  })

  it("keeps counters exact past 2^53 − 1 and saturates them at 2^64 − 1 like the fold", () => {
    const big = A.record("read_file", { bytes_read: Entry.MAX_U53, bytes_written: Entry.MAX_U53 - 1 })
    // 2^64 / 2^53 = 2048 tool entries reach saturation.
    const h = A.run({ entry_cap: 3 }, Array.from({ length: 2600 }, (_, i) => i % 7 === 6 ? A.message(i) : big))
    const fold = new ReplayFold(h.states[0]!)
    h.entries.forEach((entry, i) => {
      fold.fold(entry)
      if (i === 1 || i === 2 || i === 100 || i % 500 === 0 || i >= 2380) same(h.states[i + 1]!, fold.state())
    })
    const last = h.states[h.entries.length]!
    assert.strictEqual(last.data_flow.total_bytes_read, JournalState.U64_MAX)
    same(last, fold.state())
  })

  it("applies metadata with the later updated_at, as applyMeta does", () => {
    const empty = JournalState.empty("m")
    const fold = new ReplayFold(empty)
    const m1 = { title: "a", updated_at: 5 } as unknown as Parameters<typeof JournalState.applyMeta>[1]
    const m2 = { title: "b", updated_at: 3 } as unknown as Parameters<typeof JournalState.applyMeta>[1]
    const m3 = { title: "c", updated_at: 5 } as unknown as Parameters<typeof JournalState.applyMeta>[1]
    let s = empty
    for (const m of [m1, m2, m3]) {
      s = JournalState.applyMeta(s, m)
      fold.applyMeta(m)
      assert.strictEqual(fold.state().meta, s.meta)
    }
  })
})
