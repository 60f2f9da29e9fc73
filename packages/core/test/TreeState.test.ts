/**
 * The session's Merkle tree kept in its state (docs/DESIGN.md §14): for random
 * sessions (random caps, tool and other entries, evictions) the state's compact
 * range is the tree over every entry hash, through `fold`, the replay's mutable
 * fold, a checkpoint's encode → decode and the entries after it; and through the
 * service, a session reopened from its checkpoint has the same tree as its whole
 * history gives, without the service keeping one when told not to. The seed is in
 * the test's name (`SEED=…` replays).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import { Checkpoint, Entry, JournalState, Merkle, Persistence, SessionJournal } from "../src/index.ts"
import { ReplayFold } from "../src/internal/replayFold.ts"
import { nthToolParams } from "./fixtures.ts"

const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))

const treeOf = (entries: ReadonlyArray<Entry.Entry>): Merkle.CompactRange =>
  Merkle.fromLeaves(entries.map((e) => Merkle.entryLeaf(e.entry_hash)))

const sameTree = (a: Merkle.CompactRange | null, b: Merkle.CompactRange, label: string) => {
  assert.isNotNull(a, label)
  assert.strictEqual(a!.size, b.size, label)
  assert.deepStrictEqual(a!.nodes.map((n) => Array.from(n)), b.nodes.map((n) => Array.from(n)), label)
}

// Appends `ops` to `state` (true: a tool call, false: a message), returning the entries.
const grow = (state: JournalState.JournalState, ops: ReadonlyArray<boolean>) => {
  const entries: Array<Entry.Entry> = []
  let s = state
  for (const tool of ops) {
    const i = s.next_sequence
    const entry = tool
      ? JournalState.nextTool(s, 1_764_400_000 + i, Result.getOrThrow(Entry.validateToolParams(nthToolParams(i))))
      : JournalState.nextOther(s, 1_764_400_000 + i, "message", { n: i })
    s = JournalState.fold(s, entry)
    entries.push(entry)
  }
  return { state: s, entries }
}

describe("the tree in the state", () => {
  it(`fold, replay and checkpoints keep the tree over every entry (seed ${SEED})`, () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 9 }),
        fc.array(fc.boolean(), { maxLength: 70 }),
        fc.array(fc.boolean(), { maxLength: 30 }),
        (cap, first, then) => {
          const empty = JournalState.empty("t", { entry_cap: cap })
          const a = grow(empty, first)
          sameTree(a.state.tree, treeOf(a.entries), "fold")
          const replay = new ReplayFold(empty)
          for (const e of a.entries) replay.fold(e)
          sameTree(replay.state().tree, treeOf(a.entries), "replay")
          const back = Result.getOrThrow(Checkpoint.decode(JSON.parse(Checkpoint.toJsonText(a.state))))
          sameTree(back.tree, treeOf(a.entries), "decoded")
          const b = grow(back, then)
          sameTree(b.state.tree, treeOf([...a.entries, ...b.entries]), "after the checkpoint")
          // The same documents without the tree claim nothing.
          const none = Result.getOrThrow(
            Checkpoint.decode(JSON.parse(Checkpoint.toJsonText(JournalState.withoutTree(a.state))))
          )
          if (a.state.evicted_head === null) sameTree(none.tree, treeOf(a.entries), "recomputed")
          else assert.isNull(none.tree)
        }
      ),
      { seed: SEED, numRuns: 200 }
    )
  })

  it.effect("a session reopened from its checkpoint has the tree of its whole history", () =>
    Effect.scoped(Effect.gen(function*() {
      const persistence = yield* Persistence.makeMemory()
      const open = (keepTree: boolean) =>
        SessionJournal.make({ checkpointMinBytes: 2_000, caps: { entry_cap: 16 }, keepTree }).pipe(
          Effect.provideService(Persistence.Persistence, persistence)
        )
      const first = yield* open(true)
      for (let i = 0; i < 300; i++) yield* first.record("tree", nthToolParams(i))
      yield* first.close("tree")
      const load = (id: string) => Effect.scoped(Effect.flatMap(persistence.open(id, { mode: "read" }), (h) => h.load))
      const stored = yield* load("tree")
      assert.strictEqual(stored.recovery.checkpoint, "loaded")
      const history = yield* Stream.runCollect(first.entries("tree"))
      const again = yield* open(true)
      for (let i = 300; i < 310; i++) yield* again.record("tree", nthToolParams(i))
      const all = [...history, ...(yield* Stream.runCollect(again.entries("tree", { from: 300 })))]
      sameTree((yield* again.state("tree")).tree, treeOf(all), "reopened")
      yield* again.close("tree")
      // Without the tree: states carry none, and the checkpoint stores none.
      const plain = yield* open(false)
      for (let i = 310; i < 320; i++) yield* plain.record("tree", nthToolParams(i))
      assert.isNull((yield* plain.state("tree")).tree)
      yield* plain.close("tree")
      const reloaded = yield* load("tree")
      assert.strictEqual(reloaded.state.next_sequence, 320)
    })))
})
