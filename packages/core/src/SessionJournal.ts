/**
 * The SessionJournal service: the journal of every session of an application.
 *
 * Open sessions live in an `RcMap`: a session is opened on first use (its writer
 * guarantee taken, its state loaded), shared by every concurrent caller, released
 * when it has been idle for `idleTimeToLive`, and released early, idlest first,
 * when `maxOpenSessions` would be exceeded. A session with a write in flight is
 * never released under it. Each open session has one writer fiber draining one
 * `Queue`: it takes every queued request (group commit), builds their entries in
 * order against the session's `JournalState`, stores them with one durable append
 * and answers each caller. The state sits in a `Ref` that only the
 * writer sets, so readers never wait for a write. When storage fails, the
 * session's state is dropped and re-read before the next write: a failed sync may
 * or may not have reached the disk, and storage is the truth.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Checkpoint from "./Checkpoint.ts"
import * as CorruptReason from "./CorruptReason.ts"
import * as Entry from "./Entry.ts"
import {
  CorruptJournal,
  IntegrityViolation,
  InvalidSessionId,
  type SessionLocked,
  SessionNotFound,
  StorageError
} from "./Errors.ts"
import type * as Follow from "./Follow.ts"
import * as Guard from "./Guard.ts"
import * as Following from "./internal/following.ts"
import * as Hubs from "./internal/hubs.ts"
import * as Sessions from "./internal/sessions.ts"
import * as Writer from "./internal/writer.ts"
import * as Writes from "./internal/writes.ts"
import * as JournalState from "./JournalState.ts"
import * as Persistence from "./Persistence.ts"
import type * as Recovery from "./Recovery.ts"
import * as SessionMeta from "./SessionMeta.ts"

/**
 * Failures of opening or loading a session for writing.
 *
 * @since 0.1.0
 */
export type OpenError = Sessions.OpenError

/**
 * Failures of a write (`record`, `append`, `decide`, `setMeta`).
 *
 * @since 0.1.0
 */
export type WriteError = Sessions.WriteError

/**
 * Failures of a read of one session's state.
 *
 * @since 0.1.0
 */
export type ReadError = InvalidSessionId | StorageError | CorruptJournal | IntegrityViolation | SessionNotFound

/**
 * One element of `changes`: a committed entry, or the number of entries this
 * subscriber missed because it fell more than the stream capacity behind, or
 * (from storage) a repair's recovery entry that set entries already delivered
 * aside (`Follow.Recovered`).
 *
 * @since 0.1.0
 */
export type Change = Hubs.Change | Follow.Recovered

/**
 * Failures of a follower (`follow`, `changes` from storage): besides storage
 * failures, damage found while following, and `HistoryDiverged` when entries
 * already delivered were replaced.
 *
 * @since 0.1.0
 */
export type FollowError = Following.FollowError

/**
 * The result of `decide`: the verdict and the entry recorded for it.
 *
 * @since 0.1.0
 */
export type Decision = Writes.Decision

/**
 * What `decide` writes beside the tool entry, as a function of the verdict.
 *
 * @since 0.1.0
 */
export type Beside = Writes.Beside

/**
 * What a door knows of a decided call besides its parameters: the call as sent,
 * anchors for relative paths, tokens used so far, whether a person can be asked.
 *
 * @since 0.1.0
 */
export type DecideOptions = Writes.DecideOptions

/**
 * One item of `writeAll`: a tool call or a non-tool entry.
 *
 * @since 0.1.0
 */
export type WriteItem = Writes.WriteItem

/**
 * What a plan of `writeFrom` stores: items, an optional metadata patch stored with
 * them in the same durable append, and the caller's result.
 *
 * @since 0.1.0
 */
export type Plan<A> = Writes.Plan<A>

/**
 * What `writeFrom` gives back: the plan's result and the entries stored for it
 * (none when the plan stored nothing).
 *
 * @since 0.1.0
 */
export type Planned<A> = Writes.Planned<A>

/**
 * The result of `verify`: the head of the verified chain and how many stored
 * entries were checked.
 *
 * @since 0.1.0
 */
