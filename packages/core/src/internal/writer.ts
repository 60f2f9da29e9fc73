/**
 * The writer fiber of an open session: the one fiber that drains the session's
 * queue and the only one that changes its state. Every round takes whatever is
 * queued (group commit), builds the requests' entries in order against the state,
 * stores them with one compare-and-append, answers each caller and checkpoints when
 * the policy asks. The per-record path is plain `flatMap`s over synchronous work:
 * it runs once per record, and every effect, fiber step and allocation on it is a
 * measurable share of a record's cost (`pnpm bench`, memory.record).
 */
import type * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as Fiber from "effect/Fiber"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import * as References from "effect/References"
import type * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import * as Checkpoint from "../Checkpoint.ts"
import * as CorruptReason from "../CorruptReason.ts"
import * as Entry from "../Entry.ts"
import {
  CorruptJournal,
  type IntegrityViolation,
  InvalidRecordField,
  type InvalidSessionId,
  type SequenceConflict,
  type SessionLocked,
  StorageError
} from "../Errors.ts"
import * as JournalState from "../JournalState.ts"
import * as Persistence from "../Persistence.ts"
import * as RecordFieldReason from "../RecordFieldReason.ts"
import type * as SessionMeta from "../SessionMeta.ts"
import * as StorageReason from "../StorageReason.ts"
import type * as Hubs from "./hubs.ts"
import * as RecordBytes from "./recordBytes.ts"
import { clockProblem } from "./validate.ts"

/** Failures of opening or loading a session for writing. */
export type OpenError = InvalidSessionId | StorageError | SessionLocked | CorruptJournal | IntegrityViolation

/** Failures of a write. */
export type WriteError = OpenError | InvalidRecordField

/**
 * What a request adds: its entries, a metadata change, and its caller's result.
 * `entries` may be handed to storage as it is: it must not be the caller's result.
 */
export interface Built<A> {
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly meta: SessionMeta.SessionMeta | null
  readonly result: A
}

/** Builds a request's entries against the state the writer holds when it gets there. */
export type Build<A> = (state: JournalState.JournalState, timestampSecs: number, nowMillis: number) => Built<A>

/** One queued write and the one `Deferred` its caller waits on. */
export interface Request<A> {
  readonly build: Build<A>
  readonly deferred: Deferred.Deferred<A, WriteError>
}

/** The state of an open session, as the writer keeps it. */
export interface WriterState {
  /** `null` after a storage failure: reload before the next write. */
  readonly state: JournalState.JournalState | null
  /** Set when the stored history is damaged: writes refuse until it is repaired. */
  readonly blocked: CorruptJournal | null
  /** Bytes appended since the stored checkpoint, and that checkpoint's size (`Checkpoint.due`). */
  readonly sinceCheckpoint: number
  readonly checkpointBytes: number
  /**
   * After a storage failure (`state` is `null`): the next sequence of the last state
   * the writer committed, where the reload's catch-up starts when no entry was
   * published since the session's hub opened.
   */
  readonly committedNext?: number | undefined
}

/** What the writer needs of an open session. */
export interface WriterSession {
  readonly id: string
  readonly handle: Persistence.WriteHandle
  /** The session's state: only the writer sets it; readers `get` it without waiting for a write. */
  readonly ref: Ref.Ref<WriterState>
  readonly queue: Queue.Queue<Request<unknown>, Cause.Done>
  /**
   * The scope that holds the reference the queued writes take to the session, while
   * they hold one (see `Settings.idle`).
   */
  reference: Scope.Closeable | undefined
  /** Set while the writer commits a batch it took. */
  busy: boolean
}

/** The damage a load found, as the failure writes and reads report. */
export const blockedBy = (loaded: Persistence.Loaded, id: string): CorruptJournal | null =>
  loaded.recovery.stopped === null ? null : new CorruptJournal({
    segment: loaded.recovery.stopped.segment,
    offset: loaded.recovery.stopped.offset,
    reason: new CorruptReason.Stopped({
      reason: loaded.recovery.stopped.reason,
      detail: loaded.recovery.stopped.detail,
      advice: `session ${id} needs repair: session-journal repair ${id}`
    })
  })

