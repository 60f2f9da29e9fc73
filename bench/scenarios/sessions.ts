/**
 * `fs.sessions.touched`: one process touches many sessions once each (one record
 * per session, 8 at a time) on the filesystem adapter with the service's default
 * options, under `ulimit -n 1024`. Idle release and the bound on open sessions
 * keep descriptors and memory flat; the goal is on RSS growth from 1,000 sessions
 * to the end (≤ 64 MiB). The rate is compared with a raw loop doing the least a
 * new durable session needs: a directory, one file with one line, fdatasync, and
 * an fsync of the directory, 8 at a time.
 */
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { loadNode } from "../lib/adapters.ts"
import { lastJsonLine, packagesBuilt } from "../lib/child.ts"
import type { MemoryReading } from "../lib/child.ts"
import { withTempDir } from "../lib/env.ts"
import type { Figure, RunOptions, Scenario } from "../lib/harness.ts"
import { meets, notRun } from "../lib/harness.ts"

const GOAL = { op: "<=", target: 64, on: "RSS growth MiB" } as const
const MiB = 2 ** 20

interface ChildResult {
  readonly touched: number
  readonly ms: number
  readonly maxFds: number
  readonly rssAt1000: number
  readonly rssAtEnd: number
  readonly fdsAtEnd: number
  readonly end: MemoryReading
  readonly reduced: MemoryReading
  readonly sha256: string
}

const child = (root: string, count: number): Promise<ChildResult> =>
  lastJsonLine("sessions", "sh", [
    "-c",
    `ulimit -n 1024 && exec "$0" "$@"`,
    process.execPath,
    "--expose-gc",
    path.join(import.meta.dirname, "..", "child", "sessions.ts"),
    root,
    String(count)
  ])

/** The raw baseline: per session a directory, one synced file, a synced directory, 8 at a time; sessions/s. */
export const rawTouch = async (root: string, count: number): Promise<number> => {
  const line = Buffer.from(`{"k":"open","v":1,"base":0}\n`)
  let next = 0
  const t0 = performance.now()
  const worker = async () => {
    for (;;) {
      const i = next++
      if (i >= count) return
      const dir = path.join(root, `s-${i}`)
      await fsp.mkdir(dir, { mode: 0o700 })
      const file = await fsp.open(path.join(dir, "00000000000000000000.jsonl"), "wx", 0o600)
      await file.write(line)
      await file.datasync()
      await file.close()
      const d = await fsp.open(dir, "r")
      await d.sync()
      await d.close()
    }
  }
  await Promise.all(Array.from({ length: 8 }, worker))
  return count / ((performance.now() - t0) / 1000)
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const count = options.quick ? 5_000 : 100_000
  const baselineName = "raw: mkdir + one synced file + synced dir per session, 8 at a time"
  const node = await loadNode()
  if (!node.ok) return [notRun("fs.sessions.touched", "sessions/s", baselineName, GOAL, node.why)]
  if (!packagesBuilt()) {
    return [notRun("fs.sessions.touched", "sessions/s", baselineName, GOAL, "packages/*/dist is missing (pnpm build)")]
  }
  const rawRate = await withTempDir("sessions-raw", (dir) => rawTouch(dir, Math.min(count, 5_000)))
  options.log(`  raw: ${rawRate.toFixed(0)} sessions/s`)
  const r = await withTempDir("sessions", (dir) => child(path.join(dir, "journal"), count))
  const rate = r.touched / (r.ms / 1000)
  const growth = (r.rssAtEnd - r.rssAt1000) / MiB
  options.log(`  journal: ${rate.toFixed(0)} sessions/s, max fds ${r.maxFds}, RSS growth ${growth.toFixed(1)} MiB`)
  return [{
    name: "fs.sessions.touched",
    value: rate,
    unit: "sessions/s",
    baseline: baselineName,
    baseline_value: rawRate,
    ratio: rate / rawRate,
    goal: GOAL,
    goal_value: growth,
    met: meets(GOAL, growth),
    note: `${r.touched.toLocaleString("en-US")} sessions under ulimit -n 1024, default options (idle 30 s, ` +
      `at most 256 open); open descriptors at most ${r.maxFds} (${r.fdsAtEnd} at the end); ` +
      `RSS ${(r.rssAt1000 / MiB).toFixed(1)} MiB after 1,000 sessions, ${
        (r.rssAtEnd / MiB).toFixed(1)
      } MiB at the end ` +
      `(heap used ${(r.end.heapUsed / MiB).toFixed(1)} MiB, V8 heap pages kept in its page pool ` +
      `${(r.end.v8Pooled / MiB).toFixed(1)} MiB, highest RSS ${(r.end.rssPeak / MiB).toFixed(1)} MiB; ` +
      `${(r.reduced.rss / MiB).toFixed(1)} MiB after a memory-reducing collection); ` +
      `built packages (dist), SHA-256 ${r.sha256}`
  }]
}

/** `fs.sessions.touched`. */
export const fsSessionsTouched: Scenario = { name: "fs.sessions.touched", figures: ["fs.sessions.touched"], run }
