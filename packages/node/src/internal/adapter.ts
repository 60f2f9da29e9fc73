/**
 * What the filesystem adapter and its maintenance functions share: resolved
 * options, session id checks, narrowing the typed errors to what a method
 * declares, and taking a session's lock.
 */
import {
  CorruptJournal,
  Entry,
  IntegrityViolation,
  InvalidSessionId,
  type JournalState,
  Persistence,
  SequenceConflict,
  SessionLocked,
  SessionNotFound,
  StorageError,
  type UndeclaredError
} from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Random from "effect/Random"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as path from "node:path"
import * as Lock from "../Lock.ts"
import type { Options } from "../NodePersistence.ts"
import * as Durable from "./durable.ts"
import * as Base from "./fileOps/base.ts"
import * as Open from "./fileOps/open.ts"
import * as Replace from "./fileOps/replace.ts"
import type * as Load from "./load.ts"

const WINDOWS_NAMES = /^(?:con|prn|aux|nul|com[0-9]|lpt[0-9])$/i

export const invalidId = (operation: string, id: string): StorageError =>
  undeclared(operation, new InvalidSessionId({ id }))

// A typed failure `operation` does not declare, reported as a storage failure of
// `operation` that carries it as its reason.
const undeclared = (operation: string, e: UndeclaredError): StorageError =>
  new StorageError({ operation, reason: e, cause: e })

/**
 * Whether `id` may name a session directory: the session id pattern of docs/DESIGN.md §2,
 * and none of the device names Windows reserves (so a journal copied there stays
 * readable).
 *
 * @since 0.1.0
 */
export const isSafeSessionId = (id: unknown): id is string => Entry.isSessionId(id) && !WINDOWS_NAMES.test(id)

export interface Resolved {
  readonly ctx: Base.Context
  readonly removeCheckpointedSegments: boolean
  /** `Options.segmentMinBytes`. */
  readonly segmentMinBytes: number
  /** How often `follow` polls (`Options.pollInterval`). */
  readonly pollInterval: Duration.Duration
  /** How long a writer waits for the lock (`Options.lockWait`), milliseconds; 0: not at all. */
  readonly lockWaitMillis: number
  /** Which of this adapter's writers is alone (`Durable.write`): made once per resolution, never shared. */
  readonly turns: Durable.Turns
}

/**
 * The filesystem calls the adapter makes, as a service with the real filesystem
 * as its default: fault injection provides another one.
 */
export const Fs: Context.Reference<Base.Fs> = Context.Reference<Base.Fs>("@session-journal/node/Fs", {
  defaultValue: () => Base.nodeFs
})

/**
 * Resolves the options with the filesystem and clock of the environment; an
 * interval option that is no duration fails with a `StorageError` naming it.
 */
export const resolveWith = (options: Options): Effect.Effect<Resolved, StorageError> =>
  Effect.gen(function*() {
    const pollInterval = yield* options.pollInterval === undefined && options.pollMillis !== undefined
      ? Persistence.decodeInterval("pollMillis", options.pollMillis, 50)
      : Persistence.decodeInterval("pollInterval", options.pollInterval, "50 millis")
    const lockWait = yield* Persistence.decodeInterval("lockWait", options.lockWait, 0)
    return resolve(options, yield* Fs, yield* Clock.Clock, { pollInterval, lockWait })
  })

const withoutWriteSync = ({ writeSync: _, lstatSync: _l, ...rest }: Base.Fs): Base.Fs => rest

const resolve = (
  options: Options,
  fs: Base.Fs,
  clock: Clock.Clock,
  intervals: { readonly pollInterval: Duration.Duration; readonly lockWait: Duration.Duration }
): Resolved => ({
  ctx: {
    // Without `writeSync` every durable write (and `lstatSync` every lock check) goes
    // through the thread pool.
    fs: options.callingThreadWrites === false ? withoutWriteSync(fs) : fs,
    clock,
    root: path.resolve(options.root),
    uid: typeof process.getuid === "function" ? process.getuid() : null,
    maxFileBytes: options.maxFileBytes ?? Base.MAX_FILE_BYTES,
    maxLineBytes: options.maxLineBytes ?? Base.MAX_LINE_BYTES
  },
  removeCheckpointedSegments: options.removeCheckpointedSegments ?? false,
  segmentMinBytes: Number.isFinite(options.segmentMinBytes) ? Math.max(0, options.segmentMinBytes!) : 0,
  pollInterval: intervals.pollInterval,
  lockWaitMillis: Duration.toMillis(intervals.lockWait),
  turns: new Durable.Turns()
})

/** Every typed error the adapter's internals fail with, before `toDeclaredErrors`. */
export type AdapterError =
  | StorageError
  | CorruptJournal
  | SessionLocked
  | SessionNotFound
  | SequenceConflict
  | IntegrityViolation

// Whether `e` is one of the errors whose tags are `keep` (E's own tags).
const isKept = <E extends AdapterError>(e: AdapterError, keep: ReadonlyArray<E["_tag"]>): e is E =>
  keep.some((tag) => tag === e._tag)

// Keeps the typed errors of a method that it declares: any other one becomes a
// StorageError naming the operation.
export const toDeclaredErrors = <A, E extends AdapterError>(
  effect: Effect.Effect<A, AdapterError>,
  keep: ReadonlyArray<E["_tag"]>,
  operation: string
): Effect.Effect<A, E | StorageError> =>
  Effect.catch(
    effect,
    (e): Effect.Effect<never, E | StorageError> =>
      isKept<E>(e, keep) ? Effect.fail(e) : Effect.fail(e._tag === "StorageError" ? e : undeclared(operation, e))
  )

