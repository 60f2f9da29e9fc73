/**
 * The storage port of the journal, and its in-memory adapter.
 *
 * A session is opened for reading or writing; a write handle holds the session's
 * single-writer guarantee for as long as its scope is open (a lock file on disk, a
 * sequence key in PostgreSQL, a flag in memory). Through the handle the service
 * loads the session's state, appends batches durably, and writes checkpoints.
 * History, listing, deletion and following are available without a handle.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as PubSub from "effect/PubSub"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Checkpoint from "./Checkpoint.ts"
import type * as Entry from "./Entry.ts"
import { ZERO_HASH } from "./Entry.ts"
import {
  type CorruptJournal,
  type IntegrityViolation,
  SequenceConflict,
  SessionLocked,
  SessionNotFound,
  type StorageError
} from "./Errors.ts"
import * as JournalState from "./JournalState.ts"
import * as Recovery from "./Recovery.ts"
import type { SessionMeta } from "./SessionMeta.ts"

/**
 * What a load found beyond the valid state (see `Recovery.RecoveryReport`).
 *
 * @since 0.1.0
 */
export type RecoveryReport = Recovery.RecoveryReport

/**
 * A report for a load that found nothing unusual.
 *
 * @since 0.1.0
 */
export const cleanReport = (checkpoint: RecoveryReport["checkpoint"], replayed: number): RecoveryReport => ({
  checkpoint,
  replayed,
  skipped: 0,
  tornTail: null,
  stopped: null
})

/**
 * A session as loaded: its state (checkpoint plus verified replay), whether it
 * existed in storage, and the recovery report.
 *
 * @since 0.1.0
 */
export interface Loaded {
  readonly state: JournalState.JournalState
  readonly exists: boolean
  readonly recovery: RecoveryReport
}

/**
 * Failures of a load.
 *
 * @since 0.1.0
 */
export type LoadError = StorageError | CorruptJournal | IntegrityViolation

/**
 * One durable append: consecutive, linked entries continuing the stored chain,
 * optionally a metadata update, and the state after them (an adapter may write a
 * checkpoint from it when one is due).
 *
 * @since 0.1.0
 */
export interface AppendBatch {
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly meta?: SessionMeta | undefined
  readonly state: JournalState.JournalState
}

/**
 * An open session. For a write handle, the single-writer guarantee holds until the
 * scope that opened it closes.
 *
 * @since 0.1.0
 */
export interface SessionHandle {
  readonly id: string
  /**
   * Reads the session from storage with `Recovery` in `load` mode: the checkpoint,
   * checked against the stored records around its end, then every stored entry
   * after it. A session that does not exist loads as the empty state with
   * `exists: false`. Damage is reported in `recovery.stopped`, not failed.
   */
  readonly load: Effect.Effect<Loaded, LoadError>
  /**
   * Reads the whole stored history from its start with `Recovery` in `verify`
   * mode: every record replayed, every field of the checkpoint compared with the
   * replay.
   */
  readonly verify: Effect.Effect<Loaded, LoadError>
  /**
   * Appends a batch; durable when it succeeds. An entry whose sequence is already
   * stored with the same hash is accepted again (idempotent re-append); a different
   * entry at a stored sequence (a fork) or a sequence past the end (a gap) fails with
   * `SequenceConflict` and stores nothing of the batch.
   */
  readonly append: (batch: AppendBatch) => Effect.Effect<void, StorageError | SequenceConflict>
  /** Stores a checkpoint of `state`, atomically replacing the previous one. */
  readonly checkpoint: (state: JournalState.JournalState) => Effect.Effect<void, StorageError>
}

/**
 * How to open a session: `write` takes the single-writer guarantee; `read` never
 * blocks a writer. `caps` apply when the session has no checkpoint of its own.
 *
 * @since 0.1.0
 */
export interface OpenOptions {
  readonly mode: "read" | "write"
  readonly caps?: JournalState.Caps | undefined
}

/**
 * One line of `list`.
 *
 * @since 0.1.0
 */
export interface SessionInfo {
  readonly id: string
  /** Number of entries ever stored (the next sequence). */
  readonly entries: number
  /**
   * The exported head (`JournalState.head`): the newest entry's hash while nothing was
   * evicted, and from the first eviction on a fold that also commits to every evicted
   * entry. The value to save and later compare against `SessionJournal.head` or a
   * verify report.
   */
  readonly head: string
  /**
   * `entry_hash` of the newest stored entry (ZERO_HASH when none): what the next entry
   * links to. Equal to `head` until the session's ring evicts its first entry.
   */
  readonly lastHash: string
  /** Last change, milliseconds since the epoch, when known. */
  readonly updatedAt: number | null
  /** Bytes the session occupies in storage, when the adapter can tell. */
  readonly bytes: number | null
  /**
   * Why the session does not load cleanly (its valid prefix ends early, or it
   * cannot be read at all), or null. `entries` and `head` are then those of the
   * valid prefix, not what the session once held.
   */
  readonly problem: string | null
}

/**
 * Range of a history read: entries with `sequence >= from`, at most `limit` of them.
 *
 * @since 0.1.0
 */
