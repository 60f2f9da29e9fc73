/**
 * What a session store knows of one stored session without reading it again: how
 * far it has read (the next sequence and the newest hash), how many transcript
 * lines it holds and at which sequence each is, from which line on `load` shows
 * them (after the last deletion), the line of every `uuid` among those, and the
 * pairing of their tool calls (`Transcript.Pairing`). It is built by folding
 * stored entries in order and grows only by entries read from storage or
 * acknowledged by a durable append, so what it says is stored is stored. Places
 * are line numbers (`n`, from 1), not sequences: tool entries sit between lines.
 *
 * `classify` decides which entries of a batch are already stored: an entry with a
 * `uuid` when that uuid is (or appeared earlier in the batch); an entry without one
 * only by its place, next to a neighbour of the batch that is already stored: the
 * stored line at the same distance from that neighbour has the same text and no
 * uuid. So a retried batch and a replay of the whole transcript store nothing
 * again, while a line repeated on purpose (two equal mode markers) is kept. Pure.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import type * as Entry from "@session-journal/core/Entry"
import * as Planner from "../Planner.ts"
import * as Transcript from "../Transcript.ts"

/** The kind of the entry that records a deletion (`allowDelete`). */
export const DELETE_KIND = "claude-code.session-store.delete"

/** Default budget of a session's uuids in memory (1 MiB, estimated heap bytes). */
export const DEFAULT_BUDGET = 1024 * 1024

const encoder = new TextEncoder()

/** Longest uuid kept as it is; a longer one is kept as its SHA-256 (see `keyOf`). */
export const MAX_KEY_CHARS = 128

/**
 * What the index keys a uuid by: the uuid itself up to `MAX_KEY_CHARS` characters,
 * else `#` and the hex SHA-256 of its UTF-8 bytes padded to `MAX_KEY_CHARS + 1`
 * characters (a length no kept uuid has, so the two forms never meet).
 */
export const keyOf = (uuid: string): string =>
  uuid.length <= MAX_KEY_CHARS ? uuid : `#${bytesToHex(sha256(encoder.encode(uuid)))}`.padEnd(
    MAX_KEY_CHARS + 1,
    "="
  )

// The estimated heap bytes of one map entry: the key's characters and the entry.
const entryBytes = (key: string): number => 2 * key.length + 64

/**
 * A Bloom filter of fixed size over strings: `might` is never false for a string
 * added since the last `clear`. Two FNV-1a hashes, combined for `HASHES` probes.
 */
export class Filter {
  private readonly bits: Uint8Array
  private readonly size: number
  constructor(bytes: number) {
    this.bits = new Uint8Array(Math.max(8, Math.floor(bytes)))
    this.size = this.bits.length * 8
  }
  /** The filter's bytes. */
  get bytes(): number {
    return this.bits.length
  }
  private static readonly HASHES = 4
  // The two hashes of the last key `hash` was given.
  private h1 = 0
  private h2 = 0
  private hash(key: string): void {
    let h1 = 0x811c9dc5
    let h2 = 0x01000193 ^ key.length
    for (let i = 0; i < key.length; i++) {
      const c = key.charCodeAt(i)
      h1 = Math.imul(h1 ^ c, 0x01000193)
      h2 = Math.imul(h2 ^ c, 0x5bd1e995) ^ (h2 >>> 15)
    }
    this.h1 = h1
    this.h2 = h2 | 1
  }
  // The bit of probe `k` of the last key hashed.
  private bit(k: number): number {
    return ((this.h1 + Math.imul(k, this.h2)) >>> 0) % this.size
  }
  add(key: string): void {
    this.hash(key)
    for (let k = 0; k < Filter.HASHES; k++) {
      const bit = this.bit(k)
      this.bits[bit >>> 3]! |= 1 << (bit & 7)
    }
  }
  might(key: string): boolean {
    this.hash(key)
    for (let k = 0; k < Filter.HASHES; k++) {
      const bit = this.bit(k)
      if ((this.bits[bit >>> 3]! & (1 << (bit & 7))) === 0) return false
    }
    return true
  }
  clear(): void {
    this.bits.fill(0)
  }
}

/** The index of one session (mutable; owned by that session's serialized writer in the store). */
export interface Index {
  /** Every entry with a smaller sequence has been folded in. */
  covered: number
  /** `entry_hash` of entry `covered - 1`, or null when none. */
  lastHash: string | null
  /** Transcript lines stored so far (the `n` of the next one is `lines + 1`). */
  lines: number
  /** The sequence of line `n` at `[n - 1]`. */
  readonly sequenceOf: Array<number>
  /** The first line `load` shows (after the newest deletion). */
  firstVisible: number
  /** Whether the newest deletion is newer than every line. */
  deleted: boolean
  /**
   * Line of the newest uuids (by `keyOf`) stored since the newest deletion, oldest
   * first, within `budget` estimated bytes.
   */
  readonly uuids: Map<string, number>
  /** The estimated bytes of `uuids`. */
  uuidBytes: number
  /** The budget of `uuids` (the filter takes an eighth of it besides). */
  readonly budget: number
  /** The newest line whose uuid left `uuids` since the newest deletion (0: none did). */
  evictedThrough: number
  /** Every uuid stored since the newest deletion. */
  readonly filter: Filter
  /** The tool calls of the visible lines: those still waiting for their result, those paired. */
  pairing: Transcript.Pairing
}

