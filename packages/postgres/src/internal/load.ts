/**
 * Loading a session from PostgreSQL: the session row, the checkpoint row and the
 * entry rows after it, read in one snapshot and handed to core's `Recovery`. A
 * checkpoint row that is unusable, or that the rows contradict, is rebuilt from the
 * rows and set aside in the damaged-checkpoints table.
 */
import {
  CorruptJournal,
  CorruptReason,
  type Entry,
  JournalState,
  Persistence,
  Recovery,
  type StorageError
} from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { decodeMeta, parseJson, type Store } from "./store.ts"

/** A checkpoint row found broken and rebuilt around, to be set aside. */
interface Damaged {
  readonly doc: string
  readonly reason: string
}

/** What a full load read, and the broken checkpoint it replaced, if any. */
interface Loading {
  readonly loaded: Persistence.Loaded
  readonly damaged: Damaged | null
  readonly seen: Seen | null
}

/**
 * The rows a clean load of a write handle read: the checkpoint row (parsed, and
 * identified by its sequence and size) and the entry rows from the one it ends
 * with. Stored rows never change, so the next reload (after a lost race) reads
 * only the rows after these, checks that the newest of them is still stored with
 * the same hash (a session deleted and written again is read afresh), and hands
 * the lot to `Recovery` again: the adapter skips reading and decoding rows, never
 * checking or folding them.
 */
export interface Seen {
  readonly checkpoint: Recovery.CheckpointInput
  readonly checkpointKey: string
  readonly checkpointBytes: number
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly sizes: ReadonlyArray<number>
}

/** The rows a write handle saw, kept between its loads; `seen` is null until a clean load. */
export interface Cache {
  seen: Seen | null
}

// Rows kept per write handle at most (beyond that a reload reads everything again):
// no more than the ring of a session with the default caps, which the service
// keeps in memory anyway and which mostly holds these very entries.
const MAX_SEEN = 4096

const keyOf = (cp: { readonly next_sequence: number; readonly bytes: number } | undefined): string =>
  cp === undefined ? "none" : `${cp.next_sequence}:${cp.bytes}`

/**
 * How a session is read: `load(id, caps, mode, level)` recovers it in `load` or
 * `verify` mode, in a read-only snapshot of its own, or on `level` (a transaction
 * connection that already holds the session's row lock) when one is given.
 */
