/**
 * The read path of a full replay (a verify): segments read whole, several ahead of
 * the scan, and scanned from memory.
 *
 * A verify replays every segment in order. Reading one through `Segment.scan`
 * costs its open, stat and chunk reads one after the other, each a round trip to
 * libuv's thread pool while the main thread waits. Here `readWhole` opens, sizes,
 * reads and closes a segment of up to `WHOLE_MAX` bytes in one go, and `Ahead`
 * keeps a few of those running while the current segment is parsed, so the
 * thread pool works while the main thread hashes (on a second core when one is
 * free; with one core the same system calls run, only later).
 *
 * `scanBytes` scans the bytes with exactly the outcome of `Segment.scan` on a file
 * holding them: it handles the common lines itself (a segment's own open record
 * written as the adapter writes it, complete lines of entries and metadata) and
 * gives anything else (a damaged, torn or zero-filled line, another version, an
 * over-long line) to `Segment.scan` itself, run over the same bytes from the
 * segment's start, which visits only the records after those already visited.
 * Every line this path parses is parsed as `Segment.parseLine` parses it: ASCII
 * lines are decoded as Latin-1 (the same string UTF-8 gives for ASCII bytes) and
 * go through the same `Segment.parseText`; any other line goes to `Segment.parseLine`.
 */
