/**
 * Payload bounds on PostgreSQL: a payload at Entry.MAX_PAYLOAD_DEPTH (with -0 at the
 * bottom) and metadata as deep are stored, checkpointed, and read back and verified
 * by a fresh service on a fresh connection pool; deeper ones are refused with
 * InvalidRecordField before anything is stored; an entry row or checkpoint row
 * made deeper than the limit loads as a typed failure, never a defect.
 */
import { Entry, InvalidRecordField, Persistence, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import { afterAll, describe, expect, it } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("depth")
const LIMIT = Entry.MAX_PAYLOAD_DEPTH

const nest = (depth: number, leaf: Schema.Json): Schema.Json => {
  let v: Schema.Json = leaf
  for (let i = 0; i < depth; i++) v = i % 2 === 0 ? [v] : { k: v }
  return v
}

const deepArray = (depth: number): Schema.Json => {
  let v: Schema.Json = []
  for (let i = 1; i < depth; i++) v = [v]
  return v
}

/** Runs `f` with a fresh service over a fresh adapter (its own pool), checkpointing after every entry. */
const withService = <A, E>(f: (j: SessionJournal.SessionJournal["Service"]) => Effect.Effect<A, E>) =>
  Effect.runPromise(
    Effect.scoped(Effect.gen(function*() {
      const p = yield* Persistence.Persistence
      const j = yield* SessionJournal.make({ checkpointMinBytes: 1 }).pipe(
        Effect.provideService(Persistence.Persistence, p)
      )
      return yield* f(j)
    })).pipe(
      Effect.provide(Layer.fresh(PgPersistence.layerFromUrl(url, { tablePrefix: prefix })))
    ) as Effect.Effect<A, unknown>
  )

const admin = <A, E>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  Effect.runPromise(SqlClient.SqlClient.use(f).pipe(Effect.provide(adminLayer())) as Effect.Effect<A, unknown>)

const observe = (j: SessionJournal.SessionJournal["Service"], id: string) =>
  Effect.gen(function*() {
    const entries = yield* Stream.runCollect(j.entries(id))
    const report = yield* j.verify(id)
    const head = yield* j.head(id)
    const state = yield* j.state(id)
    return {
      entries: entries.map((e) => Entry.toJsonText(Entry.encode(e))),
      checked: report.entriesChecked,
      head,
      meta: Entry.toJsonText(state.meta?.data ?? null)
    }
  })

const text = (v: Schema.Json) => Entry.toJsonText(v)

describe.skipIf(skipReason !== null)("postgres: payload depth", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it("a payload and metadata at the limit round-trip and verify; deeper ones are refused", async () => {
    const id = "edge"
    const written = await withService((j) =>
      Effect.gen(function*() {
        const a = yield* j.append(id, "message", nest(LIMIT, -0))
        for (const deep of [deepArray(LIMIT + 1), deepArray(100_000)]) {
          const refused = yield* Effect.flip(j.append(id, "message", deep))
          expect(refused).toBeInstanceOf(InvalidRecordField)
          expect((refused as InvalidRecordField).field).toBe("payload")
          expect((refused as InvalidRecordField).message).toContain(String(LIMIT))
          const meta = yield* Effect.flip(j.setMeta(id, { data: deep }))
          expect(meta).toBeInstanceOf(InvalidRecordField)
        }
        yield* j.setMeta(id, { data: nest(LIMIT, "meta") })
        const b = yield* j.append(id, "x-future-kind", { deep: deepArray(LIMIT - 1), z: -0 })
        return { entries: [a, b], seen: yield* observe(j, id) }
      })
    )
    expect(written.seen.checked).toBe(2)
    const again = await withService((j) => observe(j, id))
    expect(again).toEqual(written.seen)
    expect(again.entries).toEqual(written.entries.map((e) => Entry.toJsonText(Entry.encode(e))))
    expect(again.entries[0]).toContain(`${"[{\"k\":".repeat(3)}`)
    expect(again.entries[0]).toContain("-0")
    expect(again.head).toBe(written.entries[1]!.entry_hash)
    expect(again.meta).toBe(text(nest(LIMIT, "meta")))
    const rows = await admin((sql) =>
      sql<{ readonly n: string }>`SELECT count(*) AS n FROM ${sql(`${prefix}entries`)} WHERE session_id = ${id}`
    )
    expect(Number(rows[0]!.n)).toBe(2)
  }, 60_000)

  it("an entry row or checkpoint row made deeper than the limit loads as a typed failure", async () => {
    for (const [table, column] of [["entries", "entry"], ["checkpoints", "doc"]] as const) {
      const id = `stored-${table}`
      await withService((j) => j.append(id, "message", deepArray(LIMIT)))
      const deeper = "[".repeat(100_000) + "]".repeat(100_000)
      const updated = await admin((sql) =>
        sql`UPDATE ${sql(`${prefix}${table}`)} SET ${sql(column)} = replace(${sql(column)}, ${
          "[".repeat(LIMIT) + "]".repeat(LIMIT)
        }, ${deeper}) WHERE session_id = ${id} RETURNING 1 AS one`
      )
      expect(updated.length).toBe(1)
      const exit = await withService((j) => Effect.exit(observe(j, id)))
      if (Exit.isFailure(exit)) {
        expect(exit.cause.reasons.some((r) => r._tag === "Die"), String(exit.cause).slice(0, 500)).toBe(false)
      } else {
        // A checkpoint row past the limit may be set aside and rebuilt from the entries.
        expect(table).toBe("checkpoints")
        expect(exit.value.checked).toBe(1)
      }
    }
  }, 60_000)
})
