/**
 * Child process of `fs.sessions.touched`: touches `count` sessions once each (one
 * record per session, 8 at a time) through one SessionJournal with default options
 * on the filesystem adapter, sampling the open descriptors (/proc/self/fd) and the
 * RSS as it goes; prints one JSON line. Run it under `ulimit -n 1024`, with
 * `--expose-gc`.
 */
import * as fs from "node:fs"
import * as Effect from "effect/Effect"
import { loadNode } from "../lib/adapters.ts"
import { journalRuntime, params, serviceOf } from "../lib/env.ts"

const [root, countText] = process.argv.slice(2)
const count = Number(countText)
const node = await loadNode()
if (!node.ok || root === undefined || !Number.isInteger(count)) {
  process.stderr.write(`usage: sessions.ts <root> <count> (${node.ok ? "bad arguments" : node.why})\n`)
  process.exit(2)
}
const fds = () => fs.readdirSync("/proc/self/fd").length
const gc = (globalThis as { gc?: () => void }).gc
const rt = journalRuntime(node.value(root))
const journal = await serviceOf(rt)
let maxFds = fds()
let rssAt1000 = 0
const t0 = performance.now()
await rt.runPromise(Effect.forEach(
  Array.from({ length: count }, (_, i) => i),
  (i) =>
    Effect.gen(function*() {
      yield* journal.record(`s-${i}`, params(i))
      if (i % 100 === 0) maxFds = Math.max(maxFds, fds())
      if (i === 1000) {
        gc?.()
        rssAt1000 = process.memoryUsage().rss
      }
    }),
  { concurrency: 8, discard: true }
))
const ms = performance.now() - t0
for (let i = 0; i < 3; i++) gc?.()
process.stdout.write(
  JSON.stringify({ touched: count, ms, maxFds, rssAt1000, rssAtEnd: process.memoryUsage().rss, fdsAtEnd: fds() }) + "\n"
)
process.exit(0)