/**
 * Takes the lock of a session for maintenance or writing: confines the root,
 * creates the session directory when asked, takes the lock and clears temp files
 * left by dead writers (a failure there releases the lock). Succeeds with null when
 * the session directory does not exist and `create` is false. Taking the lock is
 * uninterruptible and its release belongs to the scope, so an interruption never
 * leaves it taken.
 */
export const lockSession = (
  r: Resolved,
  id: string,
  create: boolean,
  options?: Lock.AcquireOptions
): Effect.Effect<Lock.Held | null, StorageError | SessionLocked, Scope.Scope> => {
  const dir = path.join(r.ctx.root, id)
  // Uninterruptible: an interruption between creating the directory and fsyncing the
  // root would leave a directory the next open finds existing and never makes durable.
  const exists = Effect.uninterruptible(Effect.andThen(
    Open.checkDir(r.ctx, r.ctx.root),
    create ? Effect.as(Open.ensureDir(r.ctx, dir, r.ctx.root), true) : Open.confineSessionDir(r.ctx, dir)
  ))
  const take = Effect.flatMap(Lock.acquire(r.ctx, dir, id, options), (held) =>
    Effect.gen(function*() {
      // Which stale lock was taken over, and what proved its holder gone: at debug
      // level, for a host that wants to see it (the command line prints no logs).
      if (held.tookOver !== null) yield* Effect.logDebug(tookOverLine(id, held.tookOver))
      const names = yield* Replace.listDir(r.ctx, dir)
      for (const n of names) {
        if (n.startsWith(Replace.TEMP_PREFIX)) yield* Replace.unlinkIfExists(r.ctx, path.join(dir, n))
      }
      yield* Lock.clearStaleTemps(r.ctx, dir, names)
      return held
    }).pipe(Effect.onError(() => Effect.ignore(held.release))))
  const attempt = Effect.acquireRelease(take, (held) => Effect.ignore(held.release))
  return Effect.flatMap(
    exists,
    (found) =>
      !found ? Effect.succeed(null) : r.lockWaitMillis > 0 ? waitFor(attempt, dir, id, r.lockWaitMillis) : attempt
  )
}

/**
 * The waits between a lock waiter's tries, as a `Schedule`: 5 ms doubling up to
 * 250 ms, each scaled by a random factor in [0.5, 1.5) from `Random` (so waiters
 * woken together spread out). It never ends by itself: `waitFor` bounds it.
 */
export const lockBackoff: Schedule.Schedule<Duration.Duration> = Schedule.exponential("5 millis").pipe(
  Schedule.modifyDelay(({ duration }) =>
    Effect.map(Random.next, (r) => Duration.millis(Math.min(250, Duration.toMillis(duration)) * (0.5 + r)))
  )
)

/**
 * Waits for the lock while another writer holds it, at most `bound` ms of the
 * fiber's `Clock` (a test clock moves it with `TestClock.adjust`): after each
 * refusal it waits for the lock file to go (a directory watch) or the next delay
 * of `lockBackoff`, whichever comes first, then tries again; the wait itself is
 * interruptible. No queue: every waiter tries again when the lock goes, so a burst
 * of N writers is done after N handovers. To keep the oldest from losing every
 * race, a waiter tries after a random delay of up to 10 ms that shrinks to nothing
 * as its wait nears the bound. After the bound, `SessionLocked` says how long it
 * waited.
 */
export const waitFor = <A, E, R>(
  attempt: Effect.Effect<A, E | SessionLocked, R>,
  dir: string,
  id: string,
  bound: number
): Effect.Effect<A, E | SessionLocked, R> =>
  Effect.gen(function*() {
    const started = yield* Clock.currentTimeMillis
    const step = yield* Schedule.toStep(lockBackoff)
    const loop: Effect.Effect<A, E | SessionLocked, R> = Effect.catchIf(
      attempt,
      (e): e is SessionLocked => e instanceof SessionLocked,
      (e) =>
        Effect.gen(function*() {
          const now = yield* Clock.currentTimeMillis
          const waited = now - started
          if (waited >= bound) {
            return yield* new SessionLocked({
              id,
              holder: `${e.holder}; gave up after waiting ${seconds(waited)} for it`
            })
          }
          // The schedule never ends; were it to, the bound is what is left.
          const [, delay] = yield* Effect.orElseSucceed(
            step(now, undefined),
            () => [Duration.zero, Duration.millis(bound - waited)] as const
          )
          const settle = 10 * (yield* Random.next) * Math.max(0, 1 - waited / bound)
          yield* Lock.awaitRelease(dir, Math.min(bound - waited, Duration.toMillis(delay)), settle)
          return yield* loop
        })
    )
    return yield* loop
  })

/**
 * One line saying which stale lock of session `id` a writer took over, and what
 * proved its holder gone.
 */
export const tookOverLine = (id: string, over: Lock.TakenOver): string =>
  `took over the lock of session ${id} left by ${
    over.record === null ? "an unreadable lock file" : `pid ${over.record.pid} on ${over.record.host}`
  }: ${over.verdict.reason}`

const seconds = (millis: number): string => `${(millis / 1000).toFixed(millis < 10_000 ? 2 : 1)} s`

export const loadOptions = (
  r: Resolved,
  caps: JournalState.Caps | undefined,
  mode: Load.LoadOptions["mode"]
): Load.LoadOptions => ({ caps, mode, retention: r.removeCheckpointedSegments })
