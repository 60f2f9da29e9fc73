/**
 * Entry bytes as PostgreSQL counts them in a database whose encoding is not
 * UTF-8 (LATIN1, where `é` is one byte): the session row's `entry_bytes` and the
 * bytes the appends report are the entries' `octet_length`, for the one-statement
 * append and for the locking transaction alike, as a load counts them. Skipped
 * (with a warning) when the test's user may not create a database.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import { JournalState, Persistence } from "@session-journal/core"
import { requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const database = freshPrefix("latin1").replace(/_$/, "")
const prefix = "sjt_latin1_"

interface Row {
  readonly entry_bytes: string | number | bigint
  readonly octets: string | number | bigint
}

describe.skipIf(skipReason !== null)("postgres: entry bytes in a LATIN1 database", () => {
  it.live(
    "entry_bytes and the bytes appends report are octet_length's, on either path",
    () =>
      Effect.gen(function*() {
        const admin = yield* PgClient.PgClient
        const created = yield* Effect.exit(
          admin.unsafe(`CREATE DATABASE ${database} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`)
        )
        if (Exit.isFailure(created)) {
          console.warn(`skipped: cannot create a LATIN1 database: ${String(created.cause).split("\n")[0]}`)
          return
        }
        const target = new URL(url)
        target.pathname = `/${database}`
        const check = Effect.scoped(Effect.gen(function*() {
          const a = yield* Layer.build(PgPersistence.layerFromUrl(target.toString(), { tablePrefix: prefix }))
          const b = yield* Layer.build(PgPersistence.layerFromUrl(target.toString(), { tablePrefix: prefix }))
          const id = "latin"
          const open = (ctx: typeof a) =>
            Effect.provideContext(Persistence.Persistence.use((p) => p.open(id, { mode: "write" })), ctx)
          const ha = yield* open(a)
          const hb = yield* open(b)
          let state = JournalState.empty(id)
          let reported = 0
          for (let i = 0; i < 3; i++) {
            const e = JournalState.nextOther(state, 1764400000 + i, "message", { content: "é".repeat(10 * i + 5) })
            reported += (yield* ha.append(requestOf(state, [e]))).bytes
            state = JournalState.fold(state, e)
          }
          // A stale writer of the other instance: its retry runs the locking transaction.
          const stale = JournalState.nextOther(JournalState.empty(id), 1, "message", { content: "ééé" })
          const lost = yield* Effect.flip(hb.append(requestOf(JournalState.empty(id), [stale])))
          assert.strictEqual(lost._tag, "SequenceConflict")
          const reloaded = yield* hb.load
          const e = JournalState.nextOther(reloaded.state, 1764400009, "message", { content: "éééé" })
          reported += (yield* hb.append(requestOf(reloaded.state, [e]))).bytes
          const rows = yield* Effect.flatMap(
            Effect.service(PgClient.PgClient),
            (sql) =>
              sql<Row>`SELECT s.entry_bytes, (SELECT sum(octet_length(entry))
                  FROM ${sql(`${prefix}entries`)} e WHERE e.session_id = s.session_id) AS octets
                FROM ${sql(`${prefix}sessions`)} s WHERE s.session_id = ${id}`
          ).pipe(
            Effect.provide(PgClient.layer({ url: Redacted.make(target.toString()), applicationName: "sj-test-latin1" }))
          )
          const row = rows[0]!
          assert.strictEqual(Number(row.entry_bytes), Number(row.octets))
          assert.strictEqual(reported, Number(row.octets))
        }))
        yield* Effect.ensuring(check, Effect.ignore(admin.unsafe(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)))
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 60_000 }
  )
})
