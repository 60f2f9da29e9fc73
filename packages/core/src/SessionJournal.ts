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
 * and answers each caller. The state sits in a `SynchronizedRef` that only the
 * writer modifies, so readers never wait for a write. When storage fails, the
 * session's state is dropped and re-read before the next write: a failed sync may
 * or may not have reached the disk, and storage is the truth.
 *
 * @since 0.1.0
 */
import type * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import type * as Duration from "effect/Duration"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as MutableHashMap from "effect/MutableHashMap"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as RcMap from "effect/RcMap"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SynchronizedRef from "effect/SynchronizedRef"
import * as Entry from "./Entry.ts"
import {
  CorruptJournal,
  IntegrityViolation,
  InvalidRecordField,
  InvalidSessionId,
  type SequenceConflict,
  type SessionLocked,
  SessionNotFound,
  StorageError
} from "./Errors.ts"
import * as Guard from "./Guard.ts"
import * as JournalState from "./JournalState.ts"
import * as Persistence from "./Persistence.ts"
import * as Recovery from "./Recovery.ts"
import * as SessionMeta from "./SessionMeta.ts"

/**
 * Failures of opening or loading a session for writing.
 *
 * @since 0.1.0
 */
export type OpenError = InvalidSessionId | StorageError | SessionLocked | CorruptJournal | IntegrityViolation

/**
 * Failures of a write (`record`, `append`, `decide`, `setMeta`).
 *
 * @since 0.1.0
 */
export type WriteError = OpenError | InvalidRecordField

/**
 * Failures of a read of one session's state.
 *
 * @since 0.1.0
 */
export type ReadError = InvalidSessionId | StorageError | CorruptJournal | IntegrityViolation | SessionNotFound

/**
 * One element of `changes`: a committed entry, or the number of entries this
 * subscriber missed because it fell more than the stream capacity behind.
 *
 * @since 0.1.0
 */
export type Change =
  | { readonly _tag: "Entry"; readonly entry: Entry.Entry }
  | { readonly _tag: "Missed"; readonly count: number; readonly fromSequence: number }

/**
 * The result of `decide`: the verdict and the entry recorded for it.
 *
 * @since 0.1.0
 */
export interface Decision {
  readonly verdict: Guard.Verdict
  readonly entry: Entry.ToolEntry
}

/**
 * One item of `writeAll`: a tool call or a non-tool entry.
 *
 * @since 0.1.0
 */
export type WriteItem =
  | { readonly _tag: "Tool"; readonly params: Entry.ToolParams }
  | { readonly _tag: "Other"; readonly kind: string; readonly payload: unknown }

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
   * it again from storage (default 30 seconds).
   */
  readonly idleTimeToLive?: Duration.Input | undefined
  /**
   * Most sessions kept open at once (default 256). Opening one more first releases
   * the session idle the longest; sessions with writes in flight are never released
   * under them, so the bound is exceeded only while more than this many sessions
   * are being written at the same moment.
   */
  readonly maxOpenSessions?: number | undefined
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
  /** Evaluates `guard` on the current snapshot and records the call with `allowed` set by the verdict, atomically. */
  readonly decide: (id: string, params: Entry.ToolParams, guard: Guard.Guard) => Effect.Effect<Decision, WriteError>
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
  /** Entries from `from` on, then every entry any writer stores later (other processes included). */
  readonly follow: (
    id: string,
    from?: number
  ) => Stream.Stream<Entry.Entry, InvalidSessionId | StorageError | CorruptJournal | SessionNotFound>
  /**
   * Subscribes to every entry this service commits to the session from now on. The
   * subscription exists once the effect completes (so nothing committed after that
   * is lost) and lasts as long as its scope; the stream delivers entries in order,
   * with a "missed" marker where a slow consumer fell more than the hub's capacity
   * behind. Entries this service finds in storage when it reloads (another writer's,
   * or those of an append that failed after reaching storage) are delivered too. The
   * stream ends when the session is deleted.
   */
  readonly changes: (
    id: string
  ) => Effect.Effect<Stream.Stream<Change, StorageError | CorruptJournal | SessionNotFound>, ReadError, Scope.Scope>
  /**
   * Completes when this service has committed entry `sequence` (at once if it already
   * has, or if storage already holds it); fails with `SessionNotFound` if the session
   * is deleted meanwhile.
   */
  readonly awaitSequence: (id: string, sequence: number) => Effect.Effect<void, ReadError>
  /** All sessions in storage. */
  readonly list: Effect.Effect<ReadonlyArray<Persistence.SessionInfo>, StorageError>
  /** Closes the session here (releasing its writer guarantee) and deletes it from storage. */
  readonly delete: (id: string) => Effect.Effect<void, InvalidSessionId | StorageError | SessionLocked | SessionNotFound>
  /**
   * Closes an open session: commits what is already queued, then releases the writer
   * guarantee; writes that arrive meanwhile open the session afresh once it is
   * released. A no-op when the session is not open.
   */
  readonly close: (id: string) => Effect.Effect<void>
}>()("@session-journal/core/SessionJournal") {}

