/**
 * How the writer makes its bytes durable (README "Preallocated segments"): segments
 * are opened with `O_DSYNC`, so one write is one durable step; a writer alone in
 * the process writes on the calling thread, others through libuv's thread pool;
 * a preallocated segment grows by stretches of zeros (the file is extended with
 * `ftruncate`, so no zero byte is written), and is trimmed to its data when the
 * writer leaves it.
 */
import type { StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as FileOps from "./fileOps.ts"

/** Bytes of zeros (a hole) a preallocated segment is given beyond its data when it grows. */
export const PREALLOCATE_BYTES = 64 * 1024

/**
 * The size a preallocated segment holding `used` bytes is given when it grows: the
 * next 4 KiB boundary, plus `PREALLOCATE_BYTES` of zeros. The writes in between
 * land inside the file and do not change its size, so their sync commits no new
 * size (only a block allocation once per 4 KiB).
 */
export const preallocatedEnd = (used: number): number => Math.ceil(used / 4096) * 4096 + PREALLOCATE_BYTES

// Which writer of this process made the last durable write, and how many durable
// writes are in the thread pool now.
const turns: { inFlight: number; last: object | null } = { inFlight: 0, last: null }

/**
 * One durable write for `owner` (a writer) on a handle opened with `DSYNC`. A
 * writer that is alone in the process — it made the last durable write and none
 * is in the thread pool now — writes on the calling thread (`Fs.writeSync`): no
 * pool round trip, which is most of what a lone caller's append costs beyond the
 * disk, at the price of the event loop waiting for the disk. Otherwise the write
 * goes through the pool, so the writes of many sessions overlap. On failure any
 * prefix of the bytes may be on disk (see `FileOps.writeDurable`).
 */
export const write = (
  ctx: FileOps.Context,
  owner: object,
  fh: FileOps.FileHandle,
  file: string,
  bytes: Uint8Array,
  position: number
): Effect.Effect<void, StorageError> =>
  Effect.suspend(() => {
    const writeSync = ctx.fs.writeSync
    const alone = writeSync !== undefined && FileOps.DSYNC !== 0 && turns.inFlight === 0 && turns.last === owner
    turns.last = owner
    if (alone) return FileOps.writeDurableSync(writeSync, fh, file, bytes, position)
    turns.inFlight++
    return Effect.ensuring(
      FileOps.writeDurable(fh, file, bytes, position),
      Effect.sync(() => {
        turns.inFlight--
      })
    )
  })

/** Forgets `owner` as the last writer (it closes). */
export const leave = (owner: object): void => {
  if (turns.last === owner) turns.last = null
}

/**
 * Extends `file` to `end` bytes with `ftruncate`: the new bytes are a hole that
 * reads as zeros, and nothing is written. Not synced by itself: the next durable
 * write commits the new size with its data; the filesystem may also commit it
 * earlier, so a segment is extended only once its open line is durable (its
 * zeros are then unused space, whenever a crash comes).
 */
export const extend = (fh: FileOps.FileHandle, file: string, end: number): Effect.Effect<void, StorageError> =>
  FileOps.call("ftruncate", file, () => fh.truncate(end))

/**
 * Cuts `file` back to `end` (its data). Not synced: every byte up to `end` is
 * durable already, so a crash leaves the file cut or with its zero tail, which
 * is unused space (DESIGN §11); the filesystem commits the size when it will.
 */
export const trim = (fh: FileOps.FileHandle, file: string, end: number): Effect.Effect<void, StorageError> =>
  FileOps.call("ftruncate", file, () => fh.truncate(end))
