/**
 * The session store's index keeps its uuids within its budget of bytes, whatever
 * the uuids weigh, and never forgets one: a uuid that left the map is still one
 * the filter may hold (no false negatives), and `unresolved` names it with the
 * lines it can be on. The seed is in the test's name (`SEED=…` replays).
 */
import type * as Entry from "@session-journal/core/Entry"
import * as fc from "fast-check"
import { assert, describe, it } from "vitest"
import * as StoreIndex from "../src/internal/storeIndex.ts"
import * as Planner from "../src/Planner.ts"

const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))

// The stored line entry `sequence`: only what the index reads of it.
const lineEntry = (sequence: number, n: number, text: string): Entry.Entry =>
  ({
    sequence,
    prev_hash: sequence === 0 ? "0".repeat(64) : `${String(sequence - 1).padStart(64, "0")}`,
    entry_hash: String(sequence).padStart(64, "0"),
    kind: Planner.LINE_KIND,
    payload: { n, line: text }
  }) as unknown as Entry.Entry

const indexOf = (budget: number, uuids: ReadonlyArray<string>): StoreIndex.Index => {
  const index = StoreIndex.empty(budget)
  uuids.forEach((uuid, i) => {
    assert.isTrue(StoreIndex.fold(index, lineEntry(i, i + 1, JSON.stringify({ type: "user", uuid }))))
  })
  return index
}

describe("StoreIndex within a budget", () => {
  it("10,000 uuids of up to 64 KiB each stay within 64 KiB and its filter", () => {
    const budget = 64 * 1024
    const uuids = Array.from({ length: 10_000 }, (_, i) => i % 100 === 0 ? `${i}-${"x".repeat(65_536)}` : `u-${i}`)
    const index = indexOf(budget, uuids)
    assert.isAtMost(StoreIndex.uuidBytes(index), budget + budget / 8)
    // A uuid is kept by its key: a long one as a digest of fixed length.
    for (const key of index.uuids.keys()) assert.isAtMost(key.length, StoreIndex.MAX_KEY_CHARS + 1)
    assert.isAbove(index.evictedThrough, 0)
    // The oldest uuids left the map; the filter still may hold every one.
    for (const uuid of uuids) assert.isTrue(index.filter.might(StoreIndex.keyOf(uuid)))
    const old = [{ line: "", uuid: StoreIndex.keyOf(uuids[0]!) }]
    assert.deepStrictEqual(StoreIndex.unresolved(index, old)?.from, 1)
    assert.deepStrictEqual(StoreIndex.unresolved(index, old)?.through, index.evictedThrough)
  })

  it(`a uuid is in the map or named by unresolved, for any budget (seed ${SEED})`, () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1, maxLength: 200 }), { minLength: 1, maxLength: 300 }),
        fc.integer({ min: 0, max: 4096 }),
        (uuids, budget) => {
          const index = indexOf(budget, uuids)
          uuids.forEach((uuid, i) => {
            const key = StoreIndex.keyOf(uuid)
            const at = index.uuids.get(key)
            if (at !== undefined) {
              assert.strictEqual(at, i + 1)
              return
            }
            const wanted = StoreIndex.unresolved(index, [{ line: "", uuid: key }])
            assert.isDefined(wanted, uuid)
            assert.isTrue(wanted!.keys.has(key))
            assert.isAtMost(wanted!.from, i + 1)
            assert.isAtLeast(wanted!.through, i + 1)
          })
          assert.isAtMost(index.uuidBytes, budget)
        }
      ),
      { seed: SEED, numRuns: 200 }
    )
  })

  it("long uuids are keyed apart from every short one", () => {
    const long = "y".repeat(StoreIndex.MAX_KEY_CHARS + 1)
    const key = StoreIndex.keyOf(long)
    assert.strictEqual(key.length, StoreIndex.MAX_KEY_CHARS + 1)
    assert.notStrictEqual(key, long)
    assert.strictEqual(StoreIndex.keyOf("z".repeat(StoreIndex.MAX_KEY_CHARS)), "z".repeat(StoreIndex.MAX_KEY_CHARS))
    assert.notStrictEqual(StoreIndex.keyOf(`${long}a`), key)
  })
})
