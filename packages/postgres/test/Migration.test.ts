/**
 * A database whose tables predate a migration: the adapter brings it up to date on
 * start, and sessions written before still list correctly.
 */
import { assert, describe, it } from "@effect/vitest"
import { Checkpoint, JournalState, Persistence } from "@session-journal/core"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("migrate")

const withAdapter = <A, E>(f: (p: Persistence.Persistence["Service"]) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.gen(function*() {
    const p = yield* Persistence.Persistence
    return yield* f(p)
  })).pipe(Effect.provide(Layer.fresh(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))))

describe.skipIf(skipReason !== null)("postgres: migrations", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.effect("a session written before exported_head existed lists its newest hash until a checkpoint", () =>
    Effect.gen(function*() {
      const id = "evicted"
      const c = chain(JournalState.empty(id, { entry_cap: 2 }), 5)
      yield* withAdapter((p) =>
        Effect.scoped(Effect.gen(function*() {
          const h = yield* p.open(id, { mode: "write", caps: { entry_cap: 2 } })
          yield* h.append(requestOf(JournalState.empty(id, { entry_cap: 2 }), c.entries))
        }))
      )
      // Back to the schema of migration 1, with the row as it was written then.
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`ALTER TABLE ${sql(`${prefix}sessions`)} DROP COLUMN exported_head`
        yield* sql`DROP TABLE ${sql(`${prefix}checkpoints_damaged`)}`
        const removed = yield* sql<{ readonly migration_id: number }>`DELETE FROM ${sql(`${prefix}migrations`)}
          WHERE migration_id >= 2 RETURNING migration_id`
        assert.deepStrictEqual(removed.map((r) => r.migration_id).sort(), [2, 3])
      }).pipe(Effect.provide(adminLayer()))

      const head = JournalState.head(c.state)
      const lastHash = JournalState.lastHash(c.state)
      assert.notStrictEqual(head, lastHash)
      // Starting the adapter runs migrations 2 and 3; the old row has no exported head yet.
      const before = yield* withAdapter((p) => p.list)
      const info = before.find((s) => s.id === id)
      assert.strictEqual(info?.entries, 5)
      assert.strictEqual(info?.lastHash, lastHash)
      assert.strictEqual(info?.head, lastHash)

      // A checkpoint of the loaded state fills it in.
      const after = yield* withAdapter((p) =>
        Effect.gen(function*() {
          yield* Effect.scoped(Effect.gen(function*() {
            const h = yield* p.open(id, { mode: "write" })
            const loaded = yield* h.load
            assert.strictEqual(JournalState.head(loaded.state), head)
            yield* h.checkpoint(Checkpoint.encode(loaded.state))
          }))
          return yield* p.list
        })
      )
      const filled = after.find((s) => s.id === id)
      assert.strictEqual(filled?.head, head)
      assert.strictEqual(filled?.lastHash, lastHash)
    }))
})
