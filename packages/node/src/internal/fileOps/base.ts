/**
 * The hardened file primitives of the filesystem adapter, in `fileOps/`: this
 * module (`Fs`, `nodeFs`, their context and bounds, and the one place a failed
 * call becomes a `StorageError`), `lines.ts` (bounded reads and the line reader),
 * `open.ts` (confinement, checked opens, durable writes) and `replace.ts` (atomic
 * replacement, side files, temp names). Every durable or security-relevant
 * filesystem step of the adapter goes through them, and
 * each function's comment states the crash guarantee it gives and what the caller
 * must still do (docs/DESIGN.md §6).
 *
 * The functions are Effects over a small `Fs` interface (the calls the adapter
 * makes, with `node:fs/promises` as the default), so tests can inject a failing
 * filesystem that wraps the real one (`layerFs`). Each raw call is wrapped once
 * (`call`): its failure is a `StorageError` naming the operation and the path, with
 * the node error as its cause, in the typed error channel; damage is
 * `CorruptJournal`. Descriptors are resources: opened uninterruptibly and closed
 * on every exit (`withHandle`), so an interruption never leaks one.
 *
 * Confinement: Node has `O_NOFOLLOW` only for the last path component and no
 * `openat`, so every open is preceded by an lstat walk from the journal root (no
 * symlinks, owned by this user, not group/other-writable) and followed by an fstat
 * whose dev/ino must equal the lstat's.
 */
import { StorageError } from "@session-journal/core"
import type * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as fs from "node:fs"
import type { Stats } from "node:fs"
import * as fsp from "node:fs/promises"

/**
 * The calls made on an open file. `node:fs/promises`' `FileHandle` satisfies it.
 */
export interface FileHandle {
  readonly fd: number
  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ readonly bytesRead: number }>
  write(
    buffer: Uint8Array,
    offset: number,
    length: number,
    position: number
  ): Promise<{ readonly bytesWritten: number }>
  datasync(): Promise<void>
  sync(): Promise<void>
  stat(): Promise<Stats>
  chmod(mode: number): Promise<void>
  truncate(length: number): Promise<void>
  close(): Promise<void>
}

/**
 * The filesystem calls the adapter makes. The default is `node:fs/promises`; tests
 * wrap it to inject failures (real files, only the failure is made up).
 */
export interface Fs {
  open(path: string, flags: number, mode?: number): Promise<FileHandle>
  lstat(path: string): Promise<Stats>
  mkdir(path: string, mode: number): Promise<void>
  readdir(path: string): Promise<Array<string>>
  rename(from: string, to: string): Promise<void>
  link(existing: string, newPath: string): Promise<void>
  unlink(path: string): Promise<void>
  rmdir(path: string): Promise<void>
  /**
   * A write on the calling thread (`fs.writeSync`): returns the bytes written. The
   * writer uses it, when present, for the durable write of a writer that is alone
   * in the process (no thread-pool round trip); without it every write goes
   * through `FileHandle.write`.
   */
  writeSync?(fd: number, buffer: Uint8Array, offset: number, length: number, position: number): number
  /**
   * An lstat on the calling thread (`fs.lstatSync`). A writer uses it, when present,
   * for the check of its lock before each batch (one system call, no thread-pool
   * round trip); without it the check goes through `lstat`. Left out with
   * `writeSync` when `callingThreadWrites` is false.
   */
  lstatSync?(path: string): Stats
}

/**
 * The real filesystem.
 */
export const nodeFs: Fs = {
  open: (p, flags, mode) => fsp.open(p, flags, mode),
  lstat: (p) => fsp.lstat(p),
  mkdir: async (p, mode) => {
    await fsp.mkdir(p, { mode })
  },
  readdir: (p) => fsp.readdir(p),
  rename: (a, b) => fsp.rename(a, b),
  link: (a, b) => fsp.link(a, b),
  unlink: (p) => fsp.unlink(p),
  rmdir: (p) => fsp.rmdir(p),
  writeSync: (fd, buffer, offset, length, position) => fs.writeSync(fd, buffer, offset, length, position),
  lstatSync: (p) => fs.lstatSync(p)
}

/** Largest file the adapter reads (docs/DESIGN.md §6): 1 GiB. */
export const MAX_FILE_BYTES = 1024 * 1024 * 1024

/** Largest line of a segment: 8 MiB. Longer entries are refused on append. */
export const MAX_LINE_BYTES = 8 * 1024 * 1024

/** Mode of every directory the adapter creates, whatever the umask. */
export const DIR_MODE = 0o700

/** Mode of every file the adapter creates, whatever the umask. */
export const FILE_MODE = 0o600

/**
 * What the primitives need: the filesystem, the clock (lock records and repair
 * entries carry times), the journal root (absolute), the uid that must own
 * everything (null where the platform has none), and the bounds.
 */
export interface Context {
  readonly fs: Fs
  readonly clock: Clock.Clock
  readonly root: string
  readonly uid: number | null
  readonly maxFileBytes: number
  readonly maxLineBytes: number
}

/** The node error code of a failure, if it has one. */
export const codeOf = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

/**
 * Runs one filesystem call as an Effect: a rejection (or a throw) becomes a
 * `StorageError` naming the operation and the path, with the node error as its
 * cause (`codeOf(e.cause)` tells ENOENT from the rest).
 *
 * Interrupting it abandons the pending call, whose result is then lost: a call
 * that yields a resource (an open) must run uninterruptibly, as the acquire of
 * `Effect.acquireUseRelease` / `acquireRelease` does.
 */
export const call = <A>(operation: string, p: string, f: () => Promise<A>): Effect.Effect<A, StorageError> =>
  Effect.tryPromise({ try: f, catch: (cause) => StorageError.io(operation, cause, p) })

/** Like `call`, for a synchronous call: a throw becomes a `StorageError`. */
export const callSync = <A>(operation: string, p: string, f: () => A): Effect.Effect<A, StorageError> =>
  Effect.try({ try: f, catch: (cause) => cause instanceof StorageError ? cause : StorageError.io(operation, cause, p) })

/** Whether a typed failure is a `StorageError` of a failed call whose node error has code `code`. */
export const hasCode = (e: { readonly _tag: string }, code: string): boolean =>
  e instanceof StorageError && e.reason._tag === "Io" && e.reason.code === code
