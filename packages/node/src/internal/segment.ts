/**
 * Segment framing (docs/DESIGN.md §6): file names, the JSONL records of schema `v` 1, and
 * the scan that reads a segment's records and tells a torn tail (an incomplete or
 * unparsable last line) from damage followed by more bytes (corruption).
 */
import { Entry, SessionMeta, Utf8 } from "@session-journal/core"
import type { CorruptJournal, StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type { Context, FileHandle } from "./fileOps/base.ts"
import { boundedSize, type Line, LineReader, NeedIo, readAt } from "./fileOps/lines.ts"

/** Schema version of the records this release writes and reads. */
export const VERSION = 1

const NAME = /^([0-9]{20})\.jsonl$/

/** The file name of the segment whose first sequence is `base`: 20 digits. */
export const name = (base: number): string => `${String(base).padStart(20, "0")}.jsonl`

/** The base of a segment file name, or null for any other name. */
export const parseName = (file: string): number | null => {
  const m = NAME.exec(file)
  if (m === null) return null
  const n = Number(m[1])
  return Number.isSafeInteger(n) ? n : null
}

/** Segment names in `names`, sorted by base. */
export const segmentsOf = (names: ReadonlyArray<string>): Array<{ readonly name: string; readonly base: number }> =>
  names.flatMap((n) => {
    const base = parseName(n)
    return base === null ? [] : [{ name: n, base }]
  }).sort((a, b) => a.base - b.base)

const encoder = new TextEncoder()
const encodeMeta = Schema.encodeSync(SessionMeta.SessionMeta)
const decodeMeta = Schema.decodeUnknownResult(SessionMeta.SessionMeta)

/**
 * JSON text of a JSON value, like `JSON.stringify` except that negative zero is
 * written as `-0` (core's `Entry.toJsonText`).
 */
export const stringify = Entry.toJsonText

/**
 * The first line of a segment. A preallocated segment says so in its open record
 * (`"prealloc":true`): the zero bytes after its last line are unused space, not a
 * torn tail (see `scan`).
 */
export const openLine = (base: number, preallocated = false): string =>
  preallocated
    ? `${JSON.stringify({ k: "open", v: VERSION, base, prealloc: true })}\n`
    : `${JSON.stringify({ k: "open", v: VERSION, base })}\n`

const ENTRY_LINE_START = `{"k":"entry","v":${VERSION},"e":`

/**
 * The line of an entry: `{"k":"entry","v":1,"e":<entry>}`, the entry's text being
 * `Entry.jsonText` (the text the checkpoint that will hold the entry writes too).
 */
export const entryLine = (entry: Entry.Entry): string => `${ENTRY_LINE_START}${Entry.jsonText(entry)}}\n`

/**
 * Bytes an entry line adds around the entry's own JSON text: `{"k":"entry","v":1,"e":`,
 * the closing brace and the newline.
 */
export const ENTRY_LINE_OVERHEAD = 25

// The start of an entry line as `entryLine` writes it: the entry's text begins with
// its sequence, link and hash (`Entry.jsonText`'s order), before any payload.
const ENTRY_HEAD =
  /^\{"k":"entry","v":1,"e":\{"sequence":(0|[1-9][0-9]{0,15}),"prev_hash":"[0-9a-f]{64}","entry_hash":"([0-9a-f]{64})"/

// Bytes of a line read to match `ENTRY_HEAD` (it is 212 bytes at most), decoded
// byte for byte (a cut may fall inside a character of the payload after it).
const HEAD_BYTES = 256
const headDecoder = new TextDecoder("latin1")

// The first window read back from a segment's end; each next one is four times larger.
const FIRST_WINDOW = 4 * 1024

/**
 * Where the line of the entry `sequence` whose `entry_hash` is `hash` starts in an
 * opened segment of `size` bytes, found by reading back from the end in growing
 * windows (up to `maxWindow` bytes): so a load reads from the entry its checkpoint
 * ends with, whatever the segment held before it. Only a complete line (ended by its
 * newline) whose head, as `entryLine` writes it, names this sequence and hash is
 * taken; lines of another form (metadata, damage, a torn or zero tail) are passed
 * over. Null when the lines reached name an earlier sequence, the entry's hash is
 * another, or the window reached the file's start or `maxWindow` first: the caller
 * then reads the segment from its start. What is found is a claim like the
 * checkpoint: the recovery checks the whole record there and what follows.
 */
export const lineOf = (
  fh: FileHandle,
  file: string,
  size: number,
  sequence: number,
  hash: string,
  maxWindow: number
): Effect.Effect<number | null, StorageError> => {
  // `known`: the bytes read so far, the last of the file; each window reads only
  // what lies before them.
  const search = (window: number, known: Uint8Array): Effect.Effect<number | null, StorageError> => {
    const from = Math.max(0, size - window)
    return Effect.flatMap(readAt(fh, file, from, size - known.length - from), (before) => {
      const bytes = new Uint8Array(before.length + known.length)
      bytes.set(before, 0)
      bytes.set(known, before.length)
      // Lines from the last one back: `end` is where the current line's newline is.
      let end = bytes.length
      for (let i = bytes.length - 1; i >= -1; i--) {
        if (i >= 0 ? bytes[i] !== 10 : from > 0) continue
        const start = i + 1
        if (start < end && end < bytes.length) {
          const m = ENTRY_HEAD.exec(headDecoder.decode(bytes.subarray(start, Math.min(end, start + HEAD_BYTES))))
          if (m !== null) {
            const found = Number(m[1])
            if (found === sequence) return Effect.succeed(m[2] === hash ? from + start : null)
            if (found < sequence) return Effect.succeed(null)
          }
        }
        end = i
      }
      return from === 0 || window >= maxWindow || before.length === 0
        ? Effect.succeed(null)
        : search(Math.min(maxWindow, window * 4), bytes)
    })
  }
  return search(Math.min(FIRST_WINDOW, maxWindow), new Uint8Array(0))
}

/** The line of a metadata update. */
export const metaLine = (meta: SessionMeta.SessionMeta): string =>
  `${JSON.stringify({ k: "meta", v: VERSION, meta: encodeMeta(meta) })}\n`

/** UTF-8 bytes of a string. */
export const bytes = (s: string): Uint8Array => encoder.encode(s)

// The spare buffer of `Utf8Sink`s: the one a finished sink gave back, reused by
// the next (a fresh megabyte-sized allocation per checkpoint, and the text of the
// whole document, cost more than writing it). Sinks in use at the same time take
// their own.
let spare: Buffer | null = null
const SINK_START = 64 * 1024
const SINK_MIN = 1024
// A larger buffer is not kept for reuse once its sink is done.
const SPARE_MAX = 16 * 1024 * 1024

/**
 * UTF-8 bytes written piece by piece into one buffer (exactly the bytes
 * `bytes(pieces.join(""))` gives), reused from one sink to the next: take one with
 * `sink()`, write, use `view()` until the write that needs it is over, then
 * `release()` it (after which its bytes may change).
 */
export class Utf8Sink {
  private buf: Buffer
  private used = 0
  constructor(buf: Buffer) {
    this.buf = buf
  }

  /** Bytes written so far. */
  get length(): number {
    return this.used
  }

  /** Appends the UTF-8 bytes of `text`. */
  readonly add = (text: string): void => {
    // A UTF-16 code unit is at most three UTF-8 bytes.
    const need = this.used + text.length * 3
    if (need > this.buf.length) {
      const grown = Buffer.allocUnsafeSlow(Math.max(need, this.buf.length * 2))
      this.buf.copy(grown, 0, 0, this.used)
      this.buf = grown
    }
    this.used += this.buf.write(text, this.used, "utf8")
  }

  /** Appends an entry's line (`entryLine`). */
  addEntryLine(entry: Entry.Entry): void {
    this.add(ENTRY_LINE_START)
    this.add(Entry.jsonText(entry))
    this.add("}\n")
  }

  /** The bytes written, a view of the sink's buffer: valid until `release`. */
  view(): Uint8Array {
    return this.buf.subarray(0, this.used)
  }

  /** Done with the bytes: the buffer may serve the next sink. */
  release(): void {
    if (this.buf.length <= SPARE_MAX && (spare === null || spare.length < this.buf.length)) spare = this.buf
    this.buf = Buffer.alloc(0)
    this.used = 0
  }
}

/**
 * A sink over the spare buffer, or a new one of about `expected` bytes when another
 * sink holds it (many sessions appending at once each take their own, of the size
 * they need; a sink grows when it needs more).
 */
export const sink = (expected: number = SINK_START): Utf8Sink => {
  const buf = spare ?? Buffer.allocUnsafeSlow(Math.max(expected, SINK_MIN))
  spare = null
  return new Utf8Sink(buf)
}

/** One parsed line. */
export type Record =
  | { readonly _tag: "Open"; readonly base: number }
  | { readonly _tag: "Entry"; readonly entry: Entry.Entry }
  | { readonly _tag: "Meta"; readonly meta: SessionMeta.SessionMeta }
  | { readonly _tag: "UnknownVersion"; readonly v: unknown }
  | { readonly _tag: "Damaged"; readonly reason: string }

/** Parses one complete line (without its newline). Never throws. */
export const parseLine = (line: Uint8Array): Record => {
  let text: string
  try {
    text = Utf8.decodeStrict(line)
  } catch {
    return { _tag: "Damaged", reason: "not a JSON line" }
  }
  return parseText(text)
}

/**
 * `parseLine` of a line already decoded (without its newline); for an ASCII line,
 * its Latin-1 text is the same string UTF-8 gives.
 */
export const parseText = (text: string): Record => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return { _tag: "Damaged", reason: "not a JSON line" }
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return { _tag: "Damaged", reason: "not a JSON object" }
  }
  const o = json as { readonly [k: string]: unknown }
  if (!("v" in o)) return { _tag: "Damaged", reason: "record without a version" }
  if (o["v"] !== VERSION) return { _tag: "UnknownVersion", v: o["v"] }
  switch (o["k"]) {
    case "open": {
      const base = o["base"]
      return typeof base === "number" && Number.isSafeInteger(base) && base >= 0
        ? { _tag: "Open", base }
        : { _tag: "Damaged", reason: "malformed open record" }
    }
    case "entry": {
      const e = Entry.decode(o["e"])
      return Result.isSuccess(e) ? { _tag: "Entry", entry: e.success } : { _tag: "Damaged", reason: "malformed entry" }
    }
    case "meta": {
      const m = decodeMeta(o["meta"])
      return Result.isSuccess(m) ? { _tag: "Meta", meta: m.success } : { _tag: "Damaged", reason: "malformed metadata" }
    }
    default:
      return { _tag: "Damaged", reason: "unknown record kind" }
  }
}

const isZeros = (bytes: Uint8Array): boolean => {
  for (let i = 0; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return bytes.length > 0
}

// A damaged line ends a scan: a terminated line is no torn write; only an
// unterminated line or a zero-filled tail can be.
const damagedAt = (
  size: number,
  validEnd: number,
  offset: number,
  lineEnd: number,
  reason: string,
  terminated: boolean,
  zeros: boolean
): Omit<Scan, "preallocated"> => ({
  size,
  validEnd,
  end: { _tag: "Damaged", offset, reason, more: terminated && lineEnd < size, terminated, zeros }
})

/** How a scan of one segment ended. */
export type End =
  /** Every byte read was a valid record. */
  | { readonly _tag: "Clean" }
  /** The visitor asked to stop at the record at `offset`. */
  | { readonly _tag: "Halted"; readonly offset: number }
  /** A record of another schema version at `offset`: the valid prefix ends there. */
  | { readonly _tag: "UnknownVersion"; readonly offset: number; readonly v: unknown }
  /**
   * A damaged line at `offset`. `more` says whether bytes follow the damaged line
   * (then it is corruption); otherwise it is this segment's last line.
   * `terminated` says whether the line ended with a newline (a crash cannot leave a
   * complete line that does not parse), `zeros` whether every byte from `offset` to
   * the end of the file is zero (a crash can leave a zero-filled tail).
   */
  | {
    readonly _tag: "Damaged"
    readonly offset: number
    readonly reason: string
    readonly more: boolean
    readonly terminated: boolean
    readonly zeros: boolean
  }

/** The result of scanning one segment. */
export interface Scan {
  /** Size of the file when the scan started. */
  readonly size: number
  /** End of the last valid record (where a writer may continue). */
  readonly validEnd: number
  readonly end: End
  /**
   * Whether the segment is preallocated (its open record says so). A clean scan of
   * one may end before `size`: the bytes from `validEnd` on are zeros, the unused
   * space a writer continues into.
   */
  readonly preallocated: boolean
}

/** What a scan hands to its visitor: an entry or a metadata record. */
export type Visited = Extract<Record, { _tag: "Entry" | "Meta" }>

/**
 * Reads every record of a segment from `start` (0, or the offset of a record
 * boundary) and hands entries and metadata to `visit`, which returns false to stop.
 * The first line must be the open record with the segment's own base. Reading is
 * bounded (file size and line length, see `fileOps`).
 *
 * One Effect per chunk read, not per line: the lines of a chunk are split and
 * parsed synchronously (`LineReader.poll`).
 */
export const scan = (
  ctx: Context,
  fh: FileHandle,
  file: string,
  label: string,
  base: number,
  start: number,
  visit: (record: Visited, offset: number, end: number) => boolean
): Effect.Effect<Scan, StorageError | CorruptJournal> =>
  Effect.flatMap(boundedSize(ctx, fh, file), (size) => {
    const reader = new LineReader(ctx, fh, file, label, start, size)
    const state: ScanState = { size, validEnd: start, first: start === 0, preallocated: null }
    const loop: Effect.Effect<Scan, StorageError | CorruptJournal> = Effect.suspend(() => {
      for (;;) {
        const item = reader.poll()
        if (item === NeedIo) return Effect.flatMap(reader.io(), () => loop)
        const done = step(state, base, item, visit)
        if (done === NeedHead) {
          // Read from the middle: whether the segment is preallocated is in its first line.
          return Effect.flatMap(preallocatedHead(fh, file, base), (pre) => {
            state.preallocated = pre
            const again = step(state, base, item, visit)
            return again === null ? loop : Effect.succeed(again as Scan)
          })
        }
        if (done !== null) return Effect.succeed(done)
      }
    })
    return loop
  })

// Whether `line` (without its newline) is, byte for byte, the open record a
// preallocated segment of `base` starts with.
const isPreallocatedOpen = (line: Uint8Array, base: number): boolean => {
  const want = encoder.encode(openLine(base, true))
  if (line.length !== want.length - 1) return false
  for (let i = 0; i < line.length; i++) if (line[i] !== want[i]) return false
  return true
}

// Reads the first line of a segment: whether it is preallocated.
const preallocatedHead = (fh: FileHandle, file: string, base: number): Effect.Effect<boolean, StorageError> => {
  const length = encoder.encode(openLine(base, true)).length
  return Effect.map(
    readAt(fh, file, 0, length),
    (head) =>
      head.length === length && head[length - 1] === 10 && isPreallocatedOpen(head.subarray(0, length - 1), base)
  )
}

// What `step` answers when it must know whether the segment is preallocated and
// the scan started after the open record.
const NeedHead: unique symbol = Symbol("NeedHead")

interface ScanState {
  readonly size: number
  validEnd: number
  first: boolean
  /** From the open record; null while unknown (a scan that starts after it). */
  preallocated: boolean | null
}

// One line of a scan: null to go on, or how the scan ended (`NeedHead` when
// whether the segment is preallocated decides it and is not known yet; the same
// item is then stepped again).
const step = (
  state: ScanState,
  base: number,
  item: Line | null,
  visit: (record: Visited, offset: number, end: number) => boolean
): Scan | null | typeof NeedHead => {
  const { size, validEnd } = state
  const ended = (scan: Omit<Scan, "preallocated">): Scan => ({ ...scan, preallocated: state.preallocated === true })
  if (item === null) return ended({ size, validEnd, end: { _tag: "Clean" } })
  const lineEnd = item.offset + item.line.length + 1
  if (!item.complete) {
    const zeros = item.zeros === true || isZeros(item.line)
    if (zeros && !state.first && item.offset === validEnd) {
      // The zero tail of a preallocated segment is unused space: its data ends here.
      if (state.preallocated === null) return NeedHead
      if (state.preallocated) return ended({ size, validEnd, end: { _tag: "Clean" } })
    }
    return ended(
      damagedAt(size, validEnd, item.offset, lineEnd, zeros ? "zero-filled tail" : "incomplete last line", false, zeros)
    )
  }
  const record = parseLine(item.line)
  if (state.first) {
    state.first = false
    if (record._tag === "Open" && record.base === base) {
      state.preallocated = isPreallocatedOpen(item.line, base)
      state.validEnd = lineEnd
      return null
    }
    if (record._tag === "UnknownVersion") {
      return ended({ size, validEnd, end: { _tag: "UnknownVersion", offset: item.offset, v: record.v } })
    }
    const reason = record._tag === "Open"
      ? `open record names base ${record.base}, file ${base}`
      : "missing open record"
    return ended(damagedAt(size, validEnd, item.offset, lineEnd, reason, true, false))
  }
  switch (record._tag) {
    case "Entry":
    case "Meta":
      if (!visit(record, item.offset, lineEnd)) {
        return ended({ size, validEnd, end: { _tag: "Halted", offset: item.offset } })
      }
      state.validEnd = lineEnd
      return null
    case "UnknownVersion":
      return ended({ size, validEnd, end: { _tag: "UnknownVersion", offset: item.offset, v: record.v } })
    case "Open":
      return ended(damagedAt(size, validEnd, item.offset, lineEnd, "open record inside a segment", true, false))
    case "Damaged":
      if (item.line.includes(0)) {
        // A record never holds a zero byte (JSON escapes control characters). In a
        // preallocated segment one is space that was never written: the pages of an
        // unacknowledged write reached the disk out of order. From this line to the
        // end of the file is that write's torn tail.
        if (state.preallocated === null) return NeedHead
        if (state.preallocated) {
          return ended(
            damagedAt(size, validEnd, item.offset, size, "unwritten bytes inside the last write", false, false)
          )
        }
      }
      // A line of zeros ended by a newline is written data, not a zero-filled tail.
      return ended(damagedAt(size, validEnd, item.offset, lineEnd, record.reason, true, false))
  }
}
