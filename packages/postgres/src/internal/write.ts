/**
 * Writing a session in PostgreSQL: the compare-and-append of a batch (the session
 * row locked, the stored tip compared with the one the writer built on, the rows
 * inserted and the session row advanced, all in one transaction; listeners are
 * notified after it commits), and storing a checkpoint document only when the stored rows bear
 * it out. An append is first tried as one statement in its own transaction (one
 * round trip); only when that stores nothing does the locking transaction that
 * tells a conflict apart, and keeps the lock for the retry, run (DESIGN §8).
 */
import {
  Chain,
  Checkpoint,
  Entry,
  JournalState,
  Persistence,
  SequenceConflict,
  StorageError,
  StorageReason
} from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as PubSub from "effect/PubSub"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import type * as ConflictHold from "./conflictHold.ts"
import { stringify } from "./json.ts"
import type { Notifier } from "./notify.ts"
import * as OneStatement from "./oneStatement.ts"
import { encodeMeta, type Store } from "./store.ts"

/** `append` and `checkpoint` of a write handle, over the store and the hold operations. */
export const make = (store: Store, hold: ReturnType<typeof ConflictHold.make>, notifier: Notifier) => {
  const { checkpointsT, entriesT, names, rows: rowsOf, sessionsT, signals, sql, storageError } = store
  const { finishHold, isLive, openHold, releaseLater } = hold
  const oneStatement = OneStatement.make(names)

  // Stored only when it describes what is stored: the session holds at least its
  // entries, its newest retained entry is the stored one, and it is not older than
  // the checkpoint it replaces. The same statement gives the session row the
  // exported head when the checkpoint ends where the session does (filling in rows
  // written before that column existed).
  const checkpoint = (id: string, document: Checkpoint.CheckpointJson): Effect.Effect<number, StorageError> =>
    Effect.gen(function*() {
      const doc = stringify(document)
      const next = document.next_sequence
      const last = Checkpoint.lastOf(document)
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
      const why = next > stored
        ? `checkpoint (next ${next}) is ahead of storage (${stored} entries)`
        : checkpointed !== null && next < checkpointed
        ? `checkpoint (next ${next}) is older than the stored one (next ${checkpointed})`
        : `checkpoint ends with entry ${next - 1}, which storage holds with another hash`
      return yield* new StorageError({
        operation: "checkpoint",
        path: `${names.checkpoints}:${id}`,
        reason: new StorageReason.CheckpointRefused({ why })
      })
    })

  // The compare-and-append as one statement, committed on its own: the session row
  // is advanced only if its tip is `request.after` (created with the batch when
  // there is none and `after` is the empty tip) and the entries are inserted only
  // if it was, so a statement that finds another tip stores nothing. `ON CONFLICT DO UPDATE` locks the row and
  // compares its newest committed version, waiting for a writer that holds it. An
  // empty result says only that nothing was stored: why is for `appendTx` to find
  // out, under the lock. The statement's text is one of a few fixed ones
  // (`OneStatement.text`), sent with its parameters as they are: nothing about it is
  // built per append but the parameters.
  const appendOne = (
    id: string,
    caps: JournalState.Caps | undefined,
    request: Persistence.AppendRequest,
    texts: ReadonlyArray<string>
  ) => {
    const last = request.entries[request.entries.length - 1]!
    const next = request.after.sequence + request.entries.length
    const meta = request.meta
    const empty = Persistence.tipMatches(request.after, 0, Entry.ZERO_HASH)
    const hashes = new Array<string>(request.entries.length)
    for (let i = 0; i < hashes.length; i++) hashes[i] = request.entries[i]!.entry_hash
    const params: Array<unknown> = [id, request.after.sequence, next, last.entry_hash, request.head(), hashes, texts]
    if (request.after.hash !== null) params.push(request.after.hash)
    if (meta !== undefined) params.push(stringify(encodeMeta(meta)), meta.updated_at)
    if (empty) {
      const initial = JournalState.empty(id, caps)
      params.push(initial.entry_cap, initial.tool_counts_cap)
    }
    const text = oneStatement.text(empty, request.after.hash !== null, meta !== undefined)
    return sql.unsafe(text, params).pipe(
      Effect.flatMap(rowsOf.appended),
      Effect.map((advanced) => {
        const row = advanced[0]
        return row === undefined ? null : { bytes: row.bytes, notify: next }
      })
    )
  }

  // The compare-and-append, inside one transaction: stores the batch only if the
  // stored tip is `request.after`.
  const appendTx = (
    id: string,
    caps: JournalState.Caps | undefined,
    request: Persistence.AppendRequest,
    texts: ReadonlyArray<string>
  ) =>
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
      if (!Persistence.tipMatches(request.after, stored, row!.head) || !consecutive(request)) return yield* conflict
      const storedMetaAt = row!.meta_updated_at
      const meta = request.meta !== undefined && (storedMetaAt === null || request.meta.updated_at >= storedMetaAt)
        ? request.meta
        : undefined
      const setMeta = meta === undefined
        ? sql``
        : sql`, meta = ${stringify(encodeMeta(meta))}, meta_updated_at = ${meta.updated_at}`
      const last = request.entries[request.entries.length - 1]
      if (last === undefined) {
        yield* sql`UPDATE ${sessionsT} SET exported_head = ${request.head()}, updated_at = now() ${setMeta} WHERE session_id = ${id}`
        return { bytes: 0, notify: null }
      }
      const next = stored + request.entries.length
      // Insert and advance the session row in one statement; other instances are
      // notified once the transaction has committed (`append`).
      const [appended] = yield* sql`WITH inserted AS (
          INSERT INTO ${entriesT} (session_id, sequence, entry_hash, entry)
          SELECT ${id}, t.s, t.h, t.e
          FROM unnest(${request.entries.map((e) => String(e.sequence))}::int8[], ${
        request.entries.map((e) => e.entry_hash)
      }::text[],
            ${texts}::text[]) AS t(s, h, e)
          RETURNING octet_length(entry) AS n
        ), total AS (SELECT coalesce(sum(n), 0)::int8 AS bytes FROM inserted)
        UPDATE ${sessionsT} SET next_sequence = ${next}, head = ${last.entry_hash}, exported_head = ${request.head()},
          entry_bytes = entry_bytes + (SELECT bytes FROM total), updated_at = now() ${setMeta}
        WHERE session_id = ${id}
        RETURNING (SELECT bytes FROM total) AS bytes`.pipe(
        Effect.flatMap(rowsOf.appended)
      )
      return { bytes: appended!.bytes, notify: next }
    })

  // The locking transaction, after a one-statement append stored nothing or when
  // the handle holds the lock from a lost race.
  const appendLocked = (
    id: string,
    caps: JournalState.Caps | undefined,
    request: Persistence.AppendRequest,
    texts: ReadonlyArray<string>,
    slot: ConflictHold.WriterHold,
    scope: Scope.Scope
  ) =>
    Effect.gen(function*() {
      const held = isLive(slot.held) ? slot.held : yield* openHold(scope)
      held.inUse = true
      held.uses++
      slot.held = null
      const result = yield* Effect.result(
        Effect.provideService(appendTx(id, caps, request, texts), sql.transactionService, held.level)
      )
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
    })

  // The compare-and-append, committed as one transaction; followers of this process
  // and, through the notifier, of other instances are told after the commit. A
  // lost race keeps that
  // transaction open (and with it the session's row lock) for the reload and the
  // retry, which the service makes through the same handle: the retry cannot lose
  // again, so two busy writers take turns instead of one starving the other.
  const append = (
    id: string,
    caps: JournalState.Caps | undefined,
    request: Persistence.AppendRequest,
    slot: ConflictHold.WriterHold,
    scope: Scope.Scope
  ): Effect.Effect<Persistence.Appended, StorageError | SequenceConflict> => {
    const entries = request.entries
    if (entries.length === 0 && request.meta === undefined) return Effect.succeed({ bytes: 0 })
    return Effect.suspend(() => {
      // The entries' texts, encoded once for whichever statement stores them.
      const texts = new Array<string>(entries.length)
      for (let i = 0; i < entries.length; i++) texts[i] = Entry.jsonText(entries[i]!)
      // Without a held lock, a batch that continues `after` is tried as one statement.
      return !isLive(slot.held) && entries.length > 0 && consecutive(request)
        ? Effect.flatMap(
          appendOne(id, caps, request, texts),
          (one) => one !== null ? Effect.succeed(one) : appendLocked(id, caps, request, texts, slot, scope)
        )
        : appendLocked(id, caps, request, texts, slot, scope)
    }).pipe(
      Effect.catchTag("SqlError", (e) =>
        // The row lock makes this unreachable between instances of this adapter;
        // the key still settles any other writer that skips the lock.
        Effect.fail(
          e.reason._tag === "UniqueViolation"
            ? new SequenceConflict({ id, sequence: request.after.sequence })
            : storageError("append", names.entries)(e)
        )),
      Effect.map((r): Persistence.Appended => {
        if (r.notify !== null) {
          PubSub.publishUnsafe(signals, { id, next: r.notify })
          notifier.mark(id, r.notify)
        }
        return { bytes: r.bytes }
      })
    )
  }

  return { append, checkpoint }
}

// Whether the batch's entries are numbered on from `after` (with a matching tip,
// from the stored count).
const consecutive = (request: Persistence.AppendRequest): boolean => {
  const entries = request.entries
  for (let i = 0; i < entries.length; i++) {
    if (entries[i]!.sequence !== request.after.sequence + i) return false
  }
  return true
}
