/**
 * Confinement (the lstat walk from the root, ownership and mode checks), directory
 * creation and sync, checked opens and durable writes.
 *
 * Opens are resources: every function that opens a descriptor either closes it
 * before it returns (on every exit, interruption included) or hands it over from
 * an uninterruptible region, so the caller can take it as the acquire of
 * `Effect.acquireUseRelease` / `acquireRelease` (`withHandle`) without a window in
 * which an interruption loses it.
 */
import { StorageError, StorageReason } from "@session-journal/core"
import * as Effect from "effect/Effect"
import { constants } from "node:fs"
import type { Stats } from "node:fs"
import { call, callSync, codeOf, type Context, DIR_MODE, FILE_MODE, type FileHandle, hasCode } from "./base.ts"

const refuse = (p: string, why: string): StorageError =>
  new StorageError({ operation: "confine", path: p, reason: new StorageReason.RefusedPath({ why }) })

// A write that wrote nothing: an I/O failure without an error of its own.
const noProgress = (file: string): StorageError =>
  new StorageError({ operation: "write", path: file, reason: new StorageReason.Io({ message: "no progress" }) })

const ownerAndMode = (ctx: Context, st: Stats, p: string): StorageError | null => {
  if (ctx.uid !== null && st.uid !== ctx.uid) return refuse(p, `owned by uid ${st.uid}, not ${ctx.uid}`)
  if ((st.mode & 0o022) !== 0) return refuse(p, `group- or other-writable (mode ${(st.mode & 0o777).toString(8)})`)
  return null
}

/**
 * Checks one directory component: not a symlink, a directory, owned by us, not
 * group/other-writable. Fails with `StorageError` (operation "confine") otherwise.
 */
export const checkDir = (ctx: Context, p: string): Effect.Effect<Stats, StorageError> =>
  Effect.flatMap(call("lstat", p, () => ctx.fs.lstat(p)), (st) => {
    if (st.isSymbolicLink()) return Effect.fail(refuse(p, "a symbolic link"))
    if (!st.isDirectory()) return Effect.fail(refuse(p, "not a directory"))
    const bad = ownerAndMode(ctx, st, p)
    return bad === null ? Effect.succeed(st) : Effect.fail(bad)
  })

/**
 * Confines a session directory: lstat-checks the root and the session directory.
 * Succeeds with false when the session directory does not exist (the root must).
 */
export const confineSessionDir = (ctx: Context, dir: string): Effect.Effect<boolean, StorageError> =>
  Effect.andThen(
    checkDir(ctx, ctx.root),
    checkDir(ctx, dir).pipe(
      Effect.as(true),
      Effect.catchIf((e) => hasCode(e, "ENOENT"), () => Effect.succeed(false))
    )
  )

/** Closes a handle, ignoring errors (the descriptor is released regardless). */
export const closeQuietly = (fh: FileHandle): Effect.Effect<void> =>
  Effect.promise(async () => {
    try {
      await fh.close()
    } catch {
      // Linux releases the descriptor even when close reports an error.
    }
  })

/**
 * Runs `use` on the handle `open` yields and closes it on every exit (success,
 * failure, interruption). `open` runs uninterruptibly, so a descriptor is never
 * opened without being closed.
 */
export const withHandle = <A, E, E2, R>(
  open: Effect.Effect<FileHandle, E>,
  use: (fh: FileHandle) => Effect.Effect<A, E2, R>
): Effect.Effect<A, E | E2, R> => Effect.acquireUseRelease(open, use, closeQuietly)

const openDir = (ctx: Context, dir: string): Effect.Effect<FileHandle, StorageError> =>
  call("open", dir, () => ctx.fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW))

/**
 * Makes the creation, rename or removal of entries in `dir` durable: opens the
 * directory read-only (O_NOFOLLOW) and fsyncs it. Without it a crash can forget a
 * file that was created and written and fsynced itself.
 */
export const syncDir = (ctx: Context, dir: string): Effect.Effect<void, StorageError> =>
  withHandle(openDir(ctx, dir), (fh) => call("fsync", dir, () => fh.sync()))

