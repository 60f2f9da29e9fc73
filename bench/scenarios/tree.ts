/**
 * `tree.append`: the cost of keeping the session's RFC 6962 tree (docs/DESIGN.md §14)
 * as entries are recorded. Records per second through `SessionJournal.record` on the
 * in-memory adapter, one caller, each recorded entry then appended to a compact range
 * (its leaf hash and the merges its size carries: what `Transparency.signedHeads` does
 * per entry, without the signatures, which come once per batch), against the same
 * records without the tree. Interleaved rounds, as `memory.record`.
 */
import * as Effect from "effect/Effect"
import { Merkle, Persistence } from "../../packages/core/src/index.ts"
import { journalRuntime, params, recordSequential, serviceOf } from "../lib/env.ts"
import { type Figure, interleave, type RunOptions, type Scenario, throughputFigure } from "../lib/harness.ts"

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const n = options.quick ? 3_000 : 20_000
  const rounds = options.quick ? 3 : 7
  const rt = journalRuntime(Persistence.layerMemory())
  try {
    const journal = await serviceOf(rt)
    let offset = 0
    const tree = Merkle.builder()
    const samples = await interleave(
      rounds,
      async () => {
        const start = offset
        offset += n
        const ms = await rt.runPromise(Effect.gen(function*() {
          const t0 = performance.now()
          for (let i = 0; i < n; i++) {
            const entry = yield* journal.record("bench-tree", params(start + i))
            tree.appendEntryHash(entry.entry_hash)
          }
          return performance.now() - t0
        }))
        return { ops: n, ms }
      },
      async () => {
        const ms = await rt.runPromise(recordSequential(journal, "bench-tree-plain", n, offset))
        offset += n
        return { ops: n, ms }
      },
      { log: options.log, label: "tree.append" }
    )
    return [
      throughputFigure(
        "tree.append",
        "records/s",
        "memory.record without the tree (same service, same records)",
        samples,
        { op: ">=", target: 0.9 },
        `${rounds} rounds × ${n.toLocaleString("en-US")} records, the tree kept over every entry (${
          tree.size().toLocaleString("en-US")
        } leaves at the end)`
      )
    ]
  } finally {
    await rt.dispose()
  }
}

/** The scenario. */
export const treeAppend: Scenario = { name: "tree.append", figures: ["tree.append"], run }
