/**
 * `memory.record`: records per second through `SessionJournal.record` on the
 * in-memory adapter, one caller, with the ring full (every record evicts one entry).
 * The baseline is the hashing such a record cannot avoid: two SHA-256 per record —
 * the entry's own hash over its preimage and the eviction fold over a preimage of
 * the fold's shape (docs/DESIGN.md §2: `lp(evicted_head) ‖ lp(evicted hash)`) — both encoded
 * beforehand and hashed with `Sha256.hex`, the function core hashes with (here
 * `@noble/hashes`: nothing installs another implementation in this process).
 */
import { Persistence, Sha256 } from "../../packages/core/src/index.ts"
import { foldPreimage } from "../../packages/core/src/internal/preimage.ts"
import { journalRuntime, makeEntries, preimages, recordSequential, serviceOf } from "../lib/env.ts"
import { type Figure, interleave, type RunOptions, type Scenario, throughputFigure } from "../lib/harness.ts"

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const n = options.quick ? 3_000 : 20_000
  const rounds = options.quick ? 3 : 7
  const entries = makeEntries(n)
  const encoded = preimages(entries)
  // One fold preimage per record, of the steady-state shape: two 64-character hex
  // strings, each length-prefixed (144 bytes).
  const folds = entries.map((e, i) => foldPreimage(entries[(i + 1) % n]!.entry_hash, e.entry_hash))
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
        for (let i = 0; i < n; i++) {
          sink ^= Sha256.hex(encoded[i]!).charCodeAt(0) ^ Sha256.hex(folds[i]!).charCodeAt(1)
        }
        return { ops: n, ms: performance.now() - t0 }
      },
      { log: options.log, label: "memory.record" }
    )
    if (sink === -1) options.log("unreachable")
    return [
      throughputFigure(
        "memory.record",
        "records/s",
        `two SHA-256 per record (entry + fold preimage, ${Sha256.implementation()})`,
        samples,
        { op: ">=", target: 0.7 },
        `${rounds} rounds × ${n.toLocaleString("en-US")} records, one session (ring full after the warm-up)`
      )
    ]
  } finally {
    await rt.dispose()
  }
}

/** The scenario. */
export const memoryRecord: Scenario = { name: "memory.record", figures: ["memory.record"], run }
