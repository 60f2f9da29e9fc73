/**
 * `memory.open_sessions`: the heap of 64 open sessions on the filesystem adapter,
 * each with 4,096 chat messages of about 2 KB (default caps and window), against
 * the same process with one message per session: what a chat server keeps in
 * memory per open session. A session keeps its counters, the hashes of its
 * retained entries and a byte-budgeted window of recent entries, not the entries;
 * the goal is on the heap's growth (≤ 64 MiB, where a ring of whole entries holds
 * about 512 MiB of messages), and every checkpoint must stay under 1 MB. Runs in a
 * child process on the built packages (`dist/`), heap read after forced collections.
 */
import * as path from "node:path"
import { loadNode } from "../lib/adapters.ts"
import { lastJsonLine, packagesBuilt } from "../lib/child.ts"
import type { MemoryReading } from "../lib/child.ts"
import { withTempDir } from "../lib/env.ts"
import type { Figure, RunOptions, Scenario } from "../lib/harness.ts"
import { meets, notRun } from "../lib/harness.ts"

const NAME = "memory.open_sessions"
const GOAL = { op: "<=", target: 64, on: "heap growth MiB" } as const
const CHECKPOINT_LIMIT = 1_000_000
const MiB = 2 ** 20
const mib = (bytes: number) => (bytes / MiB).toFixed(1)

interface ChildResult {
  readonly sessions: number
  readonly entries: number
  readonly retained: number
  readonly windowEntries: number
  readonly windowBytes: number
  readonly before: MemoryReading
  readonly after: MemoryReading
  readonly checkpoints: ReadonlyArray<number>
  readonly ms: number
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const sessions = 64
  const entries = options.quick ? 512 : 4096
  const baselineName = "heap with one message per session"
  const node = await loadNode()
  if (!node.ok) return [notRun(NAME, "MiB", baselineName, GOAL, node.why)]
  if (!packagesBuilt()) return [notRun(NAME, "MiB", baselineName, GOAL, "packages/*/dist is missing (pnpm build)")]
  const script = path.join(import.meta.dirname, "..", "child", "openSessions.ts")
  const r = await withTempDir(
    "open-sessions",
    (dir) =>
      lastJsonLine<ChildResult>(NAME, process.execPath, ["--expose-gc", script, dir, String(sessions), String(entries)])
  )
  if (r.entries !== sessions * entries) {
    throw new Error(`the child stored ${r.entries} entries, not ${sessions * entries}`)
  }
  const growth = (r.after.heapUsed - r.before.heapUsed) / MiB
  const largest = Math.max(...r.checkpoints)
  const checkpointsMet = r.checkpoints.every((b) => b > 0 && b < CHECKPOINT_LIMIT)
  options.log(
    `  ${sessions} × ${entries}: heap ${mib(r.before.heapUsed)} → ${
      mib(r.after.heapUsed)
    } MiB, largest checkpoint ${largest} bytes (${(r.ms / 1000).toFixed(1)} s)`
  )
  const met = meets(GOAL, growth)
  return [{
    name: NAME,
    value: r.after.heapUsed / MiB,
    unit: "MiB",
    baseline: baselineName,
    baseline_value: r.before.heapUsed / MiB,
    ratio: r.after.heapUsed / r.before.heapUsed,
    goal: GOAL,
    goal_value: growth,
    met: met === null ? null : met && checkpointsMet,
    note:
      `subject: heap used with ${sessions} open sessions of ${
        entries.toLocaleString("en-US")
      } chat messages of about 2 KB ` +
      `(filesystem adapter, default caps, window budget ${r.windowBytes} bytes per session), after forced collections; ` +
      `growth ${growth.toFixed(1)} MiB (${(growth * MiB / sessions / 1024).toFixed(0)} KiB per session) for ` +
      `${mib(r.entries * 2048)} MiB of messages; ${r.retained.toLocaleString("en-US")} entries retained by hash, ` +
      `${r.windowEntries.toLocaleString("en-US")} in the windows; RSS ${mib(r.before.rss)} → ${
        mib(r.after.rss)
      } MiB; ` +
      `checkpoints ${Math.min(...r.checkpoints)}–${largest} bytes (goal < ${
        CHECKPOINT_LIMIT.toLocaleString("en-US")
      } each: ` +
      `${checkpointsMet ? "met" : "not met"})`
  }]
}

/** The scenario. */
export const memoryOpenSessions: Scenario = { name: NAME, figures: [NAME], run }
