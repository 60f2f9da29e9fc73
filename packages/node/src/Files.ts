/**
 * The hardened file primitives of the filesystem adapter, for tools that work on
 * journal directories from the outside (the command line's `mirror`): confined,
 * checked opens (O_NOFOLLOW plus a dev/ino check against the lstat), exclusive
 * creation at 0600 whatever the umask, directory creation at 0700 and directory
 * fsyncs. Each function keeps the crash guarantee its adapter twin documents in
 * `internal/fileOps/`; this module only chooses what is public.
 *
 * Also a reader of one stored entry (`entryHashAt`), so a tool can compare two
 * copies of a session at a sequence without loading either.
 *
 * Every primitive is an Effect failing with `StorageError` (the node error code,
 * if any, is `codeOf(error.cause)`); a handle from `openRead` or `createExclusive`
 * is closed by `withHandle`, on every exit.
 *
 * @since 0.1.0
 */
import { type CorruptJournal, StorageError, StorageReason } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { constants } from "node:fs"
import * as path from "node:path"
import * as Base from "./internal/fileOps/base.ts"
import * as Lines from "./internal/fileOps/lines.ts"
import * as Open from "./internal/fileOps/open.ts"
import * as Replace from "./internal/fileOps/replace.ts"
import * as Load from "./internal/load.ts"
import * as Segment from "./internal/segment.ts"

/**
 * What the primitives need: the filesystem, a root, the uid that must own
 * everything (null where the platform has none) and the read bounds.
 *
 * @since 0.1.0
 */
export type Context = Base.Context

/**
 * An open file.
 *
 * @since 0.1.0
 */
export type FileHandle = Base.FileHandle

/**
 * A context for the real filesystem rooted at `root` (absolute), owned by the
 * current user, with the adapter's read bounds.
 *
 * @since 0.1.0
 */
export const context = (root: string, clock: Clock.Clock = Clock.Clock.defaultValue()): Context => ({
  fs: Base.nodeFs,
  clock,
  root: path.resolve(root),
  uid: typeof process.getuid === "function" ? process.getuid() : null,
  maxFileBytes: Base.MAX_FILE_BYTES,
  maxLineBytes: Base.MAX_LINE_BYTES
})

/**
 * The node error code of a failure (also of the `cause` a `StorageError` carries).
 *
 * @since 0.1.0
 */
export const codeOf = (e: unknown): string | undefined =>
  Base.codeOf(e) ?? (e instanceof StorageError ? Base.codeOf(e.cause) : undefined)

/**
 * Runs one filesystem call as an Effect, a failure becoming a `StorageError`
 * naming the operation and the path.
 *
 * @since 0.1.0
 */
export const call = Base.call

/**
 * Runs `use` on the handle `open` yields (opened uninterruptibly) and closes it on
 * every exit, interruption included.
 *
 * @since 0.1.0
 */
export const withHandle = Open.withHandle

/**
 * Checks a directory: not a symlink, a directory, owned by us, not
 * group/other-writable.
 *
 * @since 0.1.0
 */
export const checkDir = Open.checkDir

/**
 * Fsyncs a directory (opened O_NOFOLLOW), making creations, renames and removals
 * in it durable.
 *
 * @since 0.1.0
 */
export const syncDir = Open.syncDir

/**
 * Creates `dir` in an already checked `parent` at 0700 whatever the umask and
 * fsyncs `parent`; an existing directory is only checked.
 *
 * @since 0.1.0
 */
export const ensureDir = Open.ensureDir

/**
 * Opens an existing regular file for reading, checked (no symlink, ours, the very
 * inode the lstat saw, O_NONBLOCK).
 *
 * @since 0.1.0
 */
export const openRead = Open.openRead

/**
 * Creates a new file exclusively (O_CREAT|O_EXCL|O_NOFOLLOW) at 0600 whatever the
 * umask; durable once written, fsynced and its directory fsynced.
 *
 * @since 0.1.0
 */
export const createExclusive = Open.createExclusive

/**
 * Writes all of `bytes` at `position`.
 *
 * @since 0.1.0
 */
export const writeAll = Open.writeAll

/**
 * Reads `length` bytes at `position` (fewer at the end of the file).
 *
 * @since 0.1.0
 */
export const readAt = Lines.readAt

/**
 * The size of an opened file, refusing files above the read bound.
 *
 * @since 0.1.0
 */
export const boundedSize = Lines.boundedSize

/**
 * Reads a whole opened file, refusing files above the read bound before reading.
 *
 * @since 0.1.0
 */
export const readBounded = Lines.readBounded

/**
 * Closes a handle, ignoring errors.
 *
 * @since 0.1.0
 */
export const close = Replace.close

/**
 * Lists a directory; a missing directory lists as empty.
 *
 * @since 0.1.0
 */