export interface VerifyReport {
  readonly id: string
  readonly head: string
  readonly entriesChecked: number
  readonly nextSequence: number
}

/**
 * Options of the service.
 *
 * @since 0.1.0
 */
export interface Options {
  /** Caps of new sessions (default 4096 / 4096); an existing session keeps its own. */
  readonly caps?: JournalState.Caps | undefined
  /** Capacity of each session's `changes` hub; the strategy is sliding (default 1024). */
  readonly changesCapacity?: number | undefined
  /**
   * Where `changes` takes entries from: `"service"` (default) streams what this service
   * commits, through its hub; `"storage"` streams what storage commits, from any writer
   * of any instance (through `Persistence.follow`: LISTEN/NOTIFY on PostgreSQL,
   * polling on the filesystem), which never misses an entry and so never reports
   * "missed". Choose `"storage"` when several instances write the same sessions.
   */
  readonly changesFrom?: "service" | "storage" | undefined
  /** Most requests stored by one append (default 1024). */
  readonly maxBatch?: number | undefined
  /** Reload-and-retry rounds when another instance wrote the same sequence (default 8). */
  readonly conflictRetries?: number | undefined
  /**
   * How long a session with nothing to write stays open (its writer guarantee held,
   * its files open, its state in memory) before it is released; the next use opens
   * it again from storage (default 30 seconds). A value that is no duration, or a
   * negative one, fails `make` and `layer` with a `StorageError` whose reason is
   * `InvalidOption` naming `idleTimeToLive`.
   */
  readonly idleTimeToLive?: Duration.Input | undefined
  /**
   * Most sessions kept open at once (default 256). Opening one more first releases
   * the session idle the longest; sessions with writes in flight are never released
   * under them, so the bound is exceeded only while more than this many sessions
   * are being written at the same moment.
   */
  readonly maxOpenSessions?: number | undefined
  /**
   * The floor of the checkpoint policy (`Checkpoint.due`): a session's checkpoint is
   * stored once this many bytes (default 256 KiB), or a quarter of the previous
   * checkpoint's size if that is more, were appended since the last one.
   */
  readonly checkpointMinBytes?: number | undefined
  /**
   * The budget of each open session's window of recent entries, in estimated heap
   * bytes (default `JournalState.DEFAULT_WINDOW_BYTES`, 256 KiB). An open session keeps
   * its counters, the hashes of its retained entries and the newest entries that fit
   * this budget; `JournalState.entries` of its state returns those, and
   * `entries` reads any entry from storage.
   */
  readonly windowBytes?: number | undefined
  /**
   * Whether open sessions keep their Merkle tree (default true): the compact range of
   * the RFC 6962 tree over every entry (`JournalState.tree`, docs/DESIGN.md §14), grown
   * by each append (a leaf hash and, on average, one node hash) and stored in the
   * checkpoint, so that a tree head after a reopen needs no pass over the history.
   * With false the states carry `tree: null` and checkpoints store none.
   */
  readonly keepTree?: boolean | undefined
}

/**
 * The journal service.
 *
 * @since 0.1.0
 */
