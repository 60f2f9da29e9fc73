/**
 * The session directory as the adapter sees it: loading (checkpoint, then replay of
 * the segments with the rules of DESIGN §6), the writer's view of where the next
 * bytes go, durable appends with segment rollover and checkpoints, and a paged
 * reader of stored entries shared by `history` and `follow`.
 */
import {
  Checkpoint,
  CorruptJournal,
  Entry,
  JournalState,
  Persistence,
  Recovery,
  SequenceConflict,
  StorageError
} from "@session-journal/core"
import * as path from "node:path"
import * as FileOps from "./fileOps.ts"
import * as Segment from "./segment.ts"

/** Name of the checkpoint file inside a session directory. */
export const CHECKPOINT_FILE = "checkpoint.json"

/** Files of a session directory, as found by one `readdir`. */
export interface Listing {
  readonly names: ReadonlyArray<string>
  readonly segments: ReadonlyArray<{ readonly name: string; readonly base: number }>
  readonly hasCheckpoint: boolean
}

/** Lists a session directory (which must be confined already). */
export const listing = async (ctx: FileOps.Context, dir: string): Promise<Listing> => {
  const names = await FileOps.listDir(ctx, dir)
  return { names, segments: Segment.segmentsOf(names), hasCheckpoint: names.includes(CHECKPOINT_FILE) }
}

/** What the writer knows about the last segment after a load. */
export interface LastSegment {
  readonly name: string
  readonly base: number
  /** File size when scanned (or after the writer's own appends). */
  size: number
  /** End of the last valid record; bytes past it are a torn tail. */
  validEnd: number
  /** One past the highest sequence stored in it (its base when it holds none). */
  contentNext: number
}

/** The writer's view of the stored session, rebuilt by every load. */
export interface View {
  next: number
  /** What the next entry links to (`JournalState.lastHash`: ZERO_HASH with `entry_cap` 0). */
  lastHash: string
  /** `entry_hash` of the newest stored entry (ZERO_HASH when none): the tip a compare-and-append names. */
  tipHash: string
  readonly entryCap: number
  stopped: Persistence.RecoveryReport["stopped"]
  checkpointNext: number
  checkpointSize: number
  last: LastSegment | null
  /** A checkpoint covers everything stored: the next append starts a new segment (DESIGN §6). */
  rollPending: boolean
}

/** Integrity of one segment file, as a scan found it. */
export interface SegmentReport {
  readonly name: string
  readonly base: number
  readonly bytes: number
  /** Entries read from it (valid records). */
  readonly entries: number
  readonly firstSequence: number | null
  readonly lastSequence: number | null
  /** ok; torn (a torn tail); damaged (the valid prefix ends here); unread (after that, or before a load-mode start). */
  readonly status: "ok" | "torn" | "damaged" | "unread"
  readonly problem: null | { readonly offset: number; readonly sequence: number | null; readonly detail: string }
}

/** The outcome of a load. */
export interface LoadResult {
  readonly loaded: Persistence.Loaded
  readonly view: View
  readonly listing: Listing
  /** Why the checkpoint file was not used although it exists, if so. */
  readonly brokenCheckpoint: string | null
  /** The checkpoint as decoded, when it decoded and verified by itself. */
  readonly checkpoint: JournalState.JournalState | null
  /** What the scan found in each segment. */
  readonly segments: ReadonlyArray<SegmentReport>
  /** One past the highest sequence of the valid stored records. */
  readonly storedNext: number
}

const decoder = new TextDecoder("utf-8", { fatal: true })

/** Reads a whole file of the session directory, checked and bounded. */
const readWhole = async (ctx: FileOps.Context, file: string): Promise<Uint8Array> => {
  const fh = await FileOps.openRead(ctx, file)
  try {
    return await FileOps.readBounded(ctx, fh, file)
  } finally {
    await FileOps.close(fh)
  }
}

/** Reads the checkpoint file as Recovery's input, with its size. */
export const readCheckpoint = async (
  ctx: FileOps.Context,
  dir: string
): Promise<{ readonly input: Recovery.CheckpointInput; readonly size: number }> => {
  const file = path.join(dir, CHECKPOINT_FILE)
  const raw = await readWhole(ctx, file)
  try {
    return { input: { _tag: "Document", document: JSON.parse(decoder.decode(raw)), location: file }, size: raw.length }
  } catch {
    return { input: { _tag: "Unreadable", reason: "checkpoint is not valid JSON", location: file }, size: raw.length }
  }
}

