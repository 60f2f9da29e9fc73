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
  SequenceConflict,
  SessionLocked,
  SessionNotFound,
  StorageError,
  StorageReason
} from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as path from "node:path"
import type { Options } from "../NodePersistence.ts"
import * as Lock from "../Lock.ts"
import * as FileOps from "./fileOps.ts"
import type * as Session from "./session.ts"

const WINDOWS_NAMES = /^(?:con|prn|aux|nul|com[0-9]|lpt[0-9])$/i

export const invalidId = (operation: string, id: string): StorageError => rejected(operation, new InvalidSessionId({ id }))

// Another typed failure, reported as a storage failure of `operation`.
const rejected = (operation: string, e: { readonly _tag: string; readonly message: string }): StorageError =>
  new StorageError({ operation, reason: new StorageReason.Rejected({ tag: e._tag, message: e.message }), cause: e })

/**
 * Whether `id` may name a session directory: the session id pattern of docs/DESIGN.md §2,
 * and none of the device names Windows reserves (so a journal copied there stays
 * readable).
 *
 * @since 0.1.0
 */
export const isSafeSessionId = (id: unknown): id is string => Entry.isSessionId(id) && !WINDOWS_NAMES.test(id)

export interface Resolved {
  readonly ctx: FileOps.Context
  readonly removeCheckpointedSegments: boolean
  readonly pollMillis: number
}

/**
 * The filesystem calls the adapter makes, as a service with the real filesystem
 * as its default: fault injection provides another one.
 */
export const Fs: Context.Reference<FileOps.Fs> = Context.Reference<FileOps.Fs>("@session-journal/node/Fs", {
  defaultValue: () => FileOps.nodeFs
})

/** Resolves the options with the filesystem and clock of the environment. */
export const resolveWith = (options: Options): Effect.Effect<Resolved> =>
  Effect.gen(function*() {
    return resolve(options, yield* Fs, yield* Clock.Clock)
  })

const withoutWriteSync = ({ writeSync: _, ...rest }: FileOps.Fs): FileOps.Fs => rest

export const resolve = (options: Options, fs: FileOps.Fs, clock: Clock.Clock): Resolved => ({
  ctx: {
    // Without `writeSync` every durable write goes through the thread pool.
    fs: options.callingThreadWrites === false ? withoutWriteSync(fs) : fs,
    clock,
    root: path.resolve(options.root),
    uid: typeof process.getuid === "function" ? process.getuid() : null,
    maxFileBytes: options.maxFileBytes ?? FileOps.MAX_FILE_BYTES,
    maxLineBytes: options.maxLineBytes ?? FileOps.MAX_LINE_BYTES
  },
  removeCheckpointedSegments: options.removeCheckpointedSegments ?? false,
  pollMillis: options.pollMillis ?? 50
})

export type Known = StorageError | CorruptJournal | SessionLocked | SessionNotFound | SequenceConflict | IntegrityViolation

// Whether `e` is one of the errors whose tags are `keep` (E's own tags).
const isKept = <E extends Known>(e: Known, keep: ReadonlyArray<E["_tag"]>): e is E => keep.some((tag) => tag === e._tag)

// Narrows the typed errors of a method to those it declares: any other one
// becomes a StorageError naming the operation.
export const narrow = <A, E extends Known>(
  effect: Effect.Effect<A, Known>,
  keep: ReadonlyArray<E["_tag"]>,
  operation: string
): Effect.Effect<A, E | StorageError> =>
  Effect.catch(effect, (e): Effect.Effect<never, E | StorageError> =>
    isKept<E>(e, keep) ? Effect.fail(e) : Effect.fail(e._tag === "StorageError" ? e : rejected(operation, e)))

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
  create: boolean
): Effect.Effect<Lock.Held | null, StorageError | SessionLocked, Scope.Scope> => {
  const dir = path.join(r.ctx.root, id)
  // Uninterruptible: an interruption between creating the directory and fsyncing the
  // root would leave a directory the next open finds existing and never makes durable.
  const exists = Effect.uninterruptible(Effect.andThen(
    FileOps.checkDir(r.ctx, r.ctx.root),
    create ? Effect.as(FileOps.ensureDir(r.ctx, dir, r.ctx.root), true) : FileOps.confineSessionDir(r.ctx, dir)
  ))
  const take = Effect.flatMap(Lock.acquire(r.ctx, dir, id), (held) =>
    Effect.gen(function*() {
      const names = yield* FileOps.listDir(r.ctx, dir)
      for (const n of names) {
        if (n.startsWith(FileOps.TEMP_PREFIX)) yield* FileOps.unlinkIfExists(r.ctx, path.join(dir, n))
      }
      yield* Lock.clearStaleTemps(r.ctx, dir, names)
      return held
    }).pipe(Effect.onError(() => Effect.ignore(held.release))))
  return Effect.flatMap(
    exists,
    (found) => found ? Effect.acquireRelease(take, (held) => Effect.ignore(held.release)) : Effect.succeed(null)
  )
}

export const loadOptions = (
  r: Resolved,
  caps: JournalState.Caps | undefined,
  mode: Session.LoadOptions["mode"]
): Session.LoadOptions => ({ caps, mode, retention: r.removeCheckpointedSegments })
