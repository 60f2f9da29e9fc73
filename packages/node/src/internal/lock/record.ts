/**
 * The lock file as this program writes it and reads it back: the names of the lock
 * and of its takeover claim, the record's parse, and one read that never follows a
 * symlink, never blocks and reports anything that is no lock file of ours as `Odd`
 * (see the `Lock` module header).
 */
import { StorageError, StorageReason } from "@session-journal/core"
import * as Effect from "effect/Effect"
import type { Stats } from "node:fs"
import * as path from "node:path"
import type { LockRecord } from "../../Lock.ts"
import * as Base from "../fileOps/base.ts"
import * as Lines from "../fileOps/lines.ts"
import * as Open from "../fileOps/open.ts"
import * as Replace from "../fileOps/replace.ts"
import { validPid } from "../process.ts"

/** Name of the lock file inside a session directory. */
export const LOCK_FILE = "lock"

/** Name of the takeover claim file inside a session directory. */
export const CLAIM_FILE = "lock.takeover"

const optionalText = (v: unknown): boolean => v === undefined || v === null || typeof v === "string"

// A record is used only when every field has the shape this module writes: a pid
// that `process.kill` cannot misread (0 and -1 address process groups), a finite
// time. Anything else is garbage, like a record cut short.
const parseRecord = (text: string): LockRecord | null => {
  try {
    const o = JSON.parse(text) as { readonly [k in keyof LockRecord]?: unknown }
    if (
      typeof o === "object" && o !== null && validPid(o.pid) && typeof o.host === "string" && o.host.length > 0 &&
      typeof o.token === "string" && typeof o.acquired_at === "number" && Number.isFinite(o.acquired_at) &&
      (o.start === null || typeof o.start === "string") && optionalText(o.boot) && optionalText(o.pidns)
    ) return o as LockRecord
    return null
  } catch {
    return null
  }
}

/** Largest lock record read; a larger lock file is garbage, never read whole. */
const MAX_RECORD_BYTES = 64 * 1024

/** How often a lock that changes hands while it is read is read again. */
const READ_ATTEMPTS = 32

export type Seen =
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Found"; readonly raw: string; readonly ino: number; readonly record: LockRecord | null }
  /** Something other than a lock file of ours: `reason` says what; `kind` when no writer can have made it. */
  | { readonly _tag: "Odd"; readonly reason: string; readonly directory: boolean; readonly foreign: boolean }
  /** The lock changed hands at every one of `READ_ATTEMPTS` reads: writers are busy with it. */
  | { readonly _tag: "Changing" }

const kindOf = (st: Stats): string =>
  st.isSymbolicLink()
    ? "a symbolic link"
    : st.isDirectory()
    ? "a directory"
    : st.isFIFO()
    ? "a FIFO"
    : st.isSocket()
    ? "a socket"
    : st.isCharacterDevice() || st.isBlockDevice()
    ? "a device"
    : "not a regular file"

const oddOf = (ctx: Base.Context, st: Stats): Extract<Seen, { _tag: "Odd" }> | null => {
  if (!st.isFile() || st.isSymbolicLink()) {
    return { _tag: "Odd", reason: kindOf(st), directory: st.isDirectory(), foreign: true }
  }
  if (ctx.uid !== null && st.uid !== ctx.uid) {
    return { _tag: "Odd", reason: `owned by uid ${st.uid}, not ${ctx.uid}`, directory: false, foreign: false }
  }
  if ((st.mode & 0o022) !== 0) {
    return {
      _tag: "Odd",
      reason: `group- or other-writable (mode ${(st.mode & 0o777).toString(8)})`,
      directory: false,
      foreign: false
    }
  }
  return null
}

// One read of a lock or claim file without ever following a symlink or blocking:
// lstat first, and only a regular file of ours is opened (O_NOFOLLOW|O_NONBLOCK,
// dev/ino checked). Null when the file changed between the lstat and the open.
const readOnce = (ctx: Base.Context, file: string): Effect.Effect<Seen | null, StorageError> =>
  Base.call("lstat", file, () => ctx.fs.lstat(file)).pipe(
    Effect.flatMap((st): Effect.Effect<Seen | null, StorageError> => {
      const odd = oddOf(ctx, st)
      if (odd !== null) return Effect.succeed(odd)
      return Effect.acquireUseRelease(
        Effect.result(Open.openRead(ctx, file)),
        (opened): Effect.Effect<Seen | null, StorageError> => {
          if (opened._tag === "Failure") {
            const e = opened.failure
            const code = Base.codeOf(e.cause)
            // Removed between the lstat and the open: read again, it may be back.
            if (code === "ENOENT") return Effect.succeed(null)
            if (code === "EACCES" || code === "EPERM") {
              return Effect.succeed({
                _tag: "Odd",
                reason: "not readable by this user",
                directory: false,
                foreign: false
              })
            }
            // Replaced between the lstat and the open (another writer's lock, most
            // likely): read again; the next lstat says what is there.
            if (e.operation === "confine") return Effect.succeed(null)
            return Effect.fail(e)
          }
          const fh = opened.success
          return Effect.flatMap(Base.call("fstat", file, () => fh.stat()), (fst) =>
            fst.size > MAX_RECORD_BYTES
              ? Effect.succeed<Seen>({
                _tag: "Found",
                raw: `${fst.size} bytes, modified ${fst.mtimeMs}`,
                ino: fst.ino,
                record: null
              })
              : Effect.map(Lines.readAt(fh, file, 0, MAX_RECORD_BYTES), (bytes): Seen => {
                const raw = new TextDecoder().decode(bytes)
                return { _tag: "Found", raw, ino: fst.ino, record: parseRecord(raw) }
              }))
        },
        (opened) => opened._tag === "Success" ? Replace.close(opened.success) : Effect.void
      )
    }),
    Effect.catchIf(
      (e) => Base.hasCode(e, "ENOENT") && e.operation === "lstat",
      () => Effect.succeed<Seen>({ _tag: "Missing" })
    )
  )

// Reads a lock or claim file; a file that changes hands while it is read is read
// again (at most `READ_ATTEMPTS` times, then reported as `Changing`). Whatever
// else is there is reported as Odd, never failed with.
export const readLockFile = (ctx: Base.Context, file: string): Effect.Effect<Seen, StorageError> => {
  const attempt = (n: number): Effect.Effect<Seen, StorageError> =>
    Effect.flatMap(
      readOnce(ctx, file),
      (seen) =>
        seen !== null
          ? Effect.succeed(seen)
          : n + 1 >= READ_ATTEMPTS
          ? Effect.succeed<Seen>({ _tag: "Changing" })
          : attempt(n + 1)
    )
  return attempt(0)
}

/** The error a writer gets when something odd stands where its lock must go. */
export const oddLock = (file: string, odd: Extract<Seen, { _tag: "Odd" }>): StorageError =>
  new StorageError({
    operation: "lock",
    path: file,
    reason: new StorageReason.Obstructed({
      message:
        `${path.basename(file)} is ${
          /^(a |an |not )/.test(odd.reason) ? "" : "a file "
        }${odd.reason}, where only a lock ` +
        `file of this program may be; no writer can take the session while it is there` +
        (odd.foreign
          ? `: no writer of this program makes such a file; check what did, then remove it (rm ${
            odd.directory ? "-r " : ""
          }${JSON.stringify(file)})`
          : `: it may be the lock of a writer running as another user, so it is left alone; that user can release it`)
    })
  })

export const same = (a: Seen, b: Seen): boolean =>
  a._tag === "Found" && b._tag === "Found" && a.ino === b.ino && a.raw === b.raw
