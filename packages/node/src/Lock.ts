/**
 * The single-writer lock of a session directory (docs/DESIGN.md §6): a file `lock` that
 * holds the writer's pid, host, process start time and a random token.
 *
 * Taking the lock: the record is written to a fresh temp file (O_EXCL) and then
 * hard-linked to `lock`; `link` fails when `lock` exists, so exactly one process
 * wins and nobody ever sees a half-written lock file. A lock whose holder is a
 * dead process of this host (no such pid, a zombie, or a pid reused by a process
 * that started at another time) is stale. Taking over a stale lock is serialized
 * by a claim file `lock.takeover`, taken the same way: only the claimant may remove
 * the stale lock, and only after re-reading it and finding the same record, so two
 * processes racing for a takeover can never both end up holding the lock. A claim
 * left by a process that died during a takeover is itself stale and is removed the
 * same careful way. Readers never take the lock.
 *
 * Anything else in place of the lock (a symbolic link, a directory, a FIFO, a file
 * of another owner or one this user cannot read) is never followed, opened for a
 * blocking read or removed: readers report it, writers fail with a `StorageError`
 * that names it and says how to clear it.
 *
 * @since 0.1.0
 */
import { SessionLocked, StorageError, StorageReason } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type { Stats } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as FileOps from "./internal/fileOps.ts"
import * as Process from "./internal/process.ts"
import { ownBoot, ownPidns, ownStart, validPid } from "./internal/process.ts"


const realSleep = (millis: number): Effect.Effect<void> =>
  Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis)))

/**
 * Name of the lock file inside a session directory.
 *
 * @since 0.1.0
 */
export const LOCK_FILE = "lock"

/**
 * Name of the takeover claim file inside a session directory.
 *
 * @since 0.1.0
 */
export const CLAIM_FILE = "lock.takeover"

/**
 * The record a lock file holds.
 *
 * @since 0.1.0
 */
export interface LockRecord {
  readonly pid: number
  readonly host: string
  /** Start time of the holder process (Linux: clock ticks after boot, from /proc), or null. */
  readonly start: string | null
  readonly token: string
  /** When the lock was taken, milliseconds since the epoch. */
  readonly acquired_at: number
  /** Linux boot id of the holder's machine; absent in records of older versions. */
  readonly boot?: string | null
  /** Pid namespace of the holder (`/proc/self/ns/pid`); absent in records of older versions. */
  readonly pidns?: string | null
}

/**
 * A held lock; `release` removes it if it is still ours.
 *
 * @since 0.1.0
 */
export interface Held {
  readonly record: LockRecord
  readonly release: Effect.Effect<void, StorageError>
}

/**
 * Start time of process `pid` (field 22 of /proc/<pid>/stat), its state letter,
 * or null where /proc is not available.
 *
 * @since 0.1.0
 */
export const processStat = Process.processStat

/**
 * Whether a local process `pid` exists and is not a zombie (a zombie is dead).
 * Where /proc is not available, a pid that exists counts as alive. The one
 * liveness check of the package, also used by the command line's `mirror`.
 *
 * @since 0.1.0
 */
export const pidAlive = Process.pidAlive

// Tokens of the lock records this process uses: held locks, and acquisitions in
// progress (their takeover claim carries the same record, and must count as live
// for another acquirer in this process). A lock or claim naming this process with
// any other token was left by a release that failed, and is stale.
const heldTokens = new Set<string>()

/**
 * Whether the holder of `record` may still be alive. A holder on another host is
 * always considered alive (it cannot be checked from here).
 *
 * @since 0.1.0
 */
export const holderAlive = (record: LockRecord): boolean => {
  if (record.host !== os.hostname()) return true
  if (typeof record.boot === "string" && ownBoot !== null && record.boot !== ownBoot) return false
  if (typeof record.pidns === "string" && ownPidns !== null && record.pidns !== ownPidns) return true
  if (!validPid(record.pid)) return false
  if (record.pid === process.pid && record.start === ownStart) return heldTokens.has(record.token)
  if (!pidAlive(record.pid)) return false
  const stat = processStat(record.pid)
  // The pid exists but its start time differs: it was reused by another process.
  return record.start === null || stat === null || stat.start === record.start
}