/**
 * Creates directory `dir` (inside an already confined `parent`) with mode 0700
 * whatever the umask (fchmod on the opened directory, checked against the lstat),
 * then fsyncs `parent` so the directory survives a crash. An existing directory is
 * only checked. Succeeds with whether it was created.
 */
export const ensureDir = Effect.fnUntraced(function*(ctx: Context, dir: string, parent: string) {
  const created = yield* call("mkdir", dir, () => ctx.fs.mkdir(dir, DIR_MODE)).pipe(
    Effect.as(true),
    Effect.catchIf((e) => hasCode(e, "EEXIST"), () => Effect.succeed(false))
  )
  if (created) {
    const st = yield* call("lstat", dir, () => ctx.fs.lstat(dir))
    if (st.isSymbolicLink() || !st.isDirectory()) return yield* refuse(dir, "replaced while being created")
    yield* withHandle(openDir(ctx, dir), (fh) =>
      Effect.gen(function*() {
        const fst = yield* call("fstat", dir, () => fh.stat())
        if (fst.dev !== st.dev || fst.ino !== st.ino) return yield* refuse(dir, "replaced while being created")
        yield* call("fchmod", dir, () => fh.chmod(DIR_MODE))
      }))
    yield* syncDir(ctx, parent)
  }
  yield* checkDir(ctx, dir)
  return created
})

// The open call itself; an ELOOP (the last component is a symlink, O_NOFOLLOW)
// is reported as the refusal it is.
const openFlags = (ctx: Context, file: string, flags: number, mode?: number): Effect.Effect<FileHandle, StorageError> =>
  Effect.mapError(
    call("open", file, () => ctx.fs.open(file, flags, mode)),
    (e) => codeOf(e.cause) === "ELOOP" ? refuse(file, "a symbolic link") : e
  )

// Opened and checked with the descriptor closed on any failure of the checks; the
// whole of it uninterruptible, so the handle is either returned or closed.
const openThen = (
  ctx: Context,
  file: string,
  flags: number,
  mode: number | undefined,
  check: (fh: FileHandle) => Effect.Effect<void, StorageError>
): Effect.Effect<FileHandle, StorageError> =>
  Effect.uninterruptible(Effect.flatMap(openFlags(ctx, file, flags, mode), (fh) =>
    check(fh).pipe(
      Effect.as(fh),
      Effect.onError(() => closeQuietly(fh))
    )))

const lstatRegular = (ctx: Context, file: string): Effect.Effect<Stats, StorageError> =>
  Effect.flatMap(call("lstat", file, () => ctx.fs.lstat(file)), (st) => {
    if (st.isSymbolicLink()) return Effect.fail(refuse(file, "a symbolic link"))
    if (!st.isFile()) return Effect.fail(refuse(file, "not a regular file"))
    const bad = ownerAndMode(ctx, st, file)
    return bad === null ? Effect.succeed(st) : Effect.fail(bad)
  })

const openChecked = (ctx: Context, file: string, flags: number): Effect.Effect<FileHandle, StorageError> =>
  Effect.flatMap(
    lstatRegular(ctx, file),
    (st) =>
      openThen(ctx, file, flags, undefined, (fh) =>
        Effect.flatMap(
          call("fstat", file, () => fh.stat()),
          (fst) =>
            fst.dev !== st.dev || fst.ino !== st.ino
              ? Effect.fail(refuse(file, "replaced between lstat and open"))
              : Effect.void
        ))
  )

/**
 * Opens an existing regular file of a confined directory for reading: lstat (no
 * symlink, a regular file, ours, not group/other-writable), open with O_NOFOLLOW
 * (and O_NONBLOCK, so a FIFO planted between the checks cannot hang us), fstat,
 * and dev/ino must match the lstat. The caller closes the handle (`withHandle`).
 */
export const openRead = (ctx: Context, file: string): Effect.Effect<FileHandle, StorageError> =>
  openChecked(ctx, file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)

/**
 * Opens an existing regular file for writing (no O_APPEND: the adapter writes at
 * the offsets it tracks), with the same checks as `openRead`.
 */
export const openWrite = (ctx: Context, file: string, flags = 0): Effect.Effect<FileHandle, StorageError> =>
  openChecked(ctx, file, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | flags)

