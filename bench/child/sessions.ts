/**
 * Child process of `fs.sessions.touched`: touches `count` sessions once each (one
 * record per session, 8 at a time) through one SessionJournal with default options
 * on the filesystem adapter, sampling the open descriptors (/proc/self/fd) and the
 * RSS as it goes; prints one JSON line. Run it under `ulimit -n 1024`, with
 * `--expose-gc`, after `pnpm build`: it runs the packages from their `dist/`, as
 * they are published (`loadBuiltPackages`).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as fs from "node:fs"
import { loadBuiltPackages, readMemory } from "../lib/child.ts"
import { toolParams } from "../lib/params.ts"

const [root, countText] = process.argv.slice(2)
const count = Number(countText)
if (root === undefined || !Number.isInteger(count)) {
  process.stderr.write("usage: sessions.ts <root> <count>\n")
  process.exit(2)
}
const { core, node } = await loadBuiltPackages()
const params = toolParams
const fds = () => fs.readdirSync("/proc/self/fd").length
const gc = (globalThis as { gc?: () => void }).gc
const rt = ManagedRuntime.make(core.SessionJournal.layer().pipe(Layer.provide(node.NodePersistence.layer({ root }))))
const journal = await rt.runPromise(Effect.service(core.SessionJournal.SessionJournal))
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
const end = readMemory()
const reduced = readMemory({ reduce: true })
process.stdout.write(
  JSON.stringify({
    touched: count,
    ms,
    maxFds,
    rssAt1000,
    rssAtEnd: end.rss,
    fdsAtEnd: fds(),
    end,
    reduced,
    sha256: core.Sha256.implementation()
  }) + "\n"
)
process.exit(0)