/**
 * A human-readable description of a lock holder, for `SessionLocked`.
 *
 * @since 0.1.0
 */
export const describe = (record: LockRecord): string => {
  const since = Number.isFinite(record.acquired_at) ? new Date(record.acquired_at).toISOString() : "an unknown time"
  const elsewhere = typeof record.pidns === "string" && ownPidns !== null && record.pidns !== ownPidns &&
      record.host === os.hostname()
    ? " (in another pid namespace, so it cannot be checked from here)"
    : ""
  return `pid ${record.pid} on ${record.host} since ${since}${elsewhere}`
}

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

type Seen =
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Found"; readonly raw: string; readonly ino: number; readonly record: LockRecord | null }
  /** Something other than a lock file of ours: `reason` says what. */
  | { readonly _tag: "Odd"; readonly reason: string; readonly directory: boolean }

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

const oddOf = (ctx: FileOps.Context, st: Stats): string | null => {
  if (!st.isFile() || st.isSymbolicLink()) return kindOf(st)
  if (ctx.uid !== null && st.uid !== ctx.uid) return `owned by uid ${st.uid}, not ${ctx.uid}`
  if ((st.mode & 0o022) !== 0) return `group- or other-writable (mode ${(st.mode & 0o777).toString(8)})`
  return null
}

// Reads a lock or claim file without ever following a symlink or blocking: lstat
// first, and only a regular file of ours is opened (O_NOFOLLOW|O_NONBLOCK, dev/ino
// checked). Whatever else is there is reported as Odd, never failed with.
const readLockFile = (ctx: FileOps.Context, file: string): Effect.Effect<Seen, StorageError> =>
  FileOps.call("lstat", file, () => ctx.fs.lstat(file)).pipe(
    Effect.flatMap((st): Effect.Effect<Seen, StorageError> => {
      const odd = oddOf(ctx, st)
      if (odd !== null) return Effect.succeed({ _tag: "Odd", reason: odd, directory: st.isDirectory() })
      return Effect.acquireUseRelease(
        Effect.result(FileOps.openRead(ctx, file)),
        (opened): Effect.Effect<Seen, StorageError> => {
          if (opened._tag === "Failure") {
            const e = opened.failure
            const code = FileOps.codeOf(e.cause)
            if (code === "ENOENT") return Effect.succeed({ _tag: "Missing" })
            if (code === "EACCES" || code === "EPERM") {
              return Effect.succeed({ _tag: "Odd", reason: "not readable by this user", directory: false })
            }
            // Replaced between the lstat and the open: report what was found.
            if (e.operation === "confine") {
              return Effect.succeed({ _tag: "Odd", reason: e.reason.message, directory: false })
            }
            return Effect.fail(e)
          }
          const fh = opened.success
          return Effect.flatMap(FileOps.call("fstat", file, () => fh.stat()), (fst) =>
            fst.size > MAX_RECORD_BYTES
              ? Effect.succeed<Seen>({ _tag: "Found", raw: `${fst.size} bytes, modified ${fst.mtimeMs}`, ino: fst.ino, record: null })
              : Effect.map(FileOps.readAt(fh, file, 0, MAX_RECORD_BYTES), (bytes): Seen => {
                const raw = new TextDecoder().decode(bytes)
                return { _tag: "Found", raw, ino: fst.ino, record: parseRecord(raw) }
              }))
        },
        (opened) => opened._tag === "Success" ? FileOps.close(opened.success) : Effect.void
      )
    }),
    Effect.catchIf((e) => FileOps.hasCode(e, "ENOENT") && e.operation === "lstat", () => Effect.succeed<Seen>({ _tag: "Missing" }))
  )

