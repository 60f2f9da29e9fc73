/**
 * A damaged checkpoint row does not make a session unreadable: every entry is in
 * the entries table, so the state is rebuilt from sequence 0 with the session's
 * caps, the broken row is set aside unchanged, and writing continues the chain.
 */
import { assert, describe, it } from "@effect/vitest"
import { Checkpoint, JournalState, Persistence } from "@session-journal/core"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SqlClient from "effect/sql/SqlClient"
import * as Stream from "effect/Stream"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("recover")
// Non-default caps: a rebuild with the wrong ones would evict differently.
const caps = { entry_cap: 3, tool_counts_cap: 2 }

const withAdapter = <A, E>(f: (p: Persistence.Persistence["Service"]) => Effect.Effect<A, E>) =>
  Effect.scoped(Persistence.Persistence.use(f)).pipe(
    Effect.provide(Layer.fresh(PgPersistence.layerFromUrl(url, { tablePrefix: prefix })))
  )

const withWriter = <A, E>(
  p: Persistence.Persistence["Service"],
  id: string,
  f: (h: Persistence.WriteHandle) => Effect.Effect<A, E>
) => Effect.scoped(Effect.flatMap(p.open(id, { mode: "write", caps }), f))

const admin = <A, E>(f: (sql: SqlClient.SqlClient) => Effect.Effect<A, E>) =>
  SqlClient.SqlClient.use(f).pipe(Effect.provide(adminLayer()))

// Writes 10 entries in pairs, so checkpoints are stored at 4 and 8, then replaces
// the checkpoint row's document with `broken` (given the state at 8).
const damagedSession = (id: string, broken: (at8: JournalState.JournalState) => string) =>
  Effect.gen(function*() {
    let state = JournalState.empty(id, caps)
    const written: Array<string> = []
    let at8 = state
    yield* withAdapter((p) =>
      withWriter(p, id, (h) =>
        Effect.gen(function*() {
          for (let i = 0; i < 5; i++) {
            const c = chain(state, 2)
            yield* h.append(requestOf(state, c.entries))
            if (c.state.next_sequence % 4 === 0) yield* h.checkpoint(Checkpoint.encode(c.state))
            state = c.state
            written.push(...c.entries.map((e) => e.entry_hash))
            if (state.next_sequence === 8) at8 = state
          }
        }))
    )
    const doc = broken(at8)
    const updated = yield* admin((sql) =>
      sql<{ readonly next_sequence: string }>`UPDATE ${sql(`${prefix}checkpoints`)} SET doc = ${doc}
        WHERE session_id = ${id} RETURNING next_sequence`
    )
    assert.deepStrictEqual(updated.map((r) => Number(r.next_sequence)), [8])
    return { state, written, doc }
  })

const rebuildsAndContinues = (id: string, broken: (at8: JournalState.JournalState) => string) =>
  Effect.gen(function*() {
    const original = yield* damagedSession(id, broken)
    const loaded = yield* withAdapter((p) => withWriter(p, id, (h) => h.load))
    assert.strictEqual(loaded.recovery.checkpoint, "rebuilt")
    assert.strictEqual(loaded.recovery.replayed, 10)
    assert.isNull(loaded.recovery.stopped)
    assert.deepStrictEqual(Checkpoint.encode(loaded.state), Checkpoint.encode(original.state))
    assert.strictEqual(JournalState.head(loaded.state), JournalState.head(original.state))

    // The broken row was moved aside with its bytes unchanged.
    const rows = yield* admin((sql) =>
      Effect.all([
        sql<
          { readonly doc: string; readonly next_sequence: string; readonly reason: string }
        >`SELECT doc, next_sequence, reason
          FROM ${sql(`${prefix}checkpoints_damaged`)} WHERE session_id = ${id}`,
        sql`SELECT 1 AS one FROM ${sql(`${prefix}checkpoints`)} WHERE session_id = ${id}`
      ])
    )
    assert.deepStrictEqual(rows[0].map((r) => [r.doc, Number(r.next_sequence)]), [[original.doc, 8]])
    assert.isAbove(rows[0][0]!.reason.length, 0)
    assert.strictEqual(rows[1].length, 0)

    // A write continues the chain (and, crossing 12, stores a good checkpoint).
    const more = chain(loaded.state, 2)
    const reloaded = yield* withAdapter((p) =>
      Effect.gen(function*() {
        yield* withWriter(p, id, (h) =>
          Effect.andThen(
            h.load,
            Effect.andThen(h.append(requestOf(loaded.state, more.entries)), h.checkpoint(Checkpoint.encode(more.state)))
          ))
        const stored = yield* p.history(id).pipe(Stream.runCollect)
        assert.deepStrictEqual(stored.map((e) => e.entry_hash), [
          ...original.written,
          ...more.entries.map((e) => e.entry_hash)
        ])
        return yield* withWriter(p, id, (h) => h.load)
      })
    )
    assert.strictEqual(reloaded.recovery.checkpoint, "loaded")
    assert.deepStrictEqual(Checkpoint.encode(reloaded.state), Checkpoint.encode(more.state))
  })

