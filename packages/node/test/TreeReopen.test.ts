/**
 * The session's Merkle tree kept in its state on the filesystem adapter
 * (docs/DESIGN.md §14): a session reopened from its checkpoint (version 4, the
 * tree's compact range in it) has the tree its whole history gives, and keeps it
 * as it grows; the policy's state (§16) is in the checkpoint and comes back with it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Checkpoint, Entry, Merkle, SessionJournal } from "@session-journal/core"
import { countingGuard, toolParams } from "@session-journal/core/test/fixtures"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as path from "node:path"
import { NodePersistence } from "../src/index.ts"
import { tempDir } from "./helpers.ts"

const ID = "tree-1"

const withJournal = <A, E>(root: string, program: Effect.Effect<A, E, SessionJournal.SessionJournal>) =>
  Effect.runPromise(
    program.pipe(
      Effect.provide(
        SessionJournal.layer({ checkpointMinBytes: 2_000, caps: { entry_cap: 16 } }).pipe(
          Layer.provide(NodePersistence.layer({ root }))
        )
      ),
      Effect.scoped
    ) as Effect.Effect<A, unknown>
  )

const write = (from: number, to: number) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    for (let i = from; i < to; i++) {
      yield* journal.writeAll(ID, [{ _tag: "Other" as const, kind: "message", payload: { n: i } }])
    }
    yield* journal.close(ID)
  })

const treeOf = (entries: ReadonlyArray<Entry.Entry>) =>
  Merkle.fromLeaves(entries.map((e) => Merkle.entryLeaf(e.entry_hash)))

const hex = (range: Merkle.CompactRange | null) =>
  range === null ? null : { size: range.size, nodes: range.nodes.map((n) => Buffer.from(n).toString("hex")) }

describe("the tree on the filesystem adapter", () => {
  it("a session reopened from its checkpoint has the tree of its whole history", async () => {
    const root = tempDir("tree")
    await withJournal(root, write(0, 300))
    const doc = JSON.parse(fs.readFileSync(path.join(root, ID, "checkpoint.json"), "utf8"))
    assert.strictEqual(doc.v, Checkpoint.VERSION)
    assert.isNotNull(doc.evicted_head)
    await withJournal(
      root,
      Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        const reopened = yield* journal.state(ID)
        const all = yield* Stream.runCollect(journal.entries(ID))
        assert.strictEqual(all.length, 300)
        assert.deepStrictEqual(hex(reopened.tree), hex(treeOf(all)))
      })
    )
    await withJournal(root, write(300, 333))
    await withJournal(
      root,
      Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        const all = yield* Stream.runCollect(journal.entries(ID))
        assert.strictEqual(all.length, 333)
        assert.deepStrictEqual(hex((yield* journal.state(ID)).tree), hex(treeOf(all)))
      })
    )
  })

  it("a policy's state written by decide comes back from the checkpoint (version 4) on reopening", async () => {
    const root = tempDir("guard-state")
    const decideMany = (n: number) =>
      Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        for (let i = 0; i < n; i++) yield* journal.decide(ID, toolParams("Bash"), countingGuard)
        yield* journal.close(ID)
      })
    await withJournal(root, decideMany(120))
    const doc = JSON.parse(fs.readFileSync(path.join(root, ID, "checkpoint.json"), "utf8"))
    assert.strictEqual(doc.v, 4)
    assert.isNotNull(doc.guard_state)
    await withJournal(root, decideMany(5))
    await withJournal(
      root,
      Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        assert.deepStrictEqual((yield* journal.state(ID)).guard_state, { n: 125 })
        // Verify replays from sequence 0 and compares the checkpoint's guard_state.
        const report = yield* journal.verify(ID)
        assert.strictEqual(report.nextSequence, 125 * 3)
      })
    )
  })
})