/** An index of nothing read yet, its uuids within `budget` bytes (default `DEFAULT_BUDGET`). */
export const empty = (budget: number = DEFAULT_BUDGET): Index => ({
  covered: 0,
  lastHash: null,
  lines: 0,
  sequenceOf: [],
  firstVisible: 1,
  deleted: false,
  uuids: new Map(),
  uuidBytes: 0,
  budget,
  evictedThrough: 0,
  filter: new Filter(budget / 8),
  pairing: Transcript.emptyPairing()
})

const clearUuids = (index: Index): void => {
  index.uuids.clear()
  index.uuidBytes = 0
  index.evictedThrough = 0
  index.filter.clear()
}

// Keeps `key` at line `n`, letting the oldest uuids go past the budget.
const remember = (index: Index, key: string, n: number): void => {
  index.filter.add(key)
  if (index.uuids.has(key)) return
  index.uuids.set(key, n)
  index.uuidBytes += entryBytes(key)
  while (index.uuidBytes > index.budget) {
    const oldest = index.uuids.entries().next()
    if (oldest.done === true) break
    const [k, line] = oldest.value
    index.uuids.delete(k)
    index.uuidBytes -= entryBytes(k)
    if (line > index.evictedThrough) index.evictedThrough = line
  }
}

/** The estimated heap bytes of the index's uuids (map and filter). */
export const uuidBytes = (index: Index): number => index.uuidBytes + index.filter.bytes

