/**
 * The PostgreSQL adapter of the `Persistence` port: many application instances, on
 * many machines, share sessions through one database.
 *
 * Every entry is a row keyed by (session_id, sequence), so two instances can never
 * store two entries at one sequence. An append is a compare-and-append in one short
 * transaction: it locks its session's row, compares the stored tip (entry count and
 * newest hash) with the one the writer built on and inserts the batch; listeners
 * are notified after the commit, outside it; a writer whose state is behind gets `SequenceConflict`,
 * storing nothing, and the service reloads and retries, so concurrent writers
 * interleave into one valid chain. When to checkpoint is the service's decision
 * (`Checkpoint.due`), fed with the bytes each append reports. Followers in any instance
 * learn of commits through LISTEN/NOTIFY and read the new rows themselves, so a
 * lost notification delays an entry (until the next notification or poll) but never
 * drops it.
 *
 * @since 0.1.0
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import {
  type JournalState,
  Persistence,
  SessionLocked,
  SessionNotFound,
  StorageError,
  StorageReason
} from "@session-journal/core"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as Redacted from "effect/Redacted"
import * as SqlClient from "effect/sql/SqlClient"
import * as ConflictHold from "./internal/conflictHold.ts"
import * as Follow from "./internal/follow.ts"
import * as Load from "./internal/load.ts"
import * as Notify from "./internal/notify.ts"
import * as Tables from "./internal/schema.ts"
import * as PgSha256 from "./internal/sha256.ts"
import * as Store from "./internal/store.ts"
import * as Write from "./internal/write.ts"

/**
 * Options of the adapter.
 *
 * @since 0.1.0
 */
export interface Options {
  /**
   * Start of every table name (default `"session_journal_"`): lowercase letters,
   * digits and `_`, at most 40 characters. Instances that share sessions must use
   * the same prefix.
   */
  readonly tablePrefix?: string | undefined
  /**
   * Whether missing tables are created and older ones migrated (default true). With
   * false nothing is created or changed: without the tables the adapter holds no
   * session (`list` is empty, every session reads as absent, writing fails with a
   * `StorageError` whose reason is `Obstructed`), and tables of an older schema are a
   * `StorageError` (operation `migrate`, reason `Obstructed`). For readers that must
   * leave no trace, such as the command line's read-only commands.
   */
  readonly createTables?: boolean | undefined
  /** Rows read per query by `history` and `follow` (default 500). */
  readonly pageSize?: number | undefined
  /**
   * How often a follower re-reads without a notification (default 2 seconds): the
   * safety net for notifications lost while the listening connection was down, or
   * never sent (they are sent after the append's commit, which a crash can come
   * between).
   */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * How long a writer that lost a race keeps the session's row locked while it
   * reloads and retries (default 2 seconds). Holding the lock makes the retry
   * succeed instead of racing the winner again; if no retry comes, the lock is
   * released when this time is up.
   */
  readonly conflictHold?: Duration.Input | undefined
  /**
   * How long a follower keeps reconnecting after its connection to the server is
   * lost (a restart, a dropped connection), with backoff from 100 milliseconds to
   * 2 seconds between attempts (default 1 minute). It then goes on from the entry
   * after the last one it delivered; once this time is up, the follow fails with
   * `StorageError`.
   *
   * @since 0.1.0
   */
  readonly followReconnect?: Duration.Input | undefined
}

/**
 * Options of `layerFromUrl`: the adapter's options plus the connection pool's.
 *
 * @since 0.1.0
 */
export interface UrlOptions extends Options {
  /** `application_name` of every connection (default `"session-journal"`). */
  readonly applicationName?: string | undefined
  /** Most connections in the pool (the driver's default when absent). */
  readonly maxConnections?: number | undefined
}

/**
 * The default table prefix.
 *
 * @since 0.1.0
 */
export const DEFAULT_PREFIX = "session_journal_"

/**
 * Whether `prefix` can be a `tablePrefix`: lowercase letters, digits and `_`, not
 * starting with a digit, at most 40 characters (so every table name derived from
 * it fits PostgreSQL's 63-byte limit). `make` and `layer` refuse any other prefix
 * with a `StorageError` whose reason is `InvalidOption`.
 *
 * @since 0.1.0
 */
export const isTablePrefix: (prefix: string) => boolean = Tables.isPrefix

/**
 * The rule `isTablePrefix` checks, as the refusal of a prefix says it.
 *
 * @since 0.1.0
 */
export const TABLE_PREFIX_RULE: string = Tables.PREFIX_RULE