interface Built<A> {
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly meta: SessionMeta.SessionMeta | null
  readonly result: A
}

interface Request<A> {
  readonly build: (state: JournalState.JournalState, timestampSecs: number, nowMillis: number) => Built<A>
  readonly deferred: Deferred.Deferred<A, WriteError>
}

interface Slot {
  /** `null` after a storage failure: reload before the next write. */
  readonly state: JournalState.JournalState | null
  /** Set when the stored history is damaged: writes refuse until it is repaired. */
  readonly blocked: CorruptJournal | null
}

/**
 * An open session: its write handle, its state behind a `SynchronizedRef` (only the
 * writer fiber modifies it; readers `get` it without waiting for a write), and the
 * queue its writer fiber drains. Lives as an entry of the service's `RcMap`.
 */
interface OpenSession {
  readonly id: string
  readonly handle: Persistence.SessionHandle
  readonly ref: SynchronizedRef.SynchronizedRef<Slot>
  readonly queue: Queue.Queue<Request<unknown>, Cause.Done>
  /** Completed once the session is released: its writer guarantee is free again. */
  readonly released: Deferred.Deferred<void>
}

/** Published when a session is deleted, so its subscribers' streams end. */
const Ended = { _tag: "Ended" } as const

interface Hub {
  readonly pubsub: PubSub.PubSub<Entry.Entry | typeof Ended>
  /** Next sequence this service will publish, once known. */
  next: number | null
  readonly waiters: Array<{ readonly sequence: number; readonly deferred: Deferred.Deferred<void, SessionNotFound> }>
  /** Subscribers of `changes`; the hub lives while it has subscribers or waiters. */
  subscribers: number
}

const blockedBy = (loaded: Persistence.Loaded, id: string): CorruptJournal | null =>
  loaded.recovery.stopped === null ? null : new CorruptJournal({
    segment: loaded.recovery.stopped.segment,
    offset: loaded.recovery.stopped.offset,
    reason: `${loaded.recovery.stopped.reason}: ${loaded.recovery.stopped.detail} (session ${id} needs repair: session-journal repair ${id})`
  })

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
    : new CorruptJournal({ segment: stopped.segment, offset: stopped.offset, reason: `${stopped.reason}: ${stopped.detail}` })

