/**
 * Reading stored entries from a sequence on, a page at a time: shared by
 * `history`, `follow` and the writer's checks of stored hashes.
 */
import { CorruptJournal, CorruptReason, type Entry, type StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as path from "node:path"
import * as Base from "./fileOps/base.ts"
import * as Open from "./fileOps/open.ts"
import * as Replace from "./fileOps/replace.ts"
import { listing } from "./load.ts"
import * as Segment from "./segment.ts"

/** The `entry_hash` of the stored entries from `from` on, at most `count` of them. */
export const readRange = Effect.fnUntraced(function*(ctx: Base.Context, dir: string, from: number, count: number) {
  const reader = new Reader(ctx, dir, from)
  const out = new Map<number, string>()
  while (out.size < count) {
    const page = yield* reader.page(Math.min(512, count - out.size))
    for (const e of page.entries) out.set(e.sequence, e.entry_hash)
    if (page.atEnd) break
  }
  return out
})

/**
 * A cursor over the stored entries of one session from a sequence on, reading a
 * page at a time (a segment is opened per page, so nothing stays open between
 * pages). A damaged last line of the last segment is where the stored entries end
 * for now (a writer may be completing it); damage followed by more data fails with
 * `CorruptJournal`, after the entries stored before it have been read: a page
 * that meets it ends with them, and the next one fails. A page that is full
 * stops at its last entry, without looking at the line after it. Entries missing
 * before `from` do not fail a read of the entries from `from` on, stored in
 * sequence from there (a report reads what is stored after a gap that way).
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
  /** Whether an entry was read: from then on every record must follow the one before it. */
  private started = false
  /** Whether the last page ended where the stored entries end for now. */
  private atEnd = false
  /** Identity, size and modification time of the current segment when it was last opened. */
  private lastStat: { readonly ino: number; readonly size: number; readonly mtimeMs: number } | null = null
  /** Whether to list the directory for a later segment when the current one ends (see `page`). */
  private listAtEnd = true
  private readonly ctx: Base.Context
  private readonly dir: string
  constructor(ctx: Base.Context, dir: string, from: number) {
    this.ctx = ctx
    this.dir = dir
    this.expected = Math.max(0, from)
  }

  private position(): Effect.Effect<boolean, StorageError> {
    return Effect.map(listing(this.ctx, this.dir), (list) => this.positionIn(list.segments))
  }

  private positionIn(segments: ReadonlyArray<{ readonly name: string; readonly base: number }>): boolean {
    const list = { segments }
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

  /**
   * Up to `max` entries; `atEnd` when the stored entries are exhausted for now.
   *
   * A follower that reached the end says what changed since (`changed`): the names
   * a watch of the directory reported, or null when it cannot say (a safety poll).
   * Names of no segment change nothing a reader reads: no I/O at all. Only the
   * segment being read: it is read on, and no listing looks for a later segment (a
   * new one would have been named). Null: one lstat of the segment being read and
   * one listing; it is opened only when it changed (its identity, size or
   * modification time) or a later segment exists. Without `changed` every page
   * opens the segment and lists the directory at its end.
   */
  page(
    max: number,
    changed?: ReadonlySet<string> | null
  ): Effect.Effect<{ readonly entries: Array<Entry.Entry>; readonly atEnd: boolean }, StorageError | CorruptJournal> {
    const self = this
    return Effect.gen(function*() {
      if (changed !== undefined && self.atEnd && (yield* self.unchanged(changed))) return { entries: [], atEnd: true }
      self.atEnd = false
      const out: Array<Entry.Entry> = []
      for (;;) {
        const more = yield* self.pageStep(out, max)
        if (more !== null) {
          self.atEnd = more.atEnd
          self.listAtEnd = true
          return more
        }
      }
    })
  }

  // Whether nothing this reader reads changed since it reached the end (see `page`).
  private unchanged(changed: ReadonlySet<string> | null): Effect.Effect<boolean, StorageError> {
    const seg = this.segment
    if (seg === null) return Effect.succeed(false)
    if (changed !== null) {
      const segments = Segment.segmentsOf(Array.from(changed))
      if (segments.length === 0) return Effect.succeed(true)
      this.listAtEnd = !segments.every((s) => s.name === seg.name)
      return Effect.succeed(false)
    }
    const known = this.lastStat
    if (known === null) return Effect.succeed(false)
    const file = path.join(this.dir, seg.name)
    const ctx = this.ctx
    const dir = this.dir
    return Effect.gen(function*() {
      const st = yield* Base.call("lstat", file, () => ctx.fs.lstat(file)).pipe(
        Effect.catchIf((e) => Base.hasCode(e, "ENOENT"), () => Effect.succeed(null))
      )
      if (st === null || st.ino !== known.ino || st.size !== known.size || st.mtimeMs !== known.mtimeMs) return false
      const list = yield* listing(ctx, dir)
      return !list.segments.some((s) => s.base > seg.base)
    })
  }

  // Damage met by a page: the entries read before it are the page (the reader
  // stays before the damage, so the next page meets it again, with nothing read,
  // and fails); only a page that read nothing fails. Stored entries that may still
  // verify are never lost with the damage after them.
  private failAfter(
    out: Array<Entry.Entry>,
    damage: CorruptJournal
  ): Effect.Effect<{ readonly entries: Array<Entry.Entry>; readonly atEnd: boolean }, CorruptJournal> {
    return out.length > 0 ? Effect.succeed({ entries: out, atEnd: false }) : Effect.fail(damage)
  }

  // One segment's worth of a page: the page when it is complete, null to go on.
  private pageStep(
    out: Array<Entry.Entry>,
    max: number
  ): Effect.Effect<
    null | { readonly entries: Array<Entry.Entry>; readonly atEnd: boolean },
    StorageError | CorruptJournal
  > {
    const self = this
    return Effect.gen(function*() {
      if (self.segment === null && !(yield* self.position())) return { entries: out, atEnd: true }
      const seg = self.segment!
      const file = path.join(self.dir, seg.name)
      let consumed = self.offset
      let gap: CorruptJournal | null = null
      const fromStart = self.offset === 0 && self.lastInSegment === null
      // A segment removed by retention or a repair while we read: null.
      const opened = Open.openRead(self.ctx, file).pipe(
        Effect.catchIf((e) => Base.hasCode(e, "ENOENT"), () => Effect.succeed(null))
      )
      // A segment now shorter than what was read from it was cut under the reader
      // (a repair, or an edit): what it read there is no longer stored, and what is
      // written at the cut would be read from the middle of a line.
      const cutUnder = (fh: Base.FileHandle) =>
        Effect.flatMap(Base.call("fstat", file, () => fh.stat()), (st) => {
          self.lastStat = { ino: st.ino, size: st.size, mtimeMs: st.mtimeMs }
          return st.size < self.offset
            ? Effect.fail(
              new CorruptJournal({
                segment: file,
                offset: self.offset,
                reason: new CorruptReason.Cut({ size: st.size, read: self.offset })
              })
            )
            : Effect.void
        })
      const scanned = yield* Effect.acquireUseRelease(
        opened,
        (fh) =>
          fh === null ?
            Effect.succeed(null) :
            Effect.andThen(
              cutUnder(fh),
              Segment.scan(self.ctx, fh, file, file, seg.base, self.offset, (record, offset, end) => {
                if (record._tag === "Meta") {
                  consumed = end
                  return true
                }
                const e = record.entry
                // Records of a segment run base, base + 1, …: anything else is a forged or
                // misplaced record, never skipped as a harmless duplicate.
                const expectedHere = self.lastInSegment !== null ? self.lastInSegment + 1 : fromStart ? seg.base : null
                if (expectedHere !== null && e.sequence < expectedHere && self.seen.get(e.sequence) === e.entry_hash) {
                  // An identical re-append of an entry already read here: harmless, as in Recovery.
                  consumed = end
                  return true
                }
                // Entries missing before the first one asked for are no gap of the range
                // read: the stored entries from `from` on are read from where they run in
                // sequence again (what is missing before them is for verification to say).
                const before = !self.started && e.sequence <= self.expected
                if (expectedHere !== null && e.sequence !== expectedHere && !(before && e.sequence > expectedHere)) {
                  gap = new CorruptJournal({
                    segment: file,
                    offset,
                    reason: new CorruptReason.OutOfSequence({ expected: expectedHere, found: e.sequence })
                  })
                  return false
                }
                if (e.sequence < self.expected) {
                  consumed = end
                  self.lastInSegment = e.sequence
                  self.remember(e)
                  return true
                }
                if (e.sequence > self.expected) {
                  gap = new CorruptJournal({
                    segment: file,
                    offset,
                    reason: new CorruptReason.OutOfSequence({ expected: self.expected, found: e.sequence })
                  })
                  return false
                }
                out.push(e)
                self.started = true
                self.expected++
                consumed = end
                self.lastInSegment = e.sequence
                self.remember(e)
                // A full page stops at its last entry: what follows it (damage too) is the next page's.
                return out.length < max
              })
            ),
        (fh) => fh === null ? Effect.void : Replace.close(fh)
      )
      if (scanned === null) {
        // Find our place again.
        self.segment = null
        return (yield* self.position()) ? null : { entries: out, atEnd: true }
      }
      self.offset = consumed
      const found = gap as CorruptJournal | null
      if (found !== null) return yield* self.failAfter(out, found)
      const end = scanned.end
      if (end._tag === "Halted") return { entries: out, atEnd: false }
      if (end._tag === "Damaged" && end.more) {
        return yield* self.failAfter(
          out,
          new CorruptJournal({
            segment: file,
            offset: end.offset,
            reason: new CorruptReason.Damaged({ detail: end.reason, followedBy: "more data" })
          })
        )
      }
      // The watch named only this segment: no later one appeared (see `page`).
      if (!self.listAtEnd) return { entries: out, atEnd: true }
      const list = yield* listing(self.ctx, self.dir)
      const next = list.segments.find((s) => s.base > seg.base)
      if (next === undefined) return { entries: out, atEnd: true }
      if (end._tag !== "Clean" || next.base > self.expected) {
        // A later segment exists, so this one is complete; re-read it once in case
        // the writer finished it after our read, then call it what it is.
        if (self.rescans++ === 0) return null
        if (end._tag === "UnknownVersion") return { entries: out, atEnd: true }
        return yield* self.failAfter(
          out,
          new CorruptJournal({
            segment: file,
            offset: end._tag === "Damaged" ? end.offset : self.offset,
            reason: end._tag === "Damaged"
              ? new CorruptReason.Damaged({ detail: end.reason, followedBy: `segment ${next.name}` })
              : new CorruptReason.SegmentGap({ segment: next.name, base: next.base, expected: self.expected })
          })
        )
      }
      self.rescans = 0
      self.segment = next
      self.offset = 0
      self.lastInSegment = null
      return out.length >= max ? { entries: out, atEnd: false } : null
    })
  }
}