/** How to load: `load` from the checkpoint, or `verify` the whole history (Recovery's modes). */
export interface LoadOptions {
  readonly caps: JournalState.Caps | undefined
  readonly mode: Recovery.Options["mode"]
  /** Whether a retention option removes checkpointed segments (history may start after 0). */
  readonly retention: boolean
  /**
   * Recover from the records alone (the checkpoint lends only its caps, when it
   * decodes): what `repair` trusts, since records carry their own proof.
   */
  readonly ignoreCheckpoint?: boolean | undefined
  /** With `ignoreCheckpoint`: whether the checkpoint lends its caps (default true). */
  readonly checkpointCaps?: boolean | undefined
}

/**
 * Loads a session with `Recovery`: the checkpoint, then the segments from the one
 * holding the checkpoint's last entry (load mode) or from the first (verify mode),
 * each record handed to the recovery with its file and byte offset. The adapter
 * only reads; every rule is the recovery's.
 */
export const load = async (ctx: FileOps.Context, dir: string, id: string, options: LoadOptions): Promise<LoadResult> => {
  const exists = await FileOps.confineSessionDir(ctx, dir)
  const list: Listing = exists ? await listing(ctx, dir) : { names: [], segments: [], hasCheckpoint: false }
  let checkpointInput: Recovery.CheckpointInput = null
  let checkpointSize = 0
  if (list.hasCheckpoint) {
    const cp = await readCheckpoint(ctx, dir)
    checkpointInput = cp.input
    checkpointSize = cp.size
  }
  let caps = options.caps
  if (options.ignoreCheckpoint === true || options.checkpointCaps === false) {
    const decoded = Recovery.decodeCheckpoint(id, checkpointInput)
    if (options.checkpointCaps !== false && decoded._tag === "Success" && decoded.success !== null) {
      caps = { entry_cap: decoded.success.entry_cap, tool_counts_cap: decoded.success.tool_counts_cap }
    }
    checkpointInput = null
  }
  const recovery = Recovery.make({
    id,
    mode: options.mode,
    checkpoint: checkpointInput,
    caps,
    retention: options.retention,
    location: dir
  })
  const cp = recovery.checkpoint
  const segments = list.segments
  let start = 0
  if (options.mode === "load" && cp !== null) {
    const wanted = Math.max(0, cp.next_sequence - 1)
    for (let i = 0; i < segments.length; i++) if (segments[i]!.base <= wanted) start = i
  }
  const reports: Array<SegmentReport> = []
  let last: LastSegment | null = null
  // The newest accepted entry, and where the checkpoint's last entry ends: the
  // bytes after it are what was stored since the checkpoint (the policy's count).
  let tipNext = 0
  let tipHash: string = Entry.ZERO_HASH
  const cpLast = cp === null ? -1 : cp.next_sequence - 1
  let sinceCheckpointBytes = 0
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i]!
    const file = path.join(dir, seg.name)
    if (i < start || recovery.stopped()) {
      reports.push({ name: seg.name, base: seg.base, bytes: 0, entries: 0, firstSequence: null, lastSequence: null, status: "unread", problem: null })
      continue
    }
    let contentNext = seg.base
    let entries = 0
    let firstSequence: number | null = null
    let lastSequence: number | null = null
    recovery.offer({ _tag: "Segment", segment: file, base: seg.base })
    const fh = await FileOps.openRead(ctx, file)
    let scan: Segment.Scan
    let cpEnd = -1
    try {
      scan = await Segment.scan(ctx, fh, file, file, seg.base, 0, (record, offset, end) => {
        if (record._tag === "Meta") return recovery.offer({ _tag: "Meta", meta: record.meta })
        const entry = record.entry
        if (!recovery.offer({ _tag: "Entry", entry, segment: file, offset })) return false
        if (entry.sequence + 1 >= tipNext) {
          tipNext = entry.sequence + 1
          tipHash = entry.entry_hash
        }
        if (entry.sequence === cpLast) cpEnd = end
        contentNext = Math.max(contentNext, entry.sequence + 1)
        entries++
        firstSequence ??= entry.sequence
        lastSequence = entry.sequence
        return true
      })
    } finally {
      await FileOps.close(fh)
    }
    const end = scan.end
    if (end._tag === "UnknownVersion") {
      recovery.offer({ _tag: "UnknownVersion", segment: file, offset: end.offset, version: end.v })
    } else if (end._tag === "Damaged") {
      recovery.offer({
        _tag: "Damaged",
        segment: file,
        offset: end.offset,
        reason: end.reason,
        terminated: end.terminated,
        zeros: end.zeros,
        atEnd: !end.more && i === segments.length - 1,
        bytes: scan.size - end.offset
      })
    }
    let status: SegmentReport["status"] = "ok"
    let problem: SegmentReport["problem"] = null
    if (recovery.stopped()) {
      const stopped = recovery.done().report.stopped
      if (stopped !== null && stopped.segment === file) {
        status = "damaged"
        problem = { offset: stopped.offset, sequence: stopped.sequence, detail: `${stopped.reason}: ${stopped.detail}` }
      }
    } else if (end._tag === "Damaged") {
      status = "torn"
      problem = { offset: end.offset, sequence: contentNext, detail: `torn tail: ${end.reason}` }
    }
    if (cpEnd >= 0) sinceCheckpointBytes = scan.validEnd - cpEnd
    else sinceCheckpointBytes += scan.validEnd
    reports.push({ name: seg.name, base: seg.base, bytes: scan.size, entries, firstSequence, lastSequence, status, problem })
    if (i === segments.length - 1) {
      last = { name: seg.name, base: seg.base, size: scan.size, validEnd: scan.validEnd, contentNext }
    }
  }
  const outcome = recovery.done()
  const state = outcome.state
  const stopped = outcome.report.stopped
  const tornTail = outcome.report.tornTail
  const checkpointNext = cp === null ? -1 : cp.next_sequence
  const view: View = {
    next: state.next_sequence,
    lastHash: JournalState.lastHash(state),
    tipHash: tipNext === state.next_sequence ? tipHash : JournalState.lastHash(state),
    entryCap: state.entry_cap,
    stopped,
    checkpointNext,
    checkpointSize: cp === null ? 0 : checkpointSize,
    last,
    // A checkpoint that covers every stored entry of a segment holding some: the
    // segment is complete, the next append starts the next one.
    rollPending: last !== null && checkpointNext === state.next_sequence && last.contentNext === state.next_sequence &&
      last.contentNext > last.base && tornTail === null
  }
  return {
    loaded: {
      state,
      exists: segments.length > 0 || list.hasCheckpoint,
      recovery: outcome.report,
      sinceCheckpointBytes,
      checkpointBytes: view.checkpointSize
    },
    view,
    listing: list,
    brokenCheckpoint: outcome.brokenCheckpoint,
    checkpoint: cp,
    segments: reports,
    storedNext: outcome.storedNext
  }
}