/** The slot of a freshly loaded session, its window on the service's budget. */
export const writerStateOf = (
  loaded: Persistence.Loaded,
  id: string,
  windowBytes: number,
  keepTree: boolean
): WriterState => ({
  state: keepTree
    ? JournalState.withWindowBytes(loaded.state, windowBytes)
    : JournalState.withoutTree(JournalState.withWindowBytes(loaded.state, windowBytes)),
  blocked: blockedBy(loaded, id),
  sinceCheckpoint: loaded.sinceCheckpointBytes ?? 0,
  checkpointBytes: loaded.checkpointBytes ?? 0
})

const dropped = (slot: WriterState): WriterState => ({
  ...slot,
  state: null,
  blocked: null,
  committedNext: slot.state?.next_sequence ?? slot.committedNext
})

/**
 * Whether spans made in `fiber` reach anyone. Effect's own tracer, the default, hands
 * them to no one, and making and ending one costs about a tenth of a record on the
 * memory adapter: the service makes its spans only for a tracer of the
 * application's (an exporter's, say).
 */
export const tracing = (fiber: Fiber.Fiber<unknown, unknown>): boolean =>
  fiber.getRef(References.TracerEnabled) && fiber.getRef(Tracer.Tracer) !== Tracer.nativeTracer

/**
 * A handle's `load`, in a span `Persistence.load` (attributes: the session, the
 * handle's mode, the entries stored and the bytes the adapter counts for the
 * checkpoint and the records after it).
 */
export const load = (
  handle: Persistence.ReadHandle,
  mode: "read" | "write"
): Effect.Effect<Persistence.Loaded, Persistence.LoadError> =>
  Effect.withFiber((fiber) =>
    tracing(fiber)
      ? Effect.useSpan("Persistence.load", { attributes: { session: handle.id, mode } }, (span) =>
        Effect.map(handle.load, (loaded) => {
          span.attribute("entries", loaded.state.next_sequence)
          span.attribute("bytes", (loaded.checkpointBytes ?? 0) + (loaded.sinceCheckpointBytes ?? 0))
          return loaded
        }))
      : handle.load
  )

/** Settings of the writers of one service. */
export interface Settings {
  readonly hubs: Hubs.Hubs
  readonly maxBatch: number
  readonly conflictRetries: number
  readonly checkpointMinBytes: number
  /** The budget of each session's window of recent entries. */
  readonly windowBytes: number
  /** Whether states keep their tree (`SessionJournal.Options.keepTree`). */
  readonly keepTree: boolean
  /**
   * Called when the writer finds the queue empty while the queued writes hold a
   * reference to the session (`WriterSession.reference`): lets that reference go.
   */
  readonly idle: (target: WriterSession) => Effect.Effect<void>
}

// The writer is the only fiber that sets the slot: it reads it without an effect.
const stateOfSession = (target: WriterSession): WriterState => Ref.getUnsafe(target.ref)

// The failure of a write with an entry over the storage's bound, if it has one.
const oversized = (entries: ReadonlyArray<Entry.Entry>, max: number): InvalidRecordField | undefined => {
  for (const entry of entries) {
    const bytes = RecordBytes.over(entry, max)
    if (bytes === undefined) continue
    // The field that makes it large: the payload, or a tool entry's longest name.
    let field = "payload"
    if (Entry.isTool(entry)) {
      field = "tool_name"
      if (entry.server_id.length > entry.tool_name.length) field = "server_id"
      if (entry.agent_id.length > Math.max(entry.tool_name.length, entry.server_id.length)) field = "agent_id"
    }
    return new InvalidRecordField({
      field,
      reason: new RecordFieldReason.RecordTooLarge({ bytes, max })
    })
  }
  return undefined
}

