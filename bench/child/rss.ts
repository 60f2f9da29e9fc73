/**
 * Child process of `memory.rss`: records `count` tool calls on one session of the
 * filesystem adapter (default caps, 64 concurrent callers so the run is bounded by
 * the journal, not by fdatasync), collects garbage, and prints its resident set
 * size as one JSON line. Run with `--expose-gc`.
 */
import * as fs from "node:fs"
import * as v8 from "node:v8"
import * as Effect from "effect/Effect"
import { loadNode } from "../lib/adapters.ts"
import { journalRuntime, params, serviceOf } from "../lib/env.ts"

const [root, countText] = process.argv.slice(2)
const count = Number(countText)
const node = await loadNode()
if (!node.ok || root === undefined || !Number.isInteger(count)) {
  process.stderr.write(`usage: rss.ts <root> <count> (${node.ok ? "bad arguments" : node.why})\n`)
  process.exit(2)
}
const rt = journalRuntime(node.value(root))
const journal = await serviceOf(rt)
const callers = 64
const per = Math.ceil(count / callers)
await rt.runPromise(Effect.forEach(
  Array.from({ length: callers }, (_, c) => c),
  (c) =>
    Effect.gen(function*() {
      for (let i = 0; i < per && c * per + i < count; i++) yield* journal.record("bench-rss", params(c * per + i))
    }),
  { concurrency: "unbounded", discard: true }
))
const state = await rt.runPromise(journal.state("bench-rss"))
const gc = (globalThis as { gc?: () => void }).gc
for (let i = 0; i < 3; i++) gc?.()
const usage = process.memoryUsage()
const heap = v8.getHeapStatistics()
// Resident memory by kind (Linux): anonymous (heaps, allocator), file-backed (the
// mapped binary and libraries), shared memory.
const status = (() => {
  try {
    return fs.readFileSync("/proc/self/status", "utf8")
  } catch {
    return ""
  }
})()
const kb = (key: string) => Number(status.match(new RegExp(`^${key}:\\s*(\\d+) kB`, "m"))?.[1] ?? NaN) * 1024
process.stdout.write(
  JSON.stringify({
    count: state.next_sequence,
    rss: usage.rss,
    heapUsed: usage.heapUsed,
    heapTotal: usage.heapTotal,
    external: usage.external,
    arrayBuffers: usage.arrayBuffers,
    v8Physical: heap.total_physical_size,
    v8Malloced: heap.malloced_memory,
    rssAnon: kb("RssAnon"),
    rssFile: kb("RssFile"),
    gc: gc !== undefined
  }) + "\n"
)
await rt.dispose()
