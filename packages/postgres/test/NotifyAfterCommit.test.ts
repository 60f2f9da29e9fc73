/**
 * Notifications leave the append's transaction (DESIGN §8, "Notified after the
 * commit"): the statement that stores a batch calls no `pg_notify`, so appends to
 * different sessions can share a commit flush; the commits are announced by a
 * statement of their own that does not wait for the disk; and a follower that
 * hears no notification at all still gets every entry, in order, from its poll.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import type * as PgConnection from "@effect/sql-pg/PgConnection"
import { assert, describe, it } from "@effect/vitest"
import { JournalState, Persistence } from "@session-journal/core"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import type * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as Redacted from "effect/Redacted"
import type { SqlError } from "effect/sql/SqlError"
import * as Stream from "effect/Stream"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"
import { proxied } from "./wire.ts"

const prefix = freshPrefix("notify")
const channel = `${prefix}changes`

// The adapter on a client whose LISTEN never hears anything: every notification
// is lost to it.
const deafLayer = (pollInterval: Duration.Input) =>
  PgPersistence.layer({ tablePrefix: prefix, pollInterval }).pipe(
    Layer.provide(Layer.effect(
      PgClient.PgClient,
      Effect.map(
        PgClient.make({ url: Redacted.make(url), applicationName: "sj-test-deaf" }),
        (client) =>
          Object.assign(client, {
            listen: (_channel: string) => Queue.unbounded<PgConnection.Notification, SqlError>()
          })
      )
    )),
    Layer.provide(Reactivity.layer)
  )

const writerOn = (ctx: Context.Context<Persistence.Persistence>, id: string) =>
  Effect.provideContext(Persistence.Persistence.use((p) => p.open(id, { mode: "write" })), ctx)

describe.skipIf(skipReason !== null)("postgres: notified after the commit", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.live(
    "the append's statement notifies nobody; a statement of its own, not waiting for the disk, announces the commits",
    () =>
      Effect.gen(function*() {
        const stamp = Date.now().toString(36)
        const ids = [`na-${stamp}`, `nb-${stamp}`]
        const { proxy, url: viaProxy } = yield* proxied(url)
        const ctx = yield* Layer.build(PgPersistence.layerFromUrl(viaProxy, { tablePrefix: prefix }))
        const admin = yield* PgClient.PgClient
        const heard = yield* admin.listen(channel)
        // Sizes of the batches of each session: a count of 6 and one of 1 (then 3).
        const sizes: Record<string, ReadonlyArray<number>> = { [ids[0]!]: [1, 2, 3], [ids[1]!]: [1] }
        for (const id of ids) {
          const h = yield* writerOn(ctx, id)
          let state = JournalState.empty(id)
          for (const size of sizes[id]!) {
            const c = chain(state, size)
            yield* h.append(requestOf(state, c.entries))
            state = c.state
          }
        }
        // A writer of another instance, on a stale tip: its conflict keeps the row
        // locked, and its retry stores through the locking transaction.
        const other = yield* Layer.build(
          PgPersistence.layerFromUrl(viaProxy, { tablePrefix: prefix, conflictHold: "30 seconds" })
        )
        const stale = yield* writerOn(other, ids[1]!)
        const lost = yield* Effect.flip(
          stale.append(requestOf(JournalState.empty(ids[1]!), chain(JournalState.empty(ids[1]!), 1).entries))
        )
        assert.strictEqual(lost._tag, "SequenceConflict")
        const reloaded = (yield* stale.load).state
        yield* stale.append(requestOf(reloaded, chain(reloaded, 2).entries))
        // Every notification names a session and a count it has reached; the last
        // of each session names its final count.
        const newest = new Map<string, number>()
        while (newest.get(ids[0]!) !== 6 || newest.get(ids[1]!) !== 3) {
          const note = yield* Queue.take(heard)
          const [id, next] = note.payload.split(" ")
          assert.include(ids, id)
          assert.isAtLeast(Number(next), newest.get(id!) ?? 1)
          newest.set(id!, Number(next))
        }
        const notifying = [...proxy.tally.byStatement.keys()].filter((text) => text.includes("pg_notify("))
        assert.isNotEmpty(notifying)
        for (const text of notifying) {
          assert.notInclude(text, "INSERT", "the statement that stores entries notifies nobody")
          assert.notInclude(text, "UPDATE", "the statement that advances a session notifies nobody")
          assert.include(text, "set_config('synchronous_commit', 'off', true)")
        }
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 60_000 }
  )

  it.live(
    "closing the adapter right after an append still announces it",
    () =>
      Effect.gen(function*() {
        const id = `closing-${Date.now().toString(36)}`
        const admin = yield* PgClient.PgClient
        const heard = yield* admin.listen(channel)
        // The writer's instance is closed as soon as the append has returned, well
        // within the tick its notification would otherwise wait for.
        yield* Effect.scoped(Effect.gen(function*() {
          const writer = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
          const h = yield* writerOn(writer, id)
          const c = chain(JournalState.empty(id), 3)
          yield* h.append(requestOf(JournalState.empty(id), c.entries))
        }))
        const note = yield* Queue.take(heard)
        assert.strictEqual(note.payload, `${id} 3`)
      }).pipe(Effect.scoped, Effect.provide(adminLayer())),
    { timeout: 60_000 }
  )

  it.live(
    "with every notification lost, a follower in another instance still gets every entry, in order",
    () =>
      Effect.gen(function*() {
        const id = `lost-${Date.now().toString(36)}`
        const writer = yield* Layer.build(PgPersistence.layerFromUrl(url, { tablePrefix: prefix }))
        const deaf = yield* Layer.build(deafLayer("100 millis"))
        const h = yield* writerOn(writer, id)
        let state = JournalState.empty(id)
        const written: Array<string> = []
        const append = (size: number) =>
          Effect.gen(function*() {
            const c = chain(state, size)
            yield* h.append(requestOf(state, c.entries))
            for (const e of c.entries) written.push(e.entry_hash)
            state = c.state
          })
        yield* append(1)
        const total = 40
        const follower = yield* Effect.forkChild(
          Effect.provideContext(
            Persistence.Persistence.use((p) => Stream.runCollect(Stream.take(p.follow(id, 0), total))),
            deaf
          )
        )
        for (const size of [3, 1, 7, 2, 10, 1, 5, 4, 6]) yield* append(size)
        assert.strictEqual(state.next_sequence, total)
        const got = yield* Fiber.join(follower)
        assert.deepStrictEqual(
          got.map((e) => e.sequence),
          Array.from({ length: total }, (_, i) => i)
        )
        assert.deepStrictEqual(got.map((e) => e.entry_hash), written)
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