const noEntries: ReadonlyArray<Entry.Entry> = []

const failAll = (requests: ReadonlyArray<Request<unknown>>, error: WriteError): void => {
  const exit = Exit.fail(error)
  for (const r of requests) Deferred.doneUnsafe(r.deferred, exit)
}

/** The writer loop over the service's settings. */
export const make = (settings: Settings) => {
  const { conflictRetries, hubs, maxBatch } = settings

  const toWriteError = (error: StorageError | SequenceConflict): StorageError =>
    error._tag === "SequenceConflict"
      ? new StorageError({
        operation: "append",
        reason: new StorageReason.Contended({ sequence: error.sequence, retries: conflictRetries }),
        cause: error
      })
      : error

  const reload = (target: WriterSession, previous: WriterState): Effect.Effect<WriterState, OpenError> =>
    Effect.flatMap(load(target.handle, "write"), (loaded) =>
      Effect.as(
        hubs.catchUp(target.id, loaded.state, previous.committedNext),
        // A reload after a failure keeps the larger count: the writer's own, or what
        // the adapter reports as stored since its checkpoint.
        {
          ...writerStateOf(loaded, target.id, settings.windowBytes, settings.keepTree),
          sinceCheckpoint: Math.max(previous.sinceCheckpoint, loaded.sinceCheckpointBytes ?? 0)
        }
      ))

  // Whether the policy wants a checkpoint of this slot now.
  const isDue = (slot: WriterState): boolean =>
    slot.state !== null && slot.blocked === null &&
    Checkpoint.due(slot.sinceCheckpoint, slot.checkpointBytes, settings.checkpointMinBytes)

  // Stores the checkpoint the policy asked for. Its failure fails no one (the
  // entries are durable, and the next append asks again), and neither may a defect
  // end the writer.
  const checkpoint = (target: WriterSession): Effect.Effect<void> =>
    Effect.catchCause(
      Effect.suspend(() => {
        const state = stateOfSession(target).state
        if (state === null) return Effect.void
        const store = target.handle.checkpointState
        return Effect.matchEffect(
          store !== undefined ? store(state) : target.handle.checkpoint(Checkpoint.encode(state)),
          {
            onFailure: () => Effect.void,
            onSuccess: (bytes) =>
              Ref.update(target.ref, (slot) => ({ ...slot, sinceCheckpoint: 0, checkpointBytes: bytes }))
          }
        )
      }),
      () => Effect.void
    )

  // The handle's append, in a span `Persistence.append` inside the batch's span
  // when there is one (attributes: the session, the entries, the bytes stored).
  const append = (
    target: WriterSession,
    request: Persistence.AppendRequest,
    span: Tracer.Span | undefined
  ): Effect.Effect<Persistence.Appended, StorageError | SequenceConflict> =>
    span === undefined ? target.handle.append(request) : Effect.useSpan(
      "Persistence.append",
      { parent: span, attributes: { session: target.id, entries: request.entries.length } },
      (appending) =>
        Effect.map(target.handle.append(request), (stored) => {
          appending.attribute("bytes", stored.bytes)
          span.attribute("bytes", stored.bytes)
          return stored
        })
    )

  // One attempt at a batch against `slot`; retried against a reloaded state when
  // another writer won the sequence.
  const attempt = (
    target: WriterSession,
    slot: WriterState,
    batch: ReadonlyArray<Request<unknown>>,
    clock: Clock.Clock,
    round: number,
    span: Tracer.Span | undefined
  ): Effect.Effect<void> => {
    if (slot.state === null) {
      return Effect.matchEffect(reload(target, slot), {
        onFailure: (error) => Effect.sync(() => failAll(batch, error)),
        onSuccess: (reloaded) =>
          Effect.andThen(Ref.set(target.ref, reloaded), attempt(target, reloaded, batch, clock, round, span))
      })
    }
    if (slot.blocked !== null) {
      failAll(batch, slot.blocked)
      return Effect.void
    }
    const nowMillis = clock.currentTimeMillisUnsafe()
    // A clock no stored entry can hold (before 1970, past 2^53−1) fails the batch
    // before anything is built: an entry acknowledged with it would be refused by
    // every later read.
    const badClock = clockProblem(nowMillis)
    if (badClock !== undefined) {
      failAll(batch, badClock)
      return Effect.void
    }
    const timestampSecs = Math.floor(nowMillis / 1000)
    const before = slot.state
    let state = before
    // The batch's entries and accepted requests with their results; a lone request
    // (one caller writing) keeps its own entries and needs no arrays of the batch.
    let entries: ReadonlyArray<Entry.Entry> = noEntries
    let lone: Request<unknown> | undefined
    let loneResult: unknown
    let accepted: Array<Request<unknown>> | undefined
    let results: Array<unknown> | undefined
    let meta: SessionMeta.SessionMeta | undefined
    const maxRecordBytes = target.handle.maxRecordBytes
    for (const request of batch) {
      if (Deferred.isDoneUnsafe(request.deferred)) continue
      let built: Built<unknown>
      try {
        built = request.build(state, timestampSecs, nowMillis)
      } catch (defect) {
        // A throwing guard fails its own caller only, not the batch it shares.
        Deferred.doneUnsafe(request.deferred, Exit.die(defect))
        continue
      }
      if (built.entries.length === 0 && built.meta === null) {
        // Nothing to store (a plan that found its work already done): answered at
        // once, without joining the append.
        Deferred.doneUnsafe(request.deferred, Exit.succeed(built.result))
        continue
      }
      if (maxRecordBytes !== undefined) {
        // An entry the storage cannot hold would fail the whole append: its write
        // fails alone, before it joins the batch.
        const refused = oversized(built.entries, maxRecordBytes)
        if (refused !== undefined) {
          Deferred.doneUnsafe(request.deferred, Exit.fail(refused))
          continue
        }
      }
      for (const entry of built.entries) state = JournalState.fold(state, entry)
      if (built.meta !== null) {
        meta = built.meta
        state = JournalState.applyMeta(state, built.meta)
      }
      if (lone === undefined && accepted === undefined) {
        lone = request
        loneResult = built.result
        entries = built.entries
      } else {
        if (accepted === undefined || results === undefined) {
          accepted = [lone!]
          results = [loneResult]
          entries = entries.slice()
          lone = undefined
        }
        accepted.push(request)
        results.push(built.result)
        ;(entries as Array<Entry.Entry>).push(...built.entries)
      }
    }
    if (lone === undefined && accepted === undefined) return Effect.void
    const after = state
    return Effect.matchEffect(
      append(target, { after: Persistence.tipOf(before), entries, meta, head: () => JournalState.head(after) }, span),
      {
        onFailure: (error) => {
          // Storage is the truth after any failure: drop the state, reload before the
          // next write. A lost race for a sequence is retried against the new state.
          const next = dropped(slot)
          if (error._tag === "SequenceConflict" && round < conflictRetries) {
            return Effect.andThen(Ref.set(target.ref, next), attempt(target, next, batch, clock, round + 1, span))
          }
          return Effect.andThen(
            Ref.set(target.ref, next),
            Effect.sync(() => failAll(accepted ?? [lone!], toWriteError(error)))
          )
        },
        onSuccess: (stored) => {
          // The ref holds the new state before anyone is answered, so a caller that
          // reads right after its write sees it.
          const next: WriterState = {
            state: after,
            blocked: slot.blocked,
            sinceCheckpoint: slot.sinceCheckpoint + stored.bytes,
            checkpointBytes: slot.checkpointBytes
          }
          return Effect.flatMap(Ref.set(target.ref, next), () => {
            if (lone !== undefined) Deferred.doneUnsafe(lone.deferred, Exit.succeed(loneResult))
            else if (accepted !== undefined && results !== undefined) {
              for (let i = 0; i < accepted.length; i++) {
                Deferred.doneUnsafe(accepted[i]!.deferred, Exit.succeed(results[i]))
              }
            }
            // Subscribers pull from a sliding hub: they run before the next batch, or a
            // caller writing in a loop could slide entries out before they pull.
            const published = hubs.subscribed(target.id)
              ? Effect.andThen(Effect.ignoreCause(hubs.publish(target.id, entries)), Effect.yieldNow)
              : Effect.void
            return isDue(next) ? Effect.andThen(published, checkpoint(target)) : published
          })
        }
      }
    )
  }

  // A batch; any defect answers the requests of the batch not answered yet instead
  // of leaving their callers waiting, and since the append may or may not have
  // happened, the state is re-read before the next write.
  const commit = (
    target: WriterSession,
    batch: ReadonlyArray<Request<unknown>>,
    clock: Clock.Clock,
    traced: boolean
  ): Effect.Effect<void> =>
    traced
      // A span per batch: a root, since the batch serves many callers and none of
      // them is its parent; the append's span is inside it.
      ? Effect.useSpan(
        "SessionJournal.batch",
        { root: true, attributes: { session: target.id, "batch.size": batch.length } },
        (span) => commitIn(target, batch, clock, span)
      )
      : commitIn(target, batch, clock, undefined)

  const commitIn = (
    target: WriterSession,
    batch: ReadonlyArray<Request<unknown>>,
    clock: Clock.Clock,
    span: Tracer.Span | undefined
  ): Effect.Effect<void> => {
    let attempted: Effect.Effect<void>
    try {
      attempted = attempt(target, stateOfSession(target), batch, clock, 0, span)
    } catch (defect) {
      attempted = Effect.die(defect)
    }
    return Effect.catchCause(attempted, (cause) =>
      Effect.suspend(() => {
        for (const r of batch) {
          if (!Deferred.isDoneUnsafe(r.deferred)) Deferred.doneUnsafe(r.deferred, Exit.failCause(cause))
        }
        return Ref.update(target.ref, dropped)
      }))
  }

  /**
   * The writer of one session: takes every queued request (whatever arrived during
   * the previous round is the next batch), commits it, and repeats until the queue
   * is ended and empty. Before it waits on an empty queue it lets go of the
   * reference the queued writes held. Uninterruptible: once offered, a request is
   * committed or failed, never abandoned.
   */
  const run = (target: WriterSession): Effect.Effect<void> =>
    Effect.withFiber((fiber) => {
      const clock = fiber.getRef(Clock.Clock)
      const traced = tracing(fiber)
      const idling = (): boolean => target.reference !== undefined && Queue.sizeUnsafe(target.queue) === 0
      // What follows a round: the next take, after letting go of the reference of
      // the queued writes if there is nothing left to take. First the writer lets the
      // callers it answered run: one writing in a loop queues its next write then,
      // and the reference carries over to it instead of being let go and taken again
      // through the `RcMap` for every write. A defect there must not end the writer
      // either: later writes of the session would wait forever.
      const next = (): Effect.Effect<void> => {
        target.busy = false
        return idling() ? settle : take
      }
      const take: Effect.Effect<void> = Effect.matchEffect(Queue.takeBetween(target.queue, 1, maxBatch), {
        // Failure is the end of the queue: it was ended and everything is answered.
        onFailure: () => Effect.void,
        onSuccess: (batch) => {
          target.busy = true
          return Effect.flatMap(commit(target, batch, clock, traced), next)
        }
      })
      const idleThenTake = Effect.andThen(Effect.ignoreCause(Effect.suspend(() => settings.idle(target))), take)
      const settle = Effect.flatMap(Effect.yieldNow, () => idling() ? idleThenTake : take)
      return take
    }).pipe(Effect.uninterruptible)

  return { run }
}

/** The writers of one service. */
export type GroupCommit = ReturnType<typeof make>
