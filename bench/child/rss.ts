/**
 * Child process of `memory.rss`: records `count` tool calls on one session of the
 * filesystem adapter (default caps, 64 concurrent callers so the run is bounded by
 * the journal, not by fdatasync), collects garbage, and prints its resident set
 * size as one JSON line. Run with `--expose-gc`, after `pnpm build`: it runs the
 * packages from their `dist/`, as they are published (`loadBuiltPackages`).
 *
 *   node --expose-gc bench/child/rss.ts <root> <count> [<mark>,<mark>,…] [<idle seconds>]
 *
 * With marks, it also prints a line at each mark (after forced collections, which
 * the run without marks does not have), to show where the resident set stops
 * growing. The last line also carries `reduced`: the same reading after V8's
 * memory-reducing collection. With idle seconds, the child waits that long after
 * the last record before its last reading and prints its RSS once a second
 * (stderr): V8's memory reducer gives the pooled pages back by itself once it
 * judges the process idle.
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import { loadBuiltPackages, readMemory } from "../lib/child.ts"
import { toolParams } from "../lib/params.ts"

const [root, countText, marksText, idleText] = process.argv.slice(2)
const count = Number(countText)
const marks = (marksText ?? "").split(",").filter((m) => m !== "").map(Number)
const idle = Number(idleText ?? 0)
if (
  root === undefined || !Number.isInteger(count) || !marks.every((m) => Number.isInteger(m) && m < count) ||
  !Number.isInteger(idle)
) {
  process.stderr.write("usage: rss.ts <root> <count> [<mark>,<mark>,…] [<idle seconds>] (marks below count)\n")
  process.exit(2)
}
const { core, node } = await loadBuiltPackages()

const params = toolParams

const rt = ManagedRuntime.make(core.SessionJournal.layer().pipe(Layer.provide(node.NodePersistence.layer({ root }))))
const journal = await rt.runPromise(Effect.service(core.SessionJournal.SessionJournal))
const MiB = 2 ** 20
const callers = 64
let done = 0
for (const target of [...marks, count]) {
  const todo = target - done
  const base = done
  const per = Math.ceil(todo / callers)
  await rt.runPromise(Effect.forEach(
    Array.from({ length: callers }, (_, c) => c),
    (c) =>
      Effect.gen(function*() {
        for (let i = 0; i < per && c * per + i < todo; i++) {
          yield* journal.record("bench-rss", params(base + c * per + i))
        }
      }),
    { concurrency: "unbounded", discard: true }
  ))
  done = target
  if (target === count) {
    for (let s = 1; s <= idle; s++) {
      await new Promise((resolve) => setTimeout(resolve, 1000))
      process.stderr.write(`idle ${s} s: RSS ${(process.memoryUsage().rss / MiB).toFixed(1)} MiB\n`)
    }
  }
  const state = await rt.runPromise(journal.state("bench-rss"))
  const m = readMemory()
  if (target !== count) {
    process.stderr.write(
      `${target}: RSS ${(m.rss / MiB).toFixed(1)} MiB, highest ${(m.rssPeak / MiB).toFixed(1)}, V8 pages ` +
        `${(m.v8Pages / MiB).toFixed(1)} (pooled ${(m.v8Pooled / MiB).toFixed(1)}), heap used ${
          (m.heapUsed / MiB).toFixed(1)
        }\n`
    )
  }
  // The figure is read after ordinary full collections; then, at the end only (it
  // changes what the heap holds for the records after it), once more after a
  // memory-reducing one.
  const reduced = target === count ? readMemory({ reduce: true }) : undefined
  process.stdout.write(
    JSON.stringify({ count: state.next_sequence, ...m, reduced, sha256: core.Sha256.implementation() }) + "\n"
  )
}
await rt.dispose()