/** The error a writer gets when something odd stands where its lock must go. */
const oddLock = (file: string, reason: string, directory: boolean): StorageError =>
  new StorageError({
    operation: "lock",
    path: file,
    reason: new StorageReason.Obstructed({ message:
      `${path.basename(file)} is ${/^(a |an |not )/.test(reason) ? "" : "a file "}${reason}, where only a lock ` +
      `file of this program may be; no writer can take the session while it is there: check that no writer is ` +
      `running, then remove it (rm ${directory ? "-r " : ""}${JSON.stringify(file)})` })
  })

const same = (a: Seen, b: Seen): boolean =>
  a._tag === "Found" && b._tag === "Found" && a.ino === b.ino && a.raw === b.raw

// A lock or claim whose content cannot be parsed was cut short by a crash of the
// whole machine (it is complete before it is linked), so its holder is gone.
const alive = (seen: Seen): boolean => seen._tag === "Found" && seen.record !== null && holderAlive(seen.record)

// Links `from` to `to`: false when `to` exists.
const tryLink = (ctx: FileOps.Context, from: string, to: string): Effect.Effect<boolean, StorageError> =>
  FileOps.call("link", to, () => ctx.fs.link(from, to)).pipe(
    Effect.as(true),
    Effect.catchIf((e) => FileOps.hasCode(e, "EEXIST"), () => Effect.succeed(false))
  )

/**
 * Takes the lock of the (confined, existing) session directory `dir` for session
 * `id`, taking over a stale lock of a dead local process. Fails with
 * `SessionLocked` while a live writer holds it; with `StorageError` when the
 * filesystem fails. Use it as the acquire of `Effect.acquireRelease` (it is not
 * meant to be interrupted half way: a lock taken then would be left to the
 * stale-lock takeover).
 *
 * @since 0.1.0
 */
export const acquire = (ctx: FileOps.Context, dir: string, id: string): Effect.Effect<Held, StorageError | SessionLocked> =>
  Effect.suspend(() => {
    const lockPath = path.join(dir, LOCK_FILE)
    const claimPath = path.join(dir, CLAIM_FILE)
    const record: LockRecord = {
      pid: process.pid,
      host: os.hostname(),
      start: ownStart,
      boot: ownBoot,
      pidns: ownPidns,
      token: `${ctx.clock.currentTimeMillisUnsafe().toString(36)}-${Math.random().toString(36).slice(2)}${
        Math.random().toString(36).slice(2)
      }`,
      acquired_at: ctx.clock.currentTimeMillisUnsafe()
    }
    const tmp = path.join(dir, `${LOCK_FILE}${FileOps.TEMP_PREFIX}${process.pid}-${record.token}`)
    heldTokens.add(record.token)
    let acquired = false
    return Effect.gen(function*() {
      yield* FileOps.withHandle(
        FileOps.createExclusive(ctx, tmp),
        (fh) => FileOps.writeAll(fh, tmp, new TextEncoder().encode(`${JSON.stringify(record)}\n`), 0)
      )
      for (let attempt = 0; attempt < 200; attempt++) {
        if (yield* tryLink(ctx, tmp, lockPath)) {
          acquired = true
          return { record, release: release(ctx, lockPath, record.token) } satisfies Held
        }
        const seen = yield* readLockFile(ctx, lockPath)
        if (seen._tag === "Missing") continue
        if (seen._tag === "Odd") return yield* oddLock(lockPath, seen.reason, seen.directory)
        if (alive(seen)) {
          return yield* new SessionLocked({ id, holder: seen.record !== null ? describe(seen.record) : "unknown" })
        }
        // Stale: only the holder of the claim may remove it.
        if (yield* tryLink(ctx, tmp, claimPath)) {
          // The claim is removed whatever happened (and its removal failing fails the
          // acquisition, as the lock's does); not interrupted half way.
          yield* Effect.uninterruptible(Effect.gen(function*() {
            const removal = yield* Effect.exit(Effect.flatMap(readLockFile(ctx, lockPath), (again) =>
              same(seen, again) ? FileOps.unlinkIfExists(ctx, lockPath) : Effect.void))
            yield* FileOps.unlinkIfExists(ctx, claimPath)
            if (Exit.isFailure(removal)) return yield* Effect.failCause(removal.cause)
          }))
          continue
        }
        const claim = yield* readLockFile(ctx, claimPath)
        if (claim._tag === "Missing") continue
        if (claim._tag === "Odd") return yield* oddLock(claimPath, claim.reason, claim.directory)
        if (alive(claim)) {
          // Another process is taking over right now; it finishes within milliseconds.
          // Real time, not the fiber's Clock: this runs uninterruptibly, and under a
          // test clock a Clock sleep would never end.
          yield* realSleep(5 + Math.random() * 10)
          continue
        }
        // A claim left by a process that died mid-takeover: move it aside and check
        // that what moved is the dead one; put back a live one moved by mistake.
        const aside = path.join(dir, `${CLAIM_FILE}${FileOps.TEMP_PREFIX}${process.pid}-${record.token}`)
        const moved = yield* FileOps.call("rename", claimPath, () => ctx.fs.rename(claimPath, aside)).pipe(
          Effect.as(true),
          Effect.catchIf((e) => FileOps.hasCode(e, "ENOENT"), () => Effect.succeed(false))
        )
        if (!moved) continue
        const movedSeen = yield* readLockFile(ctx, aside)
        if (!same(claim, movedSeen)) yield* tryLink(ctx, aside, claimPath)
        yield* FileOps.unlinkIfExists(ctx, aside)
      }
      return yield* new SessionLocked({ id, holder: "contended: the lock changed hands too often" })
    }).pipe(
      Effect.ensuring(Effect.suspend(() => {
        if (!acquired) heldTokens.delete(record.token)
        return Effect.ignore(FileOps.unlinkIfExists(ctx, tmp))
      }))
    )
  })

