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
 * A lock that changes hands while it is read (unlinked and linked again between
 * the lstat and the open) is read again, a bounded number of times: it is a lock
 * of a writer, never a foreign file. Anything else in place of the lock (a symbolic
 * link, a directory, a FIFO, a file of another owner or one this user cannot read)
 * is never followed, opened for a blocking read or removed: readers report it,
 * writers fail with a `StorageError` that names it. Only what no writer of this
 * program can have made (a symlink, a directory, a FIFO, a socket, a device) comes
 * with the advice to remove it; no message ever tells anyone to remove a lock a
 * live writer may hold: `unlock` removes a lock whose holder is proved gone.
 *
 * Who is proved gone (`judge`): a record carries the holder's host name, pid, the
 * pid's start time, the kernel's boot id and the holder's pid namespace. Pids and
 * start times mean something only within one kernel boot and one pid namespace, so
 * `/proc` decides only when the holder ran on this host (the same host name) or
 * under the same boot id and the same pid namespace (a container sharing this
 * kernel and this pid namespace under another host name). A holder of this host
 * under an earlier boot id is gone (the host restarted). A holder in another pid
 * namespace, under another host name with no boot id, or under another boot id and
 * another host name (another machine sharing the directory, or this one before a
 * restart: nothing here tells them apart) cannot be proved gone by a writer: its
 * lock is kept. `unlock` looks one step further (`judgeDeep`: a pid namespace of
 * this kernel with no process left, seen by root from the initial pid namespace);
 * `unlock` with `force` removes a lock whose holder cannot be proved gone.
 *
 * A held lock keeps its file open, so its inode cannot be freed and reused while it
 * is held: `Held.check` (one lstat) proves the lock is still this writer's before a
 * write becomes durable, and fails with a `StorageError` caused by `LockLost` when
 * it was removed or replaced.
 *
 * @since 0.1.0
 */
import { SessionLocked, StorageError, StorageReason } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import * as fs from "node:fs"
import type { Stats } from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as FileOps from "./internal/fileOps.ts"
import * as Process from "./internal/process.ts"
import { ownBoot, ownPidns, ownStart, validPid } from "./internal/process.ts"

/**
 * The waits of an acquirer that finds another process taking a stale lock over
 * (its claim is live): 5 ms plus up to 10 ms drawn from `Random`. The claimant
 * finishes within milliseconds, and the acquisition tries at most a bounded
 * number of times.
 *
 * @since 0.7.0
 */
export const claimBackoff: Schedule.Schedule<number> = Schedule.spaced("5 millis").pipe(
  Schedule.modifyDelay(() => Effect.map(Random.next, (r) => Duration.millis(5 + 10 * r)))
)

// The acquisition runs uninterruptibly (the acquire of `acquireRelease`), and under
// a test clock a sleep of the fiber's Clock would never end: its waits are slept
// on the real clock, whatever clock the fiber has.
const realClock = Clock.Clock.defaultValue()

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
 * A writer's lock is no longer its own: the lock file was removed, or replaced by
 * another writer's. The writer stops before its next write becomes durable;
 * everything it acknowledged before is stored. Carried as the `cause` of the
 * `StorageError` (operation "lock") a writer fails with.
 *
 * @since 0.4.0
 */
export class LockLost extends Schema.TaggedError<LockLost>()("LockLost", {
  id: Schema.String,
  path: Schema.String,
  /** What stands where the lock was: "removed", or a description of the new holder. */
  found: Schema.String
}) {
  override get message(): string {
    return `the lock of session ${this.id} is no longer this writer's (${this.found}); ` +
      `the writer stopped before its next write, and everything it acknowledged before is stored`
  }
}

/**
 * What `Lock.acquire` found in place before taking the lock: null when there was
 * no lock, else the record it took over (null when unreadable) and what proved
 * its holder gone (or, with `force`, why it could not be proved).
 *
 * @since 0.4.0
 */
export interface TakenOver {
  readonly record: LockRecord | null
  readonly verdict: Verdict
}

