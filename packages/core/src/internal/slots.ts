/**
 * The counters of a policy's stateful rules (docs/DESIGN.md §16), as the JSON data
 * `GuardState` keeps per rule: a plain count `{"n": k}`, or a sliding window
 * `{"s": newest, "w": [[age, count], …]}`: the slots of `per / 60` each that hold
 * calls, oldest first, each by its age (0 to 60) before the newest slot `s` (at most
 * 61 pairs, none with a count of 0). A call counts until its slot leaves the window: for at least `per`
 * and at most `per + per / 60`. Every read is total: a malformed slot reads as full
 * (fail closed).
 */
import type * as Schema from "effect/Schema"

/** Slots a window keeps: the current one and the 60 before it. */
export const WINDOW_SLOTS = 61

const MAX = Number.MAX_SAFE_INTEGER

const isCount = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0

const isObject = (v: Schema.Json): v is { readonly [k: string]: Schema.Json } =>
  typeof v === "object" && v !== null && !Array.isArray(v)

const add = (a: number, b: number): number => a > MAX - b ? MAX : a + b

/** The slot a time falls in, for a window of `perMillis`. */
export const slotOf = (nowMillis: number, perMillis: number): number => {
  const s = Math.floor((Math.max(0, nowMillis) * 60) / perMillis)
  return Number.isSafeInteger(s) ? s : MAX
}

type Pair = readonly [slot: number, count: number]

// Slots are immutable (they come from stored entries or from `added`): each is read
// once.
const read = new WeakMap<object, ReadonlyArray<Pair> | "bad">()

const readWindow = (slot: Schema.Json | undefined): ReadonlyArray<Pair> | undefined | "bad" => {
  if (slot === undefined) return undefined
  if (typeof slot !== "object" || slot === null) return "bad"
  const known = read.get(slot)
  if (known !== undefined) return known
  const w = parseWindow(slot)
  read.set(slot, w)
  return w
}

const parseWindow = (slot: Schema.Json): ReadonlyArray<Pair> | "bad" => {
  const s = isObject(slot) ? slot["s"] : undefined
  const w = isObject(slot) ? slot["w"] : undefined
  if (!isCount(s) || !Array.isArray(w) || w.length > WINDOW_SLOTS) return "bad"
  const out: Array<Pair> = []
  let last = WINDOW_SLOTS
  for (const p of w) {
    if (!Array.isArray(p) || p.length !== 2 || !isCount(p[0]) || !isCount(p[1])) return "bad"
    const age = p[0]
    if (age >= last || age > s) return "bad"
    last = age
    out.push([s - age, p[1]])
  }
  return out
}

// The pairs still in the window at slot `now`: a clock that went back keeps them all.
const live = (w: ReadonlyArray<Pair>, now: number): ReadonlyArray<Pair> => {
  let i = 0
  while (i < w.length && w[i]![0] <= now - WINDOW_SLOTS) i++
  return i === 0 ? w : w.slice(i)
}

const sum = (w: ReadonlyArray<Pair>): number => {
  let t = 0
  for (const p of w) t = add(t, p[1])
  return t
}

/**
 * The total a slot holds at `nowMillis`: the count, or the window's sum at the
 * current slot (`perMillis` undefined: a plain count). A malformed slot is full.
 */
export const total = (slot: Schema.Json | undefined, nowMillis: number, perMillis: number | undefined): number => {
  if (perMillis === undefined) {
    if (slot === undefined) return 0
    const n = isObject(slot) ? slot["n"] : undefined
    return isCount(n) ? n : MAX
  }
  const w = readWindow(slot)
  if (w === undefined) return 0
  if (w === "bad") return MAX
  return sum(live(w, slotOf(nowMillis, perMillis)))
}

/**
 * The slot with `amount` added at `nowMillis` (to the newest slot it holds when
 * `nowMillis` is undefined or earlier, or to slot 0 when it holds none). A malformed
 * slot starts again full. `reset` empties it first (a streak that was broken).
 */
export const added = (
  slot: Schema.Json | undefined,
  amount: number,
  nowMillis: number | undefined,
  perMillis: number | undefined,
  reset = false
): Schema.Json => {
  if (perMillis === undefined) {
    const before = reset ? 0 : total(slot, 0, undefined)
    return { n: add(before, amount) }
  }
  const before = readWindow(slot)
  const pairs: Array<Pair> = before === undefined || reset
    ? []
    : before === "bad"
    ? [[nowMillis === undefined ? 0 : slotOf(nowMillis, perMillis), MAX]]
    : [...(nowMillis === undefined ? before : live(before, slotOf(nowMillis, perMillis)))]
  const newest = pairs.length === 0 ? undefined : pairs[pairs.length - 1]!
  const now = nowMillis === undefined ? newest?.[0] ?? 0 : slotOf(nowMillis, perMillis)
  if (amount > 0) {
    if (newest !== undefined && newest[0] >= now) pairs[pairs.length - 1] = [newest[0], add(newest[1], amount)]
    else pairs.push([now, amount])
  }
  const top = pairs.length === 0 ? now : pairs[pairs.length - 1]![0]
  const out = { s: top, w: pairs.map(([slot, count]) => [top - slot, count]) }
  read.set(out, pairs)
  return out
}

/** Whether a slot is empty (a count of 0, or a window of no calls). */
export const isEmpty = (slot: Schema.Json | undefined): boolean => {
  if (slot === undefined) return true
  if (!isObject(slot)) return false
  if (Object.hasOwn(slot, "n")) return slot["n"] === 0
  const w = slot["w"]
  return Array.isArray(w) && w.length === 0
}

/**
 * A duration of a policy: an integer from 1 and a unit, `s`, `m`, `h` or `d`, at most
 * 366 days; its milliseconds, or undefined.
 */
export const durationMillis = (text: string): number | undefined => {
  const m = /^([1-9][0-9]{0,8})([smhd])$/.exec(text)
  if (m === null) return undefined
  const unit = m[2] === "s" ? 1000 : m[2] === "m" ? 60_000 : m[2] === "h" ? 3_600_000 : 86_400_000
  const ms = Number(m[1]) * unit
  return ms <= 366 * 86_400_000 ? ms : undefined
}

/** The longest JSON text of one slot: a window of 61 pairs of an age and a 16-digit count. */
export const MAX_SLOT_TEXT = 30 + WINDOW_SLOTS * 22
