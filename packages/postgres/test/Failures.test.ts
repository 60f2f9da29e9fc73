/**
 * What the adapter does when PostgreSQL connections die, and when notifications
 * are lost: writes fail with a typed error and the next one continues the chain;
 * followers in other instances still receive every entry.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert, describe, it } from "@effect/vitest"
import { Entry, JournalState, Persistence, SessionJournal, SessionNotFound } from "@session-journal/core"
import { toolParams } from "@session-journal/core/test/fixtures"
import { chain, requestOf } from "@session-journal/core/test/PersistenceContract"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { afterAll } from "vitest"
import { PgPersistence } from "../src/index.ts"
import { adminLayer, freshPrefix, skipReason, url } from "./pg.ts"

const prefix = freshPrefix("fail")
const appName = `sj-victim-${process.pid}`

const params = (n: number): Entry.ToolParams => toolParams("tool", { bytes_read: n })

// The instance under attack, and a second instance (same application_name, so its
// connections die too) that only follows and learns of commits by notification.
const Victim = SessionJournal.layer().pipe(
  Layer.provideMerge(PgPersistence.layerFromUrl(url, { tablePrefix: prefix, applicationName: appName }))
)
const makeFollower = PgPersistence.layerFromUrl(url, {
  tablePrefix: prefix,
  applicationName: appName,
  pollInterval: "1 hour"
})

const waitUntil = <E, R>(check: Effect.Effect<boolean, E, R>): Effect.Effect<void, E, R> =>
  Effect.flatMap(check, (ok) => ok ? Effect.void : Effect.andThen(Effect.sleep("20 millis"), waitUntil(check)))

// Holds the session's row from another connection (SELECT … FOR UPDATE in an open
// transaction) until `release` is completed, so an append blocks inside its own
// transaction.
const holdSessionRow = (admin: PgClient.PgClient, id: string) =>
  Effect.gen(function*() {
    const locked = yield* Deferred.make<void>()
    const release = yield* Deferred.make<void>()
    const holder = yield* admin.withTransaction(Effect.gen(function*() {
      yield* admin`SELECT 1 AS one FROM ${admin(`${prefix}sessions`)} WHERE session_id = ${id} FOR UPDATE`
      yield* Deferred.succeed(locked, undefined)
      yield* Deferred.await(release)
    })).pipe(Effect.forkChild)
    yield* Deferred.await(locked)
    return { holder, release }
  })

describe.skipIf(skipReason !== null)("postgres: failures", () => {
  afterAll(() => Effect.runPromise(PgPersistence.dropTables(prefix).pipe(Effect.provide(adminLayer()))))

  it.live(
    "a connection killed mid-write gives StorageError; the next write continues with no gap",
    () =>
      Effect.gen(function*() {
        const id = `kill-${Date.now().toString(36)}`
        const journal = yield* SessionJournal.SessionJournal
        const admin = yield* PgClient.PgClient
        for (let n = 0; n < 3; n++) yield* journal.record(id, params(n))

        const followerScope = yield* Effect.scope
        const follower = yield* Layer.buildWithScope(makeFollower, followerScope)
        const followed = yield* Persistence.Persistence.use((p) =>
          p.follow(id, 0).pipe(Stream.take(4), Stream.runCollect)
        ).pipe(
          Effect.provideContext(follower),
          Effect.forkChild
        )

        // Hold the session row from another connection, so the next append blocks
        // inside its transaction; then kill every connection of the instance.
        const { holder, release } = yield* holdSessionRow(admin, id)
        const write = yield* journal.record(id, params(3)).pipe(Effect.exit, Effect.forkChild)
        yield* waitUntil(Effect.map(
          admin`SELECT pid FROM pg_stat_activity WHERE application_name = ${appName} AND wait_event_type = 'Lock'`,
          (rows) => rows.length > 0
        ))
        const killed = yield* admin<
          { readonly pid: number }
        >`SELECT pid FROM pg_stat_activity WHERE application_name = ${appName}`
        yield* admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ${appName}`
        const failed = yield* Fiber.join(write)
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)

        assert.isTrue(Exit.isFailure(failed))
        if (Exit.isFailure(failed)) {
          const error = Exit.findErrorOption(failed)
          assert.strictEqual(error._tag === "Some" ? error.value._tag : "none", "StorageError")
        }
        assert.isAbove(killed.length, 1)

        const next = yield* journal.record(id, params(4))
        assert.strictEqual(next.sequence, 3)
        const stored = yield* journal.entries(id).pipe(Stream.runCollect)
        assert.deepStrictEqual(stored.map((e) => e.sequence), [0, 1, 2, 3])
        assert.deepStrictEqual(stored.map((e) => (Entry.isTool(e) ? e.bytes_read : -1)), [0, 1, 2, 4])
        const report = yield* journal.verify(id)
        assert.strictEqual(report.nextSequence, 4)

        // The other instance's LISTEN connection died too; it reconnects, re-reads,
        // and still delivers every entry.
        const got = yield* Fiber.join(followed)
        assert.deepStrictEqual(got.map((e) => e.entry_hash), stored.map((e) => e.entry_hash))
      }).pipe(Effect.provide(Layer.merge(Victim, adminLayer("sj-test-killer")))),
    { timeout: 60_000 }
  )

  it.live(
    "an append that waits on the session's row longer than conflictHold still commits, once",
    () =>
      Effect.gen(function*() {
        const id = `slow-${Date.now().toString(36)}`
        const p = yield* Persistence.Persistence
        const admin = yield* PgClient.PgClient
        const first = chain(JournalState.empty(id), 2)
        yield* Effect.scoped(
          Effect.flatMap(
            p.open(id, { mode: "write" }),
            (h) => h.append(requestOf(JournalState.empty(id), first.entries))
          )
        )
        const { holder, release } = yield* holdSessionRow(admin, id)
        const second = chain(first.state, 3)
        const write = yield* Effect.scoped(
          Effect.flatMap(p.open(id, { mode: "write" }), (h) => h.append(requestOf(first.state, second.entries)))
        ).pipe(Effect.exit, Effect.forkChild)
        // Blocked on the row lock, then kept there for several times conflictHold.
        yield* waitUntil(Effect.map(
          admin`SELECT pid FROM pg_stat_activity WHERE application_name = 'sj-test-slow' AND wait_event_type = 'Lock'`,
          (rows) => rows.length > 0
        ))
        yield* Effect.sleep("500 millis")
        yield* Deferred.succeed(release, undefined)
        yield* Fiber.join(holder)
        const exit = yield* Fiber.join(write)
        assert.isTrue(Exit.isSuccess(exit), String(exit))
        const stored = yield* p.history(id).pipe(Stream.runCollect)
        assert.deepStrictEqual(
          stored.map((e) => e.entry_hash),
          [...first.entries, ...second.entries].map((e) => e.entry_hash)
        )
        const [row] = yield* admin<{ readonly next_sequence: string }>`SELECT next_sequence FROM ${
          admin(`${prefix}sessions`)
        } WHERE session_id = ${id}`
        assert.strictEqual(Number(row!.next_sequence), 5)
      }).pipe(
        Effect.provide(Layer.merge(
          PgPersistence.layerFromUrl(url, {
            tablePrefix: prefix,
            applicationName: "sj-test-slow",
            conflictHold: "100 millis"
          }),
          adminLayer("sj-test-slow-admin")
        ))
      ),
    { timeout: 60_000 }
  )

  it.live(
    "with a tiny conflictHold, the reload after a lost race and the retry still succeed",
    () =>
      Effect.gen(function*() {
        const id = `race-${Date.now().toString(36)}`
        const scope = yield* Effect.scope
        const options = { tablePrefix: prefix, applicationName: "sj-test-race", conflictHold: "1 millis" } as const
        const a = yield* Layer.buildWithScope(PgPersistence.layerFromUrl(url, options), scope)
        const b = yield* Layer.buildWithScope(PgPersistence.layerFromUrl(url, options), scope)
        const writer = (ctx: typeof a) =>
          Effect.provideContext(Persistence.Persistence.use((p) => p.open(id, { mode: "write" })), ctx)
        const ha = yield* writer(a)
        const hb = yield* writer(b)
        for (let round = 0; round < 5; round++) {
          const stale = yield* hb.load
          const now = yield* ha.load
          const mine = chain(now.state, 1)
          yield* ha.append(requestOf(now.state, mine.entries))
          // b is behind: it loses, reloads on the held connection, and retries.
          const lost = chain(stale.state, 1, 1764500000)
          const conflict = yield* Effect.exit(hb.append(requestOf(stale.state, lost.entries)))
          assert.isTrue(Exit.isFailure(conflict))
          const reloaded = yield* hb.load
          assert.strictEqual(reloaded.state.next_sequence, 2 * round + 1)
          yield* Effect.sleep("5 millis")
          const retry = chain(reloaded.state, 1)
          yield* hb.append(requestOf(reloaded.state, retry.entries))
        }
        const stored = yield* Effect.provideContext(
          Persistence.Persistence.use((p) => Stream.runCollect(p.history(id))),
          a
        )
        assert.deepStrictEqual(stored.map((e) => e.sequence), Array.from({ length: 10 }, (_, i) => i))
      }),
    { timeout: 60_000 }
  )

  it.live("a follower polls: entries stored without a notification still arrive", () =>
    Effect.gen(function*() {
      const id = `quiet-${Date.now().toString(36)}`
      const p = yield* Persistence.Persistence
      const admin = yield* PgClient.PgClient
      const first = chain(JournalState.empty(id), 2)
      yield* Effect.scoped(
        Effect.flatMap(p.open(id, { mode: "write" }), (h) => h.append(requestOf(JournalState.empty(id), first.entries)))
      )
      const followed = yield* p.follow(id, 0).pipe(Stream.take(3), Stream.runCollect, Effect.forkChild)
      // Stored behind the adapter's back: no NOTIFY is sent.
      const quiet = chain(first.state, 1).entries[0]!
      yield* admin.withTransaction(Effect.gen(function*() {
        yield* admin`INSERT INTO ${admin(`${prefix}entries`)} (session_id, sequence, entry_hash, entry)
          VALUES (${id}, ${quiet.sequence}, ${quiet.entry_hash}, ${JSON.stringify(Entry.encode(quiet))})`
        yield* admin`UPDATE ${
          admin(`${prefix}sessions`)
        } SET next_sequence = 3, head = ${quiet.entry_hash} WHERE session_id = ${id}`
      }))
      const got = yield* Fiber.join(followed)
      assert.deepStrictEqual(got.map((e) => e.entry_hash), [...first.entries, quiet].map((e) => e.entry_hash))
    }).pipe(
      Effect.provide(Layer.merge(
        PgPersistence.layerFromUrl(url, {
          tablePrefix: prefix,
          applicationName: "sj-test-quiet",
          pollInterval: "100 millis"
        }),
        adminLayer("sj-test-quiet-admin")
      ))
    ), { timeout: 60_000 })
  it.live(
    "a follower of a session deleted while it is followed ends with SessionNotFound",
    () =>
      Effect.gen(function*() {
        const id = `gone-${Date.now().toString(36)}`
        const p = yield* Persistence.Persistence
        const first = chain(JournalState.empty(id), 2)
        yield* Effect.scoped(
          Effect.flatMap(
            p.open(id, { mode: "write" }),
            (h) => h.append(requestOf(JournalState.empty(id), first.entries))
          )
        )
        const caughtUp = yield* Deferred.make<void>()
        let received = 0
        const followed = yield* p.follow(id, 0).pipe(
          Stream.tap(() => (++received === 2 ? Deferred.succeed(caughtUp, undefined) : Effect.void)),
          Stream.runDrain,
          Effect.exit,
          Effect.forkChild
        )
        yield* Deferred.await(caughtUp)
        yield* p.delete(id)
        const exit = yield* Fiber.join(followed)
        assert.strictEqual(received, 2)
        const error = Exit.isFailure(exit) ? Exit.findErrorOption(exit) : undefined
        assert.isTrue(error?._tag === "Some" && error.value instanceof SessionNotFound, String(exit))
      }).pipe(
        Effect.provide(
          PgPersistence.layerFromUrl(url, {
            tablePrefix: prefix,
            applicationName: "sj-test-gone",
            pollInterval: "100 millis"
          })
        )
      ),
    { timeout: 60_000 }
  )
})
