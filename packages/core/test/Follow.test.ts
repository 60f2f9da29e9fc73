/**
 * What a follower checks (`Follow`): the genuine chain passes from any starting
 * state; every single change to a followed record (its content, its hash, its
 * sequence) is caught at that record or, when its hash was recomputed, at the next
 * one; and storage verified after a break is reconciled with what was shown
 * (intact, a repair's recovery entry, or history replaced).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Entry, Follow, JournalState } from "../src/index.ts"
import * as A from "./arbitraries.ts"

// Follows `entries` from `cursor`, returning the index (into `entries`) of the first break, or -1.
const followAll = (cursor: Follow.Cursor, entries: ReadonlyArray<Entry.Entry>): number => {
  let c = cursor
  for (let i = 0; i < entries.length; i++) {
    const r = Follow.check(c, entries[i]!)
    if (Result.isFailure(r)) return i
    c = r.success
  }
  return -1
}

const retimed = (e: Entry.Entry): Entry.Entry => ({ ...e, timestamp_secs: e.timestamp_secs + 1 })
const rehashed = (e: Entry.Entry): Entry.Entry => ({ ...e, entry_hash: Entry.computeHash(e) })

// Sessions whose entries link, and histories of two entries or more.
const linkedCaps = A.caps.filter((c) => c.entry_cap > 0)
const twoOrMore = A.ops(30).filter((l) => l.length >= 2)

const chainOf = (n: number, c?: JournalState.Caps) =>
  A.run(c ?? {}, Array.from({ length: n }, (_, i) => ({ op: "record" as const, ts: 100 + i, params: A.call(`t${i}`) })))

describe("Follow.check", () => {
  it("property: the genuine chain passes from any loaded state and any start", () => {
    fc.assert(
      fc.property(A.caps, A.ops(30), fc.nat(), fc.nat(), (c, list, a, b) => {
        const { entries, states } = A.run(c, list)
        const loadedAt = a % (entries.length + 1)
        const from = b % (loadedAt + 1)
        // A follower that loaded the state after `loadedAt` entries and shows from `from` on.
        assert.strictEqual(followAll(Follow.start(states[loadedAt]!, from), entries.slice(from)), -1)
      }),
      { numRuns: A.runs(100) }
    )
  })

  it("property: a changed record is caught at it; a changed and rehashed one at the next, or at the loaded tip", () => {
    fc.assert(
      fc.property(
        linkedCaps,
        twoOrMore,
        fc.nat(),
        fc.nat(),
        fc.constantFrom("content", "rehashed", "skipped", "repeated"),
        (c, list, a, b, how) => {
          const { entries, states } = A.run(c, list)
          const loadedAt = a % (entries.length + 1)
          const from = Math.min(loadedAt, entries.length - 1)
          const at = from + (b % (entries.length - from))
          const followed = entries.slice(from)
          const i = at - from
          const forged = followed.slice()
          if (how === "content") forged[i] = retimed(forged[i]!)
          if (how === "rehashed") forged[i] = rehashed(retimed(forged[i]!))
          if (how === "skipped") forged.splice(i, 1)
          if (how === "repeated") forged.splice(i, 0, forged[i]!)
          const caught = followAll(Follow.start(states[loadedAt]!, from), forged)
          if (how === "rehashed") {
            // A valid extension of the chain is indistinguishable, unless the loaded state vouches for it.
            const vouched = at < loadedAt
            const next = i + 1 < forged.length
            if (next || vouched) assert.strictEqual(caught, vouched ? i : i + 1)
            else assert.strictEqual(caught, -1)
          } else if (how === "skipped" && i === forged.length) {
            assert.strictEqual(caught, -1) // the last one dropped: nothing to see yet
          } else if (how === "repeated") {
            assert.strictEqual(caught, i + 1) // the second delivery of the same sequence
          } else {
            assert.strictEqual(caught, i)
          }
        }
      ),
      { numRuns: A.runs(200) }
    )
  })

  it("a session with entry_cap 0 links every entry to ZERO_HASH, and only hashes are checked", () => {
    const { entries, states } = chainOf(5, { entry_cap: 0 })
    assert.strictEqual(followAll(Follow.start(states[3]!, 3), entries.slice(3)), -1)
    assert.strictEqual(followAll(Follow.start(states[3]!, 3), [entries[3]!, retimed(entries[4]!)]), 1)
  })

  it("names what failed: sequence, prev_hash, entry_hash, or the loaded tip", () => {
    const { entries, states } = chainOf(4)
    const at = (cursor: Follow.Cursor, e: Entry.Entry) => {
      const r = Follow.check(cursor, e)
      return Result.isFailure(r) ? r.failure.what : null
    }
    assert.strictEqual(at(Follow.start(states[2]!, 2), entries[3]!), "sequence")
    assert.strictEqual(at(Follow.start(states[2]!, 2), retimed(entries[2]!)), "entry_hash")
    assert.strictEqual(
      at(Follow.start(states[2]!, 2), { ...entries[2]!, prev_hash: entries[0]!.entry_hash }),
      "prev_hash"
    )
    // From the start of a state that no longer retains entry 0: the link of entry 1
    // cannot be checked, the loaded tip still is.
    const evicting = chainOf(4, { entry_cap: 1 })
    const cursor = Follow.start(evicting.states[4]!, 1)
    assert.isNull(cursor.lastHash)
    const forged = [rehashed(retimed(evicting.entries[1]!))]
    forged.push(rehashed({ ...evicting.entries[2]!, prev_hash: forged[0]!.entry_hash }))
    forged.push(rehashed({ ...evicting.entries[3]!, prev_hash: forged[1]!.entry_hash }))
    assert.strictEqual(followAll(cursor, forged), 2)
  })
})

describe("Follow.reconcile", () => {
  const { entries } = chainOf(10)
  const shownAll = () => {
    const shown = new Follow.Shown(16)
    for (const e of entries) shown.push(e.sequence, e.entry_hash)
    return shown
  }
  const recovery = (state: JournalState.JournalState, lost: unknown) =>
    JournalState.nextOther(state, 500, Follow.RECOVERY_KIND, { problem: "integrity", lost } as never)
  const prefix = (n: number) => JournalState.foldAll(JournalState.empty("prop-session"), entries.slice(0, n))

  it("storage that holds everything shown is intact, also when it holds more", () => {
    assert.deepStrictEqual(Follow.reconcile(shownAll(), entries, true), { _tag: "Intact" })
    const more = [...entries, JournalState.nextTool(prefix(10), 600, A.call("later"))]
    assert.deepStrictEqual(Follow.reconcile(shownAll(), more, true), { _tag: "Intact" })
  })

  it("a recovery entry linked to the last entry held that sets aside everything shown after it is a repair", () => {
    const entry = recovery(prefix(5), { from: 5, to: 9 })
    const r = Follow.reconcile(shownAll(), [...entries.slice(0, 5), entry], true)
    assert.deepStrictEqual(r, { _tag: "Recovered", entry, replaced: { from: 5, to: 9 } })
  })

  it("anything else in place of history shown is divergence, with what was expected and found", () => {
    // A recovery entry that admits less than was shown.
    const short = recovery(prefix(5), { from: 5, to: 7 })
    assert.include(Follow.reconcile(shownAll(), [...entries.slice(0, 5), short], true), {
      _tag: "Diverged",
      sequence: 5
    })
    // A recovery entry that does not link to the entry before it.
    const unlinked = { ...recovery(prefix(5), { from: 5, to: 9 }), prev_hash: entries[3]!.entry_hash }
    assert.include(Follow.reconcile(shownAll(), [...entries.slice(0, 5), rehashed(unlinked)], true), {
      _tag: "Diverged"
    })
    // Cut back to 5 with new writes after it.
    let state = prefix(5)
    const rewritten = entries.slice(0, 5)
    for (let i = 5; i < 12; i++) {
      const e = JournalState.nextTool(state, 700 + i, A.call(`new${i}`))
      rewritten.push(e)
      state = JournalState.fold(state, e)
    }
    assert.deepStrictEqual(Follow.reconcile(shownAll(), rewritten, true), {
      _tag: "Diverged",
      sequence: 5,
      expected: entries[5]!.entry_hash,
      found: rewritten[5]!.entry_hash,
      shownTo: 9
    })
    // Cut with nothing after the cut.
    assert.deepStrictEqual(Follow.reconcile(shownAll(), entries.slice(0, 7), true), {
      _tag: "Diverged",
      sequence: 7,
      expected: entries[7]!.entry_hash,
      found: null,
      shownTo: 9
    })
  })

  it("remembers a bounded number of hashes, and cannot vouch for a recovery past them", () => {
    const shown = new Follow.Shown(4)
    for (const e of entries) shown.push(e.sequence, e.entry_hash)
    assert.strictEqual(shown.first, 6)
    assert.strictEqual(shown.end, 10)
    assert.isUndefined(shown.hashAt(5))
    const entry = recovery(prefix(6), { from: 6, to: 9 })
    // The entry before the recovery entry is no longer remembered: not vouched for.
    assert.include(Follow.reconcile(shown, [entry], true), { _tag: "Diverged", sequence: 6 })
  })
})

describe("Follow.startAfter", () => {
  it("property: the genuine chain passes after any entry a caller holds; another chain's entry is caught at once or at the first record", () => {
    fc.assert(
      fc.property(
        linkedCaps,
        twoOrMore,
        fc.nat(),
        fc.nat(),
        (c, list, a, b) => {
          const { entries, states } = A.run(c, list)
          const loaded = states[entries.length]!
          const at = a % (entries.length - 1)
          const genuine = Follow.startAfter(loaded, { sequence: at, hash: entries[at]!.entry_hash })
          assert.isTrue(Result.isSuccess(genuine))
          if (Result.isSuccess(genuine)) assert.strictEqual(followAll(genuine.success, entries.slice(at + 1)), -1)
          // The caller holds an entry of another chain at `at` (here: a rehashed edit).
          const other = rehashed(retimed(entries[at]!)).entry_hash
          const forged = Follow.startAfter(loaded, { sequence: at, hash: other })
          if (JournalState.retainedHashAt(loaded, at) !== undefined) {
            assert.deepStrictEqual(
              forged,
              Result.fail({ sequence: at, expected: other, found: entries[at]!.entry_hash })
            )
          } else {
            assert.isTrue(Result.isSuccess(forged))
            if (Result.isSuccess(forged)) assert.strictEqual(followAll(forged.success, entries.slice(at + 1)), 0)
          }
          // No sequence at all: held nowhere.
          for (const sequence of [-1, at + 0.5, Number.NaN, Number.POSITIVE_INFINITY]) {
            assert.deepStrictEqual(
              Follow.startAfter(loaded, { sequence, hash: other }),
              Result.fail({ sequence, expected: other, found: null })
            )
          }
          // An entry storage does not hold (yet, or any more).
          const beyond = entries.length + (b % 3)
          assert.deepStrictEqual(
            Follow.startAfter(loaded, { sequence: beyond, hash: other }),
            Result.fail({ sequence: beyond, expected: other, found: null })
          )
        }
      ),
      { numRuns: A.runs(200) }
    )
  })
})
