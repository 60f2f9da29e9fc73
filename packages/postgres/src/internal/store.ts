/**
 * What every part of the PostgreSQL adapter shares: the SQL client (without name
 * transforms), the tables of one prefix, transactions that report a lost
 * connection as a failure, the bounded retry of idempotent reads, the decoders of
 * the rows each query returns, the decoding of entry rows into entries, and the
 * in-process channel that tells followers a session grew.
 */
import type * as PgClient from "@effect/sql-pg/PgClient"
import {
  CorruptJournal,
  CorruptReason,
  Entry,
  messageOf,
  SessionMeta,
  StorageError,
  StorageReason
} from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Schema from "effect/Schema"
import type * as SqlClient from "effect/sql/SqlClient"
import { isSqlError, type SqlError } from "effect/sql/SqlError"
import type * as Statement from "effect/sql/Statement"
import * as Rows from "./rows.ts"
import type * as Tables from "./schema.ts"

/** "Session `id` now ends before `next`"; `id: null` asks every follower to re-read. */
export interface Signal {
  readonly id: string | null
  readonly next: number
}

/** An entry row as `Rows.EntryRow` decodes it. */
export type EntryRow = typeof Rows.EntryRow.Type

/** Session metadata from its stored JSON text. */
export const decodeMeta = Schema.decodeUnknownResult(SessionMeta.SessionMeta)

/** Session metadata as plain JSON, for its column. */
export const encodeMeta = Schema.encodeSync(SessionMeta.SessionMeta)

/** `JSON.parse` as a result. */
export const parseJson = (text: string): Result.Result<unknown, string> => {
  try {
    return Result.succeed(JSON.parse(text))
  } catch (e) {
    return Result.fail(messageOf(e))
  }
}

/** The shared part of the adapter, built once per layer. */
export interface Store {
  readonly pg: PgClient.PgClient
  readonly sql: SqlClient.SqlClient
  readonly names: Tables.Names
  readonly sessionsT: Statement.Identifier
  readonly entriesT: Statement.Identifier
  readonly checkpointsT: Statement.Identifier
  /** Followers of this process learn of commits here (from appends and from LISTEN). */
  readonly signals: PubSub.PubSub<Signal>
  readonly storageError: (operation: string, path: string) => (cause: SqlError) => StorageError
  readonly transaction: <A, E>(self: Effect.Effect<A, E>) => Effect.Effect<A, E | SqlError>
  readonly retryLostConnection: <A, E>(self: Effect.Effect<A, E | SqlError>) => Effect.Effect<A, E | SqlError>
  readonly rows: ReturnType<typeof rowDecoders>
  readonly decodeEntries: (
    id: string,
    rows: ReadonlyArray<EntryRow>
  ) => Effect.Effect<Array<Entry.Entry>, CorruptJournal>
  /** A page of entries from `from` on, retried on a fresh connection if the pooled one died. */
  readonly readPage: (
    id: string,
    from: number,
    limit: number,
    operation: string
  ) => Effect.Effect<Array<Entry.Entry>, CorruptJournal | StorageError | SqlError>
  readonly sessionExists: (id: string) => Effect.Effect<boolean, SqlError>
}

// The rows of each query, decoded by its Schema; `operation` names the caller.
const rowDecoders = (names: Tables.Names) => ({
  session: (operation: string) => Rows.decode(Rows.SessionRow, names.sessions, operation),
  locked: Rows.decode(Rows.LockedRow, names.sessions, "append"),
  entry: (operation: string) => Rows.decode(Rows.EntryRow, names.entries, operation),
  sizedEntry: (operation: string) => Rows.decode(Rows.SizedEntryRow, names.entries, operation),
  checkpoint: (operation: string) => Rows.decode(Rows.CheckpointRow, names.checkpoints, operation),
  checkpointKey: (operation: string) => Rows.decode(Rows.CheckpointKeyRow, names.checkpoints, operation),
  stored: Rows.decode(Rows.BytesRow, names.checkpoints, "checkpoint"),
  appended: Rows.decode(Rows.BytesRow, names.entries, "append"),
  ends: Rows.decode(Rows.EndsRow, names.sessions, "checkpoint"),
  list: Rows.decode(Rows.ListRow, names.sessions, "list")
})