/** Options the writer needs. */
export interface WriterOptions {
  readonly removeCheckpointedSegments: boolean
}

/** Load-mode options of a writer's loads. */
export const writerLoad = (caps: JournalState.Caps | undefined, options: WriterOptions): LoadOptions => ({
  caps,
  mode: "load",
  retention: options.removeCheckpointedSegments
})

/**
 * The write side of one session (the caller holds the lock). It keeps the view
 * of the last load and the open active segment; after any failure it forgets both
 * and reloads before the next write, because a failed write or sync may have left
 * any prefix of its bytes on disk.
 */
export class Writer {
  view: View | null = null
  private active: { readonly name: string; readonly fh: FileOps.FileHandle } | null = null
  private readonly ctx: FileOps.Context
  private readonly dir: string
  private readonly id: string
  private readonly caps: JournalState.Caps | undefined
  private readonly options: WriterOptions
  constructor(ctx: FileOps.Context, dir: string, id: string, caps: JournalState.Caps | undefined, options: WriterOptions) {
    this.ctx = ctx
    this.dir = dir
    this.id = id
    this.caps = caps
    this.options = options
  }

  /** Loads the session and makes the result the writer's view. */
  async load(): Promise<LoadResult> {
    await this.closeActive()
    this.view = null
    const result = await load(this.ctx, this.dir, this.id, writerLoad(this.caps, this.options))
    if (result.brokenCheckpoint !== null) {
      // Never let the next checkpoint silently replace the damaged bytes; then store
      // the state rebuilt from the records at once, so the session's caps are on disk
      // again (the segments do not carry them).
      await moveAside(this.ctx, this.dir, CHECKPOINT_FILE)
      const state = result.loaded.state
      if (result.loaded.recovery.stopped === null && result.view.last !== null && result.view.last.contentNext === state.next_sequence) {
        result.view.checkpointSize = await writeCheckpointFile(this.ctx, this.dir, state)
        result.view.checkpointNext = state.next_sequence
        this.view = result.view
        return {
          ...result,
          loaded: { ...result.loaded, sinceCheckpointBytes: 0, checkpointBytes: result.view.checkpointSize }
        }
      }
    }
    this.view = result.view
    return result
  }

