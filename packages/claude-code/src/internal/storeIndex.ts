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
import type * as Entry from "@session-journal/core/Entry"
import * as Planner from "../Planner.ts"
import * as Transcript from "../Transcript.ts"

/** The kind of the entry that records a deletion (`allowDelete`). */
export const DELETE_KIND = "claude-code.session-store.delete"

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
  /** Line of each uuid stored since the newest deletion. */
  readonly uuids: Map<string, number>
  /** The tool calls of the visible lines: those still waiting for their result, those paired. */
  pairing: Transcript.Pairing
}

/** An index of nothing read yet. */
export const empty = (): Index => ({
  covered: 0,
  lastHash: null,
  lines: 0,
  sequenceOf: [],
  firstVisible: 1,
  deleted: false,
  uuids: new Map(),
  pairing: Transcript.emptyPairing()
})

/** Starts over (storage did not continue what was read: a repair set entries aside). */
export const reset = (index: Index): void => {
  index.covered = 0
  index.lastHash = null
  index.lines = 0
  index.sequenceOf.length = 0
  index.firstVisible = 1
  index.deleted = false
  index.uuids.clear()
  index.pairing = Transcript.emptyPairing()
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/** The `uuid` of an entry's JSON text, if it is a non-empty string. */
export const uuidOfLine = (line: string): string | undefined => {
  // Only lines that mention the field are parsed.
  if (!line.includes("\"uuid\"")) return undefined
  try {
    const v: unknown = JSON.parse(line)
    return isRecord(v) && typeof v["uuid"] === "string" && v["uuid"] !== "" ? v["uuid"] : undefined
  } catch {
    return undefined
  }
}

/** The uuid of a batch entry as the store keys it. */
export const uuidOf = (entry: { readonly uuid?: unknown }): string | undefined =>
  typeof entry.uuid === "string" && entry.uuid !== "" ? entry.uuid : undefined

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
      if (uuid !== undefined && !index.uuids.has(uuid)) index.uuids.set(uuid, n)
      // The agent does not change the pairing.
      Transcript.pair(index.pairing, Transcript.parse(value.text), "main", 0)
    }
  } else if (entry.kind === DELETE_KIND) {
    index.firstVisible = index.lines + 1
    index.deleted = true
    index.uuids.clear()
    index.pairing = Transcript.emptyPairing()
  }
  index.covered = entry.sequence + 1
  index.lastHash = entry.entry_hash
  return true
}

/** One entry of a batch: its JSON text and its uuid. */
export interface Item {
  readonly line: string
  readonly uuid: string | undefined
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
export const plan = (index: Index, items: ReadonlyArray<Item>, cursor?: number) => {
  const fresh: Array<boolean> = []
  const known: Array<number | undefined> = []
  const inBatch = new Set<string>()
  for (const item of items) {
    if (item.uuid === undefined) {
      fresh.push(true)
      known.push(undefined)
      continue
    }
    const at = index.uuids.get(item.uuid)
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
