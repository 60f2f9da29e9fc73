/**
 * `memory.rss`: the resident set size of a process that has recorded 1,000,000
 * entries (default caps) against one that has recorded 10,000, each in its own
 * child process running the built packages (`dist/`), measured after a full
 * garbage collection. The journal keeps a bounded ring and bounded counters, so the
 * difference must stay small. The figure is the RSS after ordinary full
 * collections; the goal is on the growth of what stays resident after a
 * memory-reducing collection (`gc({ flavor: "last-resort" })`, V8's "Mark-Compact
 * (reduce)", which also gives back the heap pages V8 keeps in its page pool): the
 * first reading includes the heap's high-water mark, which depends on how far V8
 * let the old generation grow between collections, not on what the journal keeps.
 * The note splits the resident set: V8's own heap statistics, the pooled pages
 * (which the statistics leave out), the highest RSS the child had.
 */
import * as path from "node:path"
import { loadNode } from "../lib/adapters.ts"
import { lastJsonLine, packagesBuilt } from "../lib/child.ts"
import type { MemoryReading } from "../lib/child.ts"
import { withTempDir } from "../lib/env.ts"
import type { Figure, RunOptions, Scenario } from "../lib/harness.ts"
import { meets, notRun } from "../lib/harness.ts"

const GOAL = { op: "<=", target: 8, on: "reduced growth MiB" } as const
const MiB = 2 ** 20
const mib = (bytes: number) => (bytes / MiB).toFixed(1)

interface ChildResult {
  readonly count: number
  readonly rss: number
  readonly heapUsed: number
  readonly heapTotal: number
  readonly external: number
  readonly arrayBuffers: number
  readonly v8Physical: number
  readonly v8Malloced: number
  readonly v8Pages: number
  readonly v8Pooled: number
  readonly rssPeak: number
  readonly sha256: string
  readonly gc: boolean
  readonly reduced: MemoryReading
  readonly ms: number
}

const child = async (root: string, count: number): Promise<ChildResult> => {
  const t0 = performance.now()
  const script = path.join(import.meta.dirname, "..", "child", "rss.ts")
  const result = await lastJsonLine<Omit<ChildResult, "ms">>("rss", process.execPath, [
    "--expose-gc",
    script,
    root,
    String(count)
  ])
  return { ...result, ms: performance.now() - t0 }
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const small = 10_000
  const large = options.quick ? 30_000 : 1_000_000
  const baselineName = `RSS after ${small.toLocaleString("en-US")} records`
  const node = await loadNode()
  if (!node.ok) return [notRun("memory.rss", "MiB", baselineName, GOAL, node.why)]
  if (!packagesBuilt()) {
    return [notRun("memory.rss", "MiB", baselineName, GOAL, "packages/*/dist is missing (pnpm build)")]
  }
  // One pair per run, baseline first then subject: each child is a fresh process, so
  // order does not leak state; what noise there is (other load) does not change RSS much.
  const base = await withTempDir("rss-small", (dir) => child(dir, small))
  options.log(`  ${small} records: RSS ${(base.rss / MiB).toFixed(1)} MiB (${(base.ms / 1000).toFixed(1)} s)`)
  const big = await withTempDir("rss-large", (dir) => child(dir, large))
  options.log(`  ${large} records: RSS ${(big.rss / MiB).toFixed(1)} MiB (${(big.ms / 1000).toFixed(1)} s)`)
  if (base.count !== small || big.count !== large) throw new Error(`children recorded ${base.count} / ${big.count}`)
  const growth = (big.rss - base.rss) / MiB
  const reducedGrowth = (big.reduced.rss - base.reduced.rss) / MiB
  return [{
    name: "memory.rss",
    value: big.rss / MiB,
    unit: "MiB",
    baseline: baselineName,
    baseline_value: base.rss / MiB,
    ratio: big.rss / base.rss,
    goal: GOAL,
    goal_value: reducedGrowth,
    met: meets(GOAL, reducedGrowth),
    note:
      `subject: RSS after ${large.toLocaleString("en-US")} records (filesystem adapter, default caps, 64 callers), ` +
      `growth ${growth.toFixed(1)} MiB; ` +
      `heap used ${mib(base.heapUsed)} → ${mib(big.heapUsed)} MiB, heap total ${mib(base.heapTotal)} → ${
        mib(big.heapTotal)
      } MiB, ` +
      `V8 physical ${mib(base.v8Physical)} → ${mib(big.v8Physical)} MiB, external ${mib(base.external)} → ${
        mib(big.external)
      } MiB; ` +
      `V8 heap pages resident ${mib(base.v8Pages)} → ${mib(big.v8Pages)} MiB, of which kept in V8's page pool ` +
      `${mib(base.v8Pooled)} → ${mib(big.v8Pooled)} MiB; highest RSS of the subject ${mib(big.rssPeak)} MiB; ` +
      `after a memory-reducing collection (what V8 does itself once the process idles; the goal's reading) RSS ${
        mib(base.reduced.rss)
      } → ` +
      `${mib(big.reduced.rss)} MiB (growth ${reducedGrowth.toFixed(1)} MiB), heap used ` +
      `${mib(base.reduced.heapUsed)} → ${mib(big.reduced.heapUsed)} MiB, V8 heap pages resident ${
        mib(base.reduced.v8Pages)
      } → ${mib(big.reduced.v8Pages)} MiB, external ${mib(base.reduced.external)} → ${
        mib(big.reduced.external)
      } MiB; ` +
      `built packages (dist), SHA-256 ${big.sha256}; gc ${big.gc ? "forced" : "not exposed"}`
  }]
}

/** The scenario. */
export const memoryRss: Scenario = { name: "memory.rss", figures: ["memory.rss"], run }
