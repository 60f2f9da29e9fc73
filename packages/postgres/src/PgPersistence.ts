/**
 * The PostgreSQL adapter of the `Persistence` port: many application instances, on
 * many machines, share sessions through one database.
 *
 * Every entry is a row keyed by (session_id, sequence), so two instances can never
 * store two entries at one sequence. An append is a compare-and-append in one short
 * transaction: it locks its session's row, compares the stored tip (entry count and
 * newest hash) with the one the writer built on, inserts the batch and notifies
 * listeners on commit; a writer whose state is behind gets `SequenceConflict`,
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
  Checkpoint,
  CorruptJournal,
  Entry,
  JournalState,
  Persistence,
  Chain,
  Recovery,
  SequenceConflict,
  SessionLocked,
  SessionMeta,
  SessionNotFound,
  StorageError
} from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Data from "effect/Data"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Reactivity from "effect/reactivity/Reactivity"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as SqlClient from "effect/sql/SqlClient"
import { isSqlError, type SqlError } from "effect/sql/SqlError"
import * as Stream from "effect/Stream"
import { stringify } from "./internal/json.ts"
import * as Rows from "./internal/rows.ts"
import * as Tables from "./internal/schema.ts"

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
  /** Rows read per query by `history` and `follow` (default 500). */
  readonly pageSize?: number | undefined
  /**
   * How often a follower re-reads without a notification (default 2 seconds): the
   * safety net for notifications lost while the listening connection was down.
   */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * How long a writer that lost a race keeps the session's row locked while it
   * reloads and retries (default 2 seconds). Holding the lock makes the retry
   * succeed instead of racing the winner again; if no retry comes, the lock is
   * released when this time is up.
   */
  readonly conflictHold?: Duration.Input | undefined
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

/** A checkpoint row found broken and rebuilt around, to be set aside. */
interface Damaged {
  readonly doc: string
  readonly reason: string
}

/** What a full load read, and the broken checkpoint it replaced, if any. */
interface Loading {
  readonly loaded: Persistence.Loaded
  readonly damaged: Damaged | null
}

/**
 * A transaction kept open after a lost race: it holds the session's row lock until
 * the retry commits through it, or it is released.
 */
interface Held {
  readonly level: SqlClient.TransactionConnection.Service
  readonly finish: Deferred.Deferred<boolean>
  readonly fiber: Fiber.Fiber<void, SqlError | HoldReleased>
  /** An append or a reload is running on it: the release timer must leave it alone. */
  inUse: boolean
  /** Counts the uses, so a timer armed for an earlier one is void. */
  uses: number
}

/** The hold of one write handle: the transaction its last lost race left open, if any. */
interface Slot {
  held: Held | null
}

class HoldReleased extends Data.TaggedError("HoldReleased")<{}> {}

/** "Session `id` now ends before `next`"; `id: null` asks every follower to re-read. */
interface Signal {
  readonly id: string | null
  readonly next: number
}

const decodeMeta = Schema.decodeUnknownResult(SessionMeta.SessionMeta)
const encodeMeta = Schema.encodeSync(SessionMeta.SessionMeta)

