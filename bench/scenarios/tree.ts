/**
 * `tree.append`: the cost of keeping the session's RFC 6962 tree (docs/DESIGN.md §14)
 * as entries are recorded. Records per second through `SessionJournal.record` on the
 * in-memory adapter, one caller, with the service's default (each state keeps the
 * tree's compact range, `JournalState.tree`: a leaf hash and on average one node hash
 * per entry, and an array of at most one hash per bit of the size), against the same
 * service with `keepTree: false`. Interleaved rounds, as `memory.record`.
 */
import { Persistence } from "../../packages/core/src/index.ts"
import { journalRuntime, recordSequential, serviceOf } from "../lib/env.ts"
import { type Figure, interleave, type RunOptions, type Scenario, throughputFigure } from "../lib/harness.ts"

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const n = options.quick ? 3_000 : 20_000
  const rounds = options.quick ? 3 : 7
  const withTree = journalRuntime(Persistence.layerMemory())
  const without = journalRuntime(Persistence.layerMemory(), { keepTree: false })
  try {
    const kept = await serviceOf(withTree)
    const plain = await serviceOf(without)
    let keptOffset = 0
    let plainOffset = 0
    const samples = await interleave(
      rounds,
      async () => {
        const ms = await withTree.runPromise(recordSequential(kept, "bench-tree", n, keptOffset))
        keptOffset += n
        return { ops: n, ms }
      },
      async () => {
        const ms = await without.runPromise(recordSequential(plain, "bench-tree", n, plainOffset))
        plainOffset += n
        return { ops: n, ms }
      },
      { log: options.log, label: "tree.append" }
    )
    return [
      throughputFigure(
        "tree.append",
        "records/s",
        "memory.record with keepTree: false (same records)",
        samples,
        { op: ">=", target: 0.9 },
        `${rounds} rounds × ${n.toLocaleString("en-US")} records, the tree kept in the state over every entry (${
          keptOffset.toLocaleString("en-US")
        } leaves at the end)`
      )
    ]
  } finally {
    await withTree.dispose()
    await without.dispose()
  }
}

/** The scenario. */
export const treeAppend: Scenario = { name: "tree.append", figures: ["tree.append"], run }
