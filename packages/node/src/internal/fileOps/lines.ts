/**
 * Bounded reads of an opened file and the line reader that segment scans use.
 */
import { CorruptJournal, CorruptReason, StorageError, StorageReason } from "@session-journal/core"
import * as Effect from "effect/Effect"
import { call, type Context, type FileHandle } from "./base.ts"

/** Reads `length` bytes at `position` (fewer at the end of the file). */
export const readAt = (
  fh: FileHandle,
  file: string,
  position: number,
  length: number
): Effect.Effect<Uint8Array, StorageError> => {
  const buf = new Uint8Array(length)
  // One call per read: a short read (rare) takes another round.
  const from = (done: number): Effect.Effect<Uint8Array, StorageError> =>
    done >= length
      ? Effect.succeed(buf)
      : Effect.flatMap(call("read", file, () => fh.read(buf, done, length - done, position + done)), ({ bytesRead }) =>
        bytesRead === 0 ? Effect.succeed(buf.subarray(0, done)) : from(done + bytesRead))
  return from(0)
}

/**
 * The size of an opened file, refusing files above the read bound before a byte
 * is read (so a huge or sparse file costs no memory).
 */
export const boundedSize = (ctx: Context, fh: FileHandle, file: string): Effect.Effect<number, StorageError> =>
  Effect.flatMap(call("fstat", file, () => fh.stat()), (st) =>
    st.size > ctx.maxFileBytes
      ? Effect.fail(
        new StorageError({
          operation: "read",
          path: file,
          reason: new StorageReason.FileTooLarge({ bytes: st.size, limit: ctx.maxFileBytes, bound: "read bound" })
        })
      )
      : Effect.succeed(st.size))

/**
 * Bounded read of a whole file on an opened handle: refuses files above `limit`
 * (default the 1 GiB bound) by their fstat size, before reading.
 */
export const readBounded = (
  ctx: Context,
  fh: FileHandle,
  file: string,
  limit?: number
): Effect.Effect<Uint8Array, StorageError> =>
  Effect.flatMap(boundedSize(ctx, fh, file), (size) =>
    limit !== undefined && size > limit
      ? Effect.fail(
        new StorageError({
          operation: "read",
          path: file,
          reason: new StorageReason.FileTooLarge({ bytes: size, limit })
        })
      )
      : readAt(fh, file, 0, size))

/** One line handed out by `LineReader`. */
export interface Line {
  /** Byte offset of the line's first byte in the file. */
  readonly offset: number
  /** The line without its newline; empty for a zero-filled tail. */
  readonly line: Uint8Array
  /** False for the incomplete tail (the bytes after the last newline). */
  readonly complete: boolean
  /**
   * Set on an incomplete tail that is a run of zero bytes from a line start to the
   * end of the file (docs/DESIGN.md §9: a torn tail; §11: unused space in a preallocated segment).
   * Its bytes are not handed out (`line` is empty); it runs from `offset` to the end.
   */
  readonly zeros?: boolean
}

// Bytes read per call when checking a run of zeros; also the size of the shared
// zero buffer it is compared with.
export const ZERO_CHUNK = 1024 * 1024
let zeroBuffer: Buffer | undefined

/** Whether every byte is zero. */
export const allZero = (bytes: Uint8Array): boolean => {
  zeroBuffer ??= Buffer.alloc(ZERO_CHUNK)
  for (let at = 0; at < bytes.length; at += ZERO_CHUNK) {
    const part = bytes.subarray(at, Math.min(bytes.length, at + ZERO_CHUNK))
    if (Buffer.compare(part, zeroBuffer.subarray(0, part.length)) !== 0) return false
  }
  return true
}

/**
 * Whether the bytes of `fh` from `from` to `end` are all zero, read in bounded
 * chunks (never more than `ZERO_CHUNK` bytes held). A file that ends before `end`
 * (trimmed under us) ends the run there.
 */
const zerosTo = (fh: FileHandle, file: string, from: number, end: number): Effect.Effect<boolean, StorageError> => {
  const scratch = new Uint8Array(Math.min(ZERO_CHUNK, Math.max(0, end - from)))
  const at = (pos: number): Effect.Effect<boolean, StorageError> => {
    if (pos >= end) return Effect.succeed(true)
    const want = Math.min(scratch.length, end - pos)
    return Effect.flatMap(call("read", file, () => fh.read(scratch, 0, want, pos)), ({ bytesRead }) => {
      if (bytesRead === 0) return Effect.succeed(true)
      if (!allZero(scratch.subarray(0, bytesRead))) return Effect.succeed(false)
      return at(pos + bytesRead)
    })
  }
  return at(from)
}

/**
 * What `LineReader.poll` returns when it cannot go on without reading: run
 * `LineReader.io` and poll again.
 */
export const NeedIo: unique symbol = Symbol.for("@session-journal/node/LineReader/NeedIo")

/**
 * Reads complete lines from an opened file from `start` up to `end`, in chunks,
 * without ever holding more than one chunk plus one line (at most
 * `ctx.maxLineBytes`; a longer line fails with `CorruptJournal`). Bytes after the
 * last newline are reported as the incomplete tail. A run of zero bytes that starts
 * at a line and reaches `end` is reported as an incomplete tail with `zeros` set,
 * whatever its length: it is checked in bounded chunks, never buffered, so a
 * zero-filled tail longer than the line bound is still a torn tail. A run of zeros
 * followed by other bytes is read like any other line.
 *
 * The splitting is synchronous (`poll`) and the reading is an Effect (`io`), so
 * a scan runs one Effect per chunk read, not one per line. `next` combines them.
 */
