/**
 * The counters of a policy's stateful rules (docs/DESIGN.md §16), as the JSON data
 * `GuardState` keeps per rule: a plain count `{"n": k}`, or a sliding window
 * `{"s": slot, "c": [61 counts]}` of 60 slots of `per / 60` each before the current
 * one, oldest first, `c[60]` counting slot `s`. A call counts until its slot leaves
 * the window: for at least `per` and at most `per + per / 60`. Every read is total:
 * a malformed slot reads as full (fail closed).
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

interface Window {
  readonly s: number
  readonly c: ReadonlyArray<number>
  readonly sum: number
}

// Slots are immutable (they come from stored entries or from `added`): each is read
// once, and its sum kept.
const read = new WeakMap<object, Window | "bad">()

const readWindow = (slot: Schema.Json | undefined): Window | undefined | "bad" => {
  if (slot === undefined) return undefined
  if (typeof slot === "object" && slot !== null) {
    const known = read.get(slot)
    if (known !== undefined) return known
    const w = parseWindow(slot)
    read.set(slot, w)
    return w
  }
  return "bad"
}

const parseWindow = (slot: Schema.Json): Window | "bad" => {
  if (typeof slot !== "object" || slot === null || Array.isArray(slot)) return "bad"
  const o = slot as { readonly [k: string]: Schema.Json }
  const s = o["s"]
  const c = o["c"]
  if (!isCount(s) || !Array.isArray(c) || c.length !== WINDOW_SLOTS || !c.every(isCount)) return "bad"
  return { s, c: c as ReadonlyArray<number>, sum: sum(c as ReadonlyArray<number>) }
}

// The window moved on to `now`'s slot; a clock that went back keeps the newest slot
// (nothing leaves early).
const advance = (w: Window, now: number): Window => {
  if (now <= w.s) return w
  const k = now - w.s
  if (k >= WINDOW_SLOTS) return { s: now, c: new Array<number>(WINDOW_SLOTS).fill(0), sum: 0 }
  const c = w.c.slice(k)
  for (let i = 0; i < k; i++) c.push(0)
  return { s: now, c, sum: sum(c) }
}

// The sum the window holds at slot `now`, without building the moved window.
const sumAt = (w: Window, now: number): number => {
  if (now <= w.s) return w.sum
  const k = now - w.s
  if (k >= WINDOW_SLOTS) return 0
  let gone = 0
  for (let i = 0; i < k; i++) gone = add(gone, w.c[i]!)
  return w.sum === MAX ? sum(w.c.slice(k)) : w.sum - gone
}

const sum = (c: ReadonlyArray<number>): number => {
  let t = 0
  for (const n of c) t = add(t, n)
  return t
}

/**
 * The total a slot holds at `nowMillis`: the count, or the window's sum once moved
 * to the current slot (`perMillis` undefined: a plain count). A malformed slot is full.
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
  return sumAt(w, slotOf(nowMillis, perMillis))
}

/**
 * The slot with `amount` added at `nowMillis` (to the newest slot when `nowMillis`
 * is undefined, or to a fresh window at time 0 when there is none). A malformed slot
 * starts again full. `reset` empties it first (a streak that was broken).
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
  const now = nowMillis === undefined ? undefined : slotOf(nowMillis, perMillis)
  let w: Window
  if (before === "bad") {
    w = { s: now ?? 0, c: [...new Array<number>(WINDOW_SLOTS - 1).fill(0), MAX], sum: MAX }
  } else if (before === undefined || reset) {
    w = { s: now ?? before?.s ?? 0, c: new Array<number>(WINDOW_SLOTS).fill(0), sum: 0 }
  } else {
    w = now === undefined ? before : advance(before, now)
  }
  const c = w.c.slice()
  c[WINDOW_SLOTS - 1] = add(c[WINDOW_SLOTS - 1]!, amount)
  return { s: w.s, c }
}

/** Whether a slot is empty (a count of 0, or no window). */
export const isEmpty = (slot: Schema.Json | undefined): boolean => {
  if (slot === undefined) return true
  if (!isObject(slot)) return false
  if (Object.hasOwn(slot, "n")) return slot["n"] === 0
  const c = slot["c"]
  return Array.isArray(c) && c.length === WINDOW_SLOTS && c.every((n) => n === 0)
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

/** The longest JSON text of one slot: a window of 61 counts of 16 digits and its slot. */
export const MAX_SLOT_TEXT = 16 + 17 + WINDOW_SLOTS * 17
