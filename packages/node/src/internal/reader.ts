/**
 * Reading stored entries from a sequence on, a page at a time: shared by
 * `history`, `follow` and the writer's checks of stored hashes.
 */
import { CorruptJournal, type Entry, StorageError } from "@session-journal/core"
import * as path from "node:path"
import * as FileOps from "./fileOps.ts"
import { listing } from "./load.ts"
import * as Segment from "./segment.ts"

/** The `entry_hash` of the stored entries from `from` on, at most `count` of them. */
export const readRange = async (ctx: FileOps.Context, dir: string, from: number, count: number): Promise<Map<number, string>> => {
  const reader = new Reader(ctx, dir, from)
  const out = new Map<number, string>()
  while (out.size < count) {
    const page = await reader.page(Math.min(512, count - out.size))
    for (const e of page.entries) out.set(e.sequence, e.entry_hash)
    if (page.atEnd) break
  }
  return out
}

/**
 * A cursor over the stored entries of one session from a sequence on, reading a
 * page at a time (a segment is opened per page, so nothing stays open between
 * pages). A damaged last line of the last segment is where the stored entries end
 * for now (a writer may be completing it); damage followed by more data fails with
 * `CorruptJournal`.
 */
export class Reader {
  private expected: number
  private segment: { readonly name: string; readonly base: number } | null = null
  private offset = 0
  private rescans = 0
  /** Sequence of the last entry record consumed in the current segment. */
  private lastInSegment: number | null = null
  /** Hashes of the latest entries read, to recognise an identical re-append. */
  private readonly seen = new Map<number, string>()
  private remember(e: Entry.Entry): void {
    this.seen.set(e.sequence, e.entry_hash)
    if (this.seen.size > 4096) this.seen.delete(this.seen.keys().next().value!)
  }
  private readonly ctx: FileOps.Context
  private readonly dir: string
  constructor(ctx: FileOps.Context, dir: string, from: number) {
    this.ctx = ctx
    this.dir = dir
    this.expected = Math.max(0, from)
  }

  private async position(): Promise<boolean> {
    const list = await listing(this.ctx, this.dir)
    if (list.segments.length === 0) return false
    let chosen = list.segments[0]!
    for (const s of list.segments) if (s.base <= this.expected) chosen = s
    // Retention may have removed the history before the first segment.
    if (chosen.base > this.expected) this.expected = chosen.base
    this.segment = chosen
    this.offset = 0
    this.lastInSegment = null
    return true
  }

  /** Up to `max` entries; `atEnd` when the stored entries are exhausted for now. */
  async page(max: number): Promise<{ readonly entries: Array<Entry.Entry>; readonly atEnd: boolean }> {
    const out: Array<Entry.Entry> = []
    for (;;) {
      if (this.segment === null && !(await this.position())) return { entries: out, atEnd: true }
      const seg = this.segment!
      const file = path.join(this.dir, seg.name)
      let fh: FileOps.FileHandle
      try {
        fh = await FileOps.openRead(this.ctx, file)
      } catch (e) {
        if (e instanceof StorageError && FileOps.codeOf(e.cause) === "ENOENT") {
          // Removed by retention or a repair while we read: find our place again.
          this.segment = null
          if (!(await this.position())) return { entries: out, atEnd: true }
          continue
        }
        throw e
      }
      let consumed = this.offset
      let gap: CorruptJournal | null = null
      const fromStart = this.offset === 0 && this.lastInSegment === null
      let scan: Segment.Scan
      try {
        scan = await Segment.scan(this.ctx, fh, file, file, seg.base, this.offset, (record, offset, end) => {
          if (record._tag === "Meta") {
            consumed = end
            return true
          }
          const e = record.entry
          // Records of a segment run base, base + 1, …: anything else is a forged or
          // misplaced record, never skipped as a harmless duplicate.
          const expectedHere = this.lastInSegment !== null ? this.lastInSegment + 1 : fromStart ? seg.base : null
          if (expectedHere !== null && e.sequence < expectedHere && this.seen.get(e.sequence) === e.entry_hash) {
            // An identical re-append of an entry already read here: harmless, as in Recovery.
            consumed = end
            return true
          }
          if (expectedHere !== null && e.sequence !== expectedHere) {
            gap = new CorruptJournal({
              segment: file,
              offset,
              reason: `record of sequence ${e.sequence} where the segment holds ${expectedHere}`
            })
            return false
          }
          if (e.sequence < this.expected) {
            consumed = end
            this.lastInSegment = e.sequence
            this.remember(e)
            return true
          }
          if (e.sequence > this.expected) {
            gap = new CorruptJournal({ segment: file, offset, reason: `expected sequence ${this.expected}, found ${e.sequence}` })
            return false
          }
          if (out.length >= max) return false
          out.push(e)
          this.expected++
          consumed = end
          this.lastInSegment = e.sequence
          this.remember(e)
          return true
        })
      } finally {
        await FileOps.close(fh)
      }
      this.offset = consumed
      if (gap !== null) throw gap
      const end = scan.end
      if (end._tag === "Halted") return { entries: out, atEnd: false }
      if (end._tag === "Damaged" && end.more) {
        throw new CorruptJournal({ segment: file, offset: end.offset, reason: `${end.reason}, followed by more data` })
      }
      const list = await listing(this.ctx, this.dir)
      const next = list.segments.find((s) => s.base > seg.base)
      if (next === undefined) return { entries: out, atEnd: true }
      if (end._tag !== "Clean" || next.base > this.expected) {
        // A later segment exists, so this one is complete; re-read it once in case
        // the writer finished it after our read, then call it what it is.
        if (this.rescans++ === 0) continue
        if (end._tag === "UnknownVersion") return { entries: out, atEnd: true }
        throw new CorruptJournal({
          segment: file,
          offset: end._tag === "Damaged" ? end.offset : this.offset,
          reason: end._tag === "Damaged"
            ? `${end.reason}, followed by segment ${next.name}`
            : `segment ${next.name} starts at ${next.base}, expected ${this.expected}`
        })
      }
      this.rescans = 0
      this.segment = next
      this.offset = 0
      this.lastInSegment = null
      if (out.length >= max) return { entries: out, atEnd: false }
    }
  }
}
