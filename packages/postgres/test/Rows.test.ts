/**
 * Rows are decoded with Schemas: int8 columns arrive as numbers, bigints or decimal
 * text and become safe integers; a row that does not decode is a StorageError that
 * names the table and the column, in a unit test and on a real table.
 */
import { assert, describe, it } from "@effect/vitest"
import { JournalState, Persistence } from "@session-journal/core"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import * as Rows from "../src/internal/rows.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const failureOf = <A, E>(exit: Exit.Exit<A, E>) => {
  const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
  return error?._tag === "Some" ? error.value : undefined
}

describe("postgres rows", () => {
  const decode = Rows.decode(Rows.ListRow, "t_sessions", "list")
  const row = { session_id: "s", head: "h", exported_head: null, updated_ms: null, bytes: null }

  it.effect("int8 columns decode from a number, a bigint or decimal text", () =>
    Effect.gen(function*() {
      const decoded = yield* decode([
        { ...row, next_sequence: 7 },
        { ...row, next_sequence: 7n, updated_ms: "1764400000000" },
        { ...row, next_sequence: "7", bytes: 12n }
      ])
      assert.deepStrictEqual(decoded.map((r) => [r.next_sequence, r.updated_ms, r.bytes]), [[7, null, null], [
        7,
        1764400000000,
        null
      ], [7, null, 12]])
    }))

  it.effect("a value that is no safe count fails with a StorageError naming table and column", () =>
    Effect.gen(function*() {
      for (const bad of [2n ** 60n, "12.5", "-1", "", "9007199254740993", Number.NaN]) {
        const error = failureOf(yield* Effect.exit(decode([{ ...row, next_sequence: bad }])))
        assert.strictEqual(error?._tag, "StorageError", String(bad))
        assert.strictEqual(error?.path, "t_sessions.next_sequence")
        assert.strictEqual(error?.operation, "list")
        assert.strictEqual(error?.reason._tag, "Undecodable")
        assert.strictEqual(error?.reason._tag === "Undecodable" ? error.reason.column : undefined, "next_sequence")
        assert.include(error?.message, "next_sequence")
      }
      const text = failureOf(yield* Effect.exit(decode([{ ...row, next_sequence: 1, head: 5 }])))
      assert.strictEqual(text?.path, "t_sessions.head")
    }))
})

const prefix = freshPrefix("rows")

describe.skipIf(skipReason !== null)("postgres rows in a table", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.live(
    "a session row whose count is past 2^53 - 1: load and list fail naming sessions.next_sequence",
    () =>
      Effect.gen(function*() {
        const id = "huge"
        const p = yield* Persistence.Persistence
        const c = chain(JournalState.empty(id), 2)
        yield* Effect.scoped(
          Effect.flatMap(p.open(id, { mode: "write" }), (h) => h.append(requestOf(JournalState.empty(id), c.entries)))
        )
        yield* SqlClient.SqlClient.use((sql) =>
          sql`UPDATE ${sql(`${prefix}sessions`)} SET next_sequence = 9007199254740993 WHERE session_id = ${id}`
        ).pipe(Effect.provide(adminLayer()))
        const loaded = failureOf(
          yield* Effect.exit(Effect.scoped(Effect.flatMap(p.open(id, { mode: "read" }), (h) => h.load)))
        )
        assert.strictEqual(loaded?._tag, "StorageError")
        assert.strictEqual(loaded?._tag === "StorageError" ? loaded.path : undefined, `${prefix}sessions.next_sequence`)
        const listed = failureOf(yield* Effect.exit(p.list))
        assert.strictEqual(listed?.path, `${prefix}sessions.next_sequence`)
      }).pipe(Effect.provide(Layer.fresh(PgPersistence.layerFromUrl(url, { tablePrefix: prefix })))),
    { timeout: 60_000 }
  )
})