/**
 * Builds the adapter on a `PgClient`, first bringing the schema up to date. An
 * invalid option (table prefix, a count that is not an integer, a duration that
 * does not parse) fails with `StorageError` (operation `configure`). The
 * LISTEN connection that serves `follow` is opened on first use and held, and
 * reopened after a failure, until the surrounding scope closes.
 *
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const prefix = options?.tablePrefix ?? DEFAULT_PREFIX
  if (!Tables.isPrefix(prefix)) return yield* Tables.invalidPrefix("configure", prefix)
  // A bad option is reported like a bad prefix, as a typed failure of the layer,
  // not as a defect when the value is first used.
  const invalid = (name: string, value: unknown) =>
    new StorageError({
      operation: "configure",
      reason: new StorageReason.InvalidOption({ option: name, message: `invalid ${name} ${String(value)}` })
    })
  const count = (name: string, value: number | undefined, fallback: number) =>
    value === undefined
      ? Effect.succeed(fallback)
      : Number.isSafeInteger(value)
      ? Effect.succeed(Math.max(1, value))
      : Effect.fail(invalid(name, value))
  const pageSize = yield* count("pageSize", options?.pageSize, 500)
  const pollInterval = yield* Persistence.decodeInterval("pollInterval", options?.pollInterval, "2 seconds")
  const conflictHold = yield* Persistence.decodeInterval("conflictHold", options?.conflictHold, "2 seconds")
  const followReconnect = yield* Persistence.decodeInterval("followReconnect", options?.followReconnect, "1 minute")
  const names = Tables.names(prefix)
  const pg = yield* PgClient.PgClient
  const layerScope = yield* Effect.scope

  if (options?.createTables === false) {
    const schema = yield* Tables.schemaState(names).pipe(
      Effect.provideService(SqlClient.SqlClient, pg.withoutTransforms()),
      Effect.mapError((cause) => StorageError.io("migrate", cause, names.migrations))
    )
    if (schema === "absent") {
      return yield* Persistence.makeAbsent(`this database has no session-journal tables with the prefix ${prefix}`)
    }
    if (schema === "behind") {
      return yield* new StorageError({
        operation: "migrate",
        path: names.migrations,
        reason: new StorageReason.Obstructed({
          message: `the tables with the prefix ${prefix} have an older schema; a writing command brings them up to date`
        })
      })
    }
  } else {
    yield* Tables.migrate(names).pipe(
      Effect.provideService(SqlClient.SqlClient, pg.withoutTransforms()),
      Effect.mapError((cause) => StorageError.io("migrate", cause, names.migrations))
    )
  }

  const store = yield* Store.make(pg, names)
  const { checkpointsT, entriesT, retryLostConnection, rows, sessionsT, sql, storageError, transaction } = store
  const load = Load.make(store)
  const hold = ConflictHold.make(store, conflictHold)
  const notifier = yield* Notify.make(store, layerScope)
  const write = Write.make(store, hold, notifier)
  const { follow, history } = Follow.make(store, { pageSize, pollInterval, followReconnect, layerScope })

  // Writers of this instance, by session: the port's single-writer guarantee within
  // one process. Across instances writers are not excluded; the sequence key and
  // the row lock of each compare-and-append keep them from forking the chain.
  const writers = new Set<string>()

  const readHandle = (id: string, caps: JournalState.Caps | undefined): Persistence.ReadHandle => ({
    id,
    load: load(id, caps, "load", null),
    verify: load(id, caps, "verify", null)
  })

  const openWrite = (id: string, caps: JournalState.Caps | undefined) =>
    Effect.gen(function*() {
      yield* Effect.acquireRelease(
        Effect.suspend(() => {
          if (writers.has(id)) return Effect.fail(new SessionLocked({ id, holder: "another writer in this process" }))
          writers.add(id)
          return Effect.void
        }),
        () => Effect.sync(() => writers.delete(id))
      )
      const scope = yield* Effect.scope
      const slot: ConflictHold.WriterHold = { held: null }
      const cache: Load.Cache = { seen: null }
      const handle: Persistence.WriteHandle = {
        id,
        // The reload after a lost race runs on the held connection: the release
        // timer must not roll it back under the reload, and restarts after it.
        load: Effect.suspend(() => {
          const held = hold.isLive(slot.held) ? slot.held : null
          if (held === null) return load(id, caps, "load", null, cache)
          held.inUse = true
          held.uses++
          return load(id, caps, "load", held.level, cache).pipe(
            Effect.ensuring(Effect.suspend(() => {
              held.inUse = false
              return Effect.asVoid(hold.releaseLater(held, scope))
            }))
          )
        }),
        verify: load(id, caps, "verify", null),
        append: (request) => write.append(id, caps, request, slot, scope),
        checkpoint: (document) => write.checkpoint(id, document)
      }
      return handle
    })

  const open = Persistence.makeOpen({
    read: (id, caps) => Effect.succeed(readHandle(id, caps)),
    write: openWrite
  })

  const list = sql`SELECT s.session_id, s.next_sequence, s.head, s.exported_head,
      (extract(epoch FROM s.updated_at) * 1000)::int8 AS updated_ms,
      s.entry_bytes + coalesce(octet_length(c.doc), 0) AS bytes
    FROM ${sessionsT} s LEFT JOIN ${checkpointsT} c ON c.session_id = s.session_id
    ORDER BY s.session_id`.pipe(
    retryLostConnection,
    Effect.flatMap(rows.list),
    Effect.map((listed) =>
      listed.map((r): Persistence.SessionInfo => ({
        id: r.session_id,
        entries: r.next_sequence,
        // NULL: written before the column existed, or not known; the newest hash is
        // the exported head of every session that has not evicted yet.
        head: r.exported_head ?? r.head,
        lastHash: r.head,
        updatedAt: r.updated_ms,
        bytes: r.bytes,
        problem: null
      }))
    ),
    Effect.catchTag("SqlError", (e) => Effect.fail(storageError("list", names.sessions)(e)))
  )

  const remove = (id: string): Effect.Effect<void, StorageError | SessionLocked | SessionNotFound> =>
    Effect.suspend(() => {
      if (writers.has(id)) return Effect.fail(new SessionLocked({ id, holder: "a writer in this process" }))
      // Deleting the session row first takes the lock appends take: an append in
      // flight finishes before, and one that follows finds an empty session.
      // A lost connection is retried like a page read. An attempt that ran every
      // statement and lost its connection at COMMIT may have deleted the session,
      // so a retry that then finds no session reports success, not SessionNotFound.
      let mayHaveCommitted = false
      return retryLostConnection(transaction(Effect.gen(function*() {
        const deleted = yield* sql`DELETE FROM ${sessionsT} WHERE session_id = ${id} RETURNING session_id`
        if (deleted.length === 0) {
          return mayHaveCommitted ? undefined : yield* new SessionNotFound({ id })
        }
        yield* sql`DELETE FROM ${entriesT} WHERE session_id = ${id}`
        yield* sql`DELETE FROM ${checkpointsT} WHERE session_id = ${id}`
        mayHaveCommitted = true
      }))).pipe(Effect.catchTag("SqlError", (e) => Effect.fail(storageError("delete", names.sessions)(e))))
    })

  return Persistence.Persistence.of({ open, history, follow, list, delete: remove })
})

/**
 * The adapter as a layer over a `PgClient` (from `@effect/sql-pg`), for
 * applications that already have one. Like `NodePersistence.layer`, it installs
 * `node:crypto`'s SHA-256 for the chain while it is alive (`Sha256.layerPreferred`;
 * `make` does not).
 *
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<Persistence.Persistence, StorageError, PgClient.PgClient> =>
  Layer.merge(Layer.effect(Persistence.Persistence, make(options)), PgSha256.layer)

/**
 * The adapter with its own connection pool to `url`
 * (`postgres://user@host:port/database`). The pool closes with the layer. Installs
 * `node:crypto`'s SHA-256 as `layer` does.
 *
 * @since 0.1.0
 */
