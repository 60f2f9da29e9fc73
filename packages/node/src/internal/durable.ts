/**
 * How the writer makes its bytes durable (docs/DESIGN.md §11): segments are opened
 * with `O_DSYNC`, so one write is one durable step; a writer alone in its adapter
 * writes on the calling thread, others through libuv's thread pool; a preallocated
 * segment's size runs ahead of its data (`extend`, with `ftruncate`), zeros are
 * written into the space ahead of the data off the append path (`fill`), so most
 * appends overwrite blocks that are already allocated and their sync commits no
 * metadata; the segment is trimmed to its data when the writer leaves it.
 */
import type { StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Base from "./fileOps/base.ts"
import * as Open from "./fileOps/open.ts"

/** Bytes of zeros (a hole) a preallocated segment is given beyond its data when it grows. */
export const PREALLOCATE_BYTES = 64 * 1024

/**
 * The size a preallocated segment holding `used` bytes is given when it grows: the
 * next 4 KiB boundary, plus `PREALLOCATE_BYTES` of zeros. The writes in between
 * land inside the file and do not change its size, so their sync commits no new
 * size (only a block allocation once per 4 KiB).
 */
export const preallocatedEnd = (used: number): number => Math.ceil(used / 4096) * 4096 + PREALLOCATE_BYTES

/**
 * Which writer of one adapter made the last durable write, and how many durable
 * writes of its writers are in the thread pool now: what `write` asks to know
 * whether a writer is alone. It belongs to the adapter instance (made with its
 * resolved options), so two adapters in one process never decide each other's
 * writes, and it goes with the adapter.
 */
export class Turns {
  inFlight = 0
  last: object | null = null
}

/**
 * One durable write for `owner` (a writer) on a handle opened with `DSYNC`. A
 * writer that is alone in its adapter (`turns`) — it made the last durable write
 * and none is in the thread pool now — writes on the calling thread (`Fs.writeSync`): no
 * pool round trip, which is most of what a lone caller's append costs beyond the
 * disk, at the price of the event loop waiting for the disk. Otherwise the write
 * goes through the pool, so the writes of many sessions overlap. On failure any
 * prefix of the bytes may be on disk (see `Open.writeDurable`).
 */
export const write = (
  ctx: Base.Context,
  turns: Turns,
  owner: object,
  fh: Base.FileHandle,
  file: string,
  bytes: Uint8Array,
  position: number
): Effect.Effect<void, StorageError> =>
  Effect.suspend(() => {
    const writeSync = ctx.fs.writeSync
    const alone = writeSync !== undefined && Open.DSYNC !== 0 && turns.inFlight === 0 && turns.last === owner
    turns.last = owner
    if (alone) return Open.writeDurableSync(writeSync, fh, file, bytes, position)
    turns.inFlight++
    return Effect.ensuring(
      Open.writeDurable(fh, file, bytes, position),
      Effect.sync(() => {
        turns.inFlight--
      })
    )
  })

/**
 * Bytes of zeros a preallocated segment is given ahead of its data by one `fill`,
 * written while the appends go on before them.
 */
export const FILL_BYTES = 64 * 1024

/**
 * The append into a segment, by one writer, from which on zeros are written ahead
 * of the data: a process that appends once or twice and closes (a hook) writes no
 * zeros it would cut off at close.
 */
export const FILL_AFTER = 3

/**
 * Bytes after the end of a segment's data (rounded up to 4 KiB) that a fill
 * leaves to the appends of the moment when it starts from the data's end (a new
 * segment, or after a load): they may land there while the zeros are written,
 * the fill never writes where an append may be in flight.
 */
export const FILL_GAP = 16 * 1024

// The zeros every fill writes: never written to, shared by all writers.
const zeros = new Uint8Array(FILL_BYTES + FILL_GAP + 4096)

/**
 * Where the next fill of a preallocated segment whose data ends at `used` goes,
 * `zeroed` being where the zeros written ahead of the data end (0 when unknown):
 * null while more than half a `FILL_BYTES` of written zeros lies ahead of the
 * data. It starts at `zeroed` when that is ahead of the data, otherwise `FILL_GAP`
 * after the data's 4 KiB boundary, and ends `FILL_BYTES` after that boundary plus
 * the gap.
 */
export const nextFill = (used: number, zeroed: number): { readonly from: number; readonly end: number } | null => {
  if (zeroed - used >= FILL_BYTES / 2) return null
  const edge = Math.ceil(used / 4096) * 4096 + FILL_GAP
  return { from: zeroed >= used ? zeroed : edge, end: edge + FILL_BYTES }
}

/**
 * Writes zeros over `[from, end)` of a preallocated segment, through the thread
 * pool, durably (the handle is opened with `DSYNC`), so the appends that land
 * there later overwrite allocated blocks and their syncs commit no new size and
 * no block allocation. The caller guarantees no byte of the range holds data or
 * is being written: it lies after the data's end, and appends wait for the fill
 * before they reach `from`. A crash during it leaves zeros after the data: unused
 * space (DESIGN §11). On failure, any prefix of the zeros may be there, which is
 * unused space all the same.
 */
export const fill = (
  fh: Base.FileHandle,
  file: string,
  from: number,
  end: number
): Effect.Effect<void, StorageError> => Open.writeDurable(fh, file, zeros.subarray(0, end - from), from)

/** Forgets `owner` as the last writer of `turns` (it closes). */
export const leave = (turns: Turns, owner: object): void => {
  if (turns.last === owner) turns.last = null
}

/**
 * Extends `file` to `end` bytes with `ftruncate`: the new bytes are a hole that
 * reads as zeros, and nothing is written. Not synced by itself: the next durable
 * write commits the new size with its data; the filesystem may also commit it
 * earlier, so a segment is extended only once its open line is durable (its
 * zeros are then unused space, whenever a crash comes).
 */
export const extend = (fh: Base.FileHandle, file: string, end: number): Effect.Effect<void, StorageError> =>
  Base.call("ftruncate", file, () => fh.truncate(end))

/**
 * Cuts `file` back to `end` (its data). Not synced: every byte up to `end` is
 * durable already, so a crash leaves the file cut or with its zero tail, which
 * is unused space (DESIGN §11); the filesystem commits the size when it will.
 */
export const trim = (fh: Base.FileHandle, file: string, end: number): Effect.Effect<void, StorageError> =>
  Base.call("ftruncate", file, () => fh.truncate(end))
