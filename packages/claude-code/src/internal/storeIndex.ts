/**
 * What a session store knows of one stored session without reading it again: how
 * far it has read (the next sequence and the newest hash), how many transcript
 * lines it holds and at which sequence each is, from which line on `load` shows
 * them (after the last deletion), the line of every `uuid` among those, and the
 * pairing of their tool calls (`Transcript.Pairing`). It is built by folding
 * stored entries in order and grows only by entries read from storage or
 * acknowledged by a durable append, so what it says is stored is stored. Places
 * are line numbers (`n`, from 1), not sequences: tool entries sit between lines;
 * an oversized-line marker is a line (its `uuid` field the line's uuid).
 *
 * The uuids are kept within a budget of bytes: the newest exactly, each with its
 * line, in a map within half of it; the older ones in `Generations`, Bloom
 * filters over consecutive lines within the other half. A uuid is never lost (no
 * false negatives): it is in the map, or a generation holding its line may hold
 * it. A uuid a generation may hold is looked for in that generation's lines only
 * (`unresolved`), so a false hit costs one generation's lines, and the work of an
 * append does not grow with the history.
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

// The 32-bit finalizer of MurmurHash3: FNV-1a's low bits alone spread poorly
// over a power-of-two filter.
const mix = (h: number): number => {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}

/**
 * The probes of a key in a filter generation: `Generations.HASHES` bit positions
 * out of two hashes (FNV-1a, finalized), the same for every generation (they all
 * have the same number of bits), so a key is hashed once per lookup.
 */
export class Probes {
  readonly at: Uint32Array
  constructor(key: string, bits: number) {
    let h1 = 0x811c9dc5
    let h2 = 0x01000193 ^ key.length
    for (let i = 0; i < key.length; i++) {
      const c = key.charCodeAt(i)
      h1 = Math.imul(h1 ^ c, 0x01000193)
      h2 = Math.imul(h2 ^ c, 0x5bd1e995) ^ (h2 >>> 15)
    }
    const a = mix(h1)
    const b = mix(h2) | 1
    const mask = bits - 1
    this.at = new Uint32Array(Generations.HASHES)
    for (let k = 0; k < Generations.HASHES; k++) this.at[k] = (a + Math.imul(k, b)) & mask
  }
}

/** One generation: a Bloom filter over the uuids that left the map from line `from` through line `through`. */
export interface Generation {
  readonly bits: Uint8Array
  readonly from: number
  through: number
  /** Uuids added (past `Generations.capacity` only after a merge). */
  count: number
  /** How many merges it holds: 0 for a generation filled as it is. */
  level: number
}

/**
 * The uuids that left the map, in generations of consecutive lines, each a Bloom
 * filter of the same power-of-two size holding `capacity` uuids at 32 bits each
 * (11 probes: a false hit about one lookup in 750,000 per generation). A lookup
 * names the generations that may hold a uuid, so a false hit costs the reading of
 * one generation's lines, never the whole history. The generations share `budget`
 * bytes: when a new one would pass it, the two oldest of the same level are merged
 * (their bits OR-ed, their lines joined), so the index stays within its bytes and
 * only the oldest uuids, past what the budget holds at full precision, pay with
 * more false hits and longer reads.
 */
export class Generations {
  static readonly HASHES = 11
  /** Bits per uuid of a generation as it is filled. */
  static readonly BITS_PER_KEY = 32
  /** Bits of each generation's filter. */
  readonly size: number
  /** Uuids a generation takes before the next one starts. */
  readonly capacity: number
  readonly list: Array<Generation> = []
  /** The generations' bytes at most (one generation when it is smaller). */
  readonly budget: number
  constructor(budget: number) {
    this.budget = budget
    // At least 16 generations in the budget, each from 64 bytes to 16 KiB.
    let size = 512
    while (size < 131_072 && size * 2 * 16 <= budget * 8) size *= 2
    this.size = size
    this.capacity = size / Generations.BITS_PER_KEY
  }
  /** The generations' bytes. */
  get bytes(): number {
    return this.list.length * (this.size / 8)
  }
  /** Adds `key`, stored at line `n` (not before any line added so far). */
  add(key: string, n: number): void {
    let open = this.list[this.list.length - 1]
    if (open === undefined || (open.count >= this.capacity && this.makeRoom())) {
      open = { bits: new Uint8Array(this.size / 8), from: n, through: n, count: 0, level: 0 }
      this.list.push(open)
    }
    open = this.list[this.list.length - 1]!
    for (const bit of new Probes(key, this.size).at) open.bits[bit >>> 3]! |= 1 << (bit & 7)
    open.count++
    if (n > open.through) open.through = n
  }
  // Merges the oldest generations until one more fits the budget; false when it
  // does not even then (a budget below two generations: the newest keeps filling).
  private makeRoom(): boolean {
    const one = this.size / 8
    while (this.list.length > 1 && this.bytes + one > this.budget) {
      // The oldest pair of one level, else the two oldest.
      let i = 0
      for (let j = 0; j + 1 < this.list.length; j++) {
        if (this.list[j]!.level === this.list[j + 1]!.level) {
          i = j
          break
        }
      }
      const a = this.list[i]!
      const b = this.list[i + 1]!
      for (let k = 0; k < a.bits.length; k++) a.bits[k]! |= b.bits[k]!
      a.through = b.through
      a.count += b.count
      a.level = Math.max(a.level, b.level) + 1
      this.list.splice(i + 1, 1)
    }
    return this.bytes + one <= this.budget
  }
  /** The generations that may hold `key`. */
  lookup(key: string): Array<Generation> {
    const probes = new Probes(key, this.size).at
    const out: Array<Generation> = []
    for (const g of this.list) {
      let all = true
      for (let k = 0; k < probes.length; k++) {
        const bit = probes[k]!
        if ((g.bits[bit >>> 3]! & (1 << (bit & 7))) === 0) {
          all = false
          break
        }
      }
      if (all) out.push(g)
    }
    return out
  }
  clear(): void {
    this.list.length = 0
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
   * first, within half of `budget` estimated bytes.
   */
  readonly uuids: Map<string, number>
  /** The estimated bytes of `uuids`. */
  uuidBytes: number
  /** The budget of `uuids` and `older` together, half each. */
  readonly budget: number
  /** The newest line whose uuid left `uuids` since the newest deletion (0: none did). */
  evictedThrough: number
  /** Every uuid stored since the newest deletion that left `uuids`. */
  readonly older: Generations
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
  older: new Generations(budget / 2),
  pairing: Transcript.emptyPairing()
})

