/**
 * `memory.record`: records per second through `SessionJournal.record` on the
 * in-memory adapter, one caller, against raw `@noble/hashes` SHA-256 over the same
 * encoded entries (the hash every record must compute: the floor of its cost).
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { Persistence } from "../../packages/core/src/index.ts"
import { type Figure, interleave, type RunOptions, type Scenario, throughputFigure } from "../lib/harness.ts"
import { journalRuntime, makeEntries, preimages, recordSequential, serviceOf } from "../lib/env.ts"

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const n = options.quick ? 3_000 : 20_000
  const rounds = options.quick ? 3 : 7
  const encoded = preimages(makeEntries(n))
  const rt = journalRuntime(Persistence.layerMemory())
  try {
    const journal = await serviceOf(rt)
    let offset = 0
    let sink = 0
    const samples = await interleave(
      rounds,
      async () => {
        const ms = await rt.runPromise(recordSequential(journal, "bench-memory", n, offset))
        offset += n
        return { ops: n, ms }
      },
      async () => {
        const t0 = performance.now()
        for (let i = 0; i < encoded.length; i++) sink ^= sha256(encoded[i]!)[0]!
        return { ops: encoded.length, ms: performance.now() - t0 }
      },
      { log: options.log, label: "memory.record" }
    )
    if (sink === -1) options.log("unreachable")
    return [
      throughputFigure(
        "memory.record",
        "records/s",
        "raw SHA-256 (@noble/hashes)",
        samples,
        { op: ">=", target: 0.5 },
        `${rounds} rounds × ${n.toLocaleString("en-US")} records, one session (ring full after the warm-up)`
      )
    ]
  } finally {
    await rt.dispose()
  }
}

/** The scenario. */
export const memoryRecord: Scenario = { name: "memory.record", figures: ["memory.record"], run }