  async close(): Promise<void> {
    await this.closeActive()
  }

  private async closeActive(): Promise<void> {
    const a = this.active
    this.active = null
    if (a !== null) await FileOps.close(a.fh)
  }

  private async ensureView(): Promise<View> {
    if (this.view === null) await this.load()
    return this.view!
  }

  /**
   * Compare-and-append (see `WriteHandle.append`): stores the entries only when
   * the stored tip is `request.after`, and reports the bytes added to the segments.
   */
  async append(request: Persistence.AppendRequest): Promise<Persistence.Appended> {
    const view = await this.ensureView()
    if (view.stopped !== null) {
      throw new StorageError({
        operation: "append",
        path: view.stopped.segment,
        reason: `the stored history stops early (${view.stopped.reason}: ${view.stopped.detail}); repair the session first`
      })
    }
    if (!Persistence.tipMatches(request.after, view.next, view.tipHash)) {
      throw new SequenceConflict({ id: this.id, sequence: request.after.sequence })
    }
    const entries = request.entries
    for (let k = 0; k < entries.length; k++) {
      const e = entries[k]!
      if (e.sequence !== view.next + k) throw new SequenceConflict({ id: this.id, sequence: e.sequence })
    }
    if (entries.length > 0 && entries[0]!.prev_hash !== view.lastHash) {
      throw new SequenceConflict({ id: this.id, sequence: entries[0]!.sequence })
    }
    if (entries.length === 0 && request.meta === undefined) return { bytes: 0 }
    if (view.last === null && view.checkpointNext < 0) {
      // A new session: its caps live in the checkpoint, so one is stored before
      // the first segment (a crash in between leaves an empty, valid session).
      view.checkpointSize = await writeCheckpointFile(this.ctx, this.dir, JournalState.empty(this.id, this.caps))
      view.checkpointNext = 0
    }
    let text = ""
    for (const e of entries) text += lineChecked(this.ctx, Segment.entryLine(e), this.dir)
    if (request.meta !== undefined) text += lineChecked(this.ctx, Segment.metaLine(request.meta), this.dir)
    let bytes: number
    try {
      bytes = await this.write(view, Segment.bytes(text), entries.length)
    } catch (e) {
      await this.closeActive()
      this.view = null
      throw e
    }
    const lastEntry = entries[entries.length - 1]
    if (lastEntry !== undefined) {
      view.tipHash = lastEntry.entry_hash
      if (view.entryCap !== 0) view.lastHash = lastEntry.entry_hash
    }
    return { bytes }
  }

