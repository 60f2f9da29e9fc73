/**
 * What a session store knows of one stored session without reading it again: how
 * far it has read (the next sequence and the newest hash), how many transcript
 * lines it holds, where the entries `load` shows begin (after the last deletion),
 * and the sequence of every `uuid` among those. It is built by folding stored
 * entries in order and grows only by entries read from storage or acknowledged by
 * a durable append, so what it says is stored is stored.
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
  /** The first sequence `load` shows (after the newest deletion). */
  visibleFrom: number
  /** Whether the newest deletion is newer than every line. */
  deleted: boolean
  /** Sequence of each uuid stored since `visibleFrom`. */
  readonly uuids: Map<string, number>
}

/** An index of nothing read yet. */
export const empty = (): Index => ({ covered: 0, lastHash: null, lines: 0, visibleFrom: 0, deleted: false, uuids: new Map() })

/** Starts over (storage did not continue what was read: a repair set entries aside). */
export const reset = (index: Index): void => {
  index.covered = 0
  index.lastHash = null
  index.lines = 0
  index.visibleFrom = 0
  index.deleted = false
  index.uuids.clear()
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
    const n = isRecord(entry.payload) && typeof entry.payload["n"] === "number" ? entry.payload["n"] : index.lines + 1
    index.lines = Math.max(index.lines, n)
    index.deleted = false
    if (value !== undefined && "text" in value) {
      const uuid = uuidOfLine(value.text)
      if (uuid !== undefined && !index.uuids.has(uuid)) index.uuids.set(uuid, entry.sequence)
    }
  } else if (entry.kind === DELETE_KIND) {
    index.visibleFrom = entry.sequence + 1
    index.deleted = true
    index.uuids.clear()
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

/** A stored run a run of uuid-less batch entries may repeat: `length` lines from `from`. */
export interface Probe {
  /** Batch positions, in the order their stored candidates are read. */
  readonly positions: ReadonlyArray<number>
  /** Stored sequence of each position's candidate. */
  readonly sequences: ReadonlyArray<number>
}

/**
 * First pass: which items are new by uuid, and for the runs of uuid-less items
 * next to an already stored neighbour, the stored lines to compare them with.
 * `known[i]` is the stored sequence of item i when its uuid is stored, `fresh[i]`
 * whether it is to be stored (uuid-less items start fresh and may be claimed by a
 * probe). `cursor`, the stored sequence of the previous batch's last entry, stands
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
    const sequences: Array<number> = []
    if (before !== undefined && before >= index.visibleFrom - 1) {
      // Forward from the stored neighbour before the run.
      for (let p = i; p < end; p++) {
        const s = before + (p - i) + 1
        if (s >= index.covered) break
        positions.push(p)
        sequences.push(s)
      }
    } else if (after !== undefined) {
      // Backward from the stored neighbour after the run.
      for (let p = end - 1; p >= i; p--) {
        const s = after - (end - p)
        if (s < index.visibleFrom) break
        positions.push(p)
        sequences.push(s)
      }
    }
    if (positions.length > 0) probes.push({ positions, sequences })
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
  storedAt: (sequence: number) => Entry.Entry | undefined
): void => {
  const claimed = new Set<number>()
  for (const probe of probes) {
    for (let k = 0; k < probe.positions.length; k++) {
      const s = probe.sequences[k]!
      const entry = storedAt(s)
      if (entry === undefined || entry.kind !== Planner.LINE_KIND || claimed.has(s)) break
      const value = Planner.lineOf(entry.payload)
      const position = probe.positions[k]!
      // The same text: so no uuid either, as the item has none.
      if (value === undefined || !("text" in value) || value.text !== items[position]!.line) break
      claimed.add(s)
      fresh[position] = false
      known[position] = s
    }
  }
}