/**
 * A held lock; `release` removes it if it is still ours, `check` proves it still
 * is (one lstat: the held file stays open, so its inode cannot be reused by
 * another lock while it is held).
 *
 * @since 0.1.0
 */
export interface Held {
  readonly record: LockRecord
  readonly release: Effect.Effect<void, StorageError>
  /**
   * Succeeds when `lock` is still this holder's file (same device and inode, same
   * size and modification time, or, when those changed, the same content); else
   * fails with a `StorageError` (operation "lock") whose cause is `LockLost`.
   */
  readonly check: Effect.Effect<void, StorageError>
  /** The stale lock this acquisition removed, or null. */
  readonly tookOver: TakenOver | null
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

// Tokens of the lock records this process uses: held locks (until their file is
// removed), and acquisitions in progress (their takeover claim carries the same
// record, and must count as live for another acquirer in this process). A lock or
// claim naming this process with any other token was left by a release that
// failed, and is stale.
const heldTokens = new Set<string>()

/**
 * What can be proved about a lock's holder from here, with the reason in words:
 * `alive` (a running process of this kernel and pid namespace, with the start
 * time the record names), `gone` (proved dead), `unknown` (it ran where this
 * process cannot look: another pid namespace, another kernel, another host).
 *
 * @since 0.4.0
 */
export interface Verdict {
  readonly state: "alive" | "gone" | "unknown"
  readonly reason: string
}

/**
 * Judges a lock's holder (see the module header for what is proved and what is
 * not). A record of an older version (no boot id, no pid namespace) is judged by
 * `/proc` when it names this host, and is `unknown` otherwise.
 *
 * @since 0.4.0
 */
export const judge = (record: LockRecord): Verdict => {
  const host = os.hostname()
  const sameHost = record.host === host
  const boot = typeof record.boot === "string" ? record.boot : null
  const pidns = typeof record.pidns === "string" ? record.pidns : null
  if (boot !== null && ownBoot !== null && boot !== ownBoot) {
    if (sameHost) {
      return {
        state: "gone",
        reason: `it ran under boot ${boot} of this host, which has restarted since (now boot ${ownBoot})`
      }
    }
    return {
      state: "unknown",
      reason:
        `it ran on ${record.host} under another kernel (boot ${boot}, here ${ownBoot}): another machine sharing ` +
        `this directory, or this one before a restart; nothing here tells them apart`
    }
  }
  if (pidns !== null && ownPidns !== null && pidns !== ownPidns) {
    return {
      state: "unknown",
      reason: `it ran in another pid namespace (${pidns}, here ${ownPidns}), so its pid cannot be checked from here`
    }
  }
  const sameKernel = boot !== null && boot === ownBoot && pidns !== null && pidns === ownPidns
  if (!sameHost && !sameKernel) {
    return {
      state: "unknown",
      reason: `it ran on another host (${record.host}, here ${host})` +
        (boot === null || pidns === null ? " and its record names no boot id and pid namespace to check it by" : "")
    }
  }
  const where = sameHost
    ? "on this host"
    : `under the same kernel boot and pid namespace (host name ${record.host}, here ${host})`
  if (!validPid(record.pid)) return { state: "gone", reason: `its pid ${record.pid} names no process` }
  if (record.pid === process.pid && record.start === ownStart) {
    return heldTokens.has(record.token)
      ? { state: "alive", reason: "it is this process" }
      : { state: "gone", reason: "it is this process, which no longer holds it (a release that failed)" }
  }
  if (!pidAlive(record.pid)) return { state: "gone", reason: `no live process ${record.pid} runs ${where}` }
  const stat = processStat(record.pid)
  if (record.start !== null && stat !== null && stat.start !== record.start) {
    return {
      state: "gone",
      reason: `process ${record.pid} ${where} started at tick ${stat.start}, not ${record.start}: the pid was reused`
    }
  }
  return {
    state: "alive",
    reason: `process ${record.pid} runs ${where}` +
      (record.start !== null && stat !== null ? ` with the start time the lock names` : "")
  }
}

/**
 * `judge`, and where it finds a holder of this kernel (the same boot id) in
 * another pid namespace, one step further: when this process is root in the
 * initial pid namespace, where every process of the kernel is visible, a
 * namespace none of whose processes is alive proves the holder gone (its last
 * process ended; a namespace number reused since then only shows a live namespace,
 * which is judged alive). A whole scan of /proc: for `unlock`, not for every writer.
 *
 * @since 0.4.0
 */
export const judgeDeep = (record: LockRecord): Verdict => {
  const verdict = judge(record)
  const pidns = typeof record.pidns === "string" ? record.pidns : null
  if (verdict.state !== "unknown" || pidns === null || ownPidns === null || pidns === ownPidns) return verdict
  if (typeof record.boot !== "string" || record.boot !== ownBoot) return verdict
  const inhabited = Process.pidnsInhabited(pidns)
  if (inhabited === false) {
    return {
      state: "gone",
      reason: `no process of this kernel (boot ${ownBoot}) is left in its pid namespace ${pidns}, ` +
        `as seen by root from the initial pid namespace`
    }
  }
  return inhabited === true
    ? { state: "unknown", reason: `${verdict.reason}; processes of that namespace are still running` }
    : verdict
}

/**
 * Whether the holder of `record` may still be alive: not proved gone by `judge`.
 *
 * @since 0.1.0
 */
export const holderAlive = (record: LockRecord): boolean => judge(record).state !== "gone"

/**
 * A human-readable description of a lock holder, for `SessionLocked`.
 *
 * @since 0.1.0
 */
export const describe = (record: LockRecord): string => {
  const since = Number.isFinite(record.acquired_at) ? new Date(record.acquired_at).toISOString() : "an unknown time"
  const verdict = judge(record)
  const elsewhere = typeof record.pidns === "string" && ownPidns !== null && record.pidns !== ownPidns &&
      record.host === os.hostname()
    ? " (in another pid namespace, so it cannot be checked from here)"
    : verdict.state === "unknown"
    ? ` (it cannot be proved gone from here: ${verdict.reason})`
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

/** How often a lock that changes hands while it is read is read again. */
const READ_ATTEMPTS = 32

type Seen =
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

const oddOf = (ctx: FileOps.Context, st: Stats): Extract<Seen, { _tag: "Odd" }> | null => {
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
const readOnce = (ctx: FileOps.Context, file: string): Effect.Effect<Seen | null, StorageError> =>
  FileOps.call("lstat", file, () => ctx.fs.lstat(file)).pipe(
    Effect.flatMap((st): Effect.Effect<Seen | null, StorageError> => {
      const odd = oddOf(ctx, st)
      if (odd !== null) return Effect.succeed(odd)
      return Effect.acquireUseRelease(
        Effect.result(FileOps.openRead(ctx, file)),
        (opened): Effect.Effect<Seen | null, StorageError> => {
          if (opened._tag === "Failure") {
            const e = opened.failure
            const code = FileOps.codeOf(e.cause)
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
          return Effect.flatMap(FileOps.call("fstat", file, () => fh.stat()), (fst) =>
            fst.size > MAX_RECORD_BYTES
              ? Effect.succeed<Seen>({
                _tag: "Found",
                raw: `${fst.size} bytes, modified ${fst.mtimeMs}`,
                ino: fst.ino,
                record: null
              })
              : Effect.map(FileOps.readAt(fh, file, 0, MAX_RECORD_BYTES), (bytes): Seen => {
                const raw = new TextDecoder().decode(bytes)
                return { _tag: "Found", raw, ino: fst.ino, record: parseRecord(raw) }
              }))
        },
        (opened) => opened._tag === "Success" ? FileOps.close(opened.success) : Effect.void
      )
    }),
    Effect.catchIf(
      (e) => FileOps.hasCode(e, "ENOENT") && e.operation === "lstat",
      () => Effect.succeed<Seen>({ _tag: "Missing" })
    )
  )

// Reads a lock or claim file; a file that changes hands while it is read is read
// again (at most `READ_ATTEMPTS` times, then reported as `Changing`). Whatever
// else is there is reported as Odd, never failed with.
const readLockFile = (ctx: FileOps.Context, file: string): Effect.Effect<Seen, StorageError> => {
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
const oddLock = (file: string, odd: Extract<Seen, { _tag: "Odd" }>): StorageError =>
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

const same = (a: Seen, b: Seen): boolean =>
  a._tag === "Found" && b._tag === "Found" && a.ino === b.ino && a.raw === b.raw

// A lock or claim whose content cannot be parsed was cut short by a crash of the
// whole machine (it is complete before it is linked), so its holder is gone.
const verdictOf = (seen: Extract<Seen, { _tag: "Found" }>, deep = false): Verdict =>
  seen.record === null
    ? { state: "gone", reason: "its content is no lock record (a lock cut short by a crash, or garbage)" }
    : deep
    ? judgeDeep(seen.record)
    : judge(seen.record)

const alive = (seen: Seen): boolean => seen._tag === "Found" && verdictOf(seen).state !== "gone"

// Links `from` to `to`: false when `to` exists.
const tryLink = (ctx: FileOps.Context, from: string, to: string): Effect.Effect<boolean, StorageError> =>
  FileOps.call("link", to, () => ctx.fs.link(from, to)).pipe(
    Effect.as(true),
    Effect.catchIf((e) => FileOps.hasCode(e, "EEXIST"), () => Effect.succeed(false))
  )

/**
 * Options of `acquire`.
 *
 * @since 0.4.0
 */
export interface AcquireOptions {
  /**
   * Take over a lock whose holder cannot be proved alive or gone (`unknown`):
   * for `unlock --force`, never for a writer. A holder proved alive is never
   * taken over.
   */
  readonly force?: boolean | undefined
  /** Judge the holder with `judgeDeep` (a scan of /proc): for `unlock`. */
  readonly deep?: boolean | undefined
}

/**
 * Takes the lock of the (confined, existing) session directory `dir` for session
 * `id`, taking over a stale lock whose holder is proved gone (see `judge`). Fails
 * with `SessionLocked` while a writer that is not proved gone holds it; with
 * `StorageError` when the filesystem fails. Use it as the acquire of
 * `Effect.acquireRelease` (it is not meant to be interrupted half way: a lock
 * taken then would be left to the stale-lock takeover).
 *
 * @since 0.1.0
 */
export const acquire = (
  ctx: FileOps.Context,
  dir: string,
  id: string,
  options?: AcquireOptions
): Effect.Effect<Held, StorageError | SessionLocked> =>
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
    const text = `${JSON.stringify(record)}\n`
    const tmp = path.join(dir, `${LOCK_FILE}${FileOps.TEMP_PREFIX}${process.pid}-${record.token}`)
    heldTokens.add(record.token)
    // The record's file stays open while the lock is held: its inode cannot be freed
    // and reused by another writer's lock, so an lstat alone proves the lock ours.
    let fh: FileOps.FileHandle | null = null
    let acquired = false
    let tookOver: TakenOver | null = null
    const takeable = (verdict: Verdict) =>
      verdict.state === "gone" || (verdict.state === "unknown" && options?.force === true)
    return Effect.gen(function*() {
      const claimWait = yield* Schedule.toStep(claimBackoff)
      fh = yield* FileOps.createExclusive(ctx, tmp)
      yield* FileOps.writeAll(fh, tmp, new TextEncoder().encode(text), 0)
      // Before the link: once linked, nothing may fail before the lock is returned.
      const fst = yield* FileOps.call("fstat", tmp, () => fh!.stat())
      for (let attempt = 0; attempt < 200; attempt++) {
        if (yield* tryLink(ctx, tmp, lockPath)) {
          acquired = true
          return {
            record,
            release: release(ctx, lockPath, record.token, fh),
            check: check(ctx, id, lockPath, text, fst),
            tookOver
          } satisfies Held
        }
        const seen = yield* readLockFile(ctx, lockPath)
        if (seen._tag === "Missing" || seen._tag === "Changing") continue
        if (seen._tag === "Odd") return yield* oddLock(lockPath, seen)
        const verdict = verdictOf(seen, options?.deep === true)
        if (!takeable(verdict)) {
          return yield* new SessionLocked({ id, holder: seen.record !== null ? describe(seen.record) : "unknown" })
        }
        // Stale: only the holder of the claim may remove it.
        if (yield* tryLink(ctx, tmp, claimPath)) {
          // The claim is removed whatever happened (and its removal failing fails the
          // acquisition, as the lock's does); not interrupted half way.
          yield* Effect.uninterruptible(Effect.gen(function*() {
            const removal = yield* Effect.exit(Effect.flatMap(readLockFile(ctx, lockPath), (again) => {
              if (!same(seen, again)) return Effect.void
              tookOver = { record: seen.record, verdict }
              return FileOps.unlinkIfExists(ctx, lockPath)
            }))
            yield* FileOps.unlinkIfExists(ctx, claimPath)
            if (Exit.isFailure(removal)) return yield* Effect.failCause(removal.cause)
          }))
          continue
        }
        const claim = yield* readLockFile(ctx, claimPath)
        if (claim._tag === "Missing" || claim._tag === "Changing") continue
        if (claim._tag === "Odd") return yield* oddLock(claimPath, claim)
        if (alive(claim)) {
          // Another process is taking over right now; it finishes within milliseconds.
          const [, delay] = yield* Effect.orElseSucceed(
            claimWait(realClock.currentTimeMillisUnsafe(), undefined),
            () => [0, Duration.millis(5)] as const
          )
          yield* Effect.provideService(Effect.sleep(delay), Clock.Clock, realClock)
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
        const closing = !acquired && fh !== null ? FileOps.close(fh) : Effect.void
        if (!acquired) heldTokens.delete(record.token)
        return Effect.andThen(closing, Effect.ignore(FileOps.unlinkIfExists(ctx, tmp)))
      }))
    )
  })

const release = (
  ctx: FileOps.Context,
  lockPath: string,
  token: string,
  fh: FileOps.FileHandle
): Effect.Effect<void, StorageError> =>
  // The token stays in `heldTokens` until the lock file is gone: until then the lock
  // is live, also for another acquirer of this process, which would otherwise judge
  // it stale and take it over, and this release would then remove the new holder's
  // lock. Only the holder removes a live lock, so the one read decides the unlink.
  Effect.flatMap(readLockFile(ctx, lockPath), (seen) =>
    seen._tag === "Found" && seen.record?.token === token ? FileOps.unlinkIfExists(ctx, lockPath) : Effect.void).pipe(
      Effect.ensuring(Effect.andThen(
        Effect.sync(() =>
          heldTokens.delete(token)
        ),
        FileOps.close(fh)
      ))
    )

// The lock is still ours when `lock` is the inode we hold open (no other file can
// have its number while it is open). Its size and modification time are compared
// too; only when they changed is the content read and compared with what we wrote.
const check = (
  ctx: FileOps.Context,
  id: string,
  lockPath: string,
  text: string,
  identity: { readonly dev: number; readonly ino: number; readonly size: number; readonly mtimeMs: number }
): Effect.Effect<void, StorageError> => {
  let known = { size: identity.size, mtimeMs: identity.mtimeMs }
  const lost = (found: string) => {
    const cause = new LockLost({ id, path: lockPath, found })
    return new StorageError({
      operation: "lock",
      path: lockPath,
      reason: new StorageReason.LockLost({ session: id, found }),
      cause
    })
  }
  return Effect.gen(function*() {
    const lstatSync = ctx.fs.lstatSync
    const st = yield* (lstatSync !== undefined
      ? FileOps.callSync("lstat", lockPath, () => lstatSync(lockPath))
      : FileOps.call("lstat", lockPath, () => ctx.fs.lstat(lockPath))).pipe(
        Effect.catchIf((e) => FileOps.hasCode(e, "ENOENT"), () => Effect.succeed(null))
      )
    if (st === null) return yield* lost("the lock file was removed")
    if (
      st.isFile() && st.dev === identity.dev && st.ino === identity.ino && st.size === known.size &&
      st.mtimeMs === known.mtimeMs
    ) {
      return
    }
    const seen = yield* Effect.orElseSucceed(readLockFile(ctx, lockPath), (): Seen => ({ _tag: "Changing" }))
    if (seen._tag === "Found" && seen.ino === identity.ino && seen.raw === text) {
      known = { size: st.size, mtimeMs: st.mtimeMs }
      return
    }
    return yield* lost(
      seen._tag === "Found" && seen.ino === identity.ino
        ? "its content was changed"
        : seen._tag === "Found" && seen.record !== null
        ? `replaced by the lock of pid ${seen.record.pid} on ${seen.record.host}`
        : "replaced by another file"
    )
  })
}

/**
 * Reads the lock of a session directory: its holder, and whether that holder is
 * alive (not proved gone); null when there is no lock file.
 *
 * @since 0.1.0
 */
export const inspect = (
  ctx: FileOps.Context,
  dir: string
): Effect.Effect<
  null | {
    readonly record: LockRecord | null
    readonly alive: boolean
    readonly problem?: string
    readonly verdict?: Verdict
  }
> => {
  const file = path.join(dir, LOCK_FILE)
  return readLockFile(ctx, file).pipe(
    Effect.map((seen) => {
      switch (seen._tag) {
        case "Missing":
          return null
        case "Changing":
          return {
            record: null,
            alive: true,
            problem: "the lock changed hands at every read (writers are taking it in turn)"
          }
        case "Odd":
          return { record: null, alive: false, problem: oddLock(file, seen).reason.message }
        case "Found": {
          const verdict = verdictOf(seen)
          return seen.record === null
            ? {
              record: null,
              alive: false,
              problem: "unreadable lock file (not a lock record: a stale lock cut short, or garbage)",
              verdict
            }
            : { record: seen.record, alive: verdict.state !== "gone", verdict }
        }
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
export const clearStaleTemps = Effect.fnUntraced(
  function*(ctx: FileOps.Context, dir: string, names: ReadonlyArray<string>) {
    const pattern = new RegExp(
      `^(?:${LOCK_FILE}|${CLAIM_FILE.replace(".", "\\.")})${FileOps.TEMP_PREFIX.replace(".", "\\.")}(\\d+)-`
    )
    for (const n of names) {
      const m = pattern.exec(n)
      if (m === null) continue
      const pid = Number(m[1])
      if (pid === process.pid || pidAlive(pid)) continue
      yield* FileOps.unlinkIfExists(ctx, path.join(dir, n))
    }
  }
)

/**
 * Waits until the lock file of `dir` is removed or renamed (watched with
 * `fs.watch` on the directory) and then `settleMillis` more, or until `millis`
 * have passed, whichever comes first. Where the directory cannot be watched it
 * just waits. Time is the fiber's `Clock` (a test clock moves it with
 * `TestClock.adjust`). Interruptible: the watcher and the sleeps are let go.
 *
 * @since 0.4.0
 */
export const awaitRelease = (dir: string, millis: number, settleMillis = 0): Effect.Effect<void> => {
  // Resumes when the lock file goes; never where the directory cannot be watched.
  const released = Effect.callback<boolean>((resume) => {
    let watcher: fs.FSWatcher | null = null
    try {
      watcher = fs.watch(dir, { persistent: false }, (_event, name) => {
        if (name !== null && name !== LOCK_FILE) return
        if (watcher !== null) watcher.close()
        watcher = null
        resume(Effect.succeed(true))
      })
      watcher.on("error", () => undefined)
    } catch {
      watcher = null
    }
    return Effect.sync(() => {
      if (watcher !== null) watcher.close()
      watcher = null
    })
  })
  return Effect.flatMap(
    Effect.raceFirst(released, Effect.as(Effect.sleep(Math.max(0, millis)), false)),
    (woken) => woken && settleMillis > 0 ? Effect.sleep(settleMillis) : Effect.void
  )
}
