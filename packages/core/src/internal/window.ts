/**
 * The entries a session keeps in memory: the newest retained ones whose weights add
 * up to at most a budget of bytes (docs/DESIGN.md §3). Immutable from the outside,
 * appending in amortized O(1) like `Ring`: a window is [start, end) over shared
 * arrays whose cells, once written, never change, and only the window that owns the
 * tail appends in place. The dead prefix (entries the budget let go of) is cut off
 * once it is as long as the window or weighs as much as the budget, so the arrays
 * never hold much more than twice the budget.
 */
import * as Entry from "../Entry.ts"

/** @internal */
export interface Window {
  readonly items: Array<Entry.Entry>
  readonly weights: Array<number>
  readonly start: number
  readonly end: number
  /** The weight of the entries in the window. */
  readonly bytes: number
  /** The weight of the entries before `start` still in the arrays. */
  readonly dead: number
}

/** @internal */
export const empty = (): Window => ({ items: [], weights: [], start: 0, end: 0, bytes: 0, dead: 0 })

/** @internal */
export const size = (window: Window): number => window.end - window.start

/** @internal */
export const get = (window: Window, index: number): Entry.Entry | undefined =>
  index >= 0 && index < window.end - window.start ? window.items[window.start + index] : undefined

/** @internal */
export const toArray = (window: Window): Array<Entry.Entry> => window.items.slice(window.start, window.end)

// What a value costs beyond its characters: a tagged pointer or a heap number, an
// object or array header, a string header.
const VALUE = 16
// An entry object, its two hash strings and its sequence and time.
const ENTRY = 256

/**
 * An estimate of the heap bytes an entry holds, from above: a fixed part for the
 * entry and its hashes, two bytes per UTF-16 unit of every string (names, kind,
 * payload strings and keys) and 16 bytes per JSON value. Iterative; stored payloads
 * are trees of plain JSON (validated, or parsed).
 *
 * @internal
 */
export const weight = (entry: Entry.Entry): number => {
  if (Entry.isTool(entry)) return ENTRY + 2 * (entry.tool_name.length + entry.server_id.length + entry.agent_id.length)
  let bytes = ENTRY + 2 * entry.kind.length
  const stack: Array<unknown> = [entry.payload]
  while (stack.length > 0) {
    const value = stack.pop()
    bytes += VALUE
    if (typeof value === "string") bytes += 2 * value.length
    else if (Array.isArray(value)) {
      for (let i = 0; i < value.length; i++) stack.push(value[i])
    } else if (typeof value === "object" && value !== null) {
      for (const key in value) {
        bytes += VALUE + 2 * key.length
        stack.push((value as Record<string, unknown>)[key])
      }
    }
  }
  return bytes
}

/**
 * Appends `entry`, then lets go of the oldest entries while the window holds more
 * than `cap` entries or weighs more than `budget` (an entry heavier than the budget
 * is not kept at all).
 *
 * @internal
 */
export const push = (window: Window, entry: Entry.Entry, cap: number, budget: number): Window => {
  if (cap <= 0) return window.end === window.start ? window : empty()
  const w = weight(entry)
  let items = window.items
  let weights = window.weights
  let start = window.start
  let end = window.end
  let dead = window.dead
  if (items.length !== end) {
    items = items.slice(start, end)
    weights = weights.slice(start, end)
    end -= start
    start = 0
    dead = 0
  }
  items.push(entry)
  weights.push(w)
  end++
  let bytes = window.bytes + w
  while (end > start && (end - start > cap || bytes > budget)) {
    bytes -= weights[start]!
    dead += weights[start]!
    start++
  }
  if (start > 0 && (start >= end - start || dead >= budget)) {
    items = items.slice(start, end)
    weights = weights.slice(start, end)
    end -= start
    start = 0
    dead = 0
  }
  return { items, weights, start, end, bytes, dead }
}

/**
 * The window of a new budget: the same entries, the oldest let go of while it
 * weighs more than `budget`.
 *
 * @internal
 */
export const trim = (window: Window, budget: number): Window => {
  if (window.bytes <= budget) return window
  let start = window.start
  let bytes = window.bytes
  while (window.end > start && bytes > budget) bytes -= window.weights[start++]!
  return {
    items: window.items.slice(start, window.end),
    weights: window.weights.slice(start, window.end),
    start: 0,
    end: window.end - start,
    bytes,
    dead: 0
  }
}

/**
 * A window of the newest of `entries` (consecutive, oldest first) that fit `cap`
 * and `budget`.
 *
 * @internal
 */
export const fromArray = (entries: ReadonlyArray<Entry.Entry>, cap: number, budget: number): Window => {
  let window = empty()
  let from = entries.length
  let bytes = 0
  while (from > 0 && entries.length - from < cap) {
    const w = weight(entries[from - 1]!)
    if (bytes + w > budget) break
    bytes += w
    from--
  }
  for (let i = from; i < entries.length; i++) window = push(window, entries[i]!, cap, budget)
  return window
}