/** Starts over (storage did not continue what was read: a repair set entries aside). */
export const reset = (index: Index): void => {
  index.covered = 0
  index.lastHash = null
  index.lines = 0
  index.sequenceOf.length = 0
  index.firstVisible = 1
  index.deleted = false
  clearUuids(index)
  index.pairing = Transcript.emptyPairing()
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** The `uuid` of an entry's JSON text, if it is a non-empty string, as the index keys it (`keyOf`). */
export const uuidOfLine = (line: string): string | undefined => {
  // Only lines that mention the field are parsed.
  if (!line.includes("\"uuid\"")) return undefined
  try {
    const v: unknown = JSON.parse(line)
    return isRecord(v) && typeof v["uuid"] === "string" && v["uuid"] !== "" ? keyOf(v["uuid"]) : undefined
  } catch {
    return undefined
  }
}

/** The uuid of a batch entry as the store keys it (`keyOf`). */
export const uuidOf = (entry: { readonly uuid?: unknown }): string | undefined =>
  typeof entry.uuid === "string" && entry.uuid !== "" ? keyOf(entry.uuid) : undefined

/**
 * Folds one stored entry, which must be entry `index.covered`; false when it does
 * not continue what was read (another sequence, or a link to another hash).
 */
export const fold = (index: Index, entry: Entry.Entry): boolean => {
  if (entry.sequence !== index.covered) return false
  if (index.lastHash !== null && entry.prev_hash !== index.lastHash) return false
  if (entry.kind === Planner.LINE_KIND) {
    const value = Planner.lineOf(entry.payload)
    // The store numbers its lines from 1 without gaps (`n` of the payload).
    const n = index.lines + 1
    index.lines = n
    index.sequenceOf.push(entry.sequence)
    index.deleted = false
    if (value !== undefined && "text" in value) {
      const uuid = uuidOfLine(value.text)
      if (uuid !== undefined) remember(index, uuid, n)
      // The agent does not change the pairing.
      Transcript.pair(index.pairing, Transcript.parse(value.text), "main", 0)
    }
  } else if (entry.kind === DELETE_KIND) {
    index.firstVisible = index.lines + 1
    index.deleted = true
    clearUuids(index)
    index.pairing = Transcript.emptyPairing()
  }
  index.covered = entry.sequence + 1
  index.lastHash = entry.entry_hash
  return true
}

/** One entry of a batch: its JSON text and its uuid (`keyOf`). */
export interface Item {
  readonly line: string
  readonly uuid: string | undefined
}

/**
 * The stored lines to read for the uuids of `items` the index cannot decide alone:
 * those not in its map that its filter may hold while older uuids have left the
 * map. They can only be on the visible lines up to `evictedThrough` (a uuid first
 * stored later is still in the map). Undefined when there are none.
 */
export const unresolved = (
  index: Index,
  items: ReadonlyArray<Item>
): { readonly keys: ReadonlySet<string>; readonly from: number; readonly through: number } | undefined => {
  if (index.evictedThrough < index.firstVisible) return undefined
  let keys: Set<string> | undefined
  for (const item of items) {
    if (item.uuid === undefined || index.uuids.has(item.uuid) || !index.filter.might(item.uuid)) continue
    ;(keys ??= new Set()).add(item.uuid)
  }
  return keys === undefined ? undefined : { keys, from: index.firstVisible, through: index.evictedThrough }
}

/** The stored lines a run of uuid-less batch entries may repeat. */
export interface Probe {
  /** Batch positions, in the order their stored candidates are compared. */
  readonly positions: ReadonlyArray<number>
  /** The stored line of each position's candidate. */
  readonly lines: ReadonlyArray<number>
}

/**
 * First pass: which items are new by uuid, and for the runs of uuid-less items
 * next to an already stored neighbour, the stored lines to compare them with.
 * `known[i]` is the stored line of item i when its uuid is stored, `fresh[i]`
 * whether it is to be stored (uuid-less items start fresh and may be claimed by a
 * probe). `cursor`, the stored line of the previous batch's last entry, stands
 * in for the neighbour of a run that starts a batch with no stored uuid after it,
 * so that a replay in batches that split such runs stores them once too.
 */
export const plan = (
  index: Index,
  items: ReadonlyArray<Item>,
  cursor?: number,
  resolved?: ReadonlyMap<string, number>
) => {
  const fresh: Array<boolean> = []
  const known: Array<number | undefined> = []
  const inBatch = new Set<string>()
  for (const item of items) {
    if (item.uuid === undefined) {
      fresh.push(true)
      known.push(undefined)
      continue
    }
    const at = index.uuids.get(item.uuid) ?? resolved?.get(item.uuid)
    fresh.push(at === undefined && !inBatch.has(item.uuid))
    known.push(at)
    inBatch.add(item.uuid)
  }
  const probes: Array<Probe> = []
  let i = 0
  while (i < items.length) {
    if (items[i]!.uuid !== undefined) {
      i++
      continue
    }
    let end = i
    while (end < items.length && items[end]!.uuid === undefined) end++
    const after = end < items.length ? known[end] : undefined
    // The neighbour before the run: in the batch, else (for a run that starts the
    // batch with no stored neighbour after it) where the previous batch ended.
    const before = i > 0 ? known[i - 1] : after === undefined ? cursor : undefined
    const positions: Array<number> = []
    const lines: Array<number> = []
    if (before !== undefined && before >= index.firstVisible - 1) {
      // Forward from the stored neighbour before the run.
      for (let p = i; p < end; p++) {
        const n = before + (p - i) + 1
        if (n > index.lines) break
        positions.push(p)
        lines.push(n)
      }
    } else if (after !== undefined) {
      // Backward from the stored neighbour after the run.
      for (let p = end - 1; p >= i; p--) {
        const n = after - (end - p)
        if (n < index.firstVisible) break
        positions.push(p)
        lines.push(n)
      }
    }
    if (positions.length > 0) probes.push({ positions, lines })
    i = end
  }
  return { fresh, known, probes }
}

/**
 * Second pass: a probe's positions are stored (not fresh) as long as the stored
 * candidate, in order, is a line of the same text with no uuid and not claimed by
 * another position; the first that is not ends the run's matching.
 */
export const settle = (
  fresh: Array<boolean>,
  known: Array<number | undefined>,
  items: ReadonlyArray<Item>,
  probes: ReadonlyArray<Probe>,
  lineAt: (n: number) => Entry.Entry | undefined
): void => {
  const claimed = new Set<number>()
  for (const probe of probes) {
    for (let k = 0; k < probe.positions.length; k++) {
      const n = probe.lines[k]!
      const entry = lineAt(n)
      if (entry === undefined || entry.kind !== Planner.LINE_KIND || claimed.has(n)) break
      const value = Planner.lineOf(entry.payload)
      const position = probe.positions[k]!
      // The same text: so no uuid either, as the item has none.
      if (value === undefined || !("text" in value) || value.text !== items[position]!.line) break
      claimed.add(n)
      fresh[position] = false
      known[position] = n
    }
  }
}

/**
 * The pairing of `base` and what is paired on top of it, without changing `base`
 * (`Transcript.pair` works on it as on a pairing of its own): the tool calls of
 * lines about to be stored, computed before the append that may not happen.
 */
export const overlay = (base: Transcript.Pairing): Transcript.Pairing => {
  const removed = new Set<string>()
  class Pending extends Map<string, Transcript.ToolUse> {
    override has(k: string) {
      return super.has(k) || (base.pending.has(k) && !removed.has(k))
    }
    override get(k: string) {
      return super.get(k) ?? (removed.has(k) ? undefined : base.pending.get(k))
    }
    override delete(k: string) {
      const here = super.delete(k)
      if (base.pending.has(k) && !removed.has(k)) {
        removed.add(k)
        return true
      }
      return here
    }
  }
  class Paired extends Set<string> {
    override has(k: string) {
      return super.has(k) || base.paired.has(k)
    }
  }
  return { pending: new Pending(), paired: new Paired() }
}