const parseJson = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (e) {
    return Result.fail(e instanceof Error ? e.message : String(e))
  }
}

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
  if (!Tables.isPrefix(prefix)) {
    return yield* new StorageError({
      operation: "configure",
      reason: `invalid table prefix ${JSON.stringify(prefix)}: use lowercase letters, digits and _, at most 40 characters`
    })
  }
  // A bad option is reported like a bad prefix, as a typed failure of the layer,
  // not as a defect when the value is first used.
  const invalid = (name: string, value: unknown) =>
    new StorageError({ operation: "configure", reason: `invalid ${name} ${String(value)}` })
  const count = (name: string, value: number | undefined, fallback: number) =>
    value === undefined ? Effect.succeed(fallback) : Number.isSafeInteger(value) ? Effect.succeed(Math.max(1, value)) : Effect.fail(invalid(name, value))
  const duration = (name: string, value: Duration.Input | undefined) =>
    Option.match(Duration.fromInput(value ?? "2 seconds"), {
      onNone: () => Effect.fail(invalid(name, value)),
      onSome: (d) => Effect.succeed(d)
    })
  const pageSize = yield* count("pageSize", options?.pageSize, 500)
  const pollInterval = yield* duration("pollInterval", options?.pollInterval)
  const conflictHold = yield* duration("conflictHold", options?.conflictHold)
  const names = Tables.names(prefix)
  const pg = yield* PgClient.PgClient
  const sql = pg.withoutTransforms()
  const layerScope = yield* Effect.scope

  yield* Tables.migrate(names).pipe(
    Effect.provideService(SqlClient.SqlClient, sql),
    Effect.mapError((cause) => new StorageError({ operation: "migrate", path: names.migrations, cause }))
  )

  const sessionsT = sql(names.sessions)
  const entriesT = sql(names.entries)
  const checkpointsT = sql(names.checkpoints)

  const storageError = (operation: string, path: string) => (cause: SqlError) =>
    new StorageError({ operation, path, reason: cause.message, cause })

  // A connection lost inside a transaction also fails its ROLLBACK, which the SQL
  // client reports as a defect; it is a storage failure like any other here.
  const transaction = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError> =>
    sql.withTransaction(self).pipe(
      Effect.catchCause((cause): Effect.Effect<A, E | SqlError> => {
        if (cause.reasons.some(Cause.isInterruptReason)) return Effect.failCause(cause)
        const failure = cause.reasons.find(Cause.isFailReason)
        if (failure !== undefined) return Effect.fail(failure.error)
        const lost = cause.reasons.find((r) => Cause.isDieReason(r) && isSqlError(r.defect))
        return lost !== undefined && Cause.isDieReason(lost) ? Effect.fail(lost.defect as SqlError) : Effect.failCause(cause)
      })
    )

  const writers = new Set<string>()
  const signals = yield* PubSub.sliding<Signal>(4096)

  const corrupt = (id: string, offset: number, reason: string) =>
    new CorruptJournal({ segment: `${names.entries}:${id}`, offset, reason })

  // The rows of each query, decoded by its Schema; `operation` names the caller.
  const rowsOf = {
    session: (operation: string) => Rows.decode(Rows.SessionRow, names.sessions, operation),
    locked: Rows.decode(Rows.LockedRow, names.sessions, "append"),
    entry: (operation: string) => Rows.decode(Rows.EntryRow, names.entries, operation),
    sizedEntry: (operation: string) => Rows.decode(Rows.SizedEntryRow, names.entries, operation),
    checkpoint: (operation: string) => Rows.decode(Rows.CheckpointRow, names.checkpoints, operation),
    stored: Rows.decode(Rows.BytesRow, names.checkpoints, "checkpoint"),
    appended: Rows.decode(Rows.BytesRow, names.entries, "append"),
    ends: Rows.decode(Rows.EndsRow, names.sessions, "checkpoint"),
    list: Rows.decode(Rows.ListRow, names.sessions, "list")
  }

  // An entry row that decodes as a row but whose JSON text is no valid entry (or
  // another sequence's) is damage in the journal, not a storage failure.
  const decodeRow = (id: string, row: typeof Rows.EntryRow.Type): Result.Result<Entry.Entry, CorruptJournal> => {
    const sequence = row.sequence
    const parsed = parseJson(row.entry)
    if (Result.isFailure(parsed)) return Result.fail(corrupt(id, sequence, `unparsable entry: ${parsed.failure}`))
    const decoded = Entry.decode(parsed.success)
    if (Result.isFailure(decoded)) return Result.fail(corrupt(id, sequence, `invalid entry: ${decoded.failure.message}`))
    if (decoded.success.sequence !== sequence) {
      return Result.fail(corrupt(id, sequence, `row holds sequence ${decoded.success.sequence}`))
    }
    return Result.succeed(decoded.success)
  }

  const decodeRows = (id: string, rows: ReadonlyArray<typeof Rows.EntryRow.Type>) =>
    Effect.suspend(() => {
      const out: Array<Entry.Entry> = []
      for (const row of rows) {
        const r = decodeRow(id, row)
        if (Result.isFailure(r)) return Effect.fail(r.failure)
        out.push(r.success)
      }
      return Effect.succeed(out)
    })

  // Only connection-level failures are retried: a logical error (a typed failure
  // of `self`, or a query the server rejected) is reported at once.
  const retryLostConnection = <A, E>(self: Effect.Effect<A, E | SqlError>): Effect.Effect<A, E | SqlError> =>
    Effect.retry(self, {
      times: 3,
      schedule: Schedule.spaced("100 millis"),
      while: (e: E | SqlError) => isSqlError(e) && e.reason._tag === "ConnectionError"
    })

  // A page read is idempotent (keyset from a sequence), so a connection that died
  // while idle in the pool is retried on a fresh one before anyone is told.
  const readPage = (id: string, from: number, limit: number, operation: string) =>
    sql`SELECT sequence, entry FROM ${entriesT}
      WHERE session_id = ${id} AND sequence >= ${from} ORDER BY sequence LIMIT ${limit}`.pipe(
      retryLostConnection,
      Effect.flatMap(rowsOf.entry(operation)),
      Effect.flatMap((rows) => decodeRows(id, rows))
    )

  const sessionExists = (id: string) =>
    sql`SELECT 1 AS found FROM ${sessionsT} WHERE session_id = ${id}`.pipe(
      retryLostConnection,
      Effect.map((rows) => rows.length > 0)
    )

  // --- load

  // One recovery (core's) over the checkpoint row and the entry rows: load mode
  // reads from the checkpoint's last entry on, verify mode every row. The bytes of
  // the rows after the checkpoint the recovery started from, and the checkpoint's
  // own size, let the service's checkpoint policy carry on where it stopped.
  const recoverTx = (id: string, caps: JournalState.Caps | undefined, mode: Recovery.Options["mode"]) =>
    Effect.gen(function*() {
      const operation = mode
      const [row] = yield* sql`SELECT next_sequence, entry_cap, tool_counts_cap, meta
        FROM ${sessionsT} WHERE session_id = ${id}`.pipe(Effect.flatMap(rowsOf.session(operation)))
      const [cp] = yield* sql`SELECT doc, octet_length(doc) AS bytes FROM ${checkpointsT}
        WHERE session_id = ${id}`.pipe(Effect.flatMap(rowsOf.checkpoint(operation)))
      if (row === undefined && cp === undefined) {
        const none: Loading = { loaded: { state: JournalState.empty(id, caps), exists: false, recovery: Persistence.cleanReport("none", 0) }, damaged: null }
        return none
      }
      const location = `${names.entries}:${id}`
      const sessionCaps = row === undefined ? caps : { entry_cap: row.entry_cap, tool_counts_cap: row.tool_counts_cap }
      const storedCount = row?.next_sequence
      const recoverWith = (checkpoint: Recovery.CheckpointInput, recoverMode: Recovery.Options["mode"]) =>
        Effect.gen(function*() {
          const recovery = Recovery.make({ id, mode: recoverMode, checkpoint, caps: sessionCaps, storedCount, location })
          const after = recovery.checkpoint?.next_sequence ?? 0
          const from = recoverMode === "load" ? Math.max(0, after - 1) : 0
          const rows = yield* sql`SELECT sequence, entry, octet_length(entry) AS bytes FROM ${entriesT}
            WHERE session_id = ${id} AND sequence >= ${from} ORDER BY sequence`.pipe(Effect.flatMap(rowsOf.sizedEntry(operation)))
          const entries = yield* decodeRows(id, rows)
          let since = 0
          for (const r of rows) if (r.sequence >= after) since += r.bytes
          for (const input of Recovery.rows(location, from, entries)) if (!recovery.offer(input)) break
          return { outcome: recovery.done(), since }
        })
      const checkpoint: Recovery.CheckpointInput = cp === undefined
        ? null
        : Result.match(parseJson(cp.doc), {
          onSuccess: (document): Recovery.CheckpointInput => ({ _tag: "Document", document, location: `${names.checkpoints}:${id}` }),
          onFailure: (reason): Recovery.CheckpointInput => ({ _tag: "Unreadable", reason, location: `${names.checkpoints}:${id}` })
        })
      let { outcome, since } = yield* recoverWith(checkpoint, mode)
      let checkpointBytes = cp?.bytes ?? 0
      let damaged: Damaged | null = null
      // Every entry is in the table, so a checkpoint row that is unusable or that the
      // rows contradict is rebuilt from sequence 0 when the rows verify by
      // themselves, and set aside (a load only: a verify reports and never writes).
      // Rows missing under it are not its fault: the session stays corrupt.
      const stop = outcome.report.stopped
      if (mode === "load" && cp !== undefined && (outcome.brokenCheckpoint !== null || stop?.reason === "checkpoint")) {
        const rebuilt = yield* recoverWith(null, "verify")
        if (rebuilt.outcome.report.stopped === null) {
          damaged = { doc: cp.doc, reason: outcome.brokenCheckpoint ?? `${stop!.reason}: ${stop!.detail}` }
          outcome = { ...rebuilt.outcome, report: { ...rebuilt.outcome.report, checkpoint: "rebuilt" } }
          since = rebuilt.since
          checkpointBytes = 0
        }
      }
      let loaded: Persistence.Loaded = { ...Persistence.loaded(outcome, true), sinceCheckpointBytes: since, checkpointBytes }
      if (row?.meta != null) {
        const meta = Result.flatMap(parseJson(row.meta), (json) => Result.mapError(decodeMeta(json), (e) => e.message))
        if (Result.isFailure(meta)) {
          return yield* new CorruptJournal({ segment: `${names.sessions}:${id}`, offset: 0, reason: `invalid meta: ${meta.failure}` })
        }
        loaded = { ...loaded, state: JournalState.applyMeta(loaded.state, meta.success) }
      }
      const loading: Loading = { loaded, damaged }
      return loading
    })

  // One snapshot for the checkpoint and the rows after it: a concurrent append
  // or delete cannot fall between the two reads.
  const repeatableRead = <A, E>(self: Effect.Effect<A, E>) =>
    transaction(self).pipe(
      Effect.provideService(SqlClient.BeginTransaction, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    )

  // Inside a held transaction the reads run on its connection: the row lock it
  // holds keeps the session still, and no second connection is needed.
  const load = (
    id: string,
    caps: JournalState.Caps | undefined,
    mode: Recovery.Options["mode"],
    held: Held | null
  ): Effect.Effect<Persistence.Loaded, Persistence.LoadError> =>
    Effect.gen(function*() {
      const recover = recoverTx(id, caps, mode)
      const { damaged, loaded } = yield* (held === null
        ? repeatableRead(recover)
        : Effect.provideService(recover, sql.transactionService, held.level))
      // The load snapshot is read-only, so the broken row is set aside after it, in
      // one statement of its own that moves it only if it is still the row that was
      // read: a checkpoint written meanwhile is left alone. If the move fails the
      // load fails, rather than leave the bytes where the next checkpoint overwrites them.
      if (damaged !== null) {
        yield* sql`WITH moved AS (
            DELETE FROM ${checkpointsT} WHERE session_id = ${id} AND doc = ${damaged.doc}
            RETURNING session_id, next_sequence, doc, written_at
          )
          INSERT INTO ${sql(names.checkpointsDamaged)} (session_id, next_sequence, doc, written_at, reason)
          SELECT session_id, next_sequence, doc, written_at, ${damaged.reason} FROM moved`
      }
      return loaded
    }).pipe(Effect.catchTag("SqlError", (e) => Effect.fail(storageError("load", names.entries)(e))))

  // --- checkpoint

  // Stored only when it describes what is stored: the session holds at least its
  // entries, its newest retained entry is the stored one, and it is not older than
  // the checkpoint it replaces. The same statement gives the session row the
  // exported head when the checkpoint ends where the session does (filling in rows
  // written before that column existed).
  const checkpoint = (id: string, document: Checkpoint.CheckpointJson): Effect.Effect<number, StorageError> =>
    Effect.gen(function*() {
      const doc = stringify(document)
      const next = document.next_sequence
      const last = document.entries[document.entries.length - 1]
      const head = Chain.exportedHead(document.evicted_head, last?.entry_hash)
      const matchesLast = last === undefined
        ? sql`TRUE`
        : sql`EXISTS (SELECT 1 FROM ${entriesT} WHERE session_id = ${id} AND sequence = ${next - 1}
            AND entry_hash = ${last.entry_hash})`
      const sessionAtEnd = last === undefined ? sql`TRUE` : sql`head = ${last.entry_hash}`
      const stored = yield* sql`WITH stored AS (
          INSERT INTO ${checkpointsT} (session_id, next_sequence, doc)
          SELECT ${id}, ${next}, ${doc}
          WHERE EXISTS (SELECT 1 FROM ${sessionsT} WHERE session_id = ${id} AND next_sequence >= ${next}) AND ${matchesLast}
          ON CONFLICT (session_id) DO UPDATE SET next_sequence = EXCLUDED.next_sequence, doc = EXCLUDED.doc, written_at = now()
          WHERE ${checkpointsT}.next_sequence <= EXCLUDED.next_sequence
          RETURNING octet_length(doc) AS bytes
        ), exported AS (
          UPDATE ${sessionsT} SET exported_head = ${head}
          WHERE session_id = ${id} AND next_sequence = ${next} AND ${sessionAtEnd} AND EXISTS (SELECT 1 FROM stored)
        )
        SELECT bytes FROM stored`.pipe(Effect.flatMap(rowsOf.stored))
      const [row] = stored
      if (row !== undefined) return row.bytes
      return yield* refused(id, document)
    }).pipe(Effect.catchTag("SqlError", (e) => Effect.fail(storageError("checkpoint", names.checkpoints)(e))))

  // Why a checkpoint was refused, as far as storage can tell now.
  const refused = (id: string, document: Checkpoint.CheckpointJson) =>
    Effect.gen(function*() {
      const next = document.next_sequence
      const [row] = yield* sql`SELECT (SELECT next_sequence FROM ${sessionsT} WHERE session_id = ${id}) AS stored,
          (SELECT next_sequence FROM ${checkpointsT} WHERE session_id = ${id}) AS checkpointed`.pipe(
        Effect.flatMap(rowsOf.ends)
      )
      const stored = row?.stored ?? 0
      const checkpointed = row?.checkpointed ?? null
      const reason = next > stored
        ? `checkpoint (next ${next}) is ahead of storage (${stored} entries)`
        : checkpointed !== null && next < checkpointed
        ? `checkpoint (next ${next}) is older than the stored one (next ${checkpointed})`
        : `checkpoint ends with entry ${next - 1}, which storage holds with another hash`
      return yield* new StorageError({ operation: "checkpoint", path: `${names.checkpoints}:${id}`, reason })
    })

  // --- append

  // The compare-and-append, inside one transaction: stores the batch only if the
  // stored tip is `request.after`.
  const appendTx = (id: string, caps: JournalState.Caps | undefined, request: Persistence.AppendRequest) =>
    Effect.gen(function*() {
      const initial = JournalState.empty(id, caps)
      // Creates the session row if needed and locks it until commit: appends to one
      // session are serialized across every instance, and the row says exactly
      // what is stored.
      const [row] = yield* sql`INSERT INTO ${sessionsT} (session_id, head, entry_cap, tool_counts_cap)
        VALUES (${id}, ${Entry.ZERO_HASH}, ${initial.entry_cap}, ${initial.tool_counts_cap})
        ON CONFLICT (session_id) DO UPDATE SET session_id = EXCLUDED.session_id
        RETURNING next_sequence, head, meta_updated_at`.pipe(Effect.flatMap(rowsOf.locked))
      const stored = row!.next_sequence
      const conflict = new SequenceConflict({ id, sequence: request.after.sequence })
      if (!Persistence.tipMatches(request.after, stored, row!.head)) return yield* conflict
      for (const [i, entry] of request.entries.entries()) {
        if (entry.sequence !== stored + i) return yield* conflict
      }
      const storedMetaAt = row!.meta_updated_at
      const meta = request.meta !== undefined && (storedMetaAt === null || request.meta.updated_at >= storedMetaAt)
        ? request.meta
        : undefined
      const setMeta = meta === undefined
        ? sql``
        : sql`, meta = ${stringify(encodeMeta(meta))}, meta_updated_at = ${meta.updated_at}`
      const last = request.entries[request.entries.length - 1]
      if (last === undefined) {
        yield* sql`UPDATE ${sessionsT} SET exported_head = ${request.head}, updated_at = now() ${setMeta} WHERE session_id = ${id}`
        return { bytes: 0, notify: null }
      }
      const next = stored + request.entries.length
      // Insert, advance the session row and notify in one statement; PostgreSQL
      // delivers the notification only if the transaction commits.
      const [appended] = yield* sql`WITH inserted AS (
          INSERT INTO ${entriesT} (session_id, sequence, entry_hash, entry)
          SELECT ${id}, t.s, t.h, t.e
          FROM unnest(${request.entries.map((e) => String(e.sequence))}::int8[], ${request.entries.map((e) => e.entry_hash)}::text[],
            ${request.entries.map((e) => stringify(Entry.encode(e)))}::text[]) AS t(s, h, e)
          RETURNING octet_length(entry) AS n
        ), total AS (SELECT coalesce(sum(n), 0)::int8 AS bytes FROM inserted)
        UPDATE ${sessionsT} SET next_sequence = ${next}, head = ${last.entry_hash}, exported_head = ${request.head},
          entry_bytes = entry_bytes + (SELECT bytes FROM total), updated_at = now() ${setMeta}
        WHERE session_id = ${id}
        RETURNING (SELECT bytes FROM total) AS bytes, pg_notify(${names.channel}, ${`${id} ${next}`})`.pipe(
        Effect.flatMap(rowsOf.appended)
      )
      return { bytes: appended!.bytes, notify: next }
    })

  // Opens a transaction in its own fiber (in `scope`) and hands out its connection;
  // the fiber commits when told `true` and rolls back when told `false`. Only an
  // idle hold kept after a lost race is released by time (`releaseLater`): a timer
  // running from BEGIN would roll back, and hand back to the pool, the connection
  // of an append that is merely slow or waiting for the row lock.
  const openHold = (scope: Scope.Scope) =>
    Effect.gen(function*() {
      const ready = yield* Deferred.make<SqlClient.TransactionConnection.Service>()
      const finish = yield* Deferred.make<boolean>()
      const fiber = yield* Effect.forkIn(
        transaction(Effect.gen(function*() {
          const level = yield* Effect.serviceOption(sql.transactionService)
          if (Option.isNone(level)) return yield* Effect.die(new Error("no transaction connection inside a transaction"))
          yield* Deferred.succeed(ready, level.value)
          const commit = yield* Deferred.await(finish)
          if (!commit) return yield* new HoldReleased()
        })),
        scope
      )
      const level = yield* Effect.raceFirst(
        Deferred.await(ready),
        Effect.andThen(Fiber.join(fiber), Effect.never)
      ).pipe(Effect.catchTag("HoldReleased", () => Effect.never))
      const held: Held = { level, finish, fiber, inUse: false, uses: 0 }
      return held
    })

  // Rolls an idle hold back once `conflictHold` has passed without the retry that
  // was to use it. Synchronous check and release, so a retry claiming the hold
  // (also synchronously) and the timer can never both have it.
  const releaseLater = (held: Held, scope: Scope.Scope) => {
    const uses = held.uses
    return Effect.forkIn(
      Effect.andThen(
        Effect.sleep(conflictHold),
        Effect.sync(() => {
          if (!held.inUse && held.uses === uses) Deferred.doneUnsafe(held.finish, Exit.succeed(false))
        })
      ),
      scope
    )
  }

  const finishHold = (held: Held, commit: boolean): Effect.Effect<void, SqlError | StorageError> =>
    Effect.gen(function*() {
      yield* Deferred.succeed(held.finish, commit)
      const exit = yield* Fiber.await(held.fiber)
      if (!commit || Exit.isSuccess(exit)) return
      const error = Exit.findErrorOption(exit)
      if (Option.isSome(error) && error.value._tag === "SqlError") return yield* error.value
      // Rolled back instead (released or interrupted): nothing of the batch is stored.
      return yield* new StorageError({
        operation: "append",
        path: names.entries,
        reason: "the transaction ended before it could commit; nothing was stored"
      })
    })

  const isLive = (held: Held | null): held is Held =>
    held !== null && !Deferred.isDoneUnsafe(held.finish) && held.fiber.pollUnsafe() === undefined

  // The compare-and-append, committed as one transaction. A lost race keeps that
  // transaction open (and with it the session's row lock) for the reload and the
  // retry, which the service makes through the same handle: the retry cannot lose
  // again, so two busy writers take turns instead of one starving the other.
  const append = (
    id: string,
    caps: JournalState.Caps | undefined,
    request: Persistence.AppendRequest,
    slot: Slot,
    scope: Scope.Scope
  ): Effect.Effect<Persistence.Appended, StorageError | SequenceConflict> => {
    if (request.entries.length === 0 && request.meta === undefined) return Effect.succeed({ bytes: 0 })
    return Effect.gen(function*() {
      const held = isLive(slot.held) ? slot.held : yield* openHold(scope)
      held.inUse = true
      held.uses++
      slot.held = null
      const result = yield* Effect.result(Effect.provideService(appendTx(id, caps, request), sql.transactionService, held.level))
      if (Result.isSuccess(result)) {
        yield* finishHold(held, true)
        return result.success
      }
      if (result.failure._tag === "SequenceConflict") {
        held.inUse = false
        slot.held = held
        yield* releaseLater(held, scope)
      } else yield* Effect.ignore(finishHold(held, false))
      return yield* Effect.fail(result.failure)
    }).pipe(
      Effect.catchTag("SqlError", (e) =>
        // The row lock makes this unreachable between instances of this adapter;
        // the key still settles any other writer that skips the lock.
        Effect.fail(
          e.reason._tag === "UniqueViolation"
            ? new SequenceConflict({ id, sequence: request.after.sequence })
            : storageError("append", names.entries)(e)
        )),
      Effect.tap((r) => r.notify !== null ? PubSub.publish(signals, { id, next: r.notify }) : Effect.void),
      Effect.map((r): Persistence.Appended => ({ bytes: r.bytes }))
    )
  }

  // --- follow

  // "<session id> <next sequence>", as the append's pg_notify writes it.
  const parseSignal = (payload: string): Signal | null => {
    const match = /^(.+) (0|[1-9][0-9]{0,15})$/.exec(payload)
    if (match === null) return null
    const next = Number.parseInt(match[2]!, 10)
    return Number.isSafeInteger(next) ? { id: match[1]!, next } : null
  }


  // One LISTEN connection per instance fans notifications out to the followers of
  // this process. After every (re)connect all followers re-read, since commits may
  // have happened while nobody listened.
  const listenOnce = Effect.scoped(Effect.gen(function*() {
    const queue = yield* pg.listen(names.channel)
    yield* PubSub.publish(signals, { id: null, next: 0 })
    while (true) {
      const note = yield* Queue.take(queue)
      const signal = parseSignal(note.payload)
      if (signal !== null) yield* PubSub.publish(signals, signal)
    }
  }))
  let listening = false
  const startListener = Effect.suspend(() => {
    if (listening) return Effect.void
    listening = true
    return Effect.asVoid(Effect.forkIn(
      listenOnce.pipe(
        Effect.catchCause(() => Effect.void),
        Effect.andThen(Effect.sleep(Duration.min(pollInterval, Duration.seconds(1)))),
        Effect.forever
      ),
      layerScope
    ))
  })

  const notFound = (id: string): Stream.Stream<Entry.Entry, SessionNotFound | CorruptJournal | StorageError | SqlError> =>
    Stream.fail(new SessionNotFound({ id }))

  const history = (id: string, options?: Persistence.HistoryOptions) =>
    Stream.unwrap(Effect.gen(function*() {
      if (!(yield* sessionExists(id))) return notFound(id)
      const limit = options?.limit ?? Number.POSITIVE_INFINITY
      // Keyset pagination: each page starts after the last sequence read.
      return Stream.paginate({ from: Math.max(0, options?.from ?? 0), left: limit }, (s) =>
        s.left <= 0
          ? Effect.succeed([[], Option.none()] as const)
          : Effect.map(readPage(id, s.from, Math.min(pageSize, s.left), "history"), (page) => {
            const last = page[page.length - 1]
            const more = last !== undefined && page.length === Math.min(pageSize, s.left)
            return [page, more ? Option.some({ from: last.sequence + 1, left: s.left - page.length }) : Option.none()] as const
          }))
    })).pipe(Stream.catchTag("SqlError", (e) => Stream.fail(storageError("history", names.entries)(e))))

  const follow = (id: string, from: number) =>
    Stream.unwrap(Effect.gen(function*() {
      yield* startListener
      // Subscribe before the first read: a commit signalled after that read is
      // never missed.
      const subscription = yield* PubSub.subscribe(signals)
      if (!(yield* sessionExists(id))) return notFound(id)
      let next = Math.max(0, from)
      const relevant = (s: Signal) => s.id === null || (s.id === id && s.next > next)
      // Waits for a signal about this session, or the poll interval, whichever
      // comes first; then the caller reads whatever is there.
      const waitForMore: Effect.Effect<void> = Effect.gen(function*() {
        while (true) {
          const signal = yield* Effect.timeoutOption(PubSub.take(subscription), pollInterval)
          if (Option.isNone(signal) || relevant(signal.value)) return
        }
      })
      return Stream.paginate(undefined, () =>
        Effect.gen(function*() {
          const page = yield* readPage(id, next, pageSize, "follow")
          const fresh = page.filter((e) => e.sequence >= next)
          const last = fresh[fresh.length - 1]
          if (last === undefined) {
            // Caught up: a session deleted meanwhile ends the stream instead of
            // being polled forever (its row goes first, in the delete's transaction).
            if (!(yield* sessionExists(id))) return yield* new SessionNotFound({ id })
            yield* waitForMore
            return [[], Option.some(undefined)] as const
          }
          next = last.sequence + 1
          return [fresh, Option.some(undefined)] as const
        }))
    })).pipe(Stream.catchTag("SqlError", (e) => Stream.fail(storageError("follow", names.entries)(e))))

  // --- open, list, delete

  const readHandle = (id: string, caps: JournalState.Caps | undefined): Persistence.ReadHandle => ({
    id,
    load: load(id, caps, "load", null),
    verify: load(id, caps, "verify", null)
  })

  // Writers of this instance, by session: the port's single-writer guarantee within
  // one process. Across instances writers are not excluded; the sequence key and
  // the row lock of each compare-and-append keep them from forking the chain.
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
      const slot: Slot = { held: null }
      const handle: Persistence.WriteHandle = {
        id,
        // The reload after a lost race runs on the held connection: the release
        // timer must not roll it back under the reload, and restarts after it.
        load: Effect.suspend(() => {
          const held = isLive(slot.held) ? slot.held : null
          if (held === null) return load(id, caps, "load", null)
          held.inUse = true
          held.uses++
          return load(id, caps, "load", held).pipe(
            Effect.ensuring(Effect.suspend(() => {
              held.inUse = false
              return Effect.asVoid(releaseLater(held, scope))
            }))
          )
        }),
        verify: load(id, caps, "verify", null),
        append: (request) => append(id, caps, request, slot, scope),
        checkpoint: (document) => checkpoint(id, document)
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
    Effect.flatMap(rowsOf.list),
    Effect.map((rows) =>
      rows.map((r): Persistence.SessionInfo => ({
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
 * applications that already have one.
 *
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<Persistence.Persistence, StorageError, PgClient.PgClient> =>
  Layer.effect(Persistence.Persistence, make(options))

/**
 * The adapter with its own connection pool to `url`
 * (`postgres://user@host:port/database`). The pool closes with the layer.
 *
 * @since 0.1.0
 */
export const layerFromUrl = (url: string, options?: UrlOptions): Layer.Layer<Persistence.Persistence, StorageError> =>
  Layer.effect(
    Persistence.Persistence,
    Effect.gen(function*() {
      const client = yield* PgClient.make({
        url: Redacted.make(url),
        applicationName: options?.applicationName ?? "session-journal",
        maxConnections: options?.maxConnections
      }).pipe(Effect.mapError((cause) => new StorageError({ operation: "connect", reason: cause.message, cause })))
      return yield* Effect.provideService(make(options), PgClient.PgClient, client)
    }).pipe(Effect.provide(Reactivity.layer))
  )

/**
 * Drops every table of a prefix (default `"session_journal_"`): all sessions,
 * entries, checkpoints and the migration record. For tests and teardown.
 *
 * @since 0.1.0
 */
export const dropTables = (tablePrefix: string = DEFAULT_PREFIX): Effect.Effect<void, StorageError, PgClient.PgClient> =>
  Effect.gen(function*() {
    if (!Tables.isPrefix(tablePrefix)) {
      return yield* new StorageError({ operation: "drop", reason: `invalid table prefix ${JSON.stringify(tablePrefix)}` })
    }
    const pg = yield* PgClient.PgClient
    yield* Tables.drop(Tables.names(tablePrefix)).pipe(
      Effect.provideService(SqlClient.SqlClient, pg),
      Effect.mapError((cause) => new StorageError({ operation: "drop", reason: cause.message, cause }))
    )
  })