import type { CorruptJournal, StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import { isAscii } from "node:buffer"
import type { Stats } from "node:fs"
import * as Base from "./fileOps/base.ts"
import * as Lines from "./fileOps/lines.ts"
import * as Open from "./fileOps/open.ts"
import * as Segment from "./segment.ts"

/** Largest segment read whole; a larger one is scanned in chunks (`Segment.scan`). */
export const WHOLE_MAX = 4 * 1024 * 1024

/** How many segments are read ahead of the one being scanned. */
export const AHEAD = 4

/** A segment as `readWhole` found it: its size, and its bytes when it is small enough. */
export interface Whole {
  readonly size: number
  /** The bytes read (fewer than `size` when the file shrank under us); null above `WHOLE_MAX`. */
  readonly bytes: Uint8Array | null
}

/** Opens (with `openRead`'s checks), sizes (bounded), reads whole and closes one segment. */
export const readWhole = (ctx: Base.Context, file: string): Effect.Effect<Whole, StorageError> =>
  Open.withHandle(
    Open.openRead(ctx, file),
    (fh) =>
      Effect.flatMap(Lines.boundedSize(ctx, fh, file), (size) =>
        size > WHOLE_MAX
          ? Effect.succeed<Whole>({ size, bytes: null })
          : Effect.map(readAll(fh, file, size), (bytes): Whole => ({ size, bytes })))
  )

// Reads `size` bytes from offset 0 (fewer when the file ends first) into a buffer
// that is not zero-filled first: only the bytes the reads wrote are handed out.
const readAll = (fh: Base.FileHandle, file: string, size: number): Effect.Effect<Uint8Array, StorageError> => {
  const buf = Buffer.allocUnsafe(size)
  const from = (done: number): Effect.Effect<Uint8Array, StorageError> =>
    done >= size
      ? Effect.succeed(buf)
      : Effect.flatMap(Base.call("read", file, () => fh.read(buf, done, size - done, done)), ({ bytesRead }) =>
        bytesRead === 0 ? Effect.succeed(buf.subarray(0, done)) : from(done + bytesRead))
  return from(0)
}

/**
 * Reads of the segments `files[from..]` running ahead of the scan, at most
 * `AHEAD` at a time. `take` hands out the next one (in order); `stop` interrupts
 * what is still running (their handles are closed by `readWhole`).
 */
export class Ahead {
  private readonly running: Array<Fiber.Fiber<Whole, StorageError>> = []
  private next: number
  private readonly ctx: Base.Context
  private readonly files: ReadonlyArray<string>
  constructor(ctx: Base.Context, files: ReadonlyArray<string>, from: number) {
    this.ctx = ctx
    this.files = files
    this.next = from
  }

  private fill(): Effect.Effect<void> {
    const self = this
    return Effect.gen(function*() {
      while (self.running.length < AHEAD && self.next < self.files.length) {
        self.running.push(
          yield* Effect.forkChild(readWhole(self.ctx, self.files[self.next++]!), { startImmediately: true })
        )
      }
    })
  }

  /** The next segment in order (the reads after it keep running). */
  take(): Effect.Effect<Whole, StorageError> {
    const self = this
    return Effect.gen(function*() {
      yield* self.fill()
      const fiber = self.running.shift()!
      const whole = yield* Fiber.join(fiber)
      yield* self.fill()
      return whole
    })
  }

  /** Interrupts the reads still running. */
  stop(): Effect.Effect<void> {
    const running = this.running.splice(0)
    this.next = this.files.length
    return running.length === 0 ? Effect.void : Fiber.interruptAll(running)
  }
}

// A read-only `FileHandle` over bytes already read: `size` is the file's size as
// stat found it; reads return what `bytes` holds (fewer bytes when the file shrank
// before it was read, as the file itself would have).
const memoryHandle = (bytes: Uint8Array, size: number): Base.FileHandle => {
  const refuse = () => Promise.reject(new Error("read-only snapshot of a segment"))
  return {
    fd: -1,
    read: (buffer, offset, length, position) => {
      const n = Math.max(0, Math.min(length, bytes.length - position))
      if (n > 0) buffer.set(bytes.subarray(position, position + n), offset)
      return Promise.resolve({ bytesRead: n })
    },
    stat: () => Promise.resolve({ size } as Stats),
    write: refuse,
    datasync: refuse,
    sync: refuse,
    chmod: refuse,
    truncate: refuse,
    close: () => Promise.resolve()
  }
}

const isZeroFrom = (bytes: Buffer, from: number): boolean => {
  for (let i = from; i < bytes.length; i++) if (bytes[i] !== 0) return false
  return true
}

/**
 * `Segment.scan` of a file of `size` bytes holding `bytes` (from offset 0), with the
 * same visits and the same result.
 */
export const scanBytes = (
  ctx: Base.Context,
  bytes: Uint8Array,
  size: number,
  file: string,
  base: number,
  visit: (record: Segment.Visited, offset: number, end: number) => boolean
): Effect.Effect<Segment.Scan, StorageError | CorruptJournal> => {
  // `Segment.scan` itself over the same bytes, visiting only the records at or after `from`.
  const slow = (from: number) =>
    Segment.scan(
      ctx,
      memoryHandle(bytes, size),
      file,
      file,
      base,
      0,
      (record, offset, end) => offset < from ? true : visit(record, offset, end)
    )
  if (bytes.length !== size) return slow(0)
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length)
  // The open record, as the adapter writes it; any other first line is Segment.scan's to judge.
  const first = buf.indexOf(10)
  if (first < 0) return slow(0)
  const head = buf.toString("latin1", 0, first + 1)
  const preallocated = head === Segment.openLine(base, true)
  if (!preallocated && head !== Segment.openLine(base, false)) return slow(0)
  const ascii = isAscii(buf)
  let at = first + 1
  while (at < size) {
    if (buf[at] === 0) {
      // The zero tail of a preallocated segment is unused space: the data ends here.
      if (preallocated && isZeroFrom(buf, at)) break
      return slow(at)
    }
    const nl = buf.indexOf(10, at)
    if (nl < 0 || nl - at > ctx.maxLineBytes) return slow(at)
    const record = ascii || isAscii(buf.subarray(at, nl))
      ? Segment.parseText(buf.toString("latin1", at, nl))
      : Segment.parseLine(buf.subarray(at, nl))
    if (record._tag !== "Entry" && record._tag !== "Meta") return slow(at)
    if (!visit(record, at, nl + 1)) {
      return Effect.succeed({ size, validEnd: at, end: { _tag: "Halted", offset: at }, preallocated })
    }
    at = nl + 1
  }
  return Effect.succeed({ size, validEnd: at, end: { _tag: "Clean" }, preallocated })
}
