/**
 * Whether a process of this host is alive: /proc where there is one (a zombie is
 * dead, a reused pid shows another start time), `kill(pid, 0)` elsewhere.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs"
import { codeOf } from "./fileOps/base.ts"

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
export const validPid = (pid: unknown): pid is number =>
  typeof pid === "number" && Number.isSafeInteger(pid) && pid > 0 && pid < 2 ** 31

/** The inode number of the initial pid namespace (`PROC_PID_INIT_INO` of the kernel). */
const INIT_PIDNS = "pid:[4026531836]"

/**
 * Whether any process of this kernel is in pid namespace `pidns` ("pid:[N]"), as
 * seen from the initial pid namespace: true or false only when that can be told
 * (this process is in the initial pid namespace, /proc shows that namespace, and
 * this process is root, so that no process is hidden from it: `hidepid`, ptrace
 * checks); null otherwise. Every process of every pid namespace is visible from
 * the initial one, so false proves that no process of that namespace lives.
 */
export const pidnsInhabited = (pidns: string): boolean | null => {
  if (ownPidns !== INIT_PIDNS || typeof process.getuid !== "function" || process.getuid() !== 0) return null
  if (readOr(() => readlinkSync("/proc/self")) !== String(process.pid)) return null
  let names: Array<string>
  try {
    names = readdirSync("/proc")
  } catch {
    return null
  }
  for (const n of names) {
    if (!/^\d+$/.test(n)) continue
    try {
      if (readlinkSync(`/proc/${n}/ns/pid`) === pidns) return true
    } catch (e) {
      // A process that ended while the list was read is no inhabitant; anything else is unknown.
      if (codeOf(e) !== "ENOENT" && codeOf(e) !== "ESRCH") return null
    }
  }
  return false
}
