/**
 * Bounded reads of an opened file and the line reader that segment scans use.
 */
import { CorruptJournal, StorageError } from "@session-journal/core"
import { call, type Context, type FileHandle } from "./base.ts"

/** Reads `length` bytes at `position` (fewer at the end of the file). */
export const readAt = async (fh: FileHandle, file: string, position: number, length: number): Promise<Uint8Array> => {
  const buf = new Uint8Array(length)
  let done = 0
  while (done < length) {
    const { bytesRead } = await call("read", file, () => fh.read(buf, done, length - done, position + done))
    if (bytesRead === 0) break
    done += bytesRead
  }
  return done === length ? buf : buf.subarray(0, done)
}

/**
 * The size of an opened file, refusing files above the read bound before a byte
 * is read (so a huge or sparse file costs no memory).
 */
export const boundedSize = async (ctx: Context, fh: FileHandle, file: string): Promise<number> => {
  const st = await call("fstat", file, () => fh.stat())
  if (st.size > ctx.maxFileBytes) {
    throw new StorageError({
      operation: "read",
      path: file,
      reason: `file is ${st.size} bytes, above the read bound of ${ctx.maxFileBytes} bytes`
    })
  }
  return st.size
}

/**
 * Bounded read of a whole file on an opened handle: refuses files above `limit`
 * (default the 1 GiB bound) by their fstat size, before reading.
 */
export const readBounded = async (ctx: Context, fh: FileHandle, file: string, limit?: number): Promise<Uint8Array> => {
  const size = await boundedSize(ctx, fh, file)
  if (limit !== undefined && size > limit) {
    throw new StorageError({ operation: "read", path: file, reason: `file is ${size} bytes, above the bound of ${limit} bytes` })
  }
  return await readAt(fh, file, 0, size)
}

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
   * end of the file (DESIGN §6: a zero-filled tail of any length is a torn tail).
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
const zerosTo = async (fh: FileHandle, file: string, from: number, end: number): Promise<boolean> => {
  const scratch = new Uint8Array(Math.min(ZERO_CHUNK, Math.max(0, end - from)))
  for (let pos = from; pos < end;) {
    const want = Math.min(scratch.length, end - pos)
    const { bytesRead } = await call("read", file, () => fh.read(scratch, 0, want, pos))
    if (bytesRead === 0) return true
    if (!allZero(scratch.subarray(0, bytesRead))) return false
    pos += bytesRead
  }
  return true
}

/**
 * Reads complete lines from an opened file from `start` up to `end`, in chunks,
 * without ever holding more than one chunk plus one line (at most
 * `ctx.maxLineBytes`; a longer line fails with `CorruptJournal`). Bytes after the
 * last newline are reported as the incomplete tail. A run of zero bytes that starts
 * at a line and reaches `end` is reported as an incomplete tail with `zeros` set,
 * whatever its length: it is checked in bounded chunks, never buffered, so a
 * zero-filled tail longer than the line bound is still a torn tail. A run of zeros
 * followed by other bytes is read like any other line.
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
   * tail) if there is one, then `null`.
   */
  async next(): Promise<null | Line> {
    // Every call starts at a line start: a zero byte there may begin a zero-filled tail.
    if (this.lo === this.hi && this.readPos < this.end) await this.fill(this.lo)
    if (this.lo < this.hi && this.store[this.lo] === 0) {
      const zeros = await this.zeroTail()
      if (zeros !== null) return zeros
    }
    let scanFrom = this.lo
    for (;;) {
      const nl = this.store.subarray(0, this.hi).indexOf(10, scanFrom)
      if (nl >= 0) {
        const line = this.store.subarray(this.lo, nl)
        const offset = this.bufStart
        this.bufStart += nl + 1 - this.lo
        this.lo = nl + 1
        return { offset, line, complete: true }
      }
      scanFrom = this.hi
      const pending = this.hi - this.lo
      if (pending > this.ctx.maxLineBytes) {
        throw new CorruptJournal({
          segment: this.label,
          offset: this.bufStart,
          reason: `line longer than the bound of ${this.ctx.maxLineBytes} bytes`
        })
      }
      if (this.readPos >= this.end) {
        if (pending === 0) return null
        const line = this.store.subarray(this.lo, this.hi)
        const offset = this.bufStart
        this.bufStart += pending
        this.lo = this.hi
        return { offset, line, complete: false }
      }
      scanFrom = await this.fill(scanFrom)
    }
  }

  /**
   * Reads the next chunk into the store; returns `scanFrom` moved along with the
   * store. At the end of the file (or where it shrank under us) reading stops.
   */
  private async fill(scanFrom: number): Promise<number> {
    const want = Math.min(256 * 1024, this.end - this.readPos)
    const chunk = await readAt(this.fh, this.file, this.readPos, want)
    if (chunk.length === 0) {
      // The file shrank under us (a writer trimmed a torn tail): stop here.
      this.readPos = this.end
      return scanFrom
    }
    this.readPos += chunk.length
    const pending = this.hi - this.lo
    if (this.hi + chunk.length > this.store.length) {
      const grown = new Uint8Array(2 * (pending + chunk.length))
      grown.set(this.store.subarray(this.lo, this.hi), 0)
      this.store = grown
      scanFrom -= this.lo
      this.lo = 0
      this.hi = pending
    }
    this.store.set(chunk, this.hi)
    this.hi += chunk.length
    return scanFrom
  }

  /**
   * At a line start whose first byte is zero: when every byte from here to the end
   * is zero, consumes them all and returns the zero-filled tail; otherwise changes
   * nothing and returns null.
   */
  private async zeroTail(): Promise<Line | null> {
    if (!allZero(this.store.subarray(this.lo, this.hi))) return null
    if (!(await zerosTo(this.fh, this.file, this.readPos, this.end))) return null
    const offset = this.bufStart
    this.bufStart = Math.max(this.bufStart + (this.hi - this.lo), this.end)
    this.lo = this.hi
    this.readPos = this.end
    return { offset, line: new Uint8Array(0), complete: false, zeros: true }
  }
}
