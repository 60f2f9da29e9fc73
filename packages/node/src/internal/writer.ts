/**
 * The write side of one session: compare-and-append with durable writes, segment
 * starts after a covering checkpoint, torn tails set aside, and checkpoint
 * documents stored atomically.
 */
import { Checkpoint, JournalState, Persistence, SequenceConflict, StorageError } from "@session-journal/core"
import * as path from "node:path"
import * as FileOps from "./fileOps.ts"
import { CHECKPOINT_FILE, listing, load, type LoadOptions, type LoadResult, type View } from "./load.ts"
import { readRange } from "./reader.ts"
import * as Segment from "./segment.ts"

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
