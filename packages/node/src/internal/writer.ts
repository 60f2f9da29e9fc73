/**
 * The write side of one session: compare-and-append with durable writes, segment
 * starts after a covering checkpoint, torn tails set aside, and checkpoint
 * documents stored atomically.
 */
import {
  Checkpoint,
  type CorruptJournal,
  JournalState,
  Persistence,
  SequenceConflict,
  StorageError,
  StorageReason
} from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as path from "node:path"
import * as Durable from "./durable.ts"
import * as Base from "./fileOps/base.ts"
import * as Open from "./fileOps/open.ts"
import * as Replace from "./fileOps/replace.ts"
import {
  CHECKPOINT_FILE,
  type LastSegment,
  listing,
  load,
  type LoadOptions,
  type LoadResult,
  type View
} from "./load.ts"
import { readRange } from "./reader.ts"
import * as Segment from "./segment.ts"

/** Options the writer needs. */
export interface WriterOptions {
  readonly removeCheckpointedSegments: boolean
  /** Whether the writer is alone in its adapter: the adapter's own (`Resolved.turns`). */
  readonly turns: Durable.Turns
  /**
   * A checkpoint that covers everything stored completes the active segment only
   * once it holds at least this many bytes (0: always).
   */
  readonly segmentMinBytes?: number | undefined
  /**
   * Proves the session's lock is still the writer's (`Lock.Held.check`); run before
   * each batch and each checkpoint becomes durable, so a writer whose lock was
   * removed or taken stops instead of writing a second chain beside the new holder.
   */
  readonly lockCheck?: Effect.Effect<void, StorageError> | undefined
}

/** Load-mode options of a writer's loads. */
export const writerLoad = (caps: JournalState.Caps | undefined, options: WriterOptions): LoadOptions => ({
  caps,
  mode: "load",
  retention: options.removeCheckpointedSegments
})

/**
 * The write side of one session (the caller holds the lock). It keeps the view
 * of the last load and the open active segment; after any failure (or an
 * interruption) of a write it forgets both and reloads before the next write,
 * because a failed write or sync may have left any prefix of its bytes on disk.
 */
export class SegmentWriter {
  view: View | null = null
  private active: { readonly name: string; readonly fh: Base.FileHandle } | null = null
  // The zeros being written ahead of the active segment's data (`Durable.fill`), in
  // a fiber of their own; appends that would reach `from` wait for it, and nothing
  // trims, cuts or closes the segment before it is over.
  private filling: { readonly from: number; readonly fiber: Fiber.Fiber<void>; readonly number: number } | null = null
  // How many fills this writer started (a fill that ends clears `filling` when it is its own).
  private fills = 0
  // The active segment's appends by this writer, and where the zeros it wrote ahead
  // of the data end; after a failed fill, none more are written into that segment
  // (it grows by holes, as before).
  private zeroed: { readonly seg: LastSegment; appends: number; end: number; failed: boolean } | null = null
  private lastPath: { readonly name: string; readonly file: string } | null = null
  private readonly ctx: Base.Context
  private readonly dir: string
  private readonly id: string
  private readonly caps: JournalState.Caps | undefined
  private readonly options: WriterOptions
  constructor(
    ctx: Base.Context,
    dir: string,
    id: string,
    caps: JournalState.Caps | undefined,
    options: WriterOptions
  ) {
    this.ctx = ctx
    this.dir = dir
    this.id = id
    this.caps = caps
    this.options = options
  }

  /** Loads the session and makes the result the writer's view. */
  load(): Effect.Effect<LoadResult, StorageError | CorruptJournal> {
    const self = this
    return Effect.gen(function*() {
      yield* self.closeActive()
      self.view = null
      const result = yield* load(self.ctx, self.dir, self.id, writerLoad(self.caps, self.options))
      if (result.brokenCheckpoint !== null) {
        // Never let the next checkpoint silently replace the damaged bytes; then store
        // the state rebuilt from the records at once, so the session's caps are on disk
        // again (the segments do not carry them).
        yield* moveAside(self.ctx, self.dir, CHECKPOINT_FILE)
        const state = result.loaded.state
        if (
          result.loaded.recovery.stopped === null && result.view.last !== null &&
          result.view.last.contentNext === state.next_sequence
        ) {
          result.view.checkpointSize = yield* writeCheckpointFile(self.ctx, self.dir, state)
          result.view.checkpointNext = state.next_sequence
          self.view = result.view
          return {
            ...result,
            loaded: { ...result.loaded, sinceCheckpointBytes: 0, checkpointBytes: result.view.checkpointSize }
          }
        }
      }
      self.view = result.view
      return result
    })
  }

