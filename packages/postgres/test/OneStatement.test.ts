/**
 * The one-statement append (DESIGN §8): an append on the stored tip is one round
 * trip; it stores what the locking transaction stores (the entries' texts, the
 * session's count, head, exported head, entry bytes as PostgreSQL counts them, the
 * newest metadata); and an append on a stale tip still ends in a conflict whose
 * row lock is kept for the retry.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import { Entry, JournalState, Persistence, type SessionMeta } from "@session-journal/core"
import * as A from "@session-journal/core/test/arbitraries"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import type * as Schema from "effect/Schema"
import * as fc from "fast-check"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"
import { countExcept, proxied } from "./wire.ts"

const SEED = Number(process.env["SEED"] ?? Math.floor(Math.random() * 2 ** 31))
const prefix = freshPrefix("one")

// Payloads whose UTF-8 size differs from their length: any code units, lone
// surrogates included, besides the usual JSON values.
const payload: fc.Arbitrary<Schema.Json> = fc.oneof(
  A.json,
  fc.string({ unit: "binary", maxLength: 12 }),
  fc.dictionary(fc.string({ unit: "grapheme", maxLength: 4 }), fc.string({ unit: "binary", maxLength: 6 }), {
    maxKeys: 3
  })
)

const op: fc.Arbitrary<A.Op> = fc.oneof(
  A.op,
  fc.record({ op: fc.constant("append" as const), ts: fc.nat(), kind: A.otherKind, payload })
)

// A session written in batches, some with metadata of a random time.
const session = fc.record({
  ops: fc.array(op, { minLength: 1, maxLength: 24 }),
  cuts: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 24, maxLength: 24 }),
  metas: fc.array(
    fc.option(fc.record({ title: fc.string({ unit: "grapheme", maxLength: 5 }), updated_at: fc.nat(20) }), {
      nil: undefined
    }),
    { minLength: 24, maxLength: 24 }
  ),
  caps: A.caps
})

type Session = typeof session extends fc.Arbitrary<infer T> ? T : never

interface SessionRow {
  readonly next_sequence: string | number | bigint
  readonly head: string
  readonly exported_head: string | null
  readonly entry_bytes: string | number | bigint
  readonly meta: string | null
  readonly octets: string | number | bigint
}

// A write handle on an adapter whose connections go through the counting proxy
// (closed with the scope).
const writerBehindProxy = (id: string, maxConnections?: number) =>
  Effect.gen(function*() {
    const { proxy, url: viaProxy } = yield* proxied(url)
    const ctx = yield* Layer.build(PgPersistence.layerFromUrl(viaProxy, { tablePrefix: prefix, maxConnections }))
    const h = yield* Effect.provideContext(Persistence.Persistence.use((p) => p.open(id, { mode: "write" })), ctx)
    return { h, proxy }
  })

describe.skipIf(skipReason !== null)(`postgres: the one-statement append (seed ${SEED})`, () => {
  it.live(
    "an append on the stored tip is one round trip, the first one of a session too",
    () =>
      Effect.gen(function*() {
        const id = `trips-${Date.now().toString(36)}`
        const { h, proxy } = yield* writerBehindProxy(id)
        // The notification that follows the commit is a statement of its own, sent
        // in the background (DESIGN §8), and not counted here.
        const syncs = () => countExcept(proxy.tally, "S", "pg_notify(")
        const queries = () => countExcept(proxy.tally, "Q", "pg_notify(")
        let state = JournalState.empty(id)
        for (const size of [1, 3, 64, 1]) {
          const before = { s: syncs(), q: queries() }
          const c = chain(state, size)
          yield* h.append(requestOf(state, c.entries, { title: `after ${size}`, updated_at: size }))
          assert.deepStrictEqual({ s: syncs() - before.s, q: queries() - before.q }, { s: 1, q: 0 })
          state = c.state
        }
        const loaded = yield* h.load
        assert.strictEqual(loaded.state.next_sequence, 69)
        assert.strictEqual(JournalState.head(loaded.state), JournalState.head(state))
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live(
    "appends of one kind are parsed once: later ones send only Bind, Execute and Sync",
    () =>
      Effect.gen(function*() {
        const id = `parsed-${Date.now().toString(36)}`
        // One connection, so the statement is prepared once for all of them.
        const { h, proxy } = yield* writerBehindProxy(id, 1)
        let state = JournalState.empty(id)
        const append = (size: number, meta?: SessionMeta.SessionMeta) => {
          const c = chain(state, size)
          return Effect.map(h.append(requestOf(state, c.entries, meta)), () => {
            state = c.state
          })
        }
        // The first session statement and the first of each later kind are parsed.
        yield* append(1)
        yield* append(2)
        yield* append(1, { title: "t", updated_at: 1 })
        // Not counting the notifications sent after the commits.
        const count = (type: string) => countExcept(proxy.tally, type, "pg_notify(")
        const before = { parse: count("P"), describe: count("D"), sync: count("S") }
        for (let i = 0; i < 12; i++) {
          yield* i % 3 === 0 ? append(1 + (i % 5), { title: `t${i}`, updated_at: 2 + i }) : append(1 + (i % 5))
        }
        assert.deepStrictEqual(
          { parse: count("P") - before.parse, describe: count("D") - before.describe, sync: count("S") - before.sync },
          { parse: 0, describe: 0, sync: 12 }
        )
        const loaded = yield* h.load
        assert.strictEqual(loaded.state.next_sequence, state.next_sequence)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )

  it.live(
    "an append on a stale tip is a conflict that keeps the row locked until its retry commits",
    () =>
      Effect.gen(function*() {
        const id = `stale-${Date.now().toString(36)}`
        const options = { tablePrefix: prefix, conflictHold: "30 seconds" } as const
        const a = yield* Layer.build(PgPersistence.layerFromUrl(url, options))
        const b = yield* Layer.build(PgPersistence.layerFromUrl(url, options))
        const writer = (ctx: typeof a) =>
          Effect.provideContext(Persistence.Persistence.use((p) => p.open(id, { mode: "write" })), ctx)
        const ha = yield* writer(a)
        const hb = yield* writer(b)
        const first = chain(JournalState.empty(id), 2)
        yield* ha.append(requestOf(JournalState.empty(id), first.entries))
        const stale = chain(JournalState.empty(id), 1)
        const lost = yield* Effect.flip(hb.append(requestOf(JournalState.empty(id), stale.entries)))
        assert.strictEqual(lost._tag, "SequenceConflict")
        const admin = yield* PgClient.PgClient
        const table = admin(`${prefix}sessions`)
        const tryLock = admin.withTransaction(
          admin`SELECT 1 AS one FROM ${table} WHERE session_id = ${id} FOR UPDATE NOWAIT`
        )
        assert.isTrue(Exit.isFailure(yield* Effect.exit(tryLock)), "the loser holds the row")
        const reloaded = yield* hb.load
        assert.strictEqual(reloaded.state.next_sequence, 2)
        const retry = chain(reloaded.state, 1)
        yield* hb.append(requestOf(reloaded.state, retry.entries))
        assert.isTrue(Exit.isSuccess(yield* Effect.exit(tryLock)), "the retry released it")
        const next = chain(retry.state, 1)
        yield* ha.append(requestOf(retry.state, next.entries)).pipe(
          Effect.catchTag("SequenceConflict", () => Effect.void)
        )
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 60_000 }
  )

  it.live(
    "property: sessions written in batches store the texts, counts, heads, bytes and metadata of their entries",
    () =>
      Effect.gen(function*() {
        const ctx = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
        const admin = yield* PgClient.PgClient
        let n = 0
        const check = (s: Session) =>
          Effect.gen(function*() {
            const id = `prop-${Date.now().toString(36)}-${n++}`
            const { entries, states } = A.run(s.caps, s.ops, id)
            const h = yield* Effect.provideContext(
              Persistence.Persistence.use((p) => p.open(id, { mode: "write", caps: s.caps })),
              ctx
            )
            let at = 0
            let reported = 0
            let newest: SessionMeta.SessionMeta | undefined
            for (let i = 0; at < entries.length; i++) {
              const size = Math.min(s.cuts[i % s.cuts.length]!, entries.length - at)
              const meta = s.metas[i % s.metas.length]
              if (meta !== undefined && (newest === undefined || meta.updated_at >= newest.updated_at)) newest = meta
              const appended = yield* h.append(requestOf(states[at]!, entries.slice(at, at + size), meta))
              reported += appended.bytes
              at += size
            }
            const rows = yield* admin<SessionRow>`SELECT s.next_sequence, s.head, s.exported_head, s.entry_bytes,
                s.meta, (SELECT sum(octet_length(entry)) FROM ${admin(`${prefix}entries`)} e
                  WHERE e.session_id = s.session_id) AS octets
              FROM ${admin(`${prefix}sessions`)} s WHERE s.session_id = ${id}`
            const row = rows[0]!
            const final = states[entries.length]!
            assert.strictEqual(Number(row.next_sequence), entries.length)
            assert.strictEqual(row.head, entries[entries.length - 1]!.entry_hash)
            assert.strictEqual(row.exported_head, JournalState.head(final))
            assert.strictEqual(Number(row.entry_bytes), Number(row.octets))
            assert.strictEqual(reported, Number(row.octets))
            assert.deepStrictEqual(row.meta === null ? undefined : JSON.parse(row.meta), newest)
            const texts = yield* admin<{ readonly entry: string }>`SELECT entry FROM ${admin(`${prefix}entries`)}
              WHERE session_id = ${id} ORDER BY sequence`
            assert.deepStrictEqual(
              texts.map((t) => t.entry),
              entries.map((e) => Entry.toJsonText(Entry.encode(e)))
            )
          }).pipe(Effect.scoped)
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(session, (s) => Effect.runPromise(check(s))),
            { seed: SEED, numRuns: A.runs(25) }
          )
        )
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 120_000 }
  )

  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))
})
