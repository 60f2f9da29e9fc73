/**
 * Whether a process of this host is alive: /proc where there is one (a zombie is
 * dead, a reused pid shows another start time), `kill(pid, 0)` elsewhere.
 */
import { readFileSync, readlinkSync } from "node:fs"
import { codeOf } from "./fileOps.ts"

/**
 * Start time of process `pid` (field 22 of /proc/<pid>/stat), its state letter,
 * or null where /proc is not available.
 */
export const processStat = (pid: number): { readonly start: string; readonly state: string } | null => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    const state = fields[0]
    const start = fields[19]
    return state === undefined || start === undefined ? null : { start, state }
  } catch {
    return null
  }
}

/** Start time of this process. */
export const ownStart = processStat(process.pid)?.start ?? null

const readOr = (read: () => string): string | null => {
  try {
    return read().trim()
  } catch {
    return null
  }
}

// Pids, start times and zombies mean something only within one boot and one pid
// namespace: a holder of another boot is gone, one in another namespace (another
// container with the same host name) cannot be checked from here.
export const ownBoot = readOr(() => readFileSync("/proc/sys/kernel/random/boot_id", "utf8"))
export const ownPidns = readOr(() => readlinkSync("/proc/self/ns/pid"))
const procAvailable = processStat(process.pid) !== null

/**
 * Whether a local process `pid` exists and is not a zombie. Where /proc is not
 * available, a pid that exists counts as alive.
 */
export const pidAlive = (pid: number): boolean => {
  if (!validPid(pid)) return false
  try {
    process.kill(pid, 0)
  } catch (e) {
    if (codeOf(e) === "ESRCH") return false
    // EPERM: a process of another user owns the pid; it exists.
  }
  const stat = processStat(pid)
  if (stat === null) return !procAvailable
  return stat.state !== "Z" && stat.state !== "X"
}

/** Whether `pid` names one process (not a group, not out of range). */
export const validPid = (pid: unknown): pid is number => typeof pid === "number" && Number.isSafeInteger(pid) && pid > 0 && pid < 2 ** 31