export class SessionJournal extends Context.Service<SessionJournal, {
  /** Records a tool invocation; returns the durable entry. */
  readonly record: (id: string, params: Entry.ToolParams) => Effect.Effect<Entry.ToolEntry, WriteError>
  /** Appends a message (`kind: "message"`) or an entry of another kind. */
  readonly append: (id: string, kind: string, payload: unknown) => Effect.Effect<Entry.OtherEntry, WriteError>
  /** Stores several items with one durable append, in order; all or none. */
  readonly writeAll: (id: string, items: ReadonlyArray<WriteItem>) => Effect.Effect<Array<Entry.Entry>, WriteError>
  /**
   * Stores what `plan` decides from the session's current state, in the session's
   * writer: no other write of this service comes between the state the plan sees
   * and the append of its items (and metadata patch), and when another instance
   * wrote first (a sequence conflict) the plan runs again on the reloaded state.
   * A plan with nothing to store is answered at once, storing nothing. Gives the
   * plan's result and the entries stored for it. The plan
   * must be pure and quick: it runs inside the writer, before the append.
   */
  readonly writeFrom: <A>(
    id: string,
    plan: (state: JournalState.JournalState, nowMillis: number) => Plan<A>
  ) => Effect.Effect<Planned<A>, WriteError>
  /**
   * Evaluates `guard` on the current snapshot and records the call with `allowed` set by the verdict, atomically,
   * with the decision beside it: `beside` adds entries right after it, in the same append (all or none), and
   * when none of them records the decision (`Guard.recordsDecision`), a `Guard.DECISION_KIND` entry with the
   * verdict, the guard and the reason follows them. Every decision is on the chain with its guard and reason.
   * `options` give the guard its context (`Guard.GuardContext`; the time is the Clock's, the
   * state the session's `guard_state`); an `Ask` where `canAsk` is not true is a denial (`Guard.unanswered`),
   * and an ask is recorded `allowed: true`. When the verdict carries a state other than the one the guard was
   * given (a guard gives one only when it changed), a `Guard.STATE_KIND` entry with it ends the append.
   */
  readonly decide: (
    id: string,
    params: Entry.ToolParams,
    guard: Guard.Guard,
    beside?: Beside,
    options?: DecideOptions
  ) => Effect.Effect<Decision, WriteError>
  /** Changes the session's metadata (not chained; the latest `updated_at` wins). */
  readonly setMeta: (id: string, patch: SessionMeta.MetaPatch) => Effect.Effect<SessionMeta.SessionMeta, WriteError>
  /** The state of a session (its open state, or a read-only load). */
  readonly state: (id: string) => Effect.Effect<JournalState.JournalState, ReadError>
  /** The chio snapshot of a session. */
  readonly snapshot: (id: string) => Effect.Effect<JournalState.Snapshot, ReadError>
  /** The exported head of a session. */
  readonly head: (id: string) => Effect.Effect<string, ReadError>
  /** Verifies the whole stored history of a session against its state. */
  readonly verify: (id: string) => Effect.Effect<VerifyReport, ReadError>
  /** Full history from storage (not only the retained ring). */
  readonly entries: (
    id: string,
    options?: Persistence.HistoryOptions
  ) => Stream.Stream<Entry.Entry, InvalidSessionId | StorageError | CorruptJournal | SessionNotFound>
  /**
   * Entries from `from` on, then every entry any writer stores later (other
   * processes included), each checked before it is delivered (`Follow`): it
   * carries the next sequence, links to the entry delivered before it and hashes
   * to its own `entry_hash`. Where storage stops continuing what was delivered,
   * the follower verifies storage from its start: a repair that set delivered
   * entries aside is delivered as `Recovered` (its recovery entry, and the range
   * set aside) and followed on; an edit, a cut or another chain in place of
   * delivered entries fails the stream with `HistoryDiverged`; damage fails it as
   * `verify` would. `from` as `{ last: n }` starts at the last `n` entries stored
   * (the state the follower loads anyway says where they start). `from` as
   * `{ after: { sequence, hash } }` continues an entry the caller already holds
   * (read or shown before): the follow starts after it, and storage must still
   * hold that entry with that `entry_hash`, as it must every entry delivered;
   * when it does not (it holds another entry there, or ends before it), the stream
   * fails with `HistoryDiverged`, so a caller never continues what it holds with
   * entries of another chain.
   */
  readonly follow: (
    id: string,
    from?: number | { readonly last: number } | { readonly after: Follow.Anchor }
  ) => Stream.Stream<Follow.Event, InvalidSessionId | FollowError>
  /**
   * Subscribes to every entry this service commits to the session from now on. The
   * subscription exists once the effect completes (so nothing committed after that
   * is lost) and lasts as long as its scope; the stream delivers entries in order,
   * with a "missed" marker where a slow consumer fell more than the hub's capacity
   * behind. Entries this service finds in storage when it reloads (another writer's,
   * or those of an append that failed after reaching storage) are delivered too. The
   * stream ends when the session is deleted. From storage (`changesFrom: "storage"`)
   * every entry is checked as `follow` checks it, with the same failures.
   */
  readonly changes: (
    id: string
  ) => Effect.Effect<Stream.Stream<Change, FollowError>, ReadError, Scope.Scope>
  /**
   * Completes when this service has committed entry `sequence` (at once if it already
   * has, or if storage already holds it); fails with `SessionNotFound` if the session
   * is deleted meanwhile.
   */
  readonly awaitSequence: (id: string, sequence: number) => Effect.Effect<void, ReadError>
  /** All sessions in storage. */
  readonly list: Effect.Effect<ReadonlyArray<Persistence.SessionInfo>, StorageError>
  /** Closes the session here (releasing its writer guarantee) and deletes it from storage. */
  readonly delete: (
    id: string
  ) => Effect.Effect<void, InvalidSessionId | StorageError | SessionLocked | SessionNotFound>
  /**
   * Closes an open session: commits what is already queued, then releases the writer
   * guarantee; writes that arrive meanwhile open the session afresh once it is
   * released. A no-op when the session is not open.
   */
  readonly close: (id: string) => Effect.Effect<void>
}>()("@session-journal/core/SessionJournal") {}

