/**
 * The session store's index keeps its uuids within its budget of bytes, whatever
 * the uuids weigh, and never forgets one: a uuid that left the map is still one
 * a generation may hold (no false negatives), and `unresolved` names it with the
 * lines it can be on. A uuid never stored is a false hit of the generations
 * rarely, and a hit names the lines of one generation, not the history: the work
 * a lookup costs does not grow with the uuids stored. The seed is in the test's
 * name (`SEED=…` replays).
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
  it("10,000 uuids of up to 64 KiB each stay within a budget of 64 KiB", () => {
    const budget = 64 * 1024
    const uuids = Array.from({ length: 10_000 }, (_, i) => i % 100 === 0 ? `${i}-${"x".repeat(65_536)}` : `u-${i}`)
    const index = indexOf(budget, uuids)
    assert.isAtMost(StoreIndex.uuidBytes(index), budget)
    // A uuid is kept by its key: a long one as a digest of fixed length.
    for (const key of index.uuids.keys()) assert.isAtMost(key.length, StoreIndex.MAX_KEY_CHARS + 1)
    assert.isAbove(index.evictedThrough, 0)
    // The oldest uuids left the map; a generation still may hold every one.
    for (const uuid of uuids) {
      if (!index.uuids.has(StoreIndex.keyOf(uuid))) {
        assert.isAbove(index.older.lookup(StoreIndex.keyOf(uuid)).length, 0)
      }
    }
    const old = [{ line: "", uuid: StoreIndex.keyOf(uuids[0]!) }]
    assert.strictEqual(StoreIndex.unresolved(index, old)?.ranges[0]?.from, 1)
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
            assert.isTrue(wanted!.ranges.some((r) => r.from <= i + 1 && i + 1 <= r.through), uuid)
          })
          assert.isAtMost(index.uuidBytes, budget / 2)
          // Within the budget, or one smallest generation when the budget is below it.
          assert.isAtMost(index.older.bytes, Math.max(budget / 2, 64))
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

// The uuids of `count` transcript lines, as the SDK gives them.
const uuidsOf = (tag: string, count: number) =>
  Array.from({ length: count }, (_, i) => `${tag}0000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`)

// The lines of every generation a batch of fresh uuids makes `unresolved` read.
const linesRead = (index: StoreIndex.Index, batch: ReadonlyArray<string>) => {
  const wanted = StoreIndex.unresolved(index, batch.map((uuid) => ({ line: "", uuid })))
  return wanted === undefined ? 0 : wanted.ranges.reduce((n, r) => n + r.through - r.from + 1, 0)
}

describe("StoreIndex lookups do not grow with the history", () => {
  const history = process.env["STRESS"] === "1" ? 100_000 : 20_000

  it(`${history} uuids in the default budget: fresh uuids are rarely a false hit, and a hit reads one generation`, () => {
    const index = StoreIndex.empty()
    const stored = uuidsOf("a", history)
    let fed = 0
    const feed = (count: number) => {
      for (const uuid of stored.slice(fed, fed + count)) {
        assert.isTrue(StoreIndex.fold(index, lineEntry(fed, fed + 1, JSON.stringify({ type: "user", uuid }))))
        fed++
      }
    }
    // The lines a batch of 200 fresh uuids reads, early in the history and at its end.
    const fresh = uuidsOf("b", 20_000)
    feed(history / 2)
    const early = fresh.slice(0, 10_000)
    let earlyLines = 0
    let earlyHits = 0
    for (let i = 0; i < early.length; i += 200) {
      const lines = linesRead(index, early.slice(i, i + 200))
      earlyLines += lines
      if (lines > 0) earlyHits++
    }
    feed(history - fed)
    const late = fresh.slice(10_000)
    let lateLines = 0
    let falseHits = 0
    for (const uuid of late) {
      const may = index.older.lookup(uuid)
      falseHits += may.length
      // A hit names generations of at most `capacity` uuids, not the history.
      for (const g of may) assert.isAtMost(g.count, index.older.capacity)
    }
    for (let i = 0; i < late.length; i += 200) lateLines += linesRead(index, late.slice(i, i + 200))
    // About one lookup in 750,000 per generation: 10,000 lookups over at most 32 generations.
    assert.isAtMost(falseHits, 5, `false hits of 10,000 fresh uuids`)
    assert.isAtMost(earlyHits, 5)
    assert.isAtMost(lateLines, 5 * index.older.capacity)
    assert.isAtMost(earlyLines, 5 * index.older.capacity)
    assert.isAtMost(StoreIndex.uuidBytes(index), StoreIndex.DEFAULT_BUDGET)
    // Every stored uuid is still found: in the map, or in a generation holding its line.
    stored.forEach((uuid, i) => {
      if (index.uuids.get(uuid) === i + 1) return
      assert.isTrue(index.older.lookup(uuid).some((g) => g.from <= i + 1 && i + 1 <= g.through), uuid)
    })
  })

  it("past its budget the index merges its oldest generations and stays within its bytes, finding every uuid", () => {
    const budget = 16 * 1024
    const stored = uuidsOf("c", 30_000)
    const index = indexOf(budget, stored)
    assert.isAtMost(StoreIndex.uuidBytes(index), budget)
    assert.isTrue(index.older.list.some((g) => g.level > 0))
    // The generations are consecutive lines, oldest first.
    index.older.list.forEach((g, i) => {
      if (i > 0) assert.isAbove(g.from, index.older.list[i - 1]!.through)
    })
    stored.forEach((uuid, i) => {
      if (index.uuids.get(uuid) === i + 1) return
      assert.isTrue(index.older.lookup(uuid).some((g) => g.from <= i + 1 && i + 1 <= g.through), uuid)
    })
  })
})