  // Writes the records durably; returns the bytes added to the segments (a new
  // segment's open line included).
  private async write(view: View, data: Uint8Array, count: number): Promise<number> {
    let last = view.last
    if (last !== null && last.validEnd < last.size) {
      // A torn tail: keep its bytes in a side file, then cut the segment back to its
      // valid prefix so the next record starts on a line boundary.
      await FileOps.copyAside(this.ctx, this.dir, last.name, last.validEnd)
      const fh = await this.activeHandle(last.name)
      await FileOps.call("ftruncate", path.join(this.dir, last.name), () => fh.truncate(last!.validEnd))
      await FileOps.call("fdatasync", path.join(this.dir, last.name), () => fh.datasync())
      last.size = last.validEnd
    }
    const needNew = last === null || (last.base !== view.next && (view.rollPending || last.contentNext !== view.next))
    if (needNew) {
      const base = view.next
      const name = Segment.name(base)
      const file = path.join(this.dir, name)
      const fh = await FileOps.createExclusive(this.ctx, file)
      const header = Segment.bytes(Segment.openLine(base))
      const all = new Uint8Array(header.length + data.length)
      all.set(header, 0)
      all.set(data, header.length)
      try {
        await FileOps.appendDurable(fh, file, all, 0)
        await FileOps.syncDir(this.ctx, this.dir)
      } catch (e) {
        await FileOps.close(fh)
        throw e
      }
      await this.closeActive()
      this.active = { name, fh }
      const previous = last
      last = { name, base, size: all.length, validEnd: all.length, contentNext: base + count }
      view.last = last
      view.next = base + count
      view.rollPending = false
      if (this.options.removeCheckpointedSegments && previous !== null && view.checkpointNext >= base) {
        await this.removeCovered(base)
      }
      return all.length
    }
    const seg = last!
    const file = path.join(this.dir, seg.name)
    const fh = await this.activeHandle(seg.name)
    let bytes = data
    if (seg.validEnd === 0) {
      const header = Segment.bytes(Segment.openLine(seg.base))
      bytes = new Uint8Array(header.length + data.length)
      bytes.set(header, 0)
      bytes.set(data, header.length)
    }
    await FileOps.appendDurable(fh, file, bytes, seg.validEnd)
    seg.size = seg.validEnd + bytes.length
    seg.validEnd = seg.size
    seg.contentNext = view.next + count
    view.next += count
    return bytes.length
  }

  private async activeHandle(name: string): Promise<FileOps.FileHandle> {
    if (this.active !== null && this.active.name === name) return this.active.fh
    await this.closeActive()
    const fh = await FileOps.openWrite(this.ctx, path.join(this.dir, name))
    this.active = { name, fh }
    return fh
  }

  // Old segments are removed only once the checkpoint covers them and the segment
  // after them is durable; failures leave them in place (they are harmless).
  private async removeCovered(base: number): Promise<void> {
    try {
      const list = await listing(this.ctx, this.dir)
      for (const s of list.segments) {
        if (s.base < base) await FileOps.unlinkIfExists(this.ctx, path.join(this.dir, s.name))
      }
      await FileOps.syncDir(this.ctx, this.dir)
    } catch {
      // Retention is an optimization; the next rollover tries again.
    }
  }

  /**
   * Stores a checkpoint document (see `WriteHandle.checkpoint`) and returns its
   * size. One that covers everything stored completes the active segment: the
   * next append starts a new one.
   */
  async checkpoint(document: Checkpoint.CheckpointJson): Promise<number> {
    const view = await this.ensureView()
    const refuse = (why: string) =>
      new StorageError({ operation: "checkpoint", path: path.join(this.dir, CHECKPOINT_FILE), reason: why })
    const next = document.next_sequence
    if (document.session_id !== this.id || next > view.next) {
      throw refuse(`checkpoint (session ${document.session_id}, next ${next}) is not a prefix of the stored session (next ${view.next})`)
    }
    // A checkpoint never moves back, and must end with the entry storage holds there.
    if (next < view.checkpointNext) {
      throw refuse(`checkpoint (next ${next}) is older than the stored checkpoint (next ${view.checkpointNext})`)
    }
    const last = document.entries[document.entries.length - 1]
    if (last !== undefined) {
      const stored = last.sequence === view.next - 1
        ? view.tipHash
        : (await readRange(this.ctx, this.dir, last.sequence, 1)).get(last.sequence)
      if (last.sequence !== next - 1 || stored !== last.entry_hash) {
        throw refuse(`checkpoint's entry ${last.sequence} is not the stored one`)
      }
    }
    const bytes = Segment.bytes(Segment.stringify(document))
    await FileOps.atomicReplace(this.ctx, this.dir, CHECKPOINT_FILE, bytes)
    view.checkpointSize = bytes.length
    view.checkpointNext = next
    if (next === view.next && view.last !== null && view.last.base !== next) view.rollPending = true
    return bytes.length
  }
}

