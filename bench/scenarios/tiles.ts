/**
 * `tiles.verify`: checking a session published as tlog-tiles from its files alone
 * (core's `TiledLog.verify`, docs/DESIGN.md §14): entries per second over a log held in
 * memory (read through a map, so the figure is the checking, not the disk or the
 * network), against the least any such check does: the same entries' chain verified
 * (`Chain.verify`) and their tree rebuilt (`Merkle.builder`) from the decoded entries.
 * The difference is reading every entry back from its preimage and comparing every
 * tile. Interleaved rounds.
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import {
  Chain,
  type Entry,
  JournalState,
  Merkle,
  SignedNote,
  TiledLog,
  Tiles,
  TreeHead
} from "../../packages/core/src/index.ts"
import { type Figure, interleave, type RunOptions, type Scenario, throughputFigure } from "../lib/harness.ts"

const entriesOf = (n: number): Array<Entry.Entry> => {
  let state = JournalState.empty("bench-tiles", { entry_cap: 16, tool_counts_cap: 64 })
  const out: Array<Entry.Entry> = []
  for (let i = 0; i < n; i++) {
    const entry = i % 4 === 3
      ? JournalState.nextOther(state, 1_764_400_000 + i, "message", { role: "assistant", text: `step ${i} done` })
      : JournalState.nextTool(state, 1_764_400_000 + i, {
        tool_name: `tool_${i % 7}`,
        server_id: "srv-1",
        agent_id: "agent-1",
        bytes_read: i,
        bytes_written: 2 * i,
        delegation_depth: 0,
        allowed: true
      })
    out.push(entry)
    state = JournalState.fold(state, entry)
  }
  return out
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const n = options.quick ? 5_000 : 100_000
  const rounds = options.quick ? 3 : 7
  const entries = entriesOf(n)
  const signer = Result.getOrThrow(SignedNote.generate("bench.example/tiles"))
  const files = new Map<string, Uint8Array>()
  const writer = Tiles.writer("entries")
  for (const e of entries) {
    writer.push(e)
    for (const f of writer.full()) files.set(f.path, f.bytes)
  }
  for (const f of writer.partials()) files.set(f.path, f.bytes)
  const head = TreeHead.make(TreeHead.origin(signer.verifier.name, "bench-tiles"), writer.range())
  files.set("checkpoint", new TextEncoder().encode(Result.getOrThrow(SignedNote.sign(TreeHead.text(head), [signer]))))
  const read: TiledLog.Read<never> = (path) => Effect.succeed(files.get(path))
  const samples = await interleave(
    rounds,
    async () => {
      const t = performance.now()
      const v = Effect.runSync(TiledLog.verify(read, { verifiers: [signer.verifier] }))
      if (v.size !== n) throw new Error("the log did not verify")
      return { ops: n, ms: performance.now() - t }
    },
    async () => {
      const t = performance.now()
      const b = Merkle.builder()
      if (Result.isFailure(Chain.verify(entries, { prefixEvicted: false }))) throw new Error("the chain did not verify")
      for (const e of entries) b.appendEntryHash(e.entry_hash)
      if (!Merkle.equals(Merkle.root(b.range()), head.root)) throw new Error("another root")
      return { ops: n, ms: performance.now() - t }
    },
    { log: options.log, label: "tiles.verify" }
  )
  return [
    throughputFigure(
      "tiles.verify",
      "entries/s",
      "Chain.verify + Merkle.builder over the same entries, decoded",
      samples,
      { op: ">=", target: 0.5 },
      `${rounds} rounds × ${n.toLocaleString("en-US")} entries (${files.size} files, ${
        Math.round([...files.values()].reduce((s, f) => s + f.length, 0) / 1024)
      } KiB), one in four a message`
    )
  ]
}

/** The scenario. */
export const tilesVerify: Scenario = { name: "tiles.verify", figures: ["tiles.verify"], run }
