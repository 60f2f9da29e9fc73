/**
 * A write handle's reload reads only the rows it has not seen, and still sees what
 * another instance did meanwhile: a session deleted and written again, a newer
 * checkpoint, rows deleted under it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Checkpoint, JournalState, Persistence } from "@session-journal/core"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("reload")

describe.skipIf(skipReason !== null)("postgres: reloads of a write handle", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.live("a reload sees the session as another instance left it", () =>
    Effect.gen(function*() {
      const id = `reload-${Date.now().toString(36)}`
      const scope = yield* Effect.scope
      const options = { tablePrefix: prefix, applicationName: "sj-test-reload" } as const
      const a = yield* Layer.buildWithScope(PgPersistence.layerFromUrl(url, options), scope)
      const b = yield* Layer.buildWithScope(PgPersistence.layerFromUrl(url, options), scope)
      const pa = Context.get(a, Persistence.Persistence)
      const pb = Context.get(b, Persistence.Persistence)
      const ha = yield* pa.open(id, { mode: "write" })
      const empty = JournalState.empty(id)

      const mine = chain(empty, 6)
      yield* ha.append(requestOf(empty, mine.entries))
      assert.deepStrictEqual(Checkpoint.encode((yield* ha.load).state), Checkpoint.encode(mine.state))

      // Deleted and written again, longer, by another instance.
      yield* pb.delete(id)
      const theirs = chain(empty, 9, 1764800000)
      yield* Effect.scoped(
        Effect.flatMap(pb.open(id, { mode: "write" }), (h) => h.append(requestOf(empty, theirs.entries)))
      )
      const afterRewrite = yield* ha.load
      assert.isNull(afterRewrite.recovery.stopped)
      assert.deepStrictEqual(Checkpoint.encode(afterRewrite.state), Checkpoint.encode(theirs.state))

      // A checkpoint and more rows written by the other instance.
      const more = chain(theirs.state, 3)
      yield* Effect.scoped(Effect.flatMap(pb.open(id, { mode: "write" }), (h) =>
        Effect.andThen(h.append(requestOf(theirs.state, more.entries)), h.checkpoint(Checkpoint.encode(more.state)))))
      const afterCheckpoint = yield* ha.load
      assert.strictEqual(afterCheckpoint.recovery.checkpoint, "loaded")
      assert.deepStrictEqual(Checkpoint.encode(afterCheckpoint.state), Checkpoint.encode(more.state))
      const next = chain(more.state, 2)
      yield* ha.append(requestOf(more.state, next.entries))
      assert.deepStrictEqual(Checkpoint.encode((yield* ha.load).state), Checkpoint.encode(next.state))

      // The newest rows deleted behind everyone's back: the row count exposes them.
      yield* SqlClient.SqlClient.use((sql) =>
        sql`DELETE FROM ${sql(`${prefix}entries`)} WHERE session_id = ${id} AND sequence >= 12`
      ).pipe(Effect.provide(adminLayer()))
      const damaged = yield* ha.load
      assert.strictEqual(damaged.recovery.stopped?.reason, "missing")
      assert.deepStrictEqual(damaged.recovery.stopped?.missing, { from: 12, to: 13 })
    }), { timeout: 60_000 })
})
