/**
 * Benchmark child processes: running one and taking the JSON line it prints last
 * (the parent's side), and for the children themselves, loading the packages from
 * their build and reading the process's memory.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as v8 from "node:v8"
import { nodeEnv } from "./adapters.ts"

/** Runs `command args…` and resolves with the parsed last line of its stdout; rejects on a non-zero exit. */
export const lastJsonLine = <A>(label: string, command: string, args: ReadonlyArray<string>): Promise<A> =>
  new Promise((resolve, reject) => {
    const p = spawn(command, [...args], { env: nodeEnv(), stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    let err = ""
    p.stdout.on("data", (d) => (out += d))
    p.stderr.on("data", (d) => (err += d))
    p.on("error", reject)
    p.on("close", (code) => {
      if (code !== 0) return reject(new Error(`${label} child exited ${code}: ${err.slice(0, 400)}`))
      try {
        resolve(JSON.parse(out.trim().split("\n").pop()!) as A)
      } catch (error) {
        reject(error)
      }
    })
  })

type Core = typeof import("../../packages/core/src/index.ts")
type NodePackage = typeof import("../../packages/node/src/index.ts")

const distEntry = (name: string) => path.resolve(import.meta.dirname, "..", "..", "packages", name, "dist", "index.js")

/** Whether `pnpm build` has produced the core and node packages' `dist/`. */
export const packagesBuilt = (): boolean => ["core", "node"].every((name) => fs.existsSync(distEntry(name)))

/**
 * The core and node packages as they are published: their built `dist/`, where the
 * node package's own imports of core resolve to the same copy. Importing core's
 * sources beside the node package would load a second core: the service would hash
 * with `@noble/hashes` while the adapter installs `node:crypto` in the other copy,
 * and Node's TypeScript stripper would keep its own memory in the process. Types
 * come from the sources; the specifiers are computed so that nothing here needs
 * the build to type-check.
 */
export const loadBuiltPackages = async (): Promise<{ readonly core: Core; readonly node: NodePackage }> => {
  if (!packagesBuilt()) throw new Error("packages/core/dist or packages/node/dist is missing: run pnpm build first")
  const core = (await import(distEntry("core"))) as Core
  const node = (await import(distEntry("node"))) as NodePackage
  return { core, node }
}

/** The resident memory of this process, split by owner, after a forced collection if `gc` is exposed. */
export interface MemoryReading {
  /** Resident set size (`process.memoryUsage().rss`). */
  readonly rss: number
  /** The highest RSS the process ever had (`VmHWM`). */
  readonly rssPeak: number
  readonly heapUsed: number
  readonly heapTotal: number
  readonly external: number
  readonly arrayBuffers: number
  /** V8's committed heap (`total_physical_size`). */
  readonly v8Physical: number
  readonly v8Malloced: number
  /** Resident bytes of V8's regular heap pages (256 KiB anonymous read-write mappings). */
  readonly v8Pages: number
  /**
   * Of those, the pages V8 keeps committed in its page pool after a collection
   * freed them: `v8Pages` minus V8's committed paged spaces. Neither `heapTotal` nor
   * the heap statistics count them; RSS does.
   */
  readonly v8Pooled: number
  readonly rssAnon: number
  readonly rssFile: number
  readonly gc: boolean
}

const readProc = (file: string): string => {
  try {
    return fs.readFileSync(file, "utf8")
  } catch {
    return ""
  }
}

const v8PagesResident = (): number => {
  let total = 0
  let v8Page = false
  for (const line of readProc("/proc/self/smaps").split("\n")) {
    const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (m !== null) {
      v8Page = parseInt(m[2]!, 16) - parseInt(m[1]!, 16) === 256 * 1024 && m[3] === "rw-p" && m[4] === ""
      continue
    }
    if (v8Page && line.startsWith("Rss:")) total += Number(line.split(/\s+/)[1]) * 1024
  }
  return total
}

/**
 * Reads this process's memory (Linux `/proc`; the `/proc` fields are NaN elsewhere)
 * after three forced collections. With `reduce`, the collection is V8's
 * memory-reducing one (`gc({ flavor: "last-resort" })`, what V8's memory reducer
 * does on its own once the process has been idle for a while): it also gives the
 * pooled pages back to the system, so the reading is what stays resident, not the
 * heap's high-water mark.
 */
export const readMemory = (options?: { readonly reduce?: boolean }): MemoryReading => {
  const gc = globalThis.gc
  for (let i = 0; i < 3; i++) {
    if (options?.reduce === true) gc?.({ type: "major", execution: "sync", flavor: "last-resort" })
    else gc?.()
  }
  const usage = process.memoryUsage()
  const heap = v8.getHeapStatistics()
  const paged = v8.getHeapSpaceStatistics()
    .filter((s) => !s.space_name.includes("large_object"))
    .reduce((sum, s) => sum + s.physical_space_size, 0)
  const pages = v8PagesResident()
  const status = readProc("/proc/self/status")
  const kb = (key: string) => Number(status.match(new RegExp(`^${key}:\\s*(\\d+) kB`, "m"))?.[1] ?? NaN) * 1024
  return {
    rss: usage.rss,
    rssPeak: kb("VmHWM"),
    heapUsed: usage.heapUsed,
    heapTotal: usage.heapTotal,
    external: usage.external,
    arrayBuffers: usage.arrayBuffers,
    v8Physical: heap.total_physical_size,
    v8Malloced: heap.malloced_memory,
    v8Pages: pages,
    v8Pooled: Math.max(0, pages - paged),
    rssAnon: kb("RssAnon"),
    rssFile: kb("RssFile"),
    gc: gc !== undefined
  }
}
