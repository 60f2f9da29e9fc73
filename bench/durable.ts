/**
 * The physical ceilings of a durable line write on this machine: every variant of
 * `lib/durable.ts` measured in the same interleaved rounds, each as lines/s and as
 * a ratio to the `fs.record.sequential` baseline (write + fdatasync, appending, on
 * the main thread, one line per sync). Usage:
 *
 *   node bench/durable.ts [--quick] [--parallel]
 *
 * `--parallel` measures 64 concurrent writers (one file each) instead.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { label, runParallelVariant, runVariant, type Variant } from "./lib/durable.ts"
import { makeEntries, segmentLine, withTempDir } from "./lib/env.ts"
import { fmt, interleaveMany, median, rate, type Sample } from "./lib/harness.ts"

const args = process.argv.slice(2)
const quick = args.includes("--quick")
const parallel = args.includes("--parallel")
const encoder = new TextEncoder()
const log = (line: string) => process.stderr.write(line + "\n")

const BASE: Variant = { sync: "fdatasync", place: "append", thread: "main", perSync: 1 }
const sequential: ReadonlyArray<Variant> = [
  BASE,
  { sync: "dsync", place: "append", thread: "main", perSync: 1 },
  { sync: "fdatasync", place: "overwrite", thread: "main", perSync: 1 },
  { sync: "dsync", place: "overwrite", thread: "main", perSync: 1 },
  { sync: "dsync", place: "sparse", thread: "main", perSync: 1 },
  { sync: "fdatasync", place: "append", thread: "pool", perSync: 1 },
  { sync: "dsync", place: "append", thread: "pool", perSync: 1 },
  { sync: "fdatasync", place: "overwrite", thread: "pool", perSync: 1 },
  { sync: "dsync", place: "overwrite", thread: "pool", perSync: 1 },
  { sync: "fdatasync", place: "append", thread: "main", perSync: 64 },
  { sync: "fdatasync", place: "overwrite", thread: "main", perSync: 64 },
  { sync: "dsync", place: "overwrite", thread: "pool", perSync: 64 }
]
const concurrent: ReadonlyArray<Variant> = [
  { sync: "fdatasync", place: "append", thread: "pool", perSync: 1 },
  { sync: "dsync", place: "append", thread: "pool", perSync: 1 },
  { sync: "fdatasync", place: "overwrite", thread: "pool", perSync: 1 },
  { sync: "dsync", place: "overwrite", thread: "pool", perSync: 1 }
]

await withTempDir("durable", async (dir) => {
  const n = quick ? 300 : 1500
  const rounds = quick ? 3 : 7
  const lines = makeEntries(Math.max(n, 64 * 20)).map((e) => encoder.encode(segmentLine(e)))
  let k = 0
  const fresh = () => {
    const f = path.join(dir, `f-${k++}`)
    return f
  }
  const variants = parallel ? concurrent : sequential
  const sides = variants.map((v) => ({
    name: label(v),
    run: async (): Promise<Sample> => {
      if (parallel) {
        const files = Array.from({ length: 64 }, fresh)
        const s = await runParallelVariant(files, lines, quick ? 5 : 40, v)
        for (const f of files) fs.rmSync(f)
        return s
      }
      const f = fresh()
      const count = v.perSync === 1 ? n : Math.min(lines.length, n * 8)
      const s = await runVariant(f, lines.slice(0, count), v)
      fs.rmSync(f)
      return s
    }
  }))
  const s = await interleaveMany(rounds, sides, { log, label: "durable" })
  const base = s[sides[0]!.name]!
  process.stdout.write(
    `| variant (sync/place/thread/lines per sync) | lines/s | ratio to ${sides[0]!.name} |\n|---|---|---|\n`
  )
  for (const side of sides) {
    const mine = s[side.name]!
    const ratio = median(mine.map((m, i) => rate(m) / rate(base[i]!)))
    process.stdout.write(`| ${side.name} | ${fmt(median(mine.map(rate)))} | ${ratio.toFixed(2)} |\n`)
  }
})