/**
 * The highest entry sequence that any parseable record of `file` from byte `from`
 * on names, skipping what does not parse: how far the bytes that a repair sets
 * aside reached, for its report of what was lost.
 */
export const highestSequence = async (ctx: FileOps.Context, file: string, from: number): Promise<number | null> => {
  const fh = await FileOps.openRead(ctx, file)
  try {
    const size = await FileOps.boundedSize(ctx, fh, file)
    const reader = new FileOps.LineReader(ctx, fh, file, file, from, size)
    let highest: number | null = null
    for (;;) {
      const item = await reader.next().catch(() => null)
      if (item === null) return highest
      const record = Segment.parseLine(item.line)
      if (record._tag === "Entry") highest = Math.max(highest ?? 0, record.entry.sequence)
    }
  } finally {
    await FileOps.close(fh)
  }
}

/**
 * For `repair`: when the line at `offset` of `file` is complete and is not an entry,
 * rewrites the segment without it (the line kept in `<segment>.damaged-<offset>`,
 * the segment replaced atomically) and asks `better` whether the records now verify
 * further; if not, puts the segment back as it was. Returns the side file's name,
 * or null when nothing was changed.
 */
export const dropLineIfChainContinues = async (
  ctx: FileOps.Context,
  dir: string,
  file: string,
  offset: number,
  better: () => Promise<boolean>
): Promise<string | null> => {
  const name = path.basename(file)
  if (Segment.parseName(name) === null || file !== path.join(dir, name)) return null
  const bytes = await readWhole(ctx, file)
  const end = bytes.indexOf(10, offset)
  if (offset === 0 || end < 0 || end + 1 >= bytes.length) return null
  const line = bytes.subarray(offset, end + 1)
  if (Segment.parseLine(line.subarray(0, line.length - 1))._tag === "Entry") return null
  const names = new Set(await FileOps.listDir(ctx, dir))
  let side = `${name}.damaged-${offset}`
  for (let n = 1; names.has(side); n++) side = `${name}.damaged-${offset}.${n}`
  await FileOps.atomicReplace(ctx, dir, side, line)
  const without = new Uint8Array(bytes.length - line.length)
  without.set(bytes.subarray(0, offset), 0)
  without.set(bytes.subarray(end + 1), offset)
  await FileOps.atomicReplace(ctx, dir, name, without)
  if (await better()) return side
  await FileOps.atomicReplace(ctx, dir, name, bytes)
  await FileOps.unlinkIfExists(ctx, path.join(dir, side))
  return null
}

/** Atomically replaces the checkpoint of `dir` with one of `state`; returns its size. */
export const writeCheckpointFile = async (
  ctx: FileOps.Context,
  dir: string,
  state: JournalState.JournalState
): Promise<number> => {
  const bytes = Segment.bytes(Segment.stringify(Checkpoint.encode(state)))
  await FileOps.atomicReplace(ctx, dir, CHECKPOINT_FILE, bytes)
  return bytes.length
}

const lineChecked = (ctx: FileOps.Context, line: string, dir: string): string => {
  if (Buffer.byteLength(line) > ctx.maxLineBytes) {
    throw new StorageError({
      operation: "append",
      path: dir,
      reason: `record of ${Buffer.byteLength(line)} bytes exceeds the line bound of ${ctx.maxLineBytes} bytes`
    })
  }
  return line
}

/** Renames `dir/name` to a free `name.damaged-0[.n]`, keeping its bytes, and syncs `dir`. */
export const moveAside = async (ctx: FileOps.Context, dir: string, name: string): Promise<string> => {
  const names = new Set(await FileOps.listDir(ctx, dir))
  let target = `${name}.damaged-0`
  for (let n = 1; names.has(target); n++) target = `${name}.damaged-0.${n}`
  await FileOps.call("rename", path.join(dir, name), () => ctx.fs.rename(path.join(dir, name), path.join(dir, target)))
  await FileOps.syncDir(ctx, dir)
  return target
}

const readRange = async (ctx: FileOps.Context, dir: string, from: number, count: number): Promise<Map<number, string>> => {
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
