/**
 * The incremental plan of one transcript (the mirror planner's rules applied to
 * lines): fold what the journal already holds against the file's current lines,
 * then extend when the journaled lines are a byte prefix of the file, record a
 * divergence at the first line that differs otherwise, and do nothing when the
 * two are equal. Nothing journaled is ever taken back: a divergence entry says
 * from which line on the transcript was rewritten, and the new content follows
 * it. Pure: no storage, no files.
 *
 * The entries this package writes, and their payloads:
 *
 * - `claude-code.line` `{ n, line }` (or `{ n, line_base64 }` for bytes that are
 *   not UTF-8): line `n` (from 1) of the transcript, without its newline.
 * - `claude-code.divergence` `{ line, journaled_lines, file_lines, reason }`:
 *   the transcript no longer starts with the journaled lines; `line` is the
 *   first that differs (`reason` `"changed"`) or the first the file no longer
 *   has (`"shorter"`). The current version is then lines `1 … line − 1` as
 *   journaled before, followed by the line entries after the divergence.
 * - `claude-code.oversized-line` `{ n, bytes, sha256 }`: line `n` was above the
 *   line bound; its size and SHA-256 stand for it (compared by hash with the file's
 *   line), its bytes are not kept.
 * - `claude-code.missing` `{ path, journaled_lines }` / `claude-code.reappeared`
 *   `{ path }`: the transcript file disappeared / is back.
 *
 * @since 0.1.0
 */
import type { Entry, SessionJournal } from "@session-journal/core"
import { isOversized, lineBytes, type LineValue, sameLine } from "./Transcript.ts"

/**
 * Kind of the entry holding one transcript line.
 *
 * @since 0.1.0
 */
export const LINE_KIND = "claude-code.line"

/**
 * Kind of the entry recording that the transcript was rewritten.
 *
 * @since 0.1.0
 */
export const DIVERGENCE_KIND = "claude-code.divergence"

/**
 * Kind of the entry recording that the transcript file disappeared.
 *
 * @since 0.1.0
 */
export const MISSING_KIND = "claude-code.missing"

/**
 * Kind of the entry recording that a disappeared transcript file is back.
 *
 * @since 0.1.0
 */
export const REAPPEARED_KIND = "claude-code.reappeared"

/**
 * Kind of the entry standing for a transcript line above the line bound:
 * `{ n, bytes, sha256 }`, the line's number, size and SHA-256, no payload.
 *
 * @since 0.1.0
 */
export const OVERSIZED_KIND = "claude-code.oversized-line"

/**
 * Where an entry is on its chain.
 *
 * @since 0.1.0
 */
export interface EntryRef {
  readonly sequence: number
  readonly entry_hash: string
}

/**
 * What the journal holds of the current version of a transcript, compared with
 * the file as it is now.
 *
 * @since 0.1.0
 */
export interface Journaled {
  /** Lines of the current version journaled. */
  lines: number
  /** The first journaled line that differs from the file's line with that number, or null. */
  mismatch: number | null
  /** The entry of each journaled line of the current version (index `n − 1`). */
  readonly refs: Array<EntryRef>
  /** Whether the latest presence entry says the file disappeared. */
  missing: boolean
  /** Whether the chain holds a divergence (so lines of earlier versions are on it too). */
  diverged: boolean
}

/**
 * Nothing journaled yet.
 *
 * @since 0.1.0
 */
export const empty = (): Journaled => ({ lines: 0, mismatch: null, refs: [], missing: false, diverged: false })

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * The line a `claude-code.line` payload holds, or undefined for a payload of
 * another shape.
 *
 * @since 0.1.0
 */
export const lineOf = (payload: unknown): LineValue | undefined => {
  if (!isRecord(payload)) return undefined
  if (typeof payload["line"] === "string") return { text: payload["line"] }
  if (typeof payload["line_base64"] === "string") return { base64: payload["line_base64"] }
  return undefined
}

/**
 * The line an entry holds: a `claude-code.line` (see `lineOf`) or a
 * `claude-code.oversized-line` marker; undefined for any other entry or shape.
 *
 * @since 0.1.0
 */
export const lineOfEntry = (entry: Entry.Entry): LineValue | undefined => {
  if (entry.kind === LINE_KIND) return lineOf(entry.payload)
  if (entry.kind !== OVERSIZED_KIND || !isRecord(entry.payload)) return undefined
  const { bytes, sha256 } = entry.payload
  return typeof bytes === "number" && typeof sha256 === "string" ? { oversized: { bytes, sha256 } } : undefined
}

/**
 * Whether an entry stands for a transcript line (a line entry or an oversized-line marker).
 *
 * @since 0.1.0
 */
export const isLineEntry = (entry: Entry.Entry): boolean => entry.kind === LINE_KIND || entry.kind === OVERSIZED_KIND

/**
 * Folds one stored entry (in chain order) into `state`, comparing each line
 * entry with the file's line of the same number (`file[n − 1]`). Entries of
 * other kinds (tool entries, other writers') change nothing. Mutates `state`.
 *
 * @since 0.1.0
 */