export const layerFromUrl = (url: string, options?: UrlOptions): Layer.Layer<Persistence.Persistence, StorageError> =>
  Layer.merge(
    Layer.effect(
      Persistence.Persistence,
      Effect.gen(function*() {
        const client = yield* PgClient.make({
          url: Redacted.make(url),
          applicationName: options?.applicationName ?? "session-journal",
          maxConnections: options?.maxConnections
        }).pipe(Effect.mapError((cause) => StorageError.io("connect", cause)))
        return yield* Effect.provideService(make(options), PgClient.PgClient, client)
      }).pipe(Effect.provide(Reactivity.layer))
    ),
    PgSha256.layer
  )

/**
 * Drops every table of a prefix (default `"session_journal_"`): all sessions,
 * entries, checkpoints and the migration record. For tests and teardown.
 *
 * @since 0.1.0
 */
export const dropTables = (
  tablePrefix: string = DEFAULT_PREFIX
): Effect.Effect<void, StorageError, PgClient.PgClient> =>
  Effect.gen(function*() {
    if (!Tables.isPrefix(tablePrefix)) return yield* Tables.invalidPrefix("drop", tablePrefix)
    const pg = yield* PgClient.PgClient
    yield* Tables.drop(Tables.names(tablePrefix)).pipe(
      Effect.provideService(SqlClient.SqlClient, pg),
      Effect.mapError((cause) => StorageError.io("drop", cause))
    )
  })
