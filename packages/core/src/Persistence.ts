/**
 * The storage port of the journal, and its in-memory adapter.
 *
 * A session is opened for reading or writing. A read handle loads and verifies;
 * a write handle also holds the session's single-writer guarantee for as long as
 * its scope is open (a lock file on disk, a sequence key in PostgreSQL, a flag in
 * memory), appends with compare-and-append (stored only if the stored tip is the
 * one the writer built on) and stores checkpoint documents. Adapters move bytes:
 * recovery is core's (`Recovery`), the decision when to checkpoint is core's
 * (`Checkpoint.due`, fed with the bytes each append reports). History, listing,
 * deletion and following are available without a handle.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as Checkpoint from "./Checkpoint.ts"
import type * as Entry from "./Entry.ts"
import {
  type CorruptJournal,
  type IntegrityViolation,
  type SequenceConflict,
  type SessionLocked,
  type SessionNotFound,
  StorageError
} from "./Errors.ts"
import * as Memory from "./internal/memory.ts"
import * as JournalState from "./JournalState.ts"
import type * as Recovery from "./Recovery.ts"
import type { SessionMeta } from "./SessionMeta.ts"
import * as StorageReason from "./StorageReason.ts"

/**
 * Decodes an interval option (a `Duration.Input`) of the service or an adapter:
 * `fallback` when it is undefined; a `StorageError` of operation "configure" whose
 * reason is `StorageReason.InvalidOption` naming `option` when it is no duration
 * (an unknown unit, `NaN`) or a negative one. An infinite duration is kept.
 *
 * @since 0.1.0
 */
export const intervalOption = (
  option: string,
  input: Duration.Input | undefined,
  fallback: Duration.Input
): Result.Result<Duration.Duration, StorageError> => {
  const invalid = (why: string) =>
    Result.fail(
      new StorageError({
        operation: "configure",
        reason: new StorageReason.InvalidOption({
          option,
          message: `invalid ${option} ${describeInput(input)}: ${why}`
        })
      })
    )
  if (input === undefined) return Result.succeed(Duration.fromInputUnsafe(fallback))
  if (typeof input === "number" && Number.isNaN(input)) return invalid("not a number")
  return Option.match(Duration.fromInput(input), {
    onNone: () => invalid("not a duration"),
    onSome: (d) => Duration.isNegative(d) ? invalid("negative") : Result.succeed(d)
  })
}

/**
 * `intervalOption` as an Effect: decodes an interval option, failing with a
 * `StorageError` that names it.
 *
 * @since 0.1.0
 */
export const decodeInterval = (
  option: string,
  input: Duration.Input | undefined,
  fallback: Duration.Input
): Effect.Effect<Duration.Duration, StorageError> => Effect.fromResult(intervalOption(option, input, fallback))

const describeInput = (input: unknown): string => {
  if (typeof input === "string") return JSON.stringify(input)
  if (typeof input === "number" || typeof input === "bigint") return String(input)
  try {
    return JSON.stringify(input) ?? String(input)
  } catch {
    return String(input)
  }
}

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
 * existed in storage, the recovery report, and what the checkpoint policy needs
 * to go on where the previous writer stopped.
 *
 * @since 0.1.0
 */
export interface Loaded {
  readonly state: JournalState.JournalState
  readonly exists: boolean
  readonly recovery: RecoveryReport
  /**
   * Bytes stored after the checkpoint the load started from (the records it
   * replayed, as the adapter counts bytes; 0 when unknown). With `checkpointBytes`
   * this lets `Checkpoint.due` carry on across a reopen.
   */
  readonly sinceCheckpointBytes?: number | undefined
  /** Size of the stored checkpoint document in bytes (0 when there is none). */
  readonly checkpointBytes?: number | undefined
}

/**
 * Failures of a load.
 *
 * @since 0.1.0
 */
export type LoadError = StorageError | CorruptJournal | IntegrityViolation

