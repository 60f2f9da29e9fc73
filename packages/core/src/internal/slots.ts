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
import { copiedFrom } from "./jcs.ts"

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

// A window as read: its newest slot, its pairs as stored (`[age, count]`, oldest
// first, checked) and the sum of their counts.
interface Window {
  readonly s: number
  readonly w: ReadonlyArray<Pair>
  readonly sum: number
}

/**
 * What one rule keeps of its windows: the last one it made, read already, and the
 * last one it read. A slot is immutable once made (it is stored as it is), so a state
 * that gives it back is read for nothing; any other slot is read from its JSON once.
 */
export class Windows {
  private lastSlot: object | undefined
  private lastWindow: Window | undefined
  // The last slot read from its JSON (a decision reads its rule's slot twice: to
  // decide, then to step).
  private readSlot: object | undefined
  private readWindow: Window | "bad" | undefined

  read(slot: Schema.Json | undefined): Window | undefined | "bad" {
    if (slot === undefined) return undefined
    if (typeof slot !== "object" || slot === null) return "bad"
    if (slot === this.lastSlot) return this.lastWindow
    if (this.lastWindow !== undefined && this.lastSlot !== undefined && copiedFrom(slot) === this.lastSlot) {
      // The journal's frozen copy of the slot made last (`SessionJournal.decide`
      // stores that): the same window, its pairs taken from the copy, so the next
      // window shares the copy's frozen pairs and the journal walks only what is new.
      this.lastSlot = slot
      this.lastWindow = { ...this.lastWindow, w: (slot as { readonly w: ReadonlyArray<Pair> }).w }
      return this.lastWindow
    }
    if (slot !== this.readSlot) {
      this.readWindow = parseWindow(slot)
      this.readSlot = slot
    }
    return this.readWindow
  }

  made(s: number, w: ReadonlyArray<Pair>, sum: number): Schema.Json {
    const out = { s, w }
    this.lastSlot = out
    this.lastWindow = { s, w, sum }
    return out
  }
}

const parseWindow = (slot: Schema.Json): Window | "bad" => {
  const s = isObject(slot) ? slot["s"] : undefined
  const w = isObject(slot) ? slot["w"] : undefined
  if (!isCount(s) || !Array.isArray(w) || w.length > WINDOW_SLOTS) return "bad"
  let last = WINDOW_SLOTS
  let sum = 0
  for (const p of w) {
    if (!Array.isArray(p) || p.length !== 2 || !isCount(p[0]) || !isCount(p[1])) return "bad"
    const age = p[0]
    if (age >= last || age > s) return "bad"
    last = age
    sum = add(sum, p[1])
  }
  return { s, w: w as ReadonlyArray<Pair>, sum }
}

// The sum of the counts still in the window at slot `now` (a pair leaves once its
// slot is at most `now - WINDOW_SLOTS`): a clock that went back keeps them all.
const liveSum = (window: Window, now: number): number => {
  const { s, w } = window
  // A pair's slot is `s - age`; it is live when `age < s - now + WINDOW_SLOTS`.
  const cut = s - now + WINDOW_SLOTS
  if (w.length === 0 || w[0]![0] < cut) return window.sum
  let t = 0
  for (const p of w) if (p[0] < cut) t = add(t, p[1])
  return t
}

/**
 * The total a slot holds at `nowMillis`: the count, or the window's sum at the
 * current slot (`perMillis` undefined: a plain count). A malformed slot is full.
 */
export const total = (
  windows: Windows,
  slot: Schema.Json | undefined,
  nowMillis: number,
  perMillis: number | undefined
): number => {
  if (perMillis === undefined) {
    if (slot === undefined) return 0
    const n = isObject(slot) ? slot["n"] : undefined
    return isCount(n) ? n : MAX
  }
  const w = windows.read(slot)
  if (w === undefined) return 0
  if (w === "bad") return MAX
  return liveSum(w, slotOf(nowMillis, perMillis))
}

/**
 * The slot with `amount` added at `nowMillis` (to the newest slot it holds when
 * `nowMillis` is undefined or earlier, or to slot 0 when it holds none). A malformed
 * slot starts again full. `reset` empties it first (a streak that was broken).
 */
export const added = (
  windows: Windows,
  slot: Schema.Json | undefined,
  amount: number,
  nowMillis: number | undefined,
  perMillis: number | undefined,
  reset = false
): Schema.Json => {
  if (perMillis === undefined) {
    const before = reset ? 0 : total(windows, slot, 0, undefined)
    return { n: add(before, amount) }
  }
  const before = windows.read(slot)
  if (before !== undefined && before !== "bad" && !reset && nowMillis !== undefined && amount > 0) {
    // Most calls add to the newest slot, which holds calls already: only its pair
    // changes, the others (and their ages) are shared with the slot before.
    const last = before.w[before.w.length - 1]
    if (last !== undefined && last[0] === 0 && before.s >= slotOf(nowMillis, perMillis)) {
      const w = before.w.slice()
      w[w.length - 1] = [0, add(last[1], amount)]
      return windows.made(before.s, w, add(before.sum, amount))
    }
  }
  const now = nowMillis === undefined ? undefined : slotOf(nowMillis, perMillis)
  if (before !== undefined && before !== "bad" && !reset) {
    const { s, w } = before
    // The pairs still in the window (slot `s - age` above `now - WINDOW_SLOTS`), from `first`.
    let first = 0
    if (now !== undefined) { while (first < w.length && s - w[first]![0] <= now - WINDOW_SLOTS) first++ }
    const newest = first < w.length ? s - w[w.length - 1]![0] : undefined
    const current = now ?? newest ?? 0
    const merge = amount > 0 && newest !== undefined && newest >= current
    const push = amount > 0 && !merge
    const top = push ? current : newest ?? current
    // Ages are counted from the newest slot: they move on when it does.
    const shift = top - s
    const out: Array<Pair> = []
    let sum = 0
    for (let i = first; i < w.length; i++) {
      const pair = w[i]!
      const count = merge && i === w.length - 1 ? add(pair[1], amount) : pair[1]
      out.push(shift === 0 && count === pair[1] ? pair : [pair[0] + shift, count])
      sum = add(sum, count)
    }
    if (push) {
      out.push([0, amount])
      sum = add(sum, amount)
    }
    return windows.made(top, out, sum)
  }
  // No window yet, a malformed one (full again) or a streak restarting.
  const pairs: Array<Pair> = before === "bad" && !reset ? [[now ?? 0, MAX]] : []
  const newest = pairs.length === 0 ? undefined : pairs[pairs.length - 1]!
  const current = now ?? newest?.[0] ?? 0
  if (amount > 0) {
    if (newest !== undefined && newest[0] >= current) pairs[pairs.length - 1] = [newest[0], add(newest[1], amount)]
    else pairs.push([current, amount])
  }
  const top = pairs.length === 0 ? current : pairs[pairs.length - 1]![0]
  let sum = 0
  const w = pairs.map(([at, count]): Pair => {
    sum = add(sum, count)
    return [top - at, count]
  })
  return windows.made(top, w, sum)
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
