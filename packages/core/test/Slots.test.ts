/**
 * The windows of a policy's limits (internal/slots.ts), which add to the newest slot
 * without copying it and re-age only what moves, against a plain reference: the
 * pairs as absolute slots, those that left dropped, the amount merged or appended,
 * the ages counted again from the newest. Random windows, amounts and times (a clock
 * that goes back, no time at all, malformed slots) give the same JSON and the same
 * totals, read back by the rule that made them or from their text.
 */
import { assert, describe, it } from "@effect/vitest"
import type * as Schema from "effect/Schema"
import * as fc from "fast-check"
import * as Slots from "../src/internal/slots.ts"
import * as A from "./arbitraries.ts"

const MAX = Number.MAX_SAFE_INTEGER
const add = (a: number, b: number) => (a > MAX - b ? MAX : a + b)

// The reference: what a slot is after `amount` is added at slot `now` (undefined: no time).
const reference = (
  slot: { readonly s: number; readonly w: ReadonlyArray<readonly [number, number]> } | "bad" | undefined,
  amount: number,
  now: number | undefined,
  reset: boolean
): Schema.Json => {
  let pairs: Array<[number, number]> = []
  if (slot === "bad" && !reset) pairs = [[now ?? 0, MAX]]
  else if (slot !== undefined && slot !== "bad" && !reset) {
    pairs = slot.w.map(([age, count]) => [slot.s - age, count] as [number, number])
      .filter(([at]) => now === undefined || at > now - Slots.WINDOW_SLOTS)
  }
  const newest = pairs[pairs.length - 1]
  const current = now ?? newest?.[0] ?? 0
  if (amount > 0) {
    if (newest !== undefined && newest[0] >= current) newest[1] = add(newest[1], amount)
    else pairs.push([current, amount])
  }
  const top = pairs.length === 0 ? current : pairs[pairs.length - 1]![0]
  return { s: top, w: pairs.map(([at, count]) => [top - at, count]) }
}

// A valid window: ages strictly decreasing from at most 60, counts from 1.
const window = fc.tuple(
  fc.integer({ min: 60, max: 400 }),
  fc.uniqueArray(fc.integer({ min: 0, max: 60 }), { maxLength: 8 }),
  fc.array(fc.oneof(fc.integer({ min: 1, max: 9 }), fc.constant(MAX - 3)), { minLength: 8, maxLength: 8 })
).map(([s, ages, counts]) => ({
  s,
  w: [...ages].sort((a, b) => b - a).map((age, i) => [age, counts[i]!] as const)
}))

const PER = 60_000

describe("Slots", () => {
  it("property: a window a rule adds to is the reference's, and totals the reference's sum", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            amount: fc.oneof(fc.nat(3), fc.constant(MAX)),
            dt: fc.option(fc.integer({ min: -5, max: 70 }), { freq: 8 }),
            reset: fc.boolean()
          }),
          { minLength: 1, maxLength: 12 }
        ),
        fc.oneof(window, fc.constant<"bad">("bad"), fc.constant(undefined)),
        (steps, start) => {
          const windows = new Slots.Windows()
          let slot: Schema.Json | undefined = start === "bad" ? { s: 1, w: [[61, 1]] } : start
          let known: Parameters<typeof reference>[0] = start
          let now = 200
          for (const { amount, dt, reset } of steps) {
            if (dt !== null) now += dt
            const at = dt === null ? undefined : now * (PER / 60)
            const expected = reference(known, amount, dt === null ? undefined : now, reset)
            // Read back by the rule that made it, or as stored text.
            const next = Slots.added(windows, slot, amount, at, PER, reset)
            assert.deepStrictEqual(next, expected)
            const copy = JSON.parse(JSON.stringify(next)) as Schema.Json
            const e = expected as { s: number; w: Array<[number, number]> }
            const live = e.w.filter(([age]) => e.s - age > now - Slots.WINDOW_SLOTS)
            const sum = live.reduce((t, [, c]) => add(t, c), 0)
            assert.strictEqual(Slots.total(windows, next, now * (PER / 60), PER), sum)
            assert.strictEqual(Slots.total(new Slots.Windows(), copy, now * (PER / 60), PER), sum)
            slot = amount % 2 === 0 ? next : copy
            known = e
          }
        }
      ),
      { numRuns: A.runs(1000) }
    )
  })

  it("a call counts until its slot is 61 slots old, then leaves", () => {
    const slot = { s: 100, w: [[10, 2], [0, 1]] }
    const at = (n: number) => n * (PER / 60)
    assert.strictEqual(Slots.total(new Slots.Windows(), slot, at(150), PER), 3)
    assert.strictEqual(Slots.total(new Slots.Windows(), slot, at(151), PER), 1)
    assert.strictEqual(Slots.total(new Slots.Windows(), slot, at(160), PER), 1)
    assert.strictEqual(Slots.total(new Slots.Windows(), slot, at(161), PER), 0)
    assert.deepStrictEqual(Slots.added(new Slots.Windows(), slot, 1, at(150), PER), {
      s: 150,
      w: [[60, 2], [50, 1], [0, 1]]
    })
    assert.deepStrictEqual(Slots.added(new Slots.Windows(), slot, 1, at(151), PER), { s: 151, w: [[51, 1], [0, 1]] })
    assert.deepStrictEqual(Slots.added(new Slots.Windows(), slot, 1, at(161), PER), { s: 161, w: [[0, 1]] })
    // A clock that went back adds to the newest slot.
    assert.deepStrictEqual(Slots.added(new Slots.Windows(), slot, 1, at(90), PER), { s: 100, w: [[10, 2], [0, 2]] })
  })
})