/** Builds the shared part over a client and the names of one prefix. */
export const make = Effect.fnUntraced(function*(pg: PgClient.PgClient, names: Tables.Names) {
  const sql = pg.withoutTransforms()
  const signals = yield* PubSub.sliding<Signal>(4096)
  const rows = rowDecoders(names)
  const sessionsT = sql(names.sessions)
  const entriesT = sql(names.entries)

  const storageError = (operation: string, path: string) => (cause: SqlError) =>
    new StorageError({
      operation,
      path,
      reason: new StorageReason.Io({ code: cause.reason._tag, message: cause.message }),
      cause
    })

  // A connection lost inside a transaction also fails its ROLLBACK, which the SQL
  // client reports as a defect; it is a storage failure like any other here.
  const transaction = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E | SqlError> =>
    sql.withTransaction(self).pipe(
      Effect.catchCause((cause): Effect.Effect<A, E | SqlError> => {
        if (cause.reasons.some(Cause.isInterruptReason)) return Effect.failCause(cause)
        const failure = cause.reasons.find(Cause.isFailReason)
        if (failure !== undefined) return Effect.fail(failure.error)
        const lost = cause.reasons.find((r) => Cause.isDieReason(r) && isSqlError(r.defect))
        return lost !== undefined && Cause.isDieReason(lost)
          ? Effect.fail(lost.defect as SqlError)
          : Effect.failCause(cause)
      })
    )

  // Only connection-level failures are retried: a logical error (a typed failure
  // of `self`, or a query the server rejected) is reported at once.
  const retryLostConnection = <A, E>(self: Effect.Effect<A, E | SqlError>): Effect.Effect<A, E | SqlError> =>
    Effect.retry(self, {
      times: 3,
      schedule: Schedule.spaced("100 millis"),
      while: (e: E | SqlError) => isSqlError(e) && e.reason._tag === "ConnectionError"
    })

  const corrupt = (id: string, offset: number, detail: string) =>
    new CorruptJournal({
      segment: `${names.entries}:${id}`,
      offset,
      reason: new CorruptReason.InvalidRow({ what: "entry", detail })
    })

  // An entry row that decodes as a row but whose JSON text is no valid entry (or
  // another sequence's) is damage in the journal, not a storage failure.
  const decodeEntry = (id: string, row: EntryRow): Result.Result<Entry.Entry, CorruptJournal> => {
    const parsed = parseJson(row.entry)
    if (Result.isFailure(parsed)) return Result.fail(corrupt(id, row.sequence, `unparsable JSON: ${parsed.failure}`))
    const decoded = Entry.decode(parsed.success)
    if (Result.isFailure(decoded)) {
      return Result.fail(corrupt(id, row.sequence, decoded.failure.message))
    }
    if (decoded.success.sequence !== row.sequence) {
      return Result.fail(corrupt(id, row.sequence, `the row holds sequence ${decoded.success.sequence}`))
    }
    return Result.succeed(decoded.success)
  }

  const decodeEntries = (id: string, entryRows: ReadonlyArray<EntryRow>) =>
    Effect.suspend(() => {
      const out: Array<Entry.Entry> = []
      for (const row of entryRows) {
        const r = decodeEntry(id, row)
        if (Result.isFailure(r)) return Effect.fail(r.failure)
        out.push(r.success)
      }
      return Effect.succeed(out)
    })

  // A page read is idempotent (keyset from a sequence), so a connection that died
  // while idle in the pool is retried on a fresh one before anyone is told.
  const readPage = (id: string, from: number, limit: number, operation: string) =>
    sql`SELECT sequence, entry FROM ${entriesT}
      WHERE session_id = ${id} AND sequence >= ${from} ORDER BY sequence LIMIT ${limit}`.pipe(
      retryLostConnection,
      Effect.flatMap(rows.entry(operation)),
      Effect.flatMap((page) => decodeEntries(id, page))
    )

  const sessionExists = (id: string) =>
    sql`SELECT 1 AS found FROM ${sessionsT} WHERE session_id = ${id}`.pipe(
      retryLostConnection,
      Effect.map((found) => found.length > 0)
    )

  const store: Store = {
    pg,
    sql,
    names,
    sessionsT,
    entriesT,
    checkpointsT: sql(names.checkpoints),
    signals,
    storageError,
    transaction,
    retryLostConnection,
    rows,
    decodeEntries,
    readPage,
    sessionExists
  }
  return store
})