  /**
   * Closes the active segment's handle. A writer that closes cleanly first cuts the
   * zero tail off the segment it wrote (best effort), so a session at rest holds
   * only data.
   */
  close(): Effect.Effect<void> {
    return Effect.suspend(() => {
      Durable.leave(this.options.turns, this)
      const last = this.view?.last ?? null
      // Only while the lock is still ours: a writer whose lock was taken must not cut
      // the new holder's records off the segment they share.
      const trim = last !== null && last.free && last.validEnd < last.size && this.active?.name === last.name
        ? Effect.ignore(Effect.andThen(this.options.lockCheck ?? Effect.void, this.trim(last)))
        : Effect.void
      return Effect.andThen(Effect.andThen(this.filled(), trim), this.closeActive())
    })
  }

  private closeActive(): Effect.Effect<void> {
    return Effect.andThen(
      this.filled(),
      Effect.suspend(() => {
        const a = this.active
        this.active = null
        this.zeroed = null
        return a === null ? Effect.void : Replace.close(a.fh)
      })
    )
  }

  // Waits for the zeros being written ahead of the data, if any (their failure is
  // no failure of the writer: the space ahead stays as it was).
  private filled(): Effect.Effect<void> {
    return Effect.suspend(() => {
      const f = this.filling
      if (f === null) return Effect.void
      return Effect.map(Fiber.await(f.fiber), () => {
        if (this.filling === f) this.filling = null
      })
    })
  }