/**
 * The tip of a stored chain: how many entries are stored (the next sequence) and
 * the `entry_hash` of the newest one (`ZERO_HASH` when none). `hash` is `null`
 * when the writer does not retain the newest entry (a session with `entry_cap`
 * 0): then only the sequence is compared.
 *
 * @since 0.1.0
 */
export interface Tip {
  readonly sequence: number
  readonly hash: string | null
}

/**
 * The tip of a state's chain.
 *
 * @since 0.1.0
 */
export const tipOf = (state: JournalState.JournalState): Tip => ({
  sequence: state.next_sequence,
  hash: state.next_sequence > 0 && JournalState.entryCount(state) === 0 ? null : JournalState.lastHash(state)
})

export {
  /**
   * Whether a stored tip (its entry count and newest `entry_hash`) is the one a
   * compare-and-append was built on.
   *
   * @since 0.1.0
   */
  tipMatches
} from "./internal/tip.ts"

/**
 * One compare-and-append: `entries` (consecutive, the first at `after.sequence`
 * linking to `after.hash`) are stored only if the stored tip is `after`;
 * optionally with a metadata update. `head()` is the exported head once they are
 * stored (`JournalState.head`), for listings; adapters store it, never compute it.
 *
 * @since 0.1.0
 */
export interface AppendRequest {
  readonly after: Tip
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly meta?: SessionMeta | undefined
  /**
   * The exported head once the entries are stored, computed on demand: once the
   * ring has evicted it costs a SHA-256, which an adapter that does not list
   * heads should not pay on every append.
   */
  readonly head: () => string
}

/**
 * What an append stored: its size in bytes as the adapter counts them (the lines
 * of a segment, the rows of a table), which feeds the checkpoint policy.
 *
 * @since 0.1.0
 */
export interface Appended {
  readonly bytes: number
}

/**
 * A session opened for reading: loads and verifications, never a write.
 *
 * @since 0.1.0
 */
export interface ReadHandle {
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
}

/**
 * A session opened for writing: a read handle that also holds the session's
 * single-writer guarantee until the scope that opened it closes.
 *
 * @since 0.1.0
 */
export interface WriteHandle extends ReadHandle {
  /**
   * Compare-and-append; durable when it succeeds. Fails with `SequenceConflict`,
   * storing nothing, unless the stored tip is `request.after` (another writer got
   * there first, or an earlier append reached storage although it failed).
   */
  readonly append: (request: AppendRequest) => Effect.Effect<Appended, StorageError | SequenceConflict>
  /**
   * Stores a checkpoint document, atomically replacing the previous one, and
   * returns its size in bytes. Refused (`StorageError`) when the document is older
   * than the stored one or does not end with the entry storage holds there.
   */
  readonly checkpoint: (document: Checkpoint.CheckpointJson) => Effect.Effect<number, StorageError>
  /**
   * Optional: stores the state itself as the checkpoint, with the contract of
   * `checkpoint`. For adapters that keep values rather than bytes (the in-memory
   * adapter, which encodes it only when a load needs the document), or that write
   * the document's text piece by piece (`Checkpoint.writeJsonText`,
   * the filesystem adapter); when present the service calls it instead of
   * `checkpoint`, sparing the encoding.
   *
   * @since 0.1.0
   */
  readonly checkpointState?: ((state: JournalState.JournalState) => Effect.Effect<number, StorageError>) | undefined
  /**
   * Optional: the largest entry this handle can store, in UTF-8 bytes of the entry's
   * JSON text (`Entry.toJsonText(Entry.encode(entry))`); an adapter whose records
   * have a bound (a line of a segment file) advertises it, less its own framing.
   * The service refuses a write with a larger entry on its own, with
   * `InvalidRecordField`, before it joins a group-committed append, so the writes
   * it would have shared an append with are stored.
   *
   * @since 0.1.0
   */
  readonly maxRecordBytes?: number | undefined
}

/**
 * An open session of either kind.
 *
 * @since 0.1.0
 */
export type SessionHandle = ReadHandle | WriteHandle

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
 * `open` by mode: a write handle for `write`, a read handle (no write methods)
 * for `read`.
 *
 * @since 0.1.0
 */