const clearUuids = (index: Index): void => {
  index.uuids.clear()
  index.uuidBytes = 0
  index.evictedThrough = 0
  index.older.clear()
}

// Keeps `key` at line `n`, moving the oldest uuids past half the budget to the
// generations (in the order of their lines, so each generation's lines follow
// the previous one's).
const remember = (index: Index, key: string, n: number): void => {
  if (index.uuids.has(key)) return
  index.uuids.set(key, n)
  index.uuidBytes += entryBytes(key)
  while (index.uuidBytes > index.budget / 2) {
    const oldest = index.uuids.entries().next()
    if (oldest.done === true) break
    const [k, line] = oldest.value
    index.uuids.delete(k)
    index.uuidBytes -= entryBytes(k)
    index.older.add(k, line)
    if (line > index.evictedThrough) index.evictedThrough = line
  }
}

/** The estimated heap bytes of the index's uuids (map and generations). */
export const uuidBytes = (index: Index): number => index.uuidBytes + index.older.bytes

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
 * The uuid (as `keyOf` gives it) of a stored line: of its text, or the one an
 * oversized-line marker of the store carries (`uuid`, already a key).
 */
export const uuidOfEntry = (entry: Entry.Entry): string | undefined => {
  if (entry.kind === Planner.LINE_KIND) {
    const value = Planner.lineOf(entry.payload)
    return value !== undefined && "text" in value ? uuidOfLine(value.text) : undefined
  }
  if (entry.kind !== Planner.OVERSIZED_KIND || !isRecord(entry.payload)) return undefined
  const uuid = entry.payload["uuid"]
  return typeof uuid === "string" && uuid !== "" && uuid.length <= MAX_KEY_CHARS + 1 ? uuid : undefined
}

/**
 * Folds one stored entry, which must be entry `index.covered`; false when it does
 * not continue what was read (another sequence, or a link to another hash).
 */
export const fold = (index: Index, entry: Entry.Entry): boolean => {
  if (entry.sequence !== index.covered) return false
  if (index.lastHash !== null && entry.prev_hash !== index.lastHash) return false
  if (Planner.isLineEntry(entry)) {
    // The store numbers its lines from 1 without gaps (`n` of the payload); an
    // oversized-line marker stands for its line.
    const n = index.lines + 1
    index.lines = n
    index.sequenceOf.push(entry.sequence)
    index.deleted = false
    const uuid = uuidOfEntry(entry)
    if (uuid !== undefined) remember(index, uuid, n)
    const value = entry.kind === Planner.LINE_KIND ? Planner.lineOf(entry.payload) : undefined
    // The agent does not change the pairing.
    if (value !== undefined && "text" in value) Transcript.pair(index.pairing, Transcript.parse(value.text), "main", 0)
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

/**
 * One entry of a batch: its JSON text, its uuid (`keyOf`), and, for a line above
 * the store's bound, the size and SHA-256 its marker keeps instead.
 */
export interface Item {
  readonly line: string
  readonly uuid: string | undefined
  readonly oversized?: Transcript.Oversized | undefined
}

/** Stored lines to read for uuids that left the map: lines `from` through `through`. */
export interface Range {
  readonly from: number
  readonly through: number
}

/**
 * The stored lines to read for the uuids of `items` the index cannot decide alone:
 * those not in its map that a generation may hold. Each such uuid can only be on
 * the lines of the generations that may hold it (a uuid first stored later is
 * still in the map); `ranges` are those generations' lines, in order, never
 * overlapping. Undefined when there are none.
 */
export const unresolved = (
  index: Index,
  items: ReadonlyArray<Item>
): { readonly keys: ReadonlySet<string>; readonly ranges: ReadonlyArray<Range> } | undefined => {
  if (index.evictedThrough < index.firstVisible) return undefined
  let keys: Set<string> | undefined
  let generations: Set<Generation> | undefined
  for (const item of items) {
    if (item.uuid === undefined || index.uuids.has(item.uuid) || keys?.has(item.uuid) === true) continue
    const may = index.older.lookup(item.uuid)
    if (may.length === 0) continue
    ;(keys ??= new Set()).add(item.uuid)
    generations ??= new Set()
    for (const g of may) generations.add(g)
  }
  if (keys === undefined || generations === undefined) return undefined
  const ranges = index.older.list.filter((g) => generations.has(g)).map((g) => ({
    from: Math.max(g.from, index.firstVisible),
    through: g.through
  }))
  return { keys, ranges }
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
      if (entry === undefined || claimed.has(n)) break
      const value = Planner.lineOfEntry(entry)
      const position = probe.positions[k]!
      const item = items[position]!
      // The same text (so no uuid either, as the item has none), or the same marker.
      if (
        value === undefined ||
        (item.oversized === undefined
          ? !("text" in value) || value.text !== item.line
          : !Transcript.isOversized(value) || value.oversized.bytes !== item.oversized.bytes ||
            value.oversized.sha256 !== item.oversized.sha256)
      ) break
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
