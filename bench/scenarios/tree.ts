/**
 * `tree.append`: the cost of keeping the session's RFC 6962 tree (docs/DESIGN.md §14)
 * as entries are recorded. Records per second through `SessionJournal.record` on the
 * in-memory adapter, one caller, with the service's default (each state keeps the
 * tree's compact range, `JournalState.tree`: a leaf hash and on average one node hash
 * per entry, and an array of at most one hash per bit of the size), against the same
 * service with `keepTree: false`. Interleaved rounds, each on a fresh service (see
 * `round`).
 */
import { Persistence } from "../../packages/core/src/index.ts"
import { journalRuntime, recordSequential, serviceOf } from "../lib/env.ts"
import { type Figure, interleave, type RunOptions, type Scenario, throughputFigure } from "../lib/harness.ts"

// One round of one side: a fresh service and session, filled to a full ring (4,096
// records, unmeasured), then `n` records measured. Every round starting from the same
// small heap keeps the two sides' rounds alike: with one service per side for the
// whole run, the memory adapter's history of both grew to hundreds of thousands of
// entries and a major collection's pause landed in whichever round was running
// (per-round ratios 0.65–1.08 in one run).
const round = async (n: number, keepTree: boolean): Promise<{ ops: number; ms: number }> => {
  const rt = journalRuntime(Persistence.layerMemory(), { keepTree })
  try {
    const journal = await serviceOf(rt)
    await rt.runPromise(recordSequential(journal, "bench-tree", FILL))
    const ms = await rt.runPromise(recordSequential(journal, "bench-tree", n, FILL))
    return { ops: n, ms }
  } finally {
    await rt.dispose()
  }
}

// The ring's default size: after it the fold evicts one entry per record.
const FILL = 4_096

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const n = options.quick ? 3_000 : 20_000
  const rounds = options.quick ? 3 : 15
  const samples = await interleave(rounds, () => round(n, true), () => round(n, false), {
    log: options.log,
    label: "tree.append"
  })
  return [
    throughputFigure(
      "tree.append",
      "records/s",
      "memory.record with keepTree: false (same records)",
      samples,
      { op: ">=", target: 0.9 },
      `${rounds} rounds × ${n.toLocaleString("en-US")} records, each round a fresh service filled to a full ring (${
        FILL.toLocaleString("en-US")
      } records) first; the tree kept in the state over every entry`
    )
  ]
}

/** The scenario. */
export const treeAppend: Scenario = { name: "tree.append", figures: ["tree.append"], run }
