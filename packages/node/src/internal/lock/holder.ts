/**
 * Who holds a lock, as far as can be proved from here: `judge` reads /proc only
 * where the record's host name, or its boot id and pid namespace, say its pid means
 * the same process here; `judgeDeep` adds a scan of /proc for `unlock` (what is
 * proved and what is not: the package README, "Who is proved gone").
 */
import * as Effect from "effect/Effect"
import * as os from "node:os"
import * as path from "node:path"
import type { LockRecord, Verdict } from "../../Lock.ts"
import type * as Base from "../fileOps/base.ts"
import * as Process from "../process.ts"
import { ownBoot, ownPidns, ownStart, pidAlive, processStat, validPid } from "../process.ts"
import { LOCK_FILE, oddLock, readLockFile, type Seen } from "./record.ts"

// Tokens of the lock records this process uses: held locks (until their file is
// removed), and acquisitions in progress (their takeover claim carries the same
// record, and must count as live for another acquirer in this process). A lock or
// claim naming this process with any other token was left by a release that
// failed, and is stale.
export const heldTokens = new Set<string>()

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

export const holderAlive = (record: LockRecord): boolean => judge(record).state !== "gone"

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

// A lock or claim whose content cannot be parsed was cut short by a crash of the
// whole machine (it is complete before it is linked), so its holder is gone.
export const verdictOf = (seen: Extract<Seen, { _tag: "Found" }>, deep = false): Verdict =>
  seen.record === null
    ? { state: "gone", reason: "its content is no lock record (a lock cut short by a crash, or garbage)" }
    : deep
    ? judgeDeep(seen.record)
    : judge(seen.record)

export const alive = (seen: Seen): boolean => seen._tag === "Found" && verdictOf(seen).state !== "gone"

export const inspect = (
  ctx: Base.Context,
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