export const observe = (state: Journaled, entry: Entry.Entry, file: ReadonlyArray<LineValue>): void => {
  if (isLineEntry(entry)) {
    const value = lineOfEntry(entry)
    const n = state.lines + 1
    const payload = "payload" in entry ? entry.payload : undefined
    const numbered = isRecord(payload) && payload["n"] === n
    const line = file[n - 1]
    if (state.mismatch === null && (value === undefined || !numbered || line === undefined || !sameLine(value, line))) {
      state.mismatch = n
    }
    state.refs.push({ sequence: entry.sequence, entry_hash: entry.entry_hash })
    state.lines = n
  } else if (entry.kind === DIVERGENCE_KIND) {
    const at = isRecord(entry.payload) && typeof entry.payload["line"] === "number" ? entry.payload["line"] : 1
    const keep = Math.max(0, Math.min(state.lines, Math.floor(at) - 1))
    state.lines = keep
    state.refs.length = keep
    if (state.mismatch !== null && state.mismatch > keep) state.mismatch = null
    state.diverged = true
  } else if (entry.kind === MISSING_KIND) {
    state.missing = true
  } else if (entry.kind === REAPPEARED_KIND) {
    state.missing = false
  }
}

/**
 * What to do with a transcript.
 *
 * - `Unchanged`: the journal holds exactly the file's complete lines.
 * - `Extend`: the journal holds the file's first `from` lines; journal the rest.
 * - `Diverge`: line `line` differs (or is gone); record it, then journal the
 *   file from that line on.
 *
 * @since 0.1.0
 */
export type Plan =
  | { readonly _tag: "Unchanged" }
  | { readonly _tag: "Extend"; readonly from: number }
  | {
    readonly _tag: "Diverge"
    readonly line: number
    readonly journaledLines: number
    readonly fileLines: number
    readonly reason: "changed" | "shorter"
  }

/**
 * Plans a transcript whose file now has `fileLines` complete lines.
 *
 * @since 0.1.0
 */
export const plan = (state: Journaled, fileLines: number): Plan => {
  if (state.mismatch !== null) {
    return { _tag: "Diverge", line: state.mismatch, journaledLines: state.lines, fileLines, reason: "changed" }
  }
  if (state.lines > fileLines) {
    return { _tag: "Diverge", line: fileLines + 1, journaledLines: state.lines, fileLines, reason: "shorter" }
  }
  return state.lines === fileLines ? { _tag: "Unchanged" } : { _tag: "Extend", from: state.lines }
}

/**
 * The first line (0-based) the file must contribute under `p`.
 *
 * @since 0.1.0
 */
export const firstNew = (p: Plan, fileLines: number): number =>
  p._tag === "Unchanged" ? fileLines : p._tag === "Extend" ? p.from : p.line - 1

/**
 * The write item of line `n` (from 1).
 *
 * @since 0.1.0
 */
export const lineItem = (n: number, value: LineValue): SessionJournal.WriteItem =>
  isOversized(value)
    ? {
      _tag: "Other",
      kind: OVERSIZED_KIND,
      payload: { n, bytes: value.oversized.bytes, sha256: value.oversized.sha256 }
    }
    : {
      _tag: "Other",
      kind: LINE_KIND,
      payload: "text" in value ? { n, line: value.text } : { n, line_base64: value.base64 }
    }

/**
 * The write item of a divergence.
 *
 * @since 0.1.0
 */
export const divergenceItem = (p: Extract<Plan, { _tag: "Diverge" }>): SessionJournal.WriteItem => ({
  _tag: "Other",
  kind: DIVERGENCE_KIND,
  payload: { line: p.line, journaled_lines: p.journaledLines, file_lines: p.fileLines, reason: p.reason }
})

/**
 * The current version of a transcript from its entries in chain order: the
 * lines after applying every divergence.
 *
 * @since 0.1.0
 */
export class Restorer {
  /** The lines of the current version so far. */
  readonly lines: Array<LineValue> = []
  /** Folds one entry. */
  push(entry: Entry.Entry): void {
    if (isLineEntry(entry)) {
      const value = lineOfEntry(entry)
      if (value !== undefined) this.lines.push(value)
    } else if (entry.kind === DIVERGENCE_KIND) {
      const at = isRecord(entry.payload) && typeof entry.payload["line"] === "number" ? entry.payload["line"] : 1
      this.lines.length = Math.max(0, Math.min(this.lines.length, Math.floor(at) - 1))
    }
  }
}

/**
 * The bytes of a transcript version: each line followed by a newline (an
 * oversized line, whose bytes are not kept, contributes none: check
 * `Transcript.isOversized` first).
 *
 * @since 0.1.0
 */
export const bytesOf = (lines: ReadonlyArray<LineValue>): Uint8Array => {
  const parts = lines.map(lineBytes)
  let size = 0
  for (const p of parts) size += p.length + 1
  const out = new Uint8Array(size)
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
    out[at++] = 0x0a
  }
  return out
}