export interface HistoryOptions {
  readonly from?: number | undefined
  readonly limit?: number | undefined
}

/**
 * The storage port. Every adapter passes the contract suite exported from
 * `@session-journal/core/test/PersistenceContract`.
 *
 * @since 0.1.0
 */
export class Persistence extends Context.Service<Persistence, {
  /** Opens a session; the handle lives as long as the surrounding scope. */
  readonly open: (
    id: string,
    options: OpenOptions
  ) => Effect.Effect<SessionHandle, StorageError | SessionLocked, Scope.Scope>
  /** Every stored entry with `sequence >= from`, in order, read lazily in pages. */
  readonly history: (
    id: string,
    options?: HistoryOptions
  ) => Stream.Stream<Entry.Entry, StorageError | CorruptJournal | SessionNotFound>
  /**
   * Entries from `from` on, then every entry stored later by any writer (this
   * process or another), without end.
   */
  readonly follow: (
    id: string,
    from: number
  ) => Stream.Stream<Entry.Entry, StorageError | CorruptJournal | SessionNotFound>
  /** All sessions in storage. */
  readonly list: Effect.Effect<ReadonlyArray<SessionInfo>, StorageError>
  /** Deletes a session and all its history; fails with `SessionLocked` while a writer holds it. */
  readonly delete: (id: string) => Effect.Effect<void, StorageError | SessionLocked | SessionNotFound>
}>()("@session-journal/core/Persistence") {}


/**
 * The load result of a recovery outcome.
 *
 * @since 0.2.0
 */
export const loaded = (outcome: Recovery.Outcome, exists = outcome.exists): Loaded => ({
  state: outcome.state,
  exists,
  recovery: outcome.report
})

/**
 * Options of the in-memory adapter.
 *
 * @since 0.1.0
 */
export interface MemoryOptions {
  /** Write a checkpoint after this many entries since the last one (default 1024). */
  readonly checkpointEvery?: number | undefined
}

interface MemorySession {
  readonly entries: Array<Entry.Entry>
  checkpoint: Checkpoint.CheckpointJson | null
  meta: SessionMeta | null
  /** Caps of the state the session was first written with; a checkpoint's caps take precedence. */
  caps: JournalState.Caps | null
  writer: boolean
  updatedAt: number
  sinceCheckpoint: number
}

/**
 * A complete in-memory adapter: full history, checkpoints (stored encoded, so the
 * codec is exercised), metadata, the session list, a writer flag per session, and
 * `follow` through a `PubSub`. Nothing survives the process; use it in tests and
 * for ephemeral journals.
 *
 * @since 0.1.0
 */
