/**
 * The PostgreSQL adapter of the `Persistence` port: many application instances, on
 * many machines, share sessions through one database.
 *
 * Every entry is a row keyed by (session_id, sequence), so two instances can never
 * store two entries at one sequence. An append locks its session's row for the
 * length of one short transaction, checks that the batch continues exactly what is
 * stored, inserts it and notifies listeners on commit; a writer whose state is
 * behind gets `SequenceConflict`, reloads and retries (the service does that), so
 * concurrent writers interleave into one valid chain. Followers in any instance
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
  Recovery,
  Replay,
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
  /** Store a checkpoint whenever an append crosses a multiple of this many entries (default 1024). */
  readonly checkpointEvery?: number | undefined
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

interface LockedRow {
  readonly next_sequence: bigint | number | string
  readonly head: string
  readonly meta_updated_at: bigint | number | string | null
}

interface SessionRow {
  readonly next_sequence: bigint | number | string
  readonly entry_cap: number
  readonly tool_counts_cap: number
  readonly meta: string | null
}

interface EntryRow {
  readonly sequence: bigint | number | string
  readonly entry: string
}

interface ListRow {
  readonly session_id: string
  readonly next_sequence: bigint | number | string
  readonly head: string
  readonly exported_head: string | null
  readonly updated_ms: bigint | number | string | null
  readonly bytes: bigint | number | string | null
}

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

/** A state a handle saw stored, and how it was first loaded. */
interface Cached {
  readonly state: JournalState.JournalState
  readonly checkpoint: Persistence.RecoveryReport["checkpoint"]
}

/**
 * A transaction kept open after a lost race: it holds the session's row lock until
 * the retry commits through it, or it is released.
 */
interface Held {
  readonly level: SqlClient.TransactionConnection.Service
  readonly finish: Deferred.Deferred<boolean>
  readonly fiber: Fiber.Fiber<void, SqlError | HoldReleased>
  /** An append is running on it: the release timer must leave it alone. */
  inUse: boolean
  /** Counts the appends that used it, so a timer armed for an earlier one is void. */
  uses: number
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
  const checkpointEvery = yield* count("checkpointEvery", options?.checkpointEvery, 1024)
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

  // Writers of this instance, by session: the port's single-writer guarantee within
  // one process. Across instances writers are not excluded; the sequence key and
  // the row lock of each append keep them from forking the chain.
  const writers = new Set<string>()
  const signals = yield* PubSub.sliding<Signal>(4096)

  const corrupt = (id: string, offset: number, reason: string) =>
    new CorruptJournal({ segment: `${names.entries}:${id}`, offset, reason })

  const decodeRow = (id: string, row: EntryRow): Result.Result<Entry.Entry, CorruptJournal> => {
    const sequence = Number(row.sequence)
    const parsed = parseJson(row.entry)
    if (Result.isFailure(parsed)) return Result.fail(corrupt(id, sequence, `unparsable entry: ${parsed.failure}`))
    const decoded = Entry.decode(parsed.success)
    if (Result.isFailure(decoded)) return Result.fail(corrupt(id, sequence, `invalid entry: ${decoded.failure.message}`))
    if (decoded.success.sequence !== sequence) {
      return Result.fail(corrupt(id, sequence, `row holds sequence ${decoded.success.sequence}`))
    }
    return Result.succeed(decoded.success)
  }

  const decodeRows = (id: string, rows: ReadonlyArray<EntryRow>) =>
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
  const readPage = (id: string, from: number, limit: number) =>
    sql<EntryRow>`SELECT sequence, entry FROM ${entriesT}
      WHERE session_id = ${id} AND sequence >= ${from} ORDER BY sequence LIMIT ${limit}`.pipe(
      retryLostConnection,
      Effect.flatMap((rows) => decodeRows(id, rows))
    )

  const sessionExists = (id: string) =>
    sql`SELECT 1 AS found FROM ${sessionsT} WHERE session_id = ${id}`.pipe(
      retryLostConnection,
      Effect.map((rows) => rows.length > 0)
    )

  // --- load