  // After an append to a preallocated segment: from the writer's `Durable.FILL_AFTER`th
  // append into it on, when less than half a stretch of written zeros lies ahead of
  // its data, writes the next stretch in a fiber of its own (through the thread
  // pool), so the append's caller is answered meanwhile.
  private fillAhead(seg: LastSegment, fh: Base.FileHandle): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.zeroed === null || this.zeroed.seg !== seg) {
        this.zeroed = { seg, appends: 0, end: 0, failed: false }
      }
      const zeroed = this.zeroed
      zeroed.appends++
      if (
        !seg.preallocated || this.filling !== null || zeroed.failed ||
        zeroed.appends < Durable.FILL_AFTER
      ) {
        return Effect.void
      }
      const next = Durable.nextFill(seg.validEnd, zeroed.end)
      if (next === null) return Effect.void
      const file = this.pathOf(seg.name)
      const number = ++this.fills
      let ended = false
      const work = Durable.fill(fh, file, next.from, next.end).pipe(
        Effect.andThen(Effect.sync(() => {
          zeroed.end = next.end
          seg.size = Math.max(seg.size, next.end)
        })),
        Effect.tapError(() =>
          Effect.sync(() => {
            zeroed.failed = true
          })
        ),
        Effect.ignore,
        Effect.ensuring(Effect.sync(() => {
          ended = true
          if (this.filling !== null && this.filling.number === number) this.filling = null
        }))
      )
      return Effect.map(Effect.forkDetach(work, { uninterruptible: true }), (fiber) => {
        // Unless it is over already (then nothing waits for it).
        if (!ended) this.filling = { from: next.from, fiber, number }
      })
    })
  }

  private ensureView(): Effect.Effect<View, StorageError | CorruptJournal> {
    return this.view !== null ? Effect.succeed(this.view) : Effect.map(this.load(), () => this.view!)
  }

  /**
   * Compare-and-append (see `WriteHandle.append`): stores the entries only when
   * the stored tip is `request.after`, and reports the bytes added to the segments.
   */
  append(
    request: Persistence.AppendRequest
  ): Effect.Effect<Persistence.Appended, StorageError | SequenceConflict | CorruptJournal> {
    return Effect.flatMap(this.ensureView(), (view) => this.appendTo(view, request))
  }

  private appendTo(
    view: View,
    request: Persistence.AppendRequest
  ): Effect.Effect<Persistence.Appended, StorageError | SequenceConflict> {
    if (view.stopped !== null) {
      return Effect.fail(
        new StorageError({
          operation: "append",
          path: view.stopped.segment,
          reason: new StorageReason.NeedsRepair({ problem: `${view.stopped.reason}: ${view.stopped.detail}` })
        })
      )
    }
    if (!Persistence.tipMatches(request.after, view.next, view.tipHash)) {
      return Effect.fail(new SequenceConflict({ id: this.id, sequence: request.after.sequence }))
    }
    const entries = request.entries
    for (let k = 0; k < entries.length; k++) {
      const e = entries[k]!
      if (e.sequence !== view.next + k) return Effect.fail(new SequenceConflict({ id: this.id, sequence: e.sequence }))
    }
    if (entries.length > 0 && entries[0]!.prev_hash !== view.lastHash) {
      return Effect.fail(new SequenceConflict({ id: this.id, sequence: entries[0]!.sequence }))
    }
    if (entries.length === 0 && request.meta === undefined) return Effect.succeed({ bytes: 0 })
    // The records' bytes, in a reused buffer that is let go once the write is over.
    // A tool entry's line is about 400 bytes.
    const sink = Segment.sink(entries.length * 512)
    // The first line above the line bound, measured as it is written.
    let longest = -1
    for (const e of entries) {
      const start = sink.length
      sink.addEntryLine(e)
      if (longest < 0 && sink.length - start > this.ctx.maxLineBytes) longest = sink.length - start
    }
    if (request.meta !== undefined) {
      const start = sink.length
      sink.add(Segment.metaLine(request.meta))
      if (longest < 0 && sink.length - start > this.ctx.maxLineBytes) longest = sink.length - start
    }
    const tooLong = longest < 0 ? null : lineTooLong(this.ctx, longest, this.dir)
    // A new session: its caps live in the checkpoint, so one is stored before
    // the first segment (a crash in between leaves an empty, valid session).
    const fresh = view.last === null && view.checkpointNext < 0
      ? Effect.map(writeCheckpointFile(this.ctx, this.dir, JournalState.empty(this.id, this.caps)), (size) => {
        view.checkpointSize = size
        view.checkpointNext = 0
      })
      : Effect.void
    // Uninterruptible from the first byte on: the view and the active handle must
    // follow what reached the disk. A failure forgets both (any prefix may be there).
    // The tip moves in the same region: an interruption arriving during the write
    // takes effect only after it, and must find the view complete.
    const written = Effect.uninterruptible(
      Effect.onExit(
        Effect.map(this.write(view, sink.view(), entries.length), (bytes) => {
          const lastEntry = entries[entries.length - 1]
          if (lastEntry !== undefined) {
            view.tipHash = lastEntry.entry_hash
            if (view.entryCap !== 0) view.lastHash = lastEntry.entry_hash
          }
          return { bytes }
        }),
        (exit) =>
          Exit.isSuccess(exit)
            ? Effect.void
            : Effect.suspend(() => {
              this.view = null
              return this.closeActive()
            })
      )
    )
    return Effect.ensuring(
      Effect.andThen(
        this.options.lockCheck ?? Effect.void,
        Effect.andThen(fresh, tooLong === null ? written : Effect.fail(tooLong))
      ),
      Effect.sync(() => sink.release())
    )
  }

  // Writes the records durably; succeeds with the bytes added to the segments (a
  // new segment's open line included).
  private write(view: View, data: Uint8Array, count: number): Effect.Effect<number, StorageError> {
    const last = view.last
    if (last !== null && last.validEnd < last.size && !last.free) {
      // A torn tail: keep its bytes in a side file, then cut the segment back to its
      // valid prefix so the next record starts on a line boundary.
      const file = path.join(this.dir, last.name)
      return Replace.copyAside(this.ctx, this.dir, last.name, last.validEnd).pipe(
        Effect.andThen(this.activeHandle(last.name)),
        Effect.flatMap((fh) =>
          Effect.andThen(
            Base.call("ftruncate", file, () => fh.truncate(last.validEnd)),
            Base.call("fdatasync", file, () => fh.datasync())
          )
        ),
        Effect.andThen(Effect.suspend(() => {
          last.size = last.validEnd
          return this.write(view, data, count)
        }))
      )
    }
    const complete = view.rollPending && last !== null && last.validEnd >= (this.options.segmentMinBytes ?? 0)
    const needNew = last === null || (last.base !== view.next && (complete || last.contentNext !== view.next))
    if (needNew) return this.writeNew(view, last, data, count)
    // A covering checkpoint that did not complete the segment covers it no more.
    view.rollPending = false
    return this.writeActive(view, last!, data, count)
  }

  // The hot path: one durable write at the tracked end of the active segment. In a
  // preallocated segment it lands inside the file (the file's size does not
  // change); when the space runs out, the file is first extended by the next
  // stretch of zeros (a hole: no zero byte is written). A segment that does not
  // hold its open line yet is extended only after that line is written: a file
  // of zeros alone would read as a torn tail.
  private writeActive(
    view: View,
    seg: LastSegment,
    data: Uint8Array,
    count: number
  ): Effect.Effect<number, StorageError> {
    const file = this.pathOf(seg.name)
    let bytes = data
    const starts = seg.validEnd === 0
    if (starts) {
      // An empty segment file (its creator died before writing): it starts now, preallocated.
      const header = Segment.bytes(Segment.openLine(seg.base, true))
      bytes = new Uint8Array(header.length + data.length)
      bytes.set(header, 0)
      bytes.set(data, header.length)
      seg.preallocated = true
    }
    const used = seg.validEnd + bytes.length
    // Decided when it runs: a fill that ended meanwhile may have made the space.
    const extend = (fh: Base.FileHandle) =>
      Effect.suspend(() => {
        const grow = Durable.preallocatedEnd(used)
        if (!seg.preallocated || (starts ? grow <= seg.size : used <= seg.size)) return Effect.void
        return Effect.map(Durable.extend(fh, file, grow), () => {
          seg.size = Math.max(seg.size, grow)
        })
      })
    // Zeros being written where this batch would land, or while the file must be
    // extended for it (the extension must not cut them): they come first.
    const fill = this.filling !== null && (used > this.filling.from || used > seg.size) ? this.filled() : Effect.void
    return this.activeHandle(seg.name).pipe(
      Effect.tap(() => fill),
      Effect.tap((fh) => starts ? Effect.void : extend(fh)),
      Effect.tap((fh) => Durable.write(this.ctx, this.options.turns, this, fh, file, bytes, seg.validEnd)),
      Effect.tap(() =>
        Effect.sync(() => {
          seg.size = Math.max(seg.size, used)
          seg.validEnd = used
          seg.free = seg.preallocated
          seg.contentNext = view.next + count
          view.next += count
        })
      ),
      // The records are durable: a failed extension only leaves no space ahead.
      Effect.tap((fh) => starts ? Effect.ignore(extend(fh)) : Effect.void),
      Effect.tap((fh) => this.fillAhead(seg, fh)),
      Effect.as(bytes.length)
    )
  }

  // A new segment, preallocated: created exclusively (O_DSYNC), the open line and
  // the batch written durably, the directory fsynced before the acknowledgement,
  // and the file extended by a stretch of zeros (a hole; best effort, not synced by
  // itself). The segment it follows is trimmed to its data.
  private writeNew(
    view: View,
    previous: LastSegment | null,
    data: Uint8Array,
    count: number
  ): Effect.Effect<number, StorageError> {
    const base = view.next
    const name = Segment.name(base)
    const file = path.join(this.dir, name)
    const header = Segment.bytes(Segment.openLine(base, true))
    const used = header.length + data.length
    const all = new Uint8Array(used)
    all.set(header, 0)
    all.set(data, header.length)
    let size = used
    return Open.createExclusive(this.ctx, file, Open.DSYNC).pipe(
      Effect.flatMap((fh) =>
        Open.writeDurable(fh, file, all, 0).pipe(
          Effect.andThen(Open.syncDir(this.ctx, this.dir)),
          Effect.onError(() => Replace.close(fh)),
          Effect.andThen(Effect.ignore(Effect.map(Durable.extend(fh, file, Durable.preallocatedEnd(used)), () => {
            size = Durable.preallocatedEnd(used)
          }))),
          Effect.andThen(
            previous !== null && previous.free && previous.validEnd < previous.size
              ? Effect.andThen(this.filled(), this.trim(previous))
              : Effect.void
          ),
          Effect.andThen(this.closeActive()),
          Effect.map(() => {
            this.active = { name, fh }
          })
        )
      ),
      Effect.andThen(Effect.suspend(() => {
        const seg: LastSegment = {
          name,
          base,
          size,
          validEnd: used,
          contentNext: base + count,
          preallocated: true,
          free: true
        }
        view.last = seg
        view.next = base + count
        view.rollPending = false
        return Effect.andThen(
          this.active !== null && this.active.name === name ? this.fillAhead(seg, this.active.fh) : Effect.void,
          this.options.removeCheckpointedSegments && previous !== null && view.checkpointNext >= base
            ? this.removeCovered(base)
            : Effect.void
        )
      })),
      Effect.as(used)
    )
  }

  // Cuts the zero tail off a preallocated segment the writer leaves (best effort:
  // a zero tail that stays, after a failure or a crash, is unused space all the same).
  private trim(seg: LastSegment): Effect.Effect<void> {
    return this.activeHandle(seg.name).pipe(
      Effect.flatMap((fh) => Durable.trim(fh, path.join(this.dir, seg.name), seg.validEnd)),
      Effect.andThen(Effect.sync(() => {
        seg.size = seg.validEnd
      })),
      Effect.ignore
    )
  }

  // The path of the segment `name`, the last one kept (an append needs it, and a
  // writer appends to one segment at a time).
  private pathOf(name: string): string {
    if (this.lastPath === null || this.lastPath.name !== name) {
      this.lastPath = { name, file: path.join(this.dir, name) }
    }
    return this.lastPath.file
  }

  // The handle of the active segment, opened when it is another one. Uninterruptible,
  // so an opened handle is always kept (and closed by `close`).
  private activeHandle(name: string): Effect.Effect<Base.FileHandle, StorageError> {
    return Effect.uninterruptible(Effect.suspend(() => {
      if (this.active !== null && this.active.name === name) return Effect.succeed(this.active.fh)
      return Effect.andThen(
        this.closeActive(),
        Effect.map(Open.openWrite(this.ctx, path.join(this.dir, name), Open.DSYNC), (fh) => {
          this.active = { name, fh }
          return fh
        })
      )
    }))
  }

  // Old segments are removed only once the checkpoint covers them and the segment
  // after them is durable; failures leave them in place (they are harmless).
  private removeCovered(base: number): Effect.Effect<void> {
    const ctx = this.ctx
    const dir = this.dir
    return Effect.gen(function*() {
      const list = yield* listing(ctx, dir)
      for (const s of list.segments) {
        if (s.base < base) yield* Replace.unlinkIfExists(ctx, path.join(dir, s.name))
      }
      yield* Open.syncDir(ctx, dir)
    }).pipe(
      // Retention is an optimization; the next rollover tries again.
      Effect.ignore
    )
  }

  /**
   * Stores a checkpoint document (see `WriteHandle.checkpoint`) and succeeds with
   * its size. One that covers everything stored completes the active segment: the
   * next append starts a new one.
   */
  checkpoint(document: Checkpoint.CheckpointJson): Effect.Effect<number, StorageError | CorruptJournal> {
    return this.storeCheckpoint(
      document.session_id,
      document.next_sequence,
      Checkpoint.lastOf(document),
      (write) => write(Segment.stringify(document))
    )
  }

  /**
   * Stores the checkpoint of a state (see `WriteHandle.checkpointState`), with the
   * contract of `checkpoint`: the same document, written piece by piece
   * (`Checkpoint.writeJsonText`) into a reused buffer.
   */
  checkpointState(state: JournalState.JournalState): Effect.Effect<number, StorageError | CorruptJournal> {
    return this.storeCheckpoint(
      state.session_id,
      state.next_sequence,
      JournalState.entryCount(state) === 0
        ? undefined
        : { sequence: state.next_sequence - 1, entry_hash: JournalState.lastHash(state) },
      (write) => Checkpoint.writeJsonText(state, write)
    )
  }

  private storeCheckpoint(
    sessionId: string,
    next: number,
    last: { readonly sequence: number; readonly entry_hash: string } | undefined,
    text: (write: (piece: string) => void) => void
  ): Effect.Effect<number, StorageError | CorruptJournal> {
    const self = this
    return Effect.gen(function*() {
      const view = yield* self.ensureView()
      const refuse = (why: string) =>
        new StorageError({
          operation: "checkpoint",
          path: path.join(self.dir, CHECKPOINT_FILE),
          reason: new StorageReason.CheckpointRefused({ why })
        })
      if (sessionId !== self.id || next > view.next) {
        return yield* refuse(
          `checkpoint (session ${sessionId}, next ${next}) is not a prefix of the stored session (next ${view.next})`
        )
      }
      // A checkpoint never moves back, and must end with the entry storage holds there.
      if (next < view.checkpointNext) {
        return yield* refuse(
          `checkpoint (next ${next}) is older than the stored checkpoint (next ${view.checkpointNext})`
        )
      }
      if (last !== undefined) {
        const stored = last.sequence === view.next - 1
          ? view.tipHash
          : (yield* readRange(self.ctx, self.dir, last.sequence, 1)).get(last.sequence)
        if (last.sequence !== next - 1 || stored !== last.entry_hash) {
          return yield* refuse(`checkpoint's entry ${last.sequence} is not the stored one`)
        }
      }
      // About the size of the stored checkpoint.
      const sink = Segment.sink(view.checkpointSize + 64 * 1024)
      text(sink.add)
      const bytes = sink.view()
      yield* self.options.lockCheck ?? Effect.void
      // The replace and the view's record of it in one region, so an interruption
      // cannot leave a stored checkpoint the view does not know.
      return yield* Effect.uninterruptible(
        Effect.map(Replace.atomicReplace(self.ctx, self.dir, CHECKPOINT_FILE, bytes), () => {
          view.checkpointSize = bytes.length
          view.checkpointNext = next
          if (next === view.next && view.last !== null && view.last.base !== next) view.rollPending = true
          return bytes.length
        })
      ).pipe(Effect.ensuring(Effect.sync(() => sink.release())))
    })
  }
}