export const listDir = Replace.listDir

/**
 * Prefix of the adapter's temporary files; such files are never session data.
 *
 * @since 0.1.0
 */
export const TEMP_PREFIX = Replace.TEMP_PREFIX

/**
 * The name of a session directory's checkpoint document: `checkpoint.json`.
 *
 * @since 0.1.0
 */
export const CHECKPOINT_FILE: string = Load.CHECKPOINT_FILE

/**
 * The file name of the segment whose first sequence is `base`: 20 decimal digits
 * and `.jsonl` (`00000000000000004096.jsonl`).
 *
 * @since 0.1.0
 */
export const segmentName: (base: number) => string = Segment.name

/**
 * Whether a file name is a segment's (20 decimal digits and `.jsonl`).
 *
 * @since 0.1.0
 */
export const isSegmentName = (name: string): boolean => Segment.parseName(name) !== null

/**
 * The name of the side file that keeps the damaged bytes of `name` from byte
 * `offset` on: `<name>.damaged-<offset>` (see `freeName` for the one to use).
 *
 * @since 0.1.0
 */
export const damagedName: (name: string, offset: number) => string = Replace.damagedName

/**
 * The first of `base`, `base.1`, `base.2`, ... that `taken` (a listing of the
 * directory) does not hold: a name for a new side file that replaces nothing.
 *
 * @since 0.1.0
 */
export const freeName: (taken: ReadonlySet<string>, base: string) => string = Replace.freeName

/**
 * Makes an existing directory of ours private (0700): lstat-checked (no symlink,
 * a directory, owned by us), opened O_NOFOLLOW and checked to be the inode the
 * lstat saw before the fchmod, so a directory swapped in meanwhile is never
 * changed.
 *
 * @since 0.1.0
 */
export const privateDir = Effect.fnUntraced(function*(ctx: Context, dir: string) {
  const st = yield* call("lstat", dir, () => ctx.fs.lstat(dir))
  const refuse = (why: string) =>
    new StorageError({ operation: "confine", path: dir, reason: new StorageReason.RefusedPath({ why }) })
  if (st.isSymbolicLink()) return yield* refuse("a symbolic link")
  if (!st.isDirectory()) return yield* refuse("not a directory")
  if (ctx.uid !== null && st.uid !== ctx.uid) return yield* refuse(`owned by uid ${st.uid}, not ${ctx.uid}`)
  if ((st.mode & 0o777) === Base.DIR_MODE) return
  yield* withHandle(
    call("open", dir, () => ctx.fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)),
    (fh) =>
      Effect.gen(function*() {
        const fst = yield* call("fstat", dir, () => fh.stat())
        if (fst.dev !== st.dev || fst.ino !== st.ino) return yield* refuse("replaced between lstat and open")
        yield* call("fchmod", dir, () => fh.chmod(Base.DIR_MODE))
      })
  )
})

/**
 * The base sequence of a segment file name (`00000000000000004096.jsonl`), or null
 * when the name is not a segment's.
 *
 * @since 0.1.0
 */
export const segmentBase = Segment.parseName

/**
 * The `entry_hash` of the record a session directory stores at `sequence`, or
 * null when none of its segments holds a well-formed record there. Reads only the
 * segments that can hold it (newest base ≤ `sequence` first), line by line with
 * the adapter's bounds; it does not verify the chain (the caller verifies the
 * directory first).
 *
 * @since 0.1.0
 */
export const entryHashAt = (
  ctx: Context,
  dir: string,
  sequence: number
): Effect.Effect<string | null, StorageError | CorruptJournal> =>
  Effect.gen(function*() {
    const candidates = Segment.segmentsOf(yield* Replace.listDir(ctx, dir))
      .filter((s) => s.base <= sequence)
      .sort((a, b) => b.base - a.base)
    for (const seg of candidates) {
      const file = path.join(dir, seg.name)
      const found = yield* withHandle(Open.openRead(ctx, file), (fh) =>
        Effect.flatMap(Lines.boundedSize(ctx, fh, file), (size) => {
          const reader = new Lines.LineReader(ctx, fh, file, file, 0, size)
          // Lines are split synchronously; only the reads are Effects.
          const loop: Effect.Effect<string | null, StorageError | CorruptJournal> = Effect.suspend(() => {
            for (;;) {
              const line = reader.poll()
              if (line === Lines.NeedIo) {
                return Effect.flatMap(reader.io(), () =>
                  loop)
              }
              if (line === null || !line.complete) return Effect.succeed(null)
              const record = Segment.parseLine(line.line)
              if (record._tag === "Entry" && record.entry.sequence === sequence) {
                return Effect.succeed(record.entry.entry_hash)
              }
            }
          })
          return loop
        }))
      if (found !== null) {
        return found
      }
    }
    return null
  })