/**
 * Creates a new file exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, so neither an
 * existing file nor a planted symlink is ever written through), sets 0600 with
 * fchmod whatever the umask, and checks dev/ino against an lstat. The new name is
 * not durable until the caller fsyncs the directory (`syncDir`). Fails with
 * `StorageError` whose cause has code EEXIST when the name is taken. `flags` are
 * added to the open flags (`DSYNC`).
 */
export const createExclusive = (ctx: Context, file: string, flags = 0): Effect.Effect<FileHandle, StorageError> =>
  openThen(
    ctx,
    file,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | flags,
    FILE_MODE,
    (fh) =>
      Effect.gen(function*() {
        yield* call("fchmod", file, () => fh.chmod(FILE_MODE))
        const fst = yield* call("fstat", file, () => fh.stat())
        const st = yield* call("lstat", file, () => ctx.fs.lstat(file))
        if (st.isSymbolicLink() || fst.dev !== st.dev || fst.ino !== st.ino) {
          return yield* refuse(file, "replaced while being created")
        }
      })
  )

/**
 * Writes all of `bytes` at `position` (looping over short writes). Not durable by
 * itself; see `appendDurable`.
 */
export const writeAll = (
  fh: FileHandle,
  file: string,
  bytes: Uint8Array,
  position: number
): Effect.Effect<void, StorageError> => {
  // One call per write: a short write (rare) takes another round.
  const from = (done: number): Effect.Effect<void, StorageError> =>
    Effect.flatMap(
      call("write", file, () => fh.write(bytes, done, bytes.length - done, position + done)),
      ({ bytesWritten }) => {
        if (bytesWritten <= 0) return Effect.fail(noProgress(file))
        return done + bytesWritten < bytes.length ? from(done + bytesWritten) : Effect.void
      }
    )
  return bytes.length === 0 ? Effect.void : from(0)
}

/**
 * Durable append: writes `bytes` at `position` and fdatasyncs. When it succeeds,
 * the bytes survive a crash (the file's size is data, so fdatasync covers it); a
 * newly created file additionally needs `syncDir` of its directory before the
 * first acknowledgement. When it fails (or is interrupted), any prefix of the
 * bytes may be on disk: the caller must forget its idea of the file's end and
 * rescan.
 */
export const appendDurable = (
  fh: FileHandle,
  file: string,
  bytes: Uint8Array,
  position: number
): Effect.Effect<void, StorageError> =>
  Effect.andThen(writeAll(fh, file, bytes, position), call("fdatasync", file, () => fh.datasync()))

/**
 * `O_DSYNC`, for `openWrite` and `createExclusive`: every write on the descriptor
 * returns only once its bytes, and the file size they need, are on disk. 0 where
 * the platform has no such flag (then `writeDurable` fdatasyncs).
 */
export const DSYNC: number = constants.O_DSYNC ?? 0

/**
 * Durable write on a handle opened with `DSYNC`: writes `bytes` at `position`, and
 * each write is durable when it returns, so no separate fdatasync (one thread-pool
 * round trip instead of two). When it fails (or is interrupted), any prefix of the
 * bytes may be on disk: the caller must forget its idea of the file's end and
 * rescan.
 */
export const writeDurable = (
  fh: FileHandle,
  file: string,
  bytes: Uint8Array,
  position: number
): Effect.Effect<void, StorageError> =>
  DSYNC === 0 ? appendDurable(fh, file, bytes, position) : writeAll(fh, file, bytes, position)

/**
 * `writeDurable` on the calling thread, through `Fs.writeSync` (which the caller
 * checked is there, and `DSYNC` is not 0): no thread-pool round trip, but the
 * event loop waits for the disk. Same guarantees.
 */
export const writeDurableSync = (
  writeSync: NonNullable<Context["fs"]["writeSync"]>,
  fh: FileHandle,
  file: string,
  bytes: Uint8Array,
  position: number
): Effect.Effect<void, StorageError> =>
  callSync("write", file, () => {
    let done = 0
    while (done < bytes.length) {
      const n = writeSync(fh.fd, bytes, done, bytes.length - done, position + done)
      if (n <= 0) throw noProgress(file)
      done += n
    }
  })