export interface Open {
  (id: string, options: OpenOptions & { readonly mode: "write" }): Effect.Effect<
    WriteHandle,
    StorageError | SessionLocked,
    Scope.Scope
  >
  (id: string, options: OpenOptions & { readonly mode: "read" }): Effect.Effect<ReadHandle, StorageError, Scope.Scope>
  (id: string, options: OpenOptions): Effect.Effect<SessionHandle, StorageError | SessionLocked, Scope.Scope>
}

/**
 * Builds an adapter's `open` from its two ways of opening.
 *
 * @since 0.1.0
 */
export const makeOpen = <RE, WE>(opens: {
  readonly read: (id: string, caps: JournalState.Caps | undefined) => Effect.Effect<ReadHandle, RE, Scope.Scope>
  readonly write: (id: string, caps: JournalState.Caps | undefined) => Effect.Effect<WriteHandle, WE, Scope.Scope>
}): Open =>
  ((id: string, options: OpenOptions) =>
    options.mode === "write" ? opens.write(id, options.caps) : opens.read(id, options.caps)) as Open

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
  readonly open: Open
  /** Every stored entry with `sequence >= from`, in order, read lazily in pages. */
  readonly history: (
    id: string,
    options?: HistoryOptions
  ) => Stream.Stream<Entry.Entry, StorageError | CorruptJournal | SessionNotFound>
  /**
   * Entries from `from` on, then every entry stored later by any writer (this
   * process or another), without end. An adapter hands over what it reads; the
   * service's followers check every record before delivering it (`Follow`).
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
 * @since 0.1.0
 */
export const loaded = (outcome: Recovery.Outcome, exists = outcome.exists): Loaded => ({
  state: outcome.state,
  exists,
  recovery: outcome.report
})

/**
 * Options of the in-memory adapter (checkpoints are the service's decision, see
 * `Checkpoint.due`).
 *
 * @since 0.1.0
 */
export interface MemoryOptions {
  /**
   * A bound on each stored entry, as a storage with bounded records has one (see
   * `WriteHandle.maxRecordBytes`): write handles advertise it, and an append with
   * a larger entry fails as a whole with `StorageError`, storing nothing (default:
   * no bound).
   *
   * @since 0.1.0
   */
  readonly maxRecordBytes?: number | undefined
}

/**
 * A complete in-memory adapter: full history, checkpoints (stored encoded, so the
 * codec is exercised), metadata, the session list, a writer flag per session, and
 * `follow` through a `PubSub`. Nothing survives the process; use it in tests and
 * for ephemeral journals.
 *
 * @since 0.1.0
 */
export const makeMemory = (options?: MemoryOptions): Effect.Effect<Persistence["Service"]> =>
  Effect.map(Memory.make(options?.maxRecordBytes), (m) =>
    Persistence.of({
      open: makeOpen({ read: m.read, write: m.write }),
      history: m.history,
      follow: m.follow,
      list: m.list,
      delete: m.delete
    }))

/**
 * The adapter of a store that does not exist (a journal directory never created, a
 * database without the tables), for readers that must not create it: it lists no
 * session, every session reads as absent, and opening one for writing, or deleting
 * one, fails with a `StorageError` (operation `open`, reason `Obstructed`) whose
 * message is `why`.
 *
 * @since 0.1.0
 */
export const makeAbsent = (why: string): Effect.Effect<Persistence["Service"]> =>
  Effect.map(Memory.make(), (m) => {
    const refused = new StorageError({ operation: "open", reason: new StorageReason.Obstructed({ message: why }) })
    return Persistence.of({
      open: makeOpen({ read: m.read, write: () => Effect.fail(refused) }),
      history: m.history,
      follow: m.follow,
      list: m.list,
      delete: () => Effect.fail(refused)
    })
  })

/**
 * The in-memory adapter as a layer.
 *
 * @since 0.1.0
 */
export const layerMemory = (options?: MemoryOptions): Layer.Layer<Persistence> =>
  Layer.effect(Persistence, makeMemory(options))