// After both groups, which share the prefix: dropped after the first one alone, the
// tables were created again by the second and left behind.
afterAll(() =>
  skipReason === null
    ? Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer())))
    : undefined
)

describe.skipIf(skipReason !== null)("postgres: checkpoint recovery", () => {
  it.live(
    "an unparsable checkpoint is rebuilt from the entries and set aside",
    () => rebuildsAndContinues("unparsable", () => `{"version":1,"broken`),
    { timeout: 60_000 }
  )

  it.live("a checkpoint the stored entries do not continue is rebuilt from the entries and set aside", () =>
    // A valid checkpoint of another chain at the same sequence: it decodes and
    // verifies, but entry 8 does not link to it.
    rebuildsAndContinues("foreign", (at8) => {
      const other = chain(JournalState.empty(at8.session_id, caps), 8, 1764900000).state
      assert.notStrictEqual(JournalState.lastHash(other), JournalState.lastHash(at8))
      return JSON.stringify(Checkpoint.encode(other))
    }), { timeout: 60_000 })
})

describe.skipIf(skipReason !== null)("postgres: the checkpoint row proves nothing by itself", () => {
  const deleteRows = (id: string, from: number, to: number) =>
    admin((sql) =>
      sql`DELETE FROM ${sql(`${prefix}entries`)} WHERE session_id = ${id} AND sequence BETWEEN ${from} AND ${to}`
    )

  const refusesWrites = (id: string) =>
    Effect.gen(function*() {
      const loaded = yield* withAdapter((p) => withWriter(p, id, (h) => h.load))
      assert.strictEqual(loaded.recovery.stopped?.reason, "missing")
      return loaded.recovery.stopped!
    })

  it.live(
    "entry rows deleted under the checkpoint row: the session is corrupt, naming the missing range",
    () =>
      Effect.gen(function*() {
        yield* damagedSession("rows-under", (at8) => JSON.stringify(Checkpoint.encode(at8)))
        yield* deleteRows("rows-under", 5, 7)
        // A load reads from the checkpoint's last entry on: it sees that one missing.
        const stopped = yield* refusesWrites("rows-under")
        assert.deepStrictEqual(stopped.missing, { from: 7, to: 7 })
        const verified = yield* withAdapter((p) =>
          Effect.scoped(Effect.flatMap(p.open("rows-under", { mode: "read" }), (h) => h.verify))
        )
        assert.strictEqual(verified.recovery.stopped?.reason, "gap")
        assert.deepStrictEqual(verified.recovery.stopped?.missing, { from: 5, to: 7 })
      }),
    { timeout: 60_000 }
  )

  it.live(
    "entry rows deleted at the tail, after the checkpoint: the session row's count exposes them",
    () =>
      Effect.gen(function*() {
        yield* damagedSession("rows-tail", (at8) => JSON.stringify(Checkpoint.encode(at8)))
        yield* deleteRows("rows-tail", 8, 9)
        const stopped = yield* refusesWrites("rows-tail")
        assert.deepStrictEqual(stopped.missing, { from: 8, to: 9 })
      }),
    { timeout: 60_000 }
  )

  it.live("a forged counter in the checkpoint row: verify names the field", () =>
    Effect.gen(function*() {
      yield* damagedSession("forged-row", (at8) => {
        const doc = Checkpoint.encode(at8)
        return JSON.stringify({ ...doc, data_flow: { ...doc.data_flow, total_bytes_read: 0 } })
      })
      const verified = yield* withAdapter((p) =>
        Effect.scoped(Effect.flatMap(p.open("forged-row", { mode: "read" }), (h) => h.verify))
      )
      assert.strictEqual(verified.recovery.stopped?.reason, "checkpoint")
      assert.include(verified.recovery.stopped?.detail, "data_flow.total_bytes_read")
    }), { timeout: 60_000 })
})