export const make = (store: Store) => {
  const { checkpointsT, decodeEntries, entriesT, names, rows: rowsOf, sessionsT, sql, storageError, transaction } =
    store

  // One recovery (core's) over the checkpoint row and the entry rows: load mode
  // reads from the checkpoint's last entry on, verify mode every row. The bytes of
  // the rows after the checkpoint the recovery started from, and the checkpoint's
  // own size, let the service's checkpoint policy carry on where it stopped.
  const recoverTx = (
    id: string,
    caps: JournalState.Caps | undefined,
    mode: Recovery.Options["mode"],
    previous: Seen | null
  ): Effect.Effect<Loading, CorruptJournal | StorageError | SqlError> =>
    Effect.gen(function*() {
      const operation = mode
      const [row] = yield* sql`SELECT next_sequence, entry_cap, tool_counts_cap, meta
        FROM ${sessionsT} WHERE session_id = ${id}`.pipe(Effect.flatMap(rowsOf.session(operation)))
      // A reload with rows already seen reads the checkpoint document again only if
      // the checkpoint row changed.
      const [key] = previous === null ? [undefined] : yield* sql`SELECT next_sequence, octet_length(doc) AS bytes
        FROM ${checkpointsT} WHERE session_id = ${id}`.pipe(Effect.flatMap(rowsOf.checkpointKey(operation)))
      let seen = previous !== null && keyOf(key) === previous.checkpointKey ? previous : null
      const [cp] = seen !== null
        ? [undefined]
        : yield* sql`SELECT doc, next_sequence, octet_length(doc) AS bytes FROM ${checkpointsT}
          WHERE session_id = ${id}`.pipe(Effect.flatMap(rowsOf.checkpoint(operation)))
      if (row === undefined && cp === undefined && key === undefined) {
        const none: Loading = {
          loaded: { state: JournalState.empty(id, caps), exists: false, recovery: Persistence.cleanReport("none", 0) },
          damaged: null,
          seen: null
        }
        return none
      }
      const location = `${names.entries}:${id}`
      const sessionCaps = row === undefined ? caps : { entry_cap: row.entry_cap, tool_counts_cap: row.tool_counts_cap }
      const storedCount = row?.next_sequence
      const readRows = (from: number) =>
        Effect.gen(function*() {
          const rows = yield* sql`SELECT sequence, entry, octet_length(entry) AS bytes FROM ${entriesT}
            WHERE session_id = ${id} AND sequence >= ${from} ORDER BY sequence`.pipe(
            Effect.flatMap(rowsOf.sizedEntry(operation))
          )
          const entries = yield* decodeEntries(id, rows)
          return { entries, sizes: rows.map((r) => r.bytes) }
        })
      // The rows from `from` on: those already seen, when the newest of them is
      // still stored as it was, and the rows after it; otherwise all of them.
      const rowsFrom = (from: number) =>
        Effect.gen(function*() {
          const last = seen?.entries[seen.entries.length - 1]
          if (seen === null || last === undefined || seen.entries[0]!.sequence !== from) return yield* readRows(from)
          const fresh = yield* readRows(last.sequence)
          if (fresh.entries[0]?.entry_hash !== last.entry_hash) return yield* readRows(from)
          return {
            entries: [...seen.entries, ...fresh.entries.slice(1)],
            sizes: [...seen.sizes, ...fresh.sizes.slice(1)]
          }
        })
      const recoverWith = (checkpoint: Recovery.CheckpointInput, recoverMode: Recovery.Options["mode"]) =>
        Effect.gen(function*() {
          const recovery = Recovery.make({
            id,
            mode: recoverMode,
            checkpoint,
            caps: sessionCaps,
            storedCount,
            location
          })
          const after = recovery.checkpoint?.next_sequence ?? 0
          const from = recoverMode === "load" ? Math.max(0, after - 1) : 0
          const { entries, sizes } = yield* rowsFrom(from)
          let since = 0
          for (const [i, e] of entries.entries()) if (e.sequence >= after) since += sizes[i]!
          for (const input of Recovery.rows(location, from, entries)) if (!recovery.offer(input)) break
          return { outcome: recovery.done(), since, entries, sizes }
        })
      const checkpoint: Recovery.CheckpointInput = seen !== null
        ? seen.checkpoint
        : cp === undefined
        ? null
        : Result.match(parseJson(cp.doc), {
          onSuccess: (document): Recovery.CheckpointInput => ({
            _tag: "Document",
            document,
            location: `${names.checkpoints}:${id}`
          }),
          onFailure: (reason): Recovery.CheckpointInput => ({
            _tag: "Unreadable",
            reason,
            location: `${names.checkpoints}:${id}`
          })
        })
      const first = yield* recoverWith(checkpoint, mode)
      // Anything unusual is looked at afresh, from rows read now.
      if (seen !== null && (first.outcome.report.stopped !== null || first.outcome.brokenCheckpoint !== null)) {
        return yield* recoverTx(id, caps, mode, null)
      }
      let { outcome, since } = first
      let checkpointBytes = seen?.checkpointBytes ?? cp?.bytes ?? 0
      let damaged: Damaged | null = null
      // Every entry is in the table, so a checkpoint row that is unusable or that the
      // rows contradict is rebuilt from sequence 0 when the rows verify by
      // themselves, and set aside (a load only: a verify reports and never writes).
      // Rows missing under it are not its fault: the session stays corrupt.
      const stop = outcome.report.stopped
      if (mode === "load" && cp !== undefined && (outcome.brokenCheckpoint !== null || stop?.reason === "checkpoint")) {
        seen = null
        const rebuilt = yield* recoverWith(null, "verify")
        if (rebuilt.outcome.report.stopped === null) {
          damaged = { doc: cp.doc, reason: outcome.brokenCheckpoint ?? `${stop!.reason}: ${stop!.detail}` }
          outcome = { ...rebuilt.outcome, report: { ...rebuilt.outcome.report, checkpoint: "rebuilt" } }
          since = rebuilt.since
          checkpointBytes = 0
        }
      }
      let loaded: Persistence.Loaded = {
        ...Persistence.loaded(outcome, true),
        sinceCheckpointBytes: since,
        checkpointBytes
      }
      if (row?.meta != null) {
        const meta = Result.flatMap(parseJson(row.meta), (json) => Result.mapError(decodeMeta(json), (e) => e.message))
        if (Result.isFailure(meta)) {
          return yield* new CorruptJournal({
            segment: `${names.sessions}:${id}`,
            offset: 0,
            reason: new CorruptReason.InvalidRow({ what: "meta", detail: meta.failure })
          })
        }
        loaded = { ...loaded, state: JournalState.applyMeta(loaded.state, meta.success) }
      }
      const clean = mode === "load" && damaged === null && outcome.report.stopped === null &&
        outcome.brokenCheckpoint === null
      const kept: Seen | null = clean && first.entries.length > 0 && first.entries.length <= MAX_SEEN
        ? {
          checkpoint,
          checkpointKey: seen?.checkpointKey ?? keyOf(cp),
          checkpointBytes,
          entries: first.entries,
          sizes: first.sizes
        }
        : null
      const loading: Loading = { loaded, damaged, seen: kept }
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
  // A write handle passes its `cache`: its reloads read only the rows it has not
  // seen yet.
  const load = (
    id: string,
    caps: JournalState.Caps | undefined,
    mode: Recovery.Options["mode"],
    level: SqlClient.TransactionConnection.Service | null,
    cache: Cache | null = null
  ): Effect.Effect<Persistence.Loaded, Persistence.LoadError> =>
    Effect.gen(function*() {
      const recover = recoverTx(id, caps, mode, cache?.seen ?? null)
      if (cache !== null) cache.seen = null
      const { damaged, loaded, seen } = yield* (level === null
        ? repeatableRead(recover)
        : Effect.provideService(recover, sql.transactionService, level))
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
      if (cache !== null) cache.seen = seen
      return loaded
    }).pipe(Effect.catchTag("SqlError", (e) => Effect.fail(storageError("load", names.entries)(e))))

  return load
}