// The typed failure a verify reports for where the valid prefix ends.
const failureOf = (stopped: Recovery.Stopped): CorruptJournal | IntegrityViolation =>
  stopped.violation !== undefined && stopped.sequence !== null
    ? new IntegrityViolation({
      index: stopped.sequence,
      sequence: stopped.sequence,
      what: stopped.violation.what,
      expected: stopped.violation.expected,
      actual: stopped.violation.actual
    })
    : new CorruptJournal({
      segment: stopped.segment,
      offset: stopped.offset,
      reason: new CorruptReason.Stopped({ reason: stopped.reason, detail: stopped.detail })
    })

/**
 * Builds the service on a `Persistence`.
 *
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const persistence = yield* Persistence.Persistence
  const caps = options?.caps
  const changesFrom = options?.changesFrom ?? "service"
  const hubs = yield* Hubs.make(options?.changesCapacity ?? 1024, persistence.history)
  const sessions = yield* Sessions.make({
    persistence,
    hubs,
    caps,
    idleTimeToLive: yield* Persistence.decodeInterval("idleTimeToLive", options?.idleTimeToLive, "30 seconds"),
    maxOpenSessions: Math.max(1, options?.maxOpenSessions ?? 256),
    maxBatch: Math.max(1, options?.maxBatch ?? 1024),
    conflictRetries: options?.conflictRetries ?? 8,
    checkpointMinBytes: Math.max(1, options?.checkpointMinBytes ?? Checkpoint.MIN_BYTES),
    windowBytes: options?.windowBytes ?? JournalState.DEFAULT_WINDOW_BYTES,
    keepTree: options?.keepTree !== false
  })

  const validId = (id: string) => Effect.fromResult(Entry.validateSessionId(id))

  const { append, decide, record, setMeta, writeAll, writeFrom } = Writes.make(sessions)

  // Reads use the open session when there is one; otherwise a read-only load that
  // never takes the writer guarantee. A session whose stored history does not bear
  // out its checkpoint is not read as if it did: the read fails as the write would.
  const state = (id: string): Effect.Effect<JournalState.JournalState, ReadError> =>
    Effect.gen(function*() {
      yield* validId(id)
      const session = sessions.opened(id)
      if (session !== undefined) {
        const slot = yield* Ref.get(session.ref)
        if (slot.blocked !== null) return yield* slot.blocked
        const current = slot.state
        // Open for writing but nothing stored yet (say, its first append failed).
        if (current !== null && current.next_sequence === 0 && current.meta === null) {
          return yield* new SessionNotFound({ id })
        }
        if (current !== null) return current
        // After a failed append the writer reloads on its own; a reader does not
        // use the writer's handle meanwhile, but a read handle of its own.
      }
      const loaded = yield* Effect.scoped(
        Effect.flatMap(persistence.open(id, { mode: "read", caps }), (h) => Writer.load(h, "read"))
      )
      if (!loaded.exists) return yield* new SessionNotFound({ id })
      const blocked = Writer.blockedBy(loaded, id)
      if (blocked !== null) return yield* blocked
      return loaded.state
    })

  const snapshot = (id: string) => Effect.map(state(id), JournalState.snapshot)
  const head = (id: string) => Effect.map(state(id), JournalState.head)

  // The whole stored history replayed from its start by `Recovery` (verify mode):
  // every link and hash, and every field of the checkpoint against the replay.
  const verify = Effect.fn("SessionJournal.verify")(function*(id: string) {
    yield* validId(id)
    const verified = yield* Effect.scoped(
      Effect.flatMap(persistence.open(id, { mode: "read", caps }), (h) => h.verify)
    )
    if (!verified.exists) return yield* new SessionNotFound({ id })
    const stopped = verified.recovery.stopped
    if (stopped !== null) return yield* failureOf(stopped)
    const report: VerifyReport = {
      id,
      head: JournalState.head(verified.state),
      entriesChecked: verified.recovery.replayed,
      nextSequence: verified.state.next_sequence
    }
    return report
  })

  const entries = (id: string, options?: Persistence.HistoryOptions) =>
    Entry.isSessionId(id) ? persistence.history(id, options) : Stream.fail(new InvalidSessionId({ id }))

  // Every follower of the service reads through the checks of `Follow`, from the
  // state it loaded.
  const followFrom = (
    id: string,
    current: JournalState.JournalState,
    from: number | { readonly after: Follow.Anchor }
  ) => Following.follow({ persistence, caps, failureOf }, id, current, from)

  const follow = (
    id: string,
    from: number | { readonly last: number } | { readonly after: Follow.Anchor } = 0
  ): Stream.Stream<Follow.Event, InvalidSessionId | FollowError> =>
    Entry.isSessionId(id)
      ? Stream.unwrap(Effect.map(state(id), (current) =>
        followFrom(
          id,
          current,
          typeof from === "number" || "after" in from
            ? from
            : Math.max(0, current.next_sequence - Math.max(0, from.last))
        )))
      : Stream.fail(new InvalidSessionId({ id }))

  // The next sequence this service has committed while it holds the session open;
  // otherwise what storage holds (another instance may have written since).
  const knownNext = (id: string) => (published: number | null): Effect.Effect<number, ReadError> =>
    published !== null && sessions.opened(id) !== undefined
      ? Effect.succeed(published)
      : Effect.map(
        Effect.catchTag(state(id), "SessionNotFound", () => Effect.succeed(JournalState.empty(id))),
        (s) => Math.max(published ?? 0, s.next_sequence)
      )

  // From storage, the baseline is read when `changes` is called; `follow` replays
  // from it, so whatever any writer commits after the call is delivered, however
  // late the stream starts.
  const changes = (
    id: string
  ): Effect.Effect<Stream.Stream<Change, FollowError>, ReadError, Scope.Scope> =>
    Effect.andThen(
      validId(id),
      changesFrom === "storage"
        ? Effect.map(
          Effect.catchTag(state(id), "SessionNotFound", () => Effect.succeed(JournalState.empty(id, caps))),
          (current): Stream.Stream<Change, FollowError> => followFrom(id, current, current.next_sequence)
        )
        : hubs.changes(id, knownNext(id))
    )

  const awaitSequence = (id: string, sequence: number): Effect.Effect<void, ReadError> =>
    Effect.andThen(validId(id), hubs.awaitSequence(id, sequence, knownNext(id)))

  const remove = Effect.fn("SessionJournal.delete")(function*(id: string) {
    yield* validId(id)
    yield* sessions.close(id)
    yield* persistence.delete(id)
    yield* hubs.end(id)
  })

  return SessionJournal.of({
    record,
    append,
    writeAll,
    writeFrom,
    decide,
    setMeta,
    state,
    snapshot,
    head,
    verify,
    entries,
    follow,
    changes,
    awaitSequence,
    list: persistence.list,
    delete: remove,
    close: sessions.close
  })
})

/**
 * The service as a layer over a `Persistence` layer. Open sessions are closed (and
 * their writer guarantees released) when the layer's scope closes.
 *
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<SessionJournal, StorageError, Persistence.Persistence> =>
  Layer.effect(SessionJournal, make(options))
