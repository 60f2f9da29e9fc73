/**
 * Pooled connections that die while idle (a server restart, a failover, an
 * administrator terminating backends) are replaced before `list` and `delete`
 * report anything: both are retried a bounded number of times on a fresh
 * connection, and only for connection-level failures.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import { JournalState, Persistence, SessionNotFound } from "@session-journal/core"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("idle")
const appName = `sj-idle-${process.pid}`

describe.skipIf(skipReason !== null)("postgres: idle connections", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.live(
    "list and delete succeed after every idle connection of the pool was terminated",
    () =>
      Effect.gen(function*() {
        const p = yield* Persistence.Persistence
        const admin = yield* PgClient.PgClient
        const ids = ["idle-a", "idle-b"]
        for (const id of ids) {
          const c = chain(JournalState.empty(id), 2)
          yield* Effect.scoped(
            Effect.flatMap(p.open(id, { mode: "write" }), (h) => h.append(requestOf(JournalState.empty(id), c.entries)))
          )
        }
        // Several connections in the pool, all idle afterwards. The next call comes
        // right after the terminations, before the pool has noticed them.
        yield* Effect.all([p.list, p.list, p.list, p.list], { concurrency: "unbounded" })
        const terminate = Effect.gen(function*() {
          const killed = yield* admin<
            { readonly pid: number }
          >`SELECT pid FROM pg_stat_activity WHERE application_name = ${appName}`
          yield* admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ${appName}`
          return killed.length
        })

        assert.isAbove(yield* terminate, 0)
        const listed = yield* p.list
        assert.deepStrictEqual(listed.map((s) => [s.id, s.entries]), [["idle-a", 2], ["idle-b", 2]])

        assert.isAbove(yield* terminate, 0)
        yield* p.delete("idle-a")
        assert.deepStrictEqual((yield* p.list).map((s) => s.id), ["idle-b"])

        // A logical failure is not retried into something else.
        yield* terminate
        const missing = yield* Effect.exit(p.delete("idle-a"))
        assert.isTrue(Exit.isFailure(missing))
        const error = Exit.isFailure(missing) ? Exit.findErrorOption(missing) : undefined
        assert.isTrue(error?._tag === "Some" && error.value instanceof SessionNotFound, String(missing))
      }).pipe(
        Effect.provide(Layer.merge(
          PgPersistence.layerFromUrl(url, { tablePrefix: prefix, applicationName: appName }),
          adminLayer("sj-test-idle-admin")
        ))
      ),
    { timeout: 60_000 }
  )
})