export const makeMemory = Effect.fnUntraced(function*(options?: MemoryOptions) {
  const checkpointEvery = options?.checkpointEvery ?? 1024
  const sessions = new Map<string, MemorySession>()
  const appended = yield* PubSub.unbounded<{ readonly id: string; readonly entries: ReadonlyArray<Entry.Entry> }>()

  const sessionFor = (id: string): MemorySession => {
    let s = sessions.get(id)
    if (s === undefined) {
      s = { entries: [], checkpoint: null, meta: null, caps: null, writer: false, updatedAt: 0, sinceCheckpoint: 0 }
      sessions.set(id, s)
    }
    return s
  }

  const load = (id: string, caps: JournalState.Caps | undefined, mode: Recovery.Options["mode"]): Effect.Effect<Loaded> =>
    Effect.sync((): Loaded => {
      const s = sessions.get(id)
      if (s === undefined || (s.entries.length === 0 && s.checkpoint === null && s.meta === null)) {
        return { state: JournalState.empty(id, caps), exists: false, recovery: cleanReport("none", 0) }
      }
      const location = `memory:${id}`
      // Load mode reads from the entry the checkpoint ends with, so it can check it.
      const from = mode === "verify" || s.checkpoint === null
        ? 0
        : Math.min(Math.max(0, s.checkpoint.next_sequence - 1), s.entries.length)
      const outcome = Recovery.run(
        {
          id,
          mode,
          // A session keeps the caps it was created with, also before its first
          // checkpoint: replaying under other caps would evict differently.
          caps: s.caps ?? caps,
          checkpoint: s.checkpoint === null ? null : { _tag: "Document", document: s.checkpoint, location: `${location}/checkpoint` },
          location
        },
        Recovery.rows(location, from, s.entries.slice(from))
      )
      const result = loaded(outcome, true)
      return s.meta === null ? result : { ...result, state: JournalState.applyMeta(result.state, s.meta) }
    })

  const append = (id: string, batch: AppendBatch): Effect.Effect<void, SequenceConflict> =>
    Effect.suspend(() => {
      const s = sessionFor(id)
      const fresh: Array<Entry.Entry> = []
      let next = s.entries.length
      for (const entry of batch.entries) {
        if (entry.sequence < next && fresh.length === 0) {
          if (s.entries[entry.sequence]!.entry_hash !== entry.entry_hash) {
            return Effect.fail(new SequenceConflict({ id, sequence: entry.sequence }))
          }
          continue
        }
        if (entry.sequence !== next) return Effect.fail(new SequenceConflict({ id, sequence: entry.sequence }))
        fresh.push(entry)
        next++
      }
      for (const e of fresh) s.entries.push(e)
      if (s.caps === null) s.caps = { entry_cap: batch.state.entry_cap, tool_counts_cap: batch.state.tool_counts_cap }
      if (batch.meta !== undefined && (s.meta === null || batch.meta.updated_at >= s.meta.updated_at)) {
        s.meta = batch.meta
      }
      s.updatedAt = Date.now()
      s.sinceCheckpoint += fresh.length
      if (s.sinceCheckpoint >= checkpointEvery && batch.state.next_sequence === s.entries.length) {
        s.checkpoint = Checkpoint.encode(batch.state)
        s.sinceCheckpoint = 0
      }
      return fresh.length === 0 ? Effect.void : Effect.asVoid(PubSub.publish(appended, { id, entries: fresh }))
    })

  const history = (id: string, options?: HistoryOptions) =>
    Stream.suspend(() => {
      const s = sessions.get(id)
      if (s === undefined) return Stream.fail(new SessionNotFound({ id }))
      const from = Math.max(0, options?.from ?? 0)
      const to = options?.limit === undefined ? s.entries.length : Math.min(s.entries.length, from + options.limit)
      return Stream.fromIterable(s.entries.slice(from, to))
    })

  const follow = (id: string, from: number) =>
    Stream.unwrap(Effect.gen(function*() {
      // Subscribe before reading the catch-up, then drop what the catch-up covered:
      // nothing appended in between is lost.
      const sub = yield* PubSub.subscribe(appended)
      const s = sessions.get(id)
      if (s === undefined) return Stream.fail(new SessionNotFound({ id }))
      const catchUp = s.entries.slice(Math.max(0, from))
      let next = Math.max(from, s.entries.length)
      const live = Stream.fromSubscription(sub).pipe(
        Stream.filter((m) => m.id === id),
        Stream.flatMap((m) => Stream.fromIterable(m.entries)),
        Stream.filter((e) => {
          if (e.sequence < next) return false
          next = e.sequence + 1
          return true
        })
      )
      return Stream.concat(Stream.fromIterable(catchUp), live)
    }))

  const open = (id: string, openOptions: OpenOptions) =>
    Effect.gen(function*() {
      if (openOptions.mode === "write") {
        yield* Effect.acquireRelease(
          Effect.suspend(() => {
            const s = sessionFor(id)
            if (s.writer) return Effect.fail(new SessionLocked({ id, holder: "another writer in this process" }))
            s.writer = true
            return Effect.void
          }),
          () => Effect.sync(() => { const s = sessions.get(id); if (s !== undefined) s.writer = false })
        )
      }
      const handle: SessionHandle = {
        id,
        load: load(id, openOptions.caps, "load"),
        // A full replay is long work: let other fibers (writers) run first.
        verify: Effect.andThen(Effect.yieldNow, load(id, openOptions.caps, "verify")),
        append: (batch) =>
          openOptions.mode === "write"
            ? append(id, batch)
            : Effect.fail(new SequenceConflict({ id, sequence: batch.entries[0]?.sequence ?? 0 })),
        checkpoint: (state) =>
          Effect.sync(() => {
            const s = sessionFor(id)
            s.checkpoint = Checkpoint.encode(state)
            s.sinceCheckpoint = 0
          })
      }
      return handle
    })

  // The exported head depends on the session's caps and evictions, so it is taken
  // from a load rather than kept beside the entries: a load always agrees with them.
  // A session that no longer loads still lists, with its newest hash as the head.
  const list = Effect.suspend(() =>
    Effect.forEach(
      Array.from(sessions.entries())
        .filter(([, s]) => s.entries.length > 0 || s.checkpoint !== null || s.meta !== null)
        .sort(([a], [b]) => a < b ? -1 : a > b ? 1 : 0),
      ([id, s]) => {
        const lastHash = s.entries[s.entries.length - 1]?.entry_hash ?? ZERO_HASH
        return load(id, undefined, "load").pipe(
          Effect.map((loaded): SessionInfo => ({
            id,
            entries: loaded.state.next_sequence,
            head: JournalState.head(loaded.state),
            lastHash,
            problem: loaded.recovery.stopped === null ? null : `${loaded.recovery.stopped.reason}: ${loaded.recovery.stopped.detail}`,
            updatedAt: s.updatedAt,
            bytes: null
          }))
        )
      }
    )
  )

  const remove = (id: string) =>
    Effect.suspend((): Effect.Effect<void, SessionLocked | SessionNotFound> => {
      const s = sessions.get(id)
      if (s === undefined) return Effect.fail(new SessionNotFound({ id }))
      if (s.writer) return Effect.fail(new SessionLocked({ id, holder: "a writer in this process" }))
      sessions.delete(id)
      return Effect.void
    })

  return Persistence.of({ open, history, follow, list, delete: remove })
})

/**
 * The in-memory adapter as a layer.
 *
 * @since 0.1.0
 */
export const layerMemory = (options?: MemoryOptions): Layer.Layer<Persistence> =>
  Layer.effect(Persistence, makeMemory(options))