/**
 * Builds the service on a `Persistence`.
 *
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function*(options?: Options) {
  const persistence = yield* Persistence.Persistence
  const caps = options?.caps
  const changesCapacity = options?.changesCapacity ?? 1024
  const changesFrom = options?.changesFrom ?? "service"
  const maxBatch = Math.max(1, options?.maxBatch ?? 1024)
  const conflictRetries = options?.conflictRetries ?? 8

  const idleTimeToLive = options?.idleTimeToLive ?? "30 seconds"
  const maxOpenSessions = Math.max(1, options?.maxOpenSessions ?? 256)

  // Sessions open now (also while one is being released), to read their state
  // without taking a reference, and so that a new opening waits for the release
  // of the previous one: its writer guarantee is not free before.
  const live = new Map<string, OpenSession>()
  // Hubs exist only while someone listens: `changes` subscribers or `awaitSequence` waiters.
  const hubs = new Map<string, Hub>()

  const validId = (id: string) => Effect.fromResult(Entry.validateSessionId(id))

  const hubFor = (id: string): Effect.Effect<Hub> =>
    Effect.suspend(() => {
      const existing = hubs.get(id)
      if (existing !== undefined) return Effect.succeed(existing)
      return Effect.map(PubSub.sliding<Entry.Entry | typeof Ended>(changesCapacity), (pubsub) => {
        // Re-check: another fiber may have created the hub while this one yielded.
        const raced = hubs.get(id)
        if (raced !== undefined) return raced
        const hub: Hub = { pubsub, next: null, waiters: [], subscribers: 0 }
        hubs.set(id, hub)
        return hub
      })
    })

  const dropIfUnused = (id: string, hub: Hub) => {
    if (hub.subscribers === 0 && hub.waiters.length === 0 && hubs.get(id) === hub) hubs.delete(id)
  }

  // Moves the hub's committed mark forward and wakes the waiters it passes. Runs
  // synchronously, as does awaitSequence's check-and-register, so no wake-up is lost.
  const advance = (hub: Hub, next: number) => {
    if (hub.next !== null && next <= hub.next) return
    hub.next = next
    const ready = hub.waiters.filter((w) => w.sequence < next)
    if (ready.length > 0) {
      const keep = hub.waiters.filter((w) => w.sequence >= next)
      hub.waiters.length = 0
      hub.waiters.push(...keep)
      for (const w of ready) Deferred.doneUnsafe(w.deferred, Effect.void)
    }
  }

  const publish = (id: string, entries: ReadonlyArray<Entry.Entry>) =>
    Effect.suspend(() => {
      const hub = hubs.get(id)
      const last = entries[entries.length - 1]
      if (hub === undefined || last === undefined) return Effect.void
      advance(hub, last.sequence + 1)
      return Effect.asVoid(PubSub.publishAll(hub.pubsub, entries))
    })

  // After a (re)load: entries that storage holds beyond what this service published
  // (written by a failed append that reached the disk after all, or by another
  // writer) are committed too; publish those still in the ring, so subscribers get
  // them, and a "missed" marker for the rest.
  const catchUp = (id: string, state: JournalState.JournalState) =>
    Effect.suspend(() => {
      const hub = hubs.get(id)
      if (hub === undefined) return Effect.void
      const from = hub.next ?? state.next_sequence
      if (state.next_sequence <= from) return Effect.sync(() => advance(hub, state.next_sequence))
      const unseen = JournalState.entries(state).filter((e) => e.sequence >= from)
      return unseen.length > 0 ? publish(id, unseen) : Effect.sync(() => advance(hub, state.next_sequence))
    })

  // Opens a session as an entry of the RcMap (its scope is the entry's): waits for
  // the release of a previous opening, takes the writer guarantee, loads, and forks
  // the one writer fiber. Released when idle (or evicted, or closed): the queue is
  // ended, the writer commits what is queued, then the handle lets go.
  const openSession = (id: string): Effect.Effect<OpenSession, OpenError, Scope.Scope> =>
    Effect.gen(function*() {
      const previous = live.get(id)
      if (previous !== undefined) yield* Deferred.await(previous.released)
      const released = yield* Deferred.make<void>()
      yield* Effect.addFinalizer(() => Deferred.succeed(released, undefined))
      const handle = yield* persistence.open(id, { mode: "write", caps })
      const loaded = yield* handle.load
      yield* catchUp(id, loaded.state)
      const ref = yield* SynchronizedRef.make<Slot>({ state: loaded.state, blocked: blockedBy(loaded, id) })
      const queue = yield* Queue.unbounded<Request<unknown>, Cause.Done>()
      const session: OpenSession = { id, handle, ref, queue, released }
      live.set(id, session)
      yield* Effect.addFinalizer(() => Effect.sync(() => {
        if (live.get(id) === session) live.delete(id)
      }))
      const writer = yield* Effect.forkDetach(writerLoop(session))
      yield* Effect.addFinalizer(() => Effect.andThen(Queue.end(queue), Fiber.await(writer)))
      return session
    })

  const sessions = yield* RcMap.make({ lookup: openSession, idleTimeToLive })

  // Below the bound, opens (or shares) the session; at the bound, first releases
  // the sessions idle the longest. A session with a reference (a write in flight)
  // is never released.
  const evictIdle: Effect.Effect<void> = Effect.suspend((): Effect.Effect<void> => {
    if (sessions.state._tag !== "Open" || live.size < maxOpenSessions) return Effect.void
    const map = sessions.state.map
    let victim: string | null = null
    let oldest = Number.POSITIVE_INFINITY
    for (const id of live.keys()) {
      const entry = MutableHashMap.get(map, id)
      if (entry._tag === "Some" && entry.value.refCount === 0 && entry.value.expiresAt < oldest) {
        oldest = entry.value.expiresAt
        victim = id
      }
    }
    return victim === null ? Effect.void : Effect.andThen(RcMap.invalidate(sessions, victim), evictIdle)
  })

  const acquire = (id: string): Effect.Effect<OpenSession, OpenError, Scope.Scope> =>
    Effect.andThen(
      live.has(id) ? Effect.void : evictIdle,
      // A failed opening is not kept: the next write tries again.
      Effect.tapError(RcMap.get(sessions, id), () => RcMap.invalidate(sessions, id))
    )

  const reload = (session: OpenSession): Effect.Effect<Slot, OpenError> =>
    Effect.flatMap(
      session.handle.load,
      (loaded) => Effect.as(catchUp(session.id, loaded.state), { state: loaded.state, blocked: blockedBy(loaded, session.id) })
    )

  const answer = (request: Request<unknown>, result: Effect.Effect<unknown, WriteError>) => {
    Deferred.doneUnsafe(request.deferred, result)
  }

  const failAll = (batch: ReadonlyArray<Request<unknown>>, error: WriteError) =>
    Effect.sync(() => {
      for (const r of batch) answer(r, Effect.fail(error))
    })

  const toWriteError = (error: StorageError | SequenceConflict): StorageError =>
    error._tag === "SequenceConflict"
      ? new StorageError({
        operation: "append",
        reason: `another writer kept winning sequence ${error.sequence} after ${conflictRetries} retries`,
        cause: error
      })
      : error

  // The session's one writer: takes every queued request (group commit: whatever
  // arrived during the previous append is the next batch), builds their entries in
  // order against the state, stores them with one append, answers each caller, and
  // repeats until the queue is ended and empty. The only fiber that modifies `ref`.
  const writerLoop = (session: OpenSession): Effect.Effect<void> =>
    Effect.gen(function*() {
      for (;;) {
        // Let callers that are already runnable enqueue first: with a backend that
        // answers without suspending, batches would otherwise hold one request each.
        yield* Effect.yieldNow
        const taken = yield* Effect.result(Queue.takeBetween(session.queue, 1, maxBatch))
        if (Result.isFailure(taken)) return
        const batch = taken.success
        const after = yield* SynchronizedRef.modifyEffect(session.ref, (slot) =>
          commitBatch(session, slot, batch).pipe(
            // Any other defect answers its batch instead of leaving the callers waiting;
            // the append may or may not have happened, so the state is re-read.
            Effect.catchCause((cause) =>
              Effect.sync(() => {
                for (const r of batch) if (!Deferred.isDoneUnsafe(r.deferred)) answer(r, Effect.failCause(cause))
                return [Effect.void, { state: null, blocked: null }] as const
              })
            )
          ))
        yield* after
      }
    }).pipe(Effect.uninterruptible)

  const commitBatch = (
    session: OpenSession,
    current: Slot,
    batch: ReadonlyArray<Request<unknown>>
  ): Effect.Effect<readonly [Effect.Effect<void>, Slot]> =>
    Effect.gen(function*() {
      let slot = current
      for (let attempt = 0;; attempt++) {
        if (slot.state === null) {
          const reloaded = yield* Effect.result(reload(session))
          if (Result.isFailure(reloaded)) {
            yield* failAll(batch, reloaded.failure)
            return [Effect.void, slot] as const
          }
          slot = reloaded.success
        }
        if (slot.blocked !== null) {
          yield* failAll(batch, slot.blocked)
          return [Effect.void, slot] as const
        }
        const nowMillis = yield* Clock.currentTimeMillis
        const timestampSecs = Math.floor(nowMillis / 1000)
        let state: JournalState.JournalState = slot.state!
        const entries: Array<Entry.Entry> = []
        const accepted: Array<{ readonly request: Request<unknown>; readonly result: unknown }> = []
        let meta: SessionMeta.SessionMeta | undefined
        for (const request of batch) {
          if (Deferred.isDoneUnsafe(request.deferred)) continue
          let built: Built<unknown>
          try {
            built = request.build(state, timestampSecs, nowMillis)
          } catch (defect) {
            // A throwing guard fails its own caller only, not the batch it shares.
            answer(request, Effect.die(defect))
            continue
          }
          for (const entry of built.entries) {
            entries.push(entry)
            state = JournalState.fold(state, entry)
          }
          if (built.meta !== null) {
            meta = built.meta
            state = JournalState.applyMeta(state, built.meta)
          }
          accepted.push({ request, result: built.result })
        }
        if (accepted.length === 0) return [Effect.void, slot] as const
        const stored = yield* Effect.result(session.handle.append({ entries, meta, state }))
        if (Result.isSuccess(stored)) {
          // Answered (and published) once the ref holds the new state, so a caller
          // that reads right after its write sees it.
          const after = Effect.andThen(
            Effect.sync(() => {
              for (const a of accepted) answer(a.request, Effect.succeed(a.result))
            }),
            publish(session.id, entries)
          )
          return [after, { state, blocked: null }] as const
        }
        // Storage is the truth after any failure: drop the state, reload before the
        // next write. A lost race for a sequence is retried against the new state.
        if (stored.failure._tag === "SequenceConflict" && attempt < conflictRetries) {
          slot = { state: null, blocked: null }
          continue
        }
        yield* failAll(accepted.map((a) => a.request), toWriteError(stored.failure))
        return [Effect.void, { state: null, blocked: null }] as const
      }
    })

  // A write takes a reference to the open session for as long as its caller waits,
  // so an idle release or an eviction never happens under it. Once offered, a
  // request is committed or failed by the writer, never abandoned, even when its
  // caller is interrupted (the release waits for the queue to drain).
  const submit = <A>(id: string, build: Request<A>["build"]): Effect.Effect<A, WriteError> =>
    Effect.scoped(Effect.gen(function*() {
      const session = yield* acquire(id)
      const request: Request<unknown> = { build, deferred: Deferred.makeUnsafe<unknown, WriteError>() }
      yield* Queue.offer(session.queue, request)
      return (yield* Deferred.await(request.deferred)) as A
    }))

  // The write paths run once per entry and are left untraced: a span per call is a
  // measurable share of a call's cost (pnpm bench, memory.record).
  const record = Effect.fnUntraced(function*(id: string, params: Entry.ToolParams) {
    yield* validId(id)
    const valid = yield* Effect.fromResult(Entry.validateToolParams(params))
    return yield* submit(id, (state, ts) => {
      const entry = JournalState.nextTool(state, ts, valid)
      return { entries: [entry], meta: null, result: entry }
    })
  })

  const append = Effect.fnUntraced(function*(id: string, kind: string, payload: unknown) {
    yield* validId(id)
    const json = yield* Effect.fromResult(Entry.validatePayload(kind, payload))
    return yield* submit(id, (state, ts) => {
      const entry = JournalState.nextOther(state, ts, kind, json)
      return { entries: [entry], meta: null, result: entry }
    })
  })

  const writeAll = Effect.fnUntraced(function*(id: string, items: ReadonlyArray<WriteItem>) {
    yield* validId(id)
    const valid: Array<
      { readonly _tag: "Tool"; readonly params: Entry.ValidToolParams } | {
        readonly _tag: "Other"
        readonly kind: string
        readonly payload: Schema.Json
      }
    > = []
    for (const item of items) {
      valid.push(
        item._tag === "Tool"
          ? { _tag: "Tool", params: yield* Effect.fromResult(Entry.validateToolParams(item.params)) }
          : { _tag: "Other", kind: item.kind, payload: yield* Effect.fromResult(Entry.validatePayload(item.kind, item.payload)) }
      )
    }
    if (valid.length === 0) return []
    // One request for the whole list keeps it contiguous and all-or-nothing.
    return yield* submit(id, (state, ts) => {
      let s = state
      const out: Array<Entry.Entry> = []
      for (const v of valid) {
        const e = v._tag === "Tool" ? JournalState.nextTool(s, ts, v.params) : JournalState.nextOther(s, ts, v.kind, v.payload)
        out.push(e)
        s = JournalState.fold(s, e)
      }
      return { entries: out, meta: null, result: out }
    })
  })

  const decide = Effect.fnUntraced(
    function*(id: string, params: Entry.ToolParams, guard: Guard.Guard) {
      yield* validId(id)
      const valid = yield* Effect.fromResult(Entry.validateToolParams(params))
      return yield* submit(id, (state, ts): Built<Decision> => {
        const verdict = guard(JournalState.snapshot(state), valid)
        const entry = JournalState.nextTool(state, ts, { ...valid, allowed: Guard.isAllowed(verdict) && valid.allowed })
        return { entries: [entry], meta: null, result: { verdict, entry } }
      })
    }
  )

  const setMeta = Effect.fn("SessionJournal.setMeta")(function*(id: string, patch: SessionMeta.MetaPatch) {
    yield* validId(id)
    if (patch.title !== undefined && typeof patch.title !== "string") {
      return yield* new InvalidRecordField({ field: "title", reason: "must be a string" })
    }
    if (patch.labels !== undefined && !(Array.isArray(patch.labels) && patch.labels.every((l) => typeof l === "string"))) {
      return yield* new InvalidRecordField({ field: "labels", reason: "must be an array of strings" })
    }
    if (patch.data !== undefined) {
      const checked = Entry.validatePayload("meta", patch.data)
      if (Result.isFailure(checked)) return yield* new InvalidRecordField({ field: "data", reason: checked.failure.reason })
    }
    return yield* submit(id, (state, _ts, nowMillis) => {
      const meta = SessionMeta.patch(state.meta, patch, nowMillis)
      return { entries: [], meta, result: meta }
    })
  })

  // Reads use the open session when there is one; otherwise a read-only load that
  // never takes the writer guarantee. A session whose stored history does not bear
  // out its checkpoint is not read as if it did: the read fails as the write would.
  const state = (id: string): Effect.Effect<JournalState.JournalState, ReadError> =>
    Effect.gen(function*() {
      yield* validId(id)
      const session = live.get(id)
      if (session !== undefined) {
        const slot = yield* SynchronizedRef.get(session.ref)
        if (slot.blocked !== null) return yield* slot.blocked
        let current = slot.state
        if (current === null) {
          const loaded = yield* session.handle.load
          const blocked = blockedBy(loaded, id)
          if (blocked !== null) return yield* blocked
          current = loaded.state
        }
        // Open for writing but nothing stored yet (say, its first append failed).
        if (current.next_sequence === 0 && current.meta === null) return yield* new SessionNotFound({ id })
        return current
      }
      const loaded = yield* Effect.scoped(
        Effect.flatMap(persistence.open(id, { mode: "read", caps }), (h) => h.load)
      )
      if (!loaded.exists) return yield* new SessionNotFound({ id })
      const blocked = blockedBy(loaded, id)
      if (blocked !== null) return yield* blocked
      return loaded.state
    }).pipe(
      Effect.catchTag("SessionLocked", (e) => Effect.fail(new StorageError({ operation: "open", reason: e.message })))
    )

  const snapshot = (id: string) => Effect.map(state(id), JournalState.snapshot)
  const head = (id: string) => Effect.map(state(id), JournalState.head)

  // The whole stored history replayed from its start by `Recovery` (verify mode):
  // every link and hash, and every field of the checkpoint against the replay.
  const verify = Effect.fn("SessionJournal.verify")(function*(id: string) {
    yield* validId(id)
    const verified = yield* Effect.scoped(
      Effect.flatMap(persistence.open(id, { mode: "read", caps }), (h) => h.verify)
    ).pipe(Effect.catchTag("SessionLocked", (e) => Effect.fail(new StorageError({ operation: "open", reason: e.message }))))
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

  const follow = (id: string, from = 0) =>
    Entry.isSessionId(id) ? persistence.follow(id, from) : Stream.fail(new InvalidSessionId({ id }))

  // The next sequence this service has committed while it holds the session open;
  // otherwise what storage holds (another instance may have written since).
  const knownNext = (id: string, hub: Hub): Effect.Effect<number, ReadError> =>
    hub.next !== null && live.has(id)
      ? Effect.succeed(hub.next)
      : Effect.map(
        Effect.catchTag(state(id), "SessionNotFound", () => Effect.succeed(JournalState.empty(id))),
        (s) => Math.max(hub.next ?? 0, s.next_sequence)
      )

  const changes = (
    id: string
  ): Effect.Effect<Stream.Stream<Change, StorageError | CorruptJournal | SessionNotFound>, ReadError, Scope.Scope> =>
    changesFrom === "storage" ? changesFromStorage(id) : changesFromHub(id)

  // The baseline is read when `changes` is called; `follow` replays from it, so
  // whatever any writer commits after the call is delivered, however late the
  // stream starts.
  const changesFromStorage = (id: string) =>
    Effect.gen(function*() {
      yield* validId(id)
      const current = yield* Effect.catchTag(state(id), "SessionNotFound", () => Effect.succeed(JournalState.empty(id)))
      return persistence.follow(id, current.next_sequence).pipe(
        Stream.map((entry): Change => ({ _tag: "Entry", entry }))
      )
    })

  const changesFromHub = (id: string): Effect.Effect<Stream.Stream<Change>, ReadError, Scope.Scope> =>
    Effect.gen(function*() {
      yield* validId(id)
      const hub = yield* hubFor(id)
      const known = yield* knownNext(id, hub)
      // Read the baseline before subscribing: an entry published in between shows
      // up as "missed", never as silently skipped.
      let expected = Math.max(known, hub.next ?? 0)
      yield* Effect.acquireRelease(
        Effect.sync(() => {
          hub.subscribers++
        }),
        () =>
          Effect.sync(() => {
            hub.subscribers--
            dropIfUnused(id, hub)
          })
      )
      const subscription = yield* PubSub.subscribe(hub.pubsub)
      return Stream.fromSubscription(subscription).pipe(
        Stream.takeWhile((item): item is Entry.Entry => item !== Ended),
        Stream.flatMap((entry) => {
          if (entry.sequence < expected) return Stream.empty
          const missed = entry.sequence - expected
          const fromSequence = expected
          expected = entry.sequence + 1
          const item: Change = { _tag: "Entry", entry }
          return missed > 0 ? Stream.make<Array<Change>>({ _tag: "Missed", count: missed, fromSequence }, item) : Stream.succeed(item)
        })
      )
    })

  const awaitSequence = (id: string, sequence: number): Effect.Effect<void, ReadError> =>
    Effect.gen(function*() {
      yield* validId(id)
      const hub = yield* hubFor(id)
      const known = yield* knownNext(id, hub)
      advance(hub, known)
      const deferred = Deferred.makeUnsafe<void, SessionNotFound>()
      // Check and register in one synchronous step: commits publish synchronously
      // too, so no commit can fall between the check and the wait.
      const done = yield* Effect.sync(() => {
        if (sequence < (hub.next ?? 0)) return true
        hub.waiters.push({ sequence, deferred })
        return false
      })
      if (!done) {
        yield* Deferred.await(deferred).pipe(Effect.ensuring(Effect.sync(() => {
          const at = hub.waiters.findIndex((w) => w.deferred === deferred)
          if (at >= 0) hub.waiters.splice(at, 1)
        })))
      }
      dropIfUnused(id, hub)
    })

  // Releases the session now if nothing is writing, otherwise once the writes in
  // flight are answered; either way its queue is drained first. Waits for the
  // release: afterwards the writer guarantee is free for another process.
  const close = (id: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      const session = live.get(id)
      if (session === undefined) return Effect.void
      return Effect.andThen(RcMap.invalidate(sessions, id), Deferred.await(session.released))
    })

  const remove = Effect.fn("SessionJournal.delete")(function*(id: string) {
    yield* validId(id)
    yield* close(id)
    yield* persistence.delete(id)
    // End the streams of the deleted session and fail its waiters: its sequences
    // start again at 0 if it is written again.
    const hub = hubs.get(id)
    if (hub !== undefined) {
      hubs.delete(id)
      for (const w of hub.waiters) Deferred.doneUnsafe(w.deferred, Effect.fail(new SessionNotFound({ id })))
      hub.waiters.length = 0
      yield* PubSub.publish(hub.pubsub, Ended)
    }
  })


  return SessionJournal.of({
    record,
    append,
    writeAll,
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
    close
  })
})

/**
 * The service as a layer over a `Persistence` layer. Open sessions are closed (and
 * their writer guarantees released) when the layer's scope closes.
 *
 * @since 0.1.0
 */
export const layer = (options?: Options): Layer.Layer<SessionJournal, never, Persistence.Persistence> =>
  Layer.effect(SessionJournal, make(options))
