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
 * Who is proved gone (`judge`; `judgeDeep` for `unlock`) is stated once, in the
 * package README ("Who is proved gone"): pids and start times mean something only
 * within one kernel boot and one pid namespace, so `/proc` decides only there.
 *
 * A held lock keeps its file open, so its inode cannot be freed and reused while it
 * is held: `Held.check` (one lstat) proves the lock is still this writer's before a
 * write becomes durable, and fails with a `StorageError` whose reason is `StorageReason.LockLost`
 * when it was removed or replaced.
 *
 * @since 0.1.0
 */
import type { StorageError } from "@session-journal/core"
import type * as Effect from "effect/Effect"
import * as Holder from "./internal/lock/holder.ts"
import * as Record from "./internal/lock/record.ts"
import * as Takeover from "./internal/lock/takeover.ts"
import * as Wait from "./internal/lock/wait.ts"
import * as Process from "./internal/process.ts"

/**
 * Name of the lock file inside a session directory.
 *
 * @since 0.1.0
 */
export const LOCK_FILE = Record.LOCK_FILE

/**
 * Name of the takeover claim file inside a session directory.
 *
 * @since 0.1.0
 */
export const CLAIM_FILE = Record.CLAIM_FILE

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
 * What can be proved about a lock's holder from here, with the reason in words:
 * `alive` (a running process of this kernel and pid namespace, with the start
 * time the record names), `gone` (proved dead), `unknown` (it ran where this
 * process cannot look: another pid namespace, another kernel, another host).
 *
 * @since 0.1.0
 */
export interface Verdict {
  readonly state: "alive" | "gone" | "unknown"
  readonly reason: string
}

/**
 * What `Lock.acquire` found in place before taking the lock: null when there was
 * no lock, else the record it took over (null when unreadable) and what proved
 * its holder gone (or, with `force`, why it could not be proved).
 *
 * @since 0.1.0
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
   * fails with a `StorageError` (operation "lock") whose reason is
   * `StorageReason.LockLost`.
   */
  readonly check: Effect.Effect<void, StorageError>
  /** The stale lock this acquisition removed, or null. */
  readonly tookOver: TakenOver | null
}

/**
 * Options of `acquire`.
 *
 * @since 0.1.0
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
 * The waits of an acquirer that finds another process taking a stale lock over
 * (its claim is live): 5 ms plus up to 10 ms drawn from `Random`. The claimant
 * finishes within milliseconds, and the acquisition tries at most a bounded
 * number of times.
 *
 * @since 0.1.0
 */
export const claimBackoff = Takeover.claimBackoff

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

/**
 * Judges a lock's holder (what is proved and what is not: the package README,
 * "Who is proved gone"). A record of an older version (no boot id, no pid namespace) is judged by
 * `/proc` when it names this host, and is `unknown` otherwise.
 *
 * @since 0.1.0
 */
export const judge = Holder.judge

/**
 * `judge`, and where it finds a holder of this kernel (the same boot id) in
 * another pid namespace, one step further: when this process is root in the
 * initial pid namespace, where every process of the kernel is visible, a
 * namespace none of whose processes is alive proves the holder gone (its last
 * process ended; a namespace number reused since then only shows a live namespace,
 * which is judged alive). A whole scan of /proc: for `unlock`, not for every writer.
 *
 * @since 0.1.0
 */
export const judgeDeep = Holder.judgeDeep

/**
 * Whether the holder of `record` may still be alive: not proved gone by `judge`.
 *
 * @since 0.1.0
 */
export const holderAlive = Holder.holderAlive

/**
 * A human-readable description of a lock holder, for `SessionLocked`.
 *
 * @since 0.1.0
 */
export const describe = Holder.describe

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
export const acquire = Takeover.acquire

/**
 * Reads the lock of a session directory: its holder, and whether that holder is
 * alive (not proved gone); null when there is no lock file.
 *
 * @since 0.1.0
 */
export const inspect = Holder.inspect

/**
 * Removes temp files of lock attempts by dead local processes (their names carry
 * the pid). Called by a writer after it took the lock.
 *
 * @since 0.1.0
 */
export const clearStaleTemps = Takeover.clearStaleTemps

/**
 * Waits until the lock file of `dir` is removed or renamed (watched with
 * `fs.watch` on the directory) and then `settleMillis` more, or until `millis`
 * have passed, whichever comes first. Where the directory cannot be watched it
 * just waits. Time is the fiber's `Clock` (a test clock moves it with
 * `TestClock.adjust`). Interruptible: the watcher and the sleeps are let go.
 *
 * @since 0.1.0
 */
export const awaitRelease = Wait.awaitRelease