  // One recovery (core's) over the checkpoint row and the entry rows: load mode
  // reads from the checkpoint's last entry on, verify mode every row.
  const recoverTx = (id: string, caps: JournalState.Caps | undefined, mode: Recovery.Options["mode"]) =>
    Effect.gen(function*() {
      const [row] = yield* sql<SessionRow>`SELECT next_sequence, entry_cap, tool_counts_cap, meta
        FROM ${sessionsT} WHERE session_id = ${id}`
      const [cp] = yield* sql<{ readonly doc: string }>`SELECT doc FROM ${checkpointsT} WHERE session_id = ${id}`
      if (row === undefined && cp === undefined) {
        const none: Loading = { loaded: { state: JournalState.empty(id, caps), exists: false, recovery: Persistence.cleanReport("none", 0) }, damaged: null }
        return none
      }
      const location = `${names.entries}:${id}`
      const sessionCaps = row === undefined ? caps : { entry_cap: row.entry_cap, tool_counts_cap: row.tool_counts_cap }
      const storedCount = row === undefined ? undefined : Number(row.next_sequence)
      const recoverWith = (checkpoint: Recovery.CheckpointInput, recoverMode: Recovery.Options["mode"]) =>
        Effect.gen(function*() {
          const recovery = Recovery.make({ id, mode: recoverMode, checkpoint, caps: sessionCaps, storedCount, location })
          const from = recoverMode === "load" && recovery.checkpoint !== null ? Math.max(0, recovery.checkpoint.next_sequence - 1) : 0
          const rows = yield* sql<EntryRow>`SELECT sequence, entry FROM ${entriesT}
            WHERE session_id = ${id} AND sequence >= ${from} ORDER BY sequence`
          const entries = yield* decodeRows(id, rows)
          for (const input of Recovery.rows(location, from, entries)) if (!recovery.offer(input)) break
          return recovery.done()
        })
      const checkpoint: Recovery.CheckpointInput = cp === undefined
        ? null
        : Result.match(parseJson(cp.doc), {
          onSuccess: (document): Recovery.CheckpointInput => ({ _tag: "Document", document, location: `${names.checkpoints}:${id}` }),
          onFailure: (reason): Recovery.CheckpointInput => ({ _tag: "Unreadable", reason, location: `${names.checkpoints}:${id}` })
        })
      let outcome = yield* recoverWith(checkpoint, mode)
      let damaged: Damaged | null = null
      // Every entry is in the table, so a checkpoint row that is unusable or that the
      // rows contradict is rebuilt from sequence 0 when the rows verify by
      // themselves, and set aside (a load only: a verify reports and never writes).
      // Rows missing under it are not its fault: the session stays corrupt.
      const stop = outcome.report.stopped
      if (mode === "load" && cp !== undefined && (outcome.brokenCheckpoint !== null || stop?.reason === "checkpoint")) {
        const rebuilt = yield* recoverWith(null, "verify")
        if (rebuilt.report.stopped === null) {
          damaged = { doc: cp.doc, reason: outcome.brokenCheckpoint ?? `${stop!.reason}: ${stop!.detail}` }
          outcome = { ...rebuilt, report: { ...rebuilt.report, checkpoint: "rebuilt" } }
        }
      }
      let loaded = Persistence.loaded(outcome, true)
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

  // A reload after a lost race only needs what was stored since the state this
  // handle last saw: stored entries never change, and the entry just before the
  // new ones is checked against that state's last hash, so a session deleted and
  // recreated meanwhile is noticed. Anything unexpected falls back to a full load.
  const loadSinceTx = (id: string, cached: Cached) =>
    Effect.gen(function*() {
      const [row] = yield* sql<SessionRow>`SELECT next_sequence, entry_cap, tool_counts_cap, meta
        FROM ${sessionsT} WHERE session_id = ${id}`
      if (row === undefined || Number(row.next_sequence) < cached.state.next_sequence) return null
      const start = cached.state.next_sequence
      const rows = yield* sql<EntryRow & { readonly entry_hash: string }>`SELECT sequence, entry_hash, entry
        FROM ${entriesT} WHERE session_id = ${id} AND sequence >= ${Math.max(0, start - 1)} ORDER BY sequence`
      let tail: ReadonlyArray<EntryRow> = rows
      if (start > 0) {
        const previous = rows[0]
        if (previous === undefined || Number(previous.sequence) !== start - 1) return null
        if (previous.entry_hash !== JournalState.lastHash(cached.state)) return null
        tail = rows.slice(1)
      }
      const entries = yield* decodeRows(id, tail)
      const outcome = Replay.replayAll(cached.state, entries, JournalState.entryCount(cached.state))
      if (outcome.stopped !== null || outcome.state.next_sequence !== Number(row.next_sequence)) return null
      let state = outcome.state
      if (row.meta !== null) {
        const meta = Result.flatMap(parseJson(row.meta), (json) => Result.mapError(decodeMeta(json), (e) => e.message))
        if (Result.isFailure(meta)) return null
        state = JournalState.applyMeta(state, meta.success)
      }
      const loaded: Persistence.Loaded = {
        state,
        exists: true,
        recovery: Persistence.cleanReport(cached.checkpoint, outcome.replayed)
      }
      return loaded
    })

  // Inside a held transaction the reads run on its connection: the row lock it
  // holds keeps the session still, and no second connection is needed.
  const load = (
    id: string,
    caps: JournalState.Caps | undefined,
    cached: Cached | null,
    held: Held | null,
    mode: Recovery.Options["mode"] = "load"
  ): Effect.Effect<Persistence.Loaded, Persistence.LoadError> =>
    Effect.gen(function*() {
      const run = <A, E>(self: Effect.Effect<A, E>) =>
        held === null ? repeatableRead(self) : Effect.provideService(self, sql.transactionService, held.level)
      const since = cached === null ? null : yield* run(loadSinceTx(id, cached))
      if (since !== null) return since
      const { damaged, loaded } = yield* run(recoverTx(id, caps, mode))
      // The load snapshot is read-only, so the broken row is set aside after it, in
      // one statement of its own (committed even if a held transaction is rolled
      // back later) that moves it only if it is still the row that was read: a
      // checkpoint written meanwhile is left alone. If the move fails the load
      // fails, rather than leave the bytes where the next checkpoint overwrites them.
      if (damaged !== null) {
        const move = sql`WITH moved AS (
            DELETE FROM ${checkpointsT} WHERE session_id = ${id} AND doc = ${damaged.doc}
            RETURNING session_id, next_sequence, doc, written_at
          )
          INSERT INTO ${sql(names.checkpointsDamaged)} (session_id, next_sequence, doc, written_at, reason)
          SELECT session_id, next_sequence, doc, written_at, ${damaged.reason} FROM moved`
        yield* move
      }
      return loaded
    }).pipe(Effect.catchTag("SqlError", (e) => Effect.fail(storageError("load", names.entries)(e))))

  // --- checkpoint

  // Stored only when it describes what is stored: the session holds at least its
  // entries, its newest retained entry is the stored one, and it is not older than
  // the checkpoint it replaces.
  const upsertCheckpoint = (id: string, state: JournalState.JournalState) => {
    const doc = stringify(Checkpoint.encode(state))
    const next = state.next_sequence
    const matchesLast = JournalState.entryCount(state) === 0
      ? sql`TRUE`
      : sql`EXISTS (SELECT 1 FROM ${entriesT} WHERE session_id = ${id} AND sequence = ${next - 1}
          AND entry_hash = ${JournalState.lastHash(state)})`
    return sql`INSERT INTO ${checkpointsT} (session_id, next_sequence, doc)
      SELECT ${id}, ${next}, ${doc}
      WHERE EXISTS (SELECT 1 FROM ${sessionsT} WHERE session_id = ${id} AND next_sequence >= ${next}) AND ${matchesLast}
      ON CONFLICT (session_id) DO UPDATE SET next_sequence = EXCLUDED.next_sequence, doc = EXCLUDED.doc, written_at = now()
      WHERE ${checkpointsT}.next_sequence <= EXCLUDED.next_sequence`
  }

  // The exported head a state gives the session row, when the state ends where the
  // session does: it fills in rows written before the column existed.
  const updateExportedHead = (id: string, state: JournalState.JournalState) => {
    const matchesLast = JournalState.entryCount(state) === 0 ? sql`TRUE` : sql`head = ${JournalState.lastHash(state)}`
    return sql`UPDATE ${sessionsT} SET exported_head = ${JournalState.head(state)}
      WHERE session_id = ${id} AND next_sequence = ${state.next_sequence} AND ${matchesLast}`
  }

  const checkpoint = (id: string, state: JournalState.JournalState): Effect.Effect<void, StorageError> =>
    Effect.asVoid(Effect.andThen(upsertCheckpoint(id, state), updateExportedHead(id, state))).pipe(
      Effect.catchTag("SqlError", (e) => Effect.fail(storageError("checkpoint", names.checkpoints)(e)))
    )

  // --- append

  const appendTx = (id: string, batch: Persistence.AppendBatch) =>
    Effect.gen(function*() {
      // Creates the session row if needed and locks it until commit: appends to one
      // session are serialized across every instance, and the row says exactly
      // what is stored.
      const [row] = yield* sql<LockedRow>`INSERT INTO ${sessionsT} (session_id, head, entry_cap, tool_counts_cap)
        VALUES (${id}, ${Entry.ZERO_HASH}, ${batch.state.entry_cap}, ${batch.state.tool_counts_cap})
        ON CONFLICT (session_id) DO UPDATE SET session_id = EXCLUDED.session_id
        RETURNING next_sequence, head, meta_updated_at`
      const stored = Number(row!.next_sequence)
      const overlap: Array<Entry.Entry> = []
      const fresh: Array<Entry.Entry> = []
      for (const entry of batch.entries) {
        if (fresh.length === 0 && entry.sequence < stored) overlap.push(entry)
        else if (entry.sequence === stored + fresh.length) fresh.push(entry)
        else return yield* new SequenceConflict({ id, sequence: entry.sequence })
      }
      if (overlap.length > 0) {
        const existing = yield* sql<{ readonly sequence: bigint; readonly entry_hash: string }>`SELECT sequence, entry_hash
          FROM ${entriesT} WHERE session_id = ${id} AND sequence = ANY(${overlap.map((e) => String(e.sequence))}::int8[])`
        const hashes = new Map(existing.map((r) => [Number(r.sequence), r.entry_hash]))
        for (const entry of overlap) {
          if (hashes.get(entry.sequence) !== entry.entry_hash) {
            return yield* new SequenceConflict({ id, sequence: entry.sequence })
          }
        }
      }
      const first = fresh[0]
      // A session deleted and recreated by another instance can end at the same
      // sequence with a different head; linking to the old head would fork it.
      if (first !== undefined && stored > 0 && batch.state.entry_cap > 0 && first.prev_hash !== row!.head) {
        return yield* new SequenceConflict({ id, sequence: first.sequence })
      }
      const storedMetaAt = row!.meta_updated_at === null ? null : Number(row!.meta_updated_at)
      const meta = batch.meta !== undefined && (storedMetaAt === null || batch.meta.updated_at >= storedMetaAt)
        ? batch.meta
        : undefined
      const setMeta = meta === undefined
        ? sql``
        : sql`, meta = ${stringify(encodeMeta(meta))}, meta_updated_at = ${meta.updated_at}`
      if (first === undefined) {
        if (meta !== undefined) {
          yield* sql`UPDATE ${sessionsT} SET updated_at = now() ${setMeta} WHERE session_id = ${id}`
        }
        return { next: stored, notify: false }
      }
      const next = stored + fresh.length
      const last = fresh[fresh.length - 1]!
      // The batch's state gives the exported head only if it ends with what is now
      // stored; otherwise the head is not known (NULL) until the next checkpoint.
      const exportedHead = batch.state.next_sequence === next &&
          (JournalState.entryCount(batch.state) === 0 || JournalState.lastHash(batch.state) === last.entry_hash)
        ? JournalState.head(batch.state)
        : null
      // Insert, advance the session row and notify in one statement; PostgreSQL
      // delivers the notification only if the transaction commits.
      yield* sql`WITH inserted AS (
          INSERT INTO ${entriesT} (session_id, sequence, entry_hash, entry)
          SELECT ${id}, t.s, t.h, t.e
          FROM unnest(${fresh.map((e) => String(e.sequence))}::int8[], ${fresh.map((e) => e.entry_hash)}::text[],
            ${fresh.map((e) => stringify(Entry.encode(e)))}::text[]) AS t(s, h, e)
          RETURNING octet_length(entry) AS n
        )
        UPDATE ${sessionsT} SET next_sequence = ${next}, head = ${last.entry_hash}, exported_head = ${exportedHead},
          entry_bytes = entry_bytes + (SELECT coalesce(sum(n), 0) FROM inserted), updated_at = now() ${setMeta}
        WHERE session_id = ${id}
        RETURNING pg_notify(${names.channel}, ${`${id} ${next}`})`
      if (batch.state.next_sequence === next && Math.floor(stored / checkpointEvery) !== Math.floor(next / checkpointEvery)) {
        yield* upsertCheckpoint(id, batch.state)
      }
      return { next, notify: true }
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

  // Resolves to the sequence the session ends before once the batch is stored. A
  // lost race keeps the transaction (and the session's row lock) for the retry,
  // which the caller makes through the same slot.
  const append = (
    id: string,
    batch: Persistence.AppendBatch,
    slot: { held: Held | null },
    scope: Scope.Scope
  ): Effect.Effect<number | null, StorageError | SequenceConflict> => {
    if (batch.entries.length === 0 && batch.meta === undefined) return Effect.succeed(null)
    return Effect.gen(function*() {
      const held = isLive(slot.held) ? slot.held : yield* openHold(scope)
      held.inUse = true
      held.uses++
      slot.held = null
      const result = yield* Effect.result(Effect.provideService(appendTx(id, batch), sql.transactionService, held.level))
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
            ? new SequenceConflict({ id, sequence: batch.entries[0]?.sequence ?? 0 })
            : storageError("append", names.entries)(e)
        )),
      Effect.tap((r) => r.notify ? PubSub.publish(signals, { id, next: r.next }) : Effect.void),
      Effect.map((r) => r.next)
    )
  }

  // --- follow

  const parseSignal = (payload: string): Signal | null => {
    const space = payload.lastIndexOf(" ")
    const next = Number(payload.slice(space + 1))
    return space > 0 && Number.isSafeInteger(next) ? { id: payload.slice(0, space), next } : null
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

  const notFound = (id: string): Stream.Stream<Entry.Entry, SessionNotFound | CorruptJournal | SqlError> =>
    Stream.fail(new SessionNotFound({ id }))

  const history = (id: string, options?: Persistence.HistoryOptions) =>
    Stream.unwrap(Effect.gen(function*() {
      if (!(yield* sessionExists(id))) return notFound(id)
      const limit = options?.limit ?? Number.POSITIVE_INFINITY
      // Keyset pagination: each page starts after the last sequence read.
      return Stream.paginate({ from: Math.max(0, options?.from ?? 0), left: limit }, (s) =>
        s.left <= 0
          ? Effect.succeed([[], Option.none()] as const)
          : Effect.map(readPage(id, s.from, Math.min(pageSize, s.left)), (page) => {
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
          const page = yield* readPage(id, next, pageSize)
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

  const open = (id: string, openOptions: Persistence.OpenOptions) =>
    Effect.gen(function*() {
      const write = openOptions.mode === "write"
      const scope = yield* Effect.scope
      const slot: { held: Held | null } = { held: null }
      if (write) {
        yield* Effect.acquireRelease(
          Effect.suspend(() => {
            if (writers.has(id)) return Effect.fail(new SessionLocked({ id, holder: "another writer in this process" }))
            writers.add(id)
            return Effect.void
          }),
          () => Effect.sync(() => writers.delete(id))
        )
      }
      // The state this handle last saw stored, for cheap reloads.
      let cached: Cached | null = null
      const remember = (state: JournalState.JournalState, checkpoint: Persistence.RecoveryReport["checkpoint"]) => {
        // Without a retained entry there is no hash to check continuity against.
        cached = state.next_sequence === 0 || JournalState.entryCount(state) > 0 ? { state, checkpoint } : null
      }
      const handle: Persistence.SessionHandle = {
        id,
        load: Effect.suspend(() => {
          // The reload after a lost race runs on the held connection: the release
          // timer must not roll it back under the reload, and restarts after it.
          const held = isLive(slot.held) ? slot.held : null
          if (held === null) return load(id, openOptions.caps, cached, null)
          held.inUse = true
          held.uses++
          return load(id, openOptions.caps, cached, held).pipe(
            Effect.ensuring(Effect.suspend(() => {
              held.inUse = false
              return Effect.asVoid(releaseLater(held, scope))
            }))
          )
        }).pipe(
          Effect.tap((loaded) =>
            Effect.sync(() => {
              if (loaded.exists && loaded.recovery.stopped === null) remember(loaded.state, loaded.recovery.checkpoint)
              else cached = null
            })
          )
        ),
        append: (batch) =>
          write
            ? append(id, batch, slot, scope).pipe(
              Effect.tap((next) =>
                Effect.sync(() => {
                  if (next !== null && next === batch.state.next_sequence) remember(batch.state, cached?.checkpoint ?? "none")
                })
              ),
              Effect.asVoid
            )
            : Effect.fail(new StorageError({ operation: "append", path: names.entries, reason: "session opened for reading" })),
        verify: load(id, openOptions.caps, null, null, "verify"),
        checkpoint: (state) => checkpoint(id, state)
      }
      return handle
    })

  const list = sql<ListRow>`SELECT s.session_id, s.next_sequence, s.head, s.exported_head,
      (extract(epoch FROM s.updated_at) * 1000)::int8 AS updated_ms,
      s.entry_bytes + coalesce(octet_length(c.doc), 0) AS bytes
    FROM ${sessionsT} s LEFT JOIN ${checkpointsT} c ON c.session_id = s.session_id
    ORDER BY s.session_id`.pipe(
    retryLostConnection,
    Effect.map((rows) =>
      rows.map((r): Persistence.SessionInfo => ({
        id: r.session_id,
        entries: Number(r.next_sequence),
        // NULL: written before the column existed, or not known; the newest hash is
        // the exported head of every session that has not evicted yet.
        head: r.exported_head ?? r.head,
        lastHash: r.head,
        updatedAt: r.updated_ms === null ? null : Number(r.updated_ms),
        bytes: r.bytes === null ? null : Number(r.bytes),
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