/** Atomically replaces the checkpoint of `dir` with one of `state`; succeeds with its size. */
export const writeCheckpointFile = (
  ctx: Base.Context,
  dir: string,
  state: JournalState.JournalState
): Effect.Effect<number, StorageError> =>
  Effect.suspend(() => {
    const sink = Segment.sink()
    Checkpoint.writeJsonText(state, sink.add)
    const bytes = sink.view()
    return Effect.as(Replace.atomicReplace(ctx, dir, CHECKPOINT_FILE, bytes), bytes.length).pipe(
      Effect.ensuring(Effect.sync(() => sink.release()))
    )
  })

// The error refusing an append with a record line of `bytes`, above the line bound.
const lineTooLong = (ctx: Base.Context, bytes: number, dir: string): StorageError =>
  new StorageError({
    operation: "append",
    path: dir,
    reason: new StorageReason.RecordTooLarge({ bytes, limit: ctx.maxLineBytes, bound: "line bound" })
  })

/** Renames `dir/name` to a free `name.damaged-0[.n]`, keeping its bytes, and syncs `dir`. */
export const moveAside = Effect.fnUntraced(function*(ctx: Base.Context, dir: string, name: string) {
  const names = new Set(yield* Replace.listDir(ctx, dir))
  const target = Replace.freeName(names, Replace.damagedName(name, 0))
  yield* Base.call("rename", path.join(dir, name), () => ctx.fs.rename(path.join(dir, name), path.join(dir, target)))
  yield* Open.syncDir(ctx, dir)
  return target
})