export class LineReader {
  // Unconsumed bytes are store[lo, hi). Lines handed out are views into a store,
  // so a store is only ever written past `hi`, never compacted in place: when a
  // chunk does not fit, a new store twice the needed size takes the unconsumed
  // bytes. Growing geometrically keeps a long line at O(line) copying and its
  // peak memory near twice the line, instead of one new buffer per chunk.
  private store: Uint8Array = new Uint8Array(0)
  private lo = 0
  private hi = 0
  private bufStart: number
  private readPos: number
  // Where the search for the current line's newline resumes (bytes before it were searched).
  private scanFrom = 0
  // The line start (file offset) whose zero-filled-tail check said no; -1 when none.
  private zerosRefused = -1
  // What `io` must do next.
  private pending: "fill" | "zeros" | "tooLong" = "fill"
  // A zero-filled tail found by `io`, handed out by the next `poll`.
  private zerosTail: Line | null = null
  private readonly ctx: Context
  private readonly fh: FileHandle
  private readonly file: string
  private readonly label: string
  private readonly end: number
  constructor(ctx: Context, fh: FileHandle, file: string, label: string, start: number, end: number) {
    this.ctx = ctx
    this.fh = fh
    this.file = file
    this.label = label
    this.bufStart = start
    this.readPos = start
    this.end = end
  }

  /**
   * The next complete line (without its newline) and its offset; at the end, the
   * incomplete tail (`complete: false`, with `zeros` when it is a zero-filled
   * tail) if there is one, then `null`. `NeedIo` when the buffered bytes do not
   * decide it: run `io`, then poll again.
   */
  poll(): null | Line | typeof NeedIo {
    if (this.zerosTail !== null) {
      const tail = this.zerosTail
      this.zerosTail = null
      return tail
    }
    // Every line starts here: a zero byte there may begin a zero-filled tail.
    if (this.lo === this.hi && this.readPos < this.end) return this.need("fill")
    if (this.lo < this.hi && this.store[this.lo] === 0 && this.zerosRefused !== this.bufStart) {
      if (allZero(this.store.subarray(this.lo, this.hi))) return this.need("zeros")
      this.zerosRefused = this.bufStart
    }
    const nl = this.store.subarray(0, this.hi).indexOf(10, Math.max(this.lo, this.scanFrom))
    if (nl >= 0) {
      const line = this.store.subarray(this.lo, nl)
      const offset = this.bufStart
      this.bufStart += nl + 1 - this.lo
      this.lo = nl + 1
      this.scanFrom = this.lo
      return { offset, line, complete: true }
    }
    this.scanFrom = this.hi
    const pending = this.hi - this.lo
    if (pending > this.ctx.maxLineBytes) return this.need("tooLong")
    if (this.readPos >= this.end) {
      if (pending === 0) return null
      const line = this.store.subarray(this.lo, this.hi)
      const offset = this.bufStart
      this.bufStart += pending
      this.lo = this.hi
      this.scanFrom = this.lo
      return { offset, line, complete: false }
    }
    return this.need("fill")
  }

  private need(what: "fill" | "zeros" | "tooLong"): typeof NeedIo {
    this.pending = what
    return NeedIo
  }

  /** The read the last `poll` that returned `NeedIo` asked for. */
  io(): Effect.Effect<void, StorageError | CorruptJournal> {
    switch (this.pending) {
      case "fill":
        return this.fill()
      case "zeros":
        return this.zeroTail()
      case "tooLong":
        return Effect.fail(
          new CorruptJournal({
            segment: this.label,
            offset: this.bufStart,
            reason: new CorruptReason.LineTooLong({ bound: this.ctx.maxLineBytes })
          })
        )
    }
  }

  /** `poll` and `io` until a line (or the end) is known. */
  readonly next: Effect.Effect<null | Line, StorageError | CorruptJournal> = Effect.suspend(() => {
    const item = this.poll()
    return item === NeedIo ? Effect.flatMap(this.io(), () => this.next) : Effect.succeed(item)
  })

  /**
   * Reads the next chunk into the store. At the end of the file (or where it
   * shrank under us) reading stops.
   */
  private fill(): Effect.Effect<void, StorageError> {
    const want = Math.min(256 * 1024, this.end - this.readPos)
    return Effect.map(readAt(this.fh, this.file, this.readPos, want), (chunk) => {
      if (chunk.length === 0) {
        // The file shrank under us (a writer trimmed a torn tail): stop here.
        this.readPos = this.end
        return
      }
      this.readPos += chunk.length
      const pending = this.hi - this.lo
      if (this.hi + chunk.length > this.store.length) {
        const grown = new Uint8Array(2 * (pending + chunk.length))
        grown.set(this.store.subarray(this.lo, this.hi), 0)
        this.store = grown
        this.scanFrom -= this.lo
        this.lo = 0
        this.hi = pending
      }
      this.store.set(chunk, this.hi)
      this.hi += chunk.length
    })
  }

  /**
   * At a line start whose buffered bytes are all zero: when every byte from here
   * to the end is zero, consumes them all (the next poll returns the zero-filled
   * tail); otherwise changes nothing but the note that this line start is no
   * zero-filled tail.
   */
  private zeroTail(): Effect.Effect<void, StorageError> {
    return Effect.map(zerosTo(this.fh, this.file, this.readPos, this.end), (zeros) => {
      if (!zeros) {
        this.zerosRefused = this.bufStart
        return
      }
      this.zerosTail = {
        offset: this.bufStart,
        line: new Uint8Array(0),
        complete: false,
        zeros: true
      }
      this.bufStart = Math.max(this.bufStart + (this.hi - this.lo), this.end)
      this.lo = this.hi
      this.scanFrom = this.lo
      this.readPos = this.end
    })
  }
}
