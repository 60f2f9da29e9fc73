/**
 * The one-statement append under races between instances (DESIGN §8): two
 * instances creating one session at the empty tip store exactly one of the two
 * batches; an entry row already at the next sequence makes the append a conflict
 * that stores nothing; checkpoints stored concurrently with appends leave the
 * exported head of the newest entries; a session row stored empty (metadata only)
 * is advanced by the first batch, keeping the newer metadata.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import { Checkpoint, JournalState, Persistence } from "@session-journal/core"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("races")

interface Row {
  readonly next_sequence: string | number | bigint
  readonly head: string
  readonly exported_head: string | null
  readonly entry_bytes: string | number | bigint
  readonly octets: string | number | bigint | null
  readonly rows: string | number | bigint
}

const rowOf = (id: string) =>
  Effect.gen(function*() {
    const admin = yield* PgClient.PgClient
    const rows = yield* admin<Row>`SELECT s.next_sequence, s.head, s.exported_head, s.entry_bytes,
        (SELECT sum(octet_length(entry)) FROM ${
      admin(`${prefix}entries`)
    } e WHERE e.session_id = s.session_id) AS octets,
        (SELECT count(*) FROM ${admin(`${prefix}entries`)} e WHERE e.session_id = s.session_id) AS rows
      FROM ${admin(`${prefix}sessions`)} s WHERE s.session_id = ${id}`
    return rows[0]
  })

describe.skipIf(skipReason !== null)("postgres: the one-statement append under races", () => {
  it.live(
    "two instances creating one session at the empty tip: one batch is stored, the other is a conflict",
    () =>
      Effect.gen(function*() {
        const a = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
        const b = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
        for (let round = 0; round < 40; round++) {
          const id = `create-${round}-${Date.now().toString(36)}`
          const open = (ctx: typeof a) =>
            Effect.provideContext(Persistence.Persistence.use((p) => p.open(id, { mode: "write" })), ctx)
          const ha = yield* open(a)
          const hb = yield* open(b)
          const ca = chain(JournalState.empty(id), 1 + (round % 3))
          const cb = chain(JournalState.empty(id), 2 + (round % 4))
          const [ea, eb] = yield* Effect.all([
            Effect.exit(ha.append(requestOf(JournalState.empty(id), ca.entries))),
            Effect.exit(hb.append(requestOf(JournalState.empty(id), cb.entries)))
          ], { concurrency: "unbounded" })
          const won = [ea, eb].filter(Exit.isSuccess).length
          assert.strictEqual(won, 1, `round ${round}: ${String(ea)} ${String(eb)}`)
          const lost = Exit.isSuccess(ea) ? eb : ea
          assert.isTrue(Exit.isFailure(lost))
          const error = Exit.isFailure(lost) ? Exit.findErrorOption(lost) : undefined
          assert.strictEqual(error?._tag === "Some" ? error.value._tag : "none", "SequenceConflict")
          const winner = Exit.isSuccess(ea) ? ca : cb
          const row = (yield* rowOf(id))!
          assert.strictEqual(Number(row.next_sequence), winner.entries.length)
          assert.strictEqual(Number(row.rows), winner.entries.length)
          assert.strictEqual(row.head, winner.entries.at(-1)!.entry_hash)
          assert.strictEqual(row.exported_head, JournalState.head(winner.state))
          assert.strictEqual(Number(row.entry_bytes), Number(row.octets))
          // The loser reloads through its hold and continues.
          const loser = Exit.isSuccess(ea) ? hb : ha
          const reloaded = yield* loser.load
          assert.strictEqual(reloaded.state.next_sequence, winner.entries.length)
          const more = chain(reloaded.state, 1)
          yield* loser.append(requestOf(reloaded.state, more.entries))
        }
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 120_000 }
  )

  it.live(
    "an entry row already at the next sequence: the append is a conflict and stores nothing",
    () =>
      Effect.gen(function*() {
        const ctx = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
        const admin = yield* PgClient.PgClient
        for (const size of [0, 3]) {
          const id = `orphan-${size}-${Date.now().toString(36)}`
          const h = yield* Effect.provideContext(Persistence.Persistence.use((p) => p.open(id, { mode: "write" })), ctx)
          const first = chain(JournalState.empty(id), size)
          if (size > 0) yield* h.append(requestOf(JournalState.empty(id), first.entries))
          const next = chain(first.state, 2)
          // A row at the second new sequence, stored past the session row's count.
          const orphan = next.entries[1]!
          yield* admin`INSERT INTO ${admin(`${prefix}entries`)} (session_id, sequence, entry_hash, entry)
            VALUES (${id}, ${orphan.sequence}, ${orphan.entry_hash}, ${"{}"})`
          const before = yield* rowOf(id)
          const exit = yield* Effect.exit(h.append(requestOf(first.state, next.entries)))
          assert.isTrue(Exit.isFailure(exit))
          const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
          assert.strictEqual(error?._tag === "Some" ? error.value._tag : "none", "SequenceConflict")
          const after = yield* rowOf(id)
          assert.deepStrictEqual(after, before)
        }
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 60_000 }
  )

  it.live(
    "checkpoints stored by another instance while one appends: the exported head is the newest entries'",
    () =>
      Effect.gen(function*() {
        const a = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
        const b = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
        const id = `cp-${Date.now().toString(36)}`
        const caps = { entry_cap: 4, tool_counts_cap: 8 }
        const ha = yield* Effect.provideContext(
          Persistence.Persistence.use((p) => p.open(id, { mode: "write", caps })),
          a
        )
        // The session exists (with its caps) before the other instance loads it.
        const first = chain(JournalState.empty(id, caps), 1)
        yield* ha.append(requestOf(JournalState.empty(id, caps), first.entries))
        let state = first.state
        const appends = Effect.gen(function*() {
          for (let i = 0; i < 60; i++) {
            const c = chain(state, 1 + (i % 3))
            yield* ha.append(requestOf(state, c.entries))
            state = c.state
          }
        })
        let stored = 0
        const checkpoints = Effect.scoped(Effect.gen(function*() {
          const hb = yield* Effect.provideContext(
            Persistence.Persistence.use((p) => p.open(id, { mode: "read" })),
            b
          )
          for (let i = 0; i < 60; i++) {
            const loaded = yield* Effect.exit(hb.load)
            if (Exit.isFailure(loaded)) continue
            // Through another instance's write handle, at the state it just loaded.
            const written = yield* Effect.exit(Effect.provideContext(
              Effect.scoped(Effect.gen(function*() {
                const p = yield* Persistence.Persistence
                const w = yield* p.open(id, { mode: "write", caps })
                return yield* w.checkpoint(Checkpoint.encode(loaded.value.state))
              })),
              b
            ))
            if (Exit.isSuccess(written)) stored++
          }
        }))
        yield* Effect.all([appends, checkpoints], { concurrency: "unbounded", discard: true })
        const row = (yield* rowOf(id))!
        assert.strictEqual(Number(row.next_sequence), state.next_sequence)
        assert.strictEqual(row.exported_head, JournalState.head(state))
        assert.strictEqual(Number(row.entry_bytes), Number(row.octets))
        assert.isAbove(stored, 0)
        const loaded = yield* ha.load
        assert.isNull(loaded.recovery.stopped)
        assert.strictEqual(JournalState.head(loaded.state), JournalState.head(state))
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 120_000 }
  )

  it.live(
    "a session row stored empty (metadata only) is advanced by the first batch, with its bytes and newest metadata",
    () =>
      Effect.gen(function*() {
        const ctx = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
        const admin = yield* PgClient.PgClient
        const id = `empty-row-${Date.now().toString(36)}`
        const h = yield* Effect.provideContext(Persistence.Persistence.use((p) => p.open(id, { mode: "write" })), ctx)
        const empty = JournalState.empty(id)
        yield* h.append(requestOf(empty, [], { title: "newer", updated_at: 5 }))
        const c = chain(empty, 3)
        const appended = yield* h.append(requestOf(empty, c.entries, { title: "older", updated_at: 4 }))
        const row = (yield* rowOf(id))!
        assert.strictEqual(Number(row.next_sequence), 3)
        assert.strictEqual(row.exported_head, JournalState.head(c.state))
        assert.strictEqual(Number(row.entry_bytes), Number(row.octets))
        assert.strictEqual(appended.bytes, Number(row.octets))
        const metas = yield* admin<{ readonly meta: string }>`SELECT meta FROM ${admin(`${prefix}sessions`)}
          WHERE session_id = ${id}`
        assert.deepStrictEqual(JSON.parse(metas[0]!.meta), { title: "newer", updated_at: 5 })
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 60_000 }
  )

  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))
})
