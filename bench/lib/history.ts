/**
 * A long session on the filesystem adapter, built once per run and shared by the
 * scenarios that read history (`fs.open.checkpointed`, `fs.replay`, `cli.verify`):
 * written through the real adapter with `writeAll` batches (so its segments and
 * checkpoints are exactly what the adapter produces), in a temp dir removed when the
 * process exits.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import * as Effect from "effect/Effect"
import type { SessionJournal } from "../../packages/core/src/index.ts"
import type { FsLayer } from "./adapters.ts"
import { journalRuntime, params, removeDir, serviceOf, tempDir } from "./env.ts"

/** A built history: where it is and how many entries it holds. */
export interface History {
  readonly root: string
  readonly id: string
  readonly entries: number
  /** Segment files of the session, in order. */
  readonly segments: ReadonlyArray<string>
  readonly bytes: number
  readonly buildMs: number
}

const built = new Map<number, Promise<History>>()
const dirs: Array<string> = []
process.on("exit", () => {
  for (const d of dirs) removeDir(d)
})

const BATCH = 5000

/** The shared history of `entries` entries (built on first use). */
export const history = (layer: FsLayer, entries: number, log: (line: string) => void): Promise<History> => {
  let h = built.get(entries)
  if (h === undefined) {
    h = build(layer, entries, log)
    built.set(entries, h)
  }
  return h
}

const build = async (layer: FsLayer, entries: number, log: (line: string) => void): Promise<History> => {
  const root = tempDir("history")
  dirs.push(root)
  const id = "bench-history"
  log(`  building a ${entries.toLocaleString("en-US")}-entry session (writeAll batches of ${BATCH})`)
  const t0 = performance.now()
  const rt = journalRuntime(layer(root))
  try {
    const journal = await serviceOf(rt)
    await rt.runPromise(Effect.gen(function*() {
      for (let from = 0; from < entries; from += BATCH) {
        const items: Array<SessionJournal.WriteItem> = []
        for (let i = from; i < Math.min(entries, from + BATCH); i++) items.push({ _tag: "Tool", params: params(i) })
        yield* journal.writeAll(id, items)
      }
    }))
  } finally {
    await rt.dispose()
  }
  const buildMs = performance.now() - t0
  const dir = path.join(root, id)
  const segments = fs.readdirSync(dir).filter((f) => /^\d{20}\.jsonl$/.test(f)).sort().map((f) => path.join(dir, f))
  const bytes = segments.reduce((n, f) => n + fs.statSync(f).size, 0)
  log(`  built in ${(buildMs / 1000).toFixed(1)} s: ${segments.length} segments, ${(bytes / 2 ** 20).toFixed(0)} MiB`)
  return { root, id, entries, segments, bytes, buildMs }
}