const release = (ctx: FileOps.Context, lockPath: string, token: string): Effect.Effect<void, StorageError> =>
  Effect.suspend(() => {
    heldTokens.delete(token)
    return Effect.flatMap(readLockFile(ctx, lockPath), (seen) =>
      seen._tag === "Found" && seen.record?.token === token ? FileOps.unlinkIfExists(ctx, lockPath) : Effect.void)
  })

/**
 * Reads the lock of a session directory: its holder, and whether that holder is
 * alive; null when there is no lock file.
 *
 * @since 0.1.0
 */
export const inspect = (
  ctx: FileOps.Context,
  dir: string
): Effect.Effect<null | { readonly record: LockRecord | null; readonly alive: boolean; readonly problem?: string }> => {
  const file = path.join(dir, LOCK_FILE)
  return readLockFile(ctx, file).pipe(
    Effect.map((seen) => {
      switch (seen._tag) {
        case "Missing":
          return null
        case "Odd":
          return { record: null, alive: false, problem: oddLock(file, seen.reason, seen.directory).reason.message }
        case "Found":
          return seen.record === null
            ? { record: null, alive: false, problem: "unreadable lock file (not a lock record: a stale lock cut short, or garbage)" }
            : { record: seen.record, alive: alive(seen) }
      }
    }),
    // A reader only reports the lock: whatever happens reading it is not its failure.
    Effect.catch((e) => Effect.succeed({ record: null, alive: false, problem: `unreadable lock file: ${e.message}` }))
  )
}

/**
 * Removes temp files of lock attempts by dead local processes (their names carry
 * the pid). Called by a writer after it took the lock.
 *
 * @since 0.1.0
 */
export const clearStaleTemps = Effect.fnUntraced(function*(ctx: FileOps.Context, dir: string, names: ReadonlyArray<string>) {
  const pattern = new RegExp(`^(?:${LOCK_FILE}|${CLAIM_FILE.replace(".", "\\.")})${FileOps.TEMP_PREFIX.replace(".", "\\.")}(\\d+)-`)
  for (const n of names) {
    const m = pattern.exec(n)
    if (m === null) continue
    const pid = Number(m[1])
    if (pid === process.pid || pidAlive(pid)) continue
    yield* FileOps.unlinkIfExists(ctx, path.join(dir, n))
  }
})
