/**
 * The session's Merkle tree kept in its state on the PostgreSQL adapter
 * (docs/DESIGN.md §14): a session reopened from its checkpoint (version 4, the
 * tree's compact range and the policy's state in it) has the tree its whole history
 * gives, and the policy's state (§16) decide wrote.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Merkle, SessionJournal } from "@session-journal/core"
import { countingGuard, toolParams } from "@session-journal/core/test/fixtures"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("tree")

const treeOf = (entries: ReadonlyArray<Entry.Entry>) =>
  Merkle.fromLeaves(entries.map((e) => Merkle.entryLeaf(e.entry_hash)))

const hex = (range: Merkle.CompactRange | null) =>
  range === null ? null : { size: range.size, nodes: range.nodes.map((n) => Buffer.from(n).toString("hex")) }

// Each run opens the session anew (a fresh service over the same tables).
const run = <A, E>(program: Effect.Effect<A, E, SessionJournal.SessionJournal>) =>
  program.pipe(
    Effect.provide(
      SessionJournal.layer({ checkpointMinBytes: 2_000, caps: { entry_cap: 16 } }).pipe(
        Layer.provide(PgPersistence.layerFromUrl(url, { tablePrefix: prefix, applicationName: "sj-test-tree" }))
      )
    ),
    Effect.scoped
  )

describe.skipIf(skipReason !== null)("postgres: the tree in the state", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.live("a session reopened from its checkpoint has the tree of its whole history", () =>
    Effect.gen(function*() {
      const id = `tree-${Date.now().toString(36)}`
      const write = (from: number, to: number) =>
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          for (let i = from; i < to; i++) {
            yield* j.writeAll(id, [{ _tag: "Other" as const, kind: "message", payload: { n: i } }])
          }
          yield* j.close(id)
        })
      const check = (count: number) =>
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          const state = yield* j.state(id)
          const all = yield* Stream.runCollect(j.entries(id))
          assert.strictEqual(all.length, count)
          assert.isNotNull(state.evicted_head)
          assert.deepStrictEqual(hex(state.tree), hex(treeOf(all)))
        })
      yield* run(write(0, 300))
      yield* run(check(300))
      yield* run(write(300, 333))
      yield* run(check(333))
    }))

  it.live("a policy's state written by decide comes back from the checkpoint on reopening", () =>
    Effect.gen(function*() {
      const id = `gstate-${Date.now().toString(36)}`
      const decideMany = (n: number) =>
        Effect.gen(function*() {
          const j = yield* SessionJournal.SessionJournal
          for (let i = 0; i < n; i++) yield* j.decide(id, toolParams("Bash"), countingGuard)
          yield* j.close(id)
        })
      yield* run(decideMany(120))
      yield* run(decideMany(5))
      yield* run(Effect.gen(function*() {
        const j = yield* SessionJournal.SessionJournal
        assert.deepStrictEqual((yield* j.state(id)).guard_state, { n: 125 })
        assert.strictEqual((yield* j.verify(id)).nextSequence, 125 * 3)
      }))
    }))
})
