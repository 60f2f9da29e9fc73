/**
 * The filesystem adapter of the `Persistence` port (docs/DESIGN.md §6): one directory per
 * session under a root, holding append-only JSONL segments named by their first
 * sequence, an atomically replaced checkpoint, and a single-writer lock.
 *
 * Also the maintenance functions the command line builds on: `inspect` (what
 * `verify` prints: the recovery report and the integrity of every segment) and
 * `repair` (sets damaged bytes aside so the session can be written again).
 *
 * @since 0.1.0
 */
import {
  type CorruptJournal,
  Entry,
  JournalState,
  Persistence,
  type SequenceConflict,
  type SessionLocked,
  SessionNotFound,
  StorageError,
  StorageReason
} from "@session-journal/core"
import type * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as path from "node:path"
import * as Adapter from "./internal/adapter.ts"
import { invalidId, loadOptions, lockSession, resolveWith, toDeclaredErrors } from "./internal/adapter.ts"
import * as Base from "./internal/fileOps/base.ts"
import * as Open from "./internal/fileOps/open.ts"
import * as Replace from "./internal/fileOps/replace.ts"
import * as Load from "./internal/load.ts"
import * as Reader from "./internal/reader.ts"
import * as Segment from "./internal/segment.ts"
import * as Watch from "./internal/watch.ts"
import * as Writer from "./internal/writer.ts"
import * as NodeSha256 from "./NodeSha256.ts"

/**
 * Options of the filesystem adapter.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The journal root; created (0700) when missing, its parent must exist. */
  readonly root: string
  /**
   * Whether a missing root is created (default true). With false, a missing root is
   * a journal with no session: nothing is created, `list` is empty, every session
   * reads as absent, and writing fails with a `StorageError` (reason `Obstructed`);
   * for readers that must leave no trace, such as the command line's read-only
   * commands. An existing root is checked as always, and leftovers of an interrupted
   * delete are left for a writer to clear.
   */
  readonly createRoot?: boolean | undefined
  /**
   * Remove segments once a checkpoint covers them (default false: every segment is
   * kept as audit history). History then starts at the oldest kept segment; the
   * checkpoint's `evicted_head` still commits to the removed entries.
   */
  readonly removeCheckpointedSegments?: boolean | undefined
  /**
   * How large a segment grows before a checkpoint that covers it completes it
   * (default 0: every checkpoint that covers everything stored does, and the next
   * append starts a new segment). A writer that checkpoints after a few appends,
   * such as a hook that opens a session once per event, sets it (for example to
   * `Checkpoint.MIN_BYTES`) so that it does not start a segment at every event;
   * a load reads from the checkpoint's last entry either way.
   *
   * @since 0.1.0
   */
  readonly segmentMinBytes?: number | undefined
  /**
   * Whether `layer` installs `node:crypto`'s SHA-256 for the process
   * (`NodeSha256.layer`, default true). A process that opens a session to write
   * once (a hook) hashes a few entries, which core's own SHA-256 does in less time
   * than loading `node:crypto` takes; it passes `"bulk"`: `node:crypto` only where
   * many digests are computed at once (a long session's tree rebuilt as it loads,
   * `NodeSha256.layerBulk`), loaded then. False: core's own only. The digests are
   * the same.
   *
   * @since 0.1.0
   */
  readonly nodeSha256?: boolean | "bulk" | undefined
  /**
   * How often `follow` polls for entries written by other processes where the
   * session directory cannot be watched (default 50 ms); where it is watched, an
   * idle follower wakes on its changes and looks itself only every
   * `FOLLOW_SAFETY_POLL` (or `pollInterval`, if longer). A value that is no duration, or a negative one, fails `make` and `layer`
   * with a `StorageError` whose reason is `InvalidOption` naming it.
   */
  readonly pollInterval?: Duration.Input | undefined
  /**
   * `pollInterval` in milliseconds; read only when `pollInterval` is not given.
   *
   * @deprecated use `pollInterval`
   */
  readonly pollMillis?: number | undefined
  /** Largest file read (default 1 GiB). */
  readonly maxFileBytes?: number | undefined
  /** Largest segment line (default 8 MiB); a longer record is refused on append. */
  readonly maxLineBytes?: number | undefined
  /**
   * Whether a writer alone in its adapter makes its durable write on the calling
   * thread (default true): one write instead of two thread-pool hand-offs, while the
   * event loop waits for the disk (about as long as one fdatasync). Set false in a
   * host whose event loop must never wait for the disk; writes then always go through
   * libuv's thread pool.
   */
  readonly callingThreadWrites?: boolean | undefined
  /**
   * How long opening a session for writing (and `repair`, `delete`) waits while
   * another writer holds its lock (default 0: fail at once with `SessionLocked`).
   * Waiters try again as soon as the lock file goes (a directory watch) or after a
   * jittered backoff of at most 250 ms; past the bound they fail with
   * `SessionLocked`, which says how long they waited. A lock whose holder is proved
   * gone is taken over at once, waiting or not. A value that is no duration, or a
   * negative one, is a `StorageError` whose reason is `InvalidOption` naming
   * `lockWait`.
   */
  readonly lockWait?: Duration.Input | undefined
}

/**
 * The filesystem calls the adapter makes; implement it (usually by wrapping
 * `nodeFs`) to inject failures in tests, and provide it with `layerFs`.
 *
 * @since 0.1.0
 */
export type Fs = Base.Fs

/**
 * The filesystem calls as a service, read by `make`, `layer`, `inspect` and
 * `repair`; the real filesystem (`nodeFs`) unless a layer provides another.
 *
 * @since 0.1.0
 */
export const Fs: Context.Reference<Fs> = Adapter.Fs

/**
 * A layer that makes the adapter use `fs` (fault injection in tests).
 *
 * @since 0.1.0
 */
export const layerFs = (fs: Fs): Layer.Layer<never> => Layer.succeed(Fs, fs)

/**
 * The real filesystem (`node:fs/promises`).
 *
 * @since 0.1.0
 */
export const nodeFs: Fs = Base.nodeFs

/**
 * Largest segment line read or written: 8 MiB.
 *
 * @since 0.1.0
 */
export const MAX_LINE_BYTES = Base.MAX_LINE_BYTES

/**
 * Largest file read: 1 GiB.
 *
 * @since 0.1.0
 */
export const MAX_FILE_BYTES = Base.MAX_FILE_BYTES

/**
 * How often an idle `follow` looks at its session itself where the session
 * directory is watched (it wakes on the watch's events, and reads only the files
 * they name); `pollInterval` when that is longer. A safety net for filesystems
 * whose watches miss events: one lstat of the segment being read and one listing
 * of the directory, and a read only when something changed.
 *
 * @since 0.1.0
 */
export const FOLLOW_SAFETY_POLL: Duration.Duration = Duration.seconds(2)

/**
 * Whether `id` may name a session directory: the session id pattern of docs/DESIGN.md §2,
 * and none of the device names Windows reserves (so a journal copied there stays
 * readable).
 *
 * @since 0.1.0
 */
export const isSafeSessionId = Adapter.isSafeSessionId

const ensureRoot = (ctx: Base.Context): Effect.Effect<void, StorageError> =>
  Effect.gen(function*() {
    yield* Open.ensureDir(ctx, ctx.root, path.dirname(ctx.root))
    // Leftovers of a delete interrupted by a crash.
    for (const n of yield* Replace.listDir(ctx, ctx.root)) {
      if (n.startsWith(TRASH_PREFIX)) yield* Effect.ignore(removeTree(ctx, path.join(ctx.root, n)))
    }
  })

const TRASH_PREFIX = ".trash-"

const removeTree = Effect.fnUntraced(function*(ctx: Base.Context, dir: string) {
  const st = yield* Base.call("lstat", dir, () => ctx.fs.lstat(dir))
  if (!st.isDirectory() || st.isSymbolicLink()) {
    return yield* new StorageError({
      operation: "delete",
      path: dir,
      reason: new StorageReason.Io({ code: "ENOTDIR", message: "not a directory" })
    })
  }
  for (const n of yield* Replace.listDir(ctx, dir)) yield* Replace.unlinkIfExists(ctx, path.join(dir, n))
  yield* Base.call("rmdir", dir, () => ctx.fs.rmdir(dir))
})

/**
 * Builds the adapter: checks (or creates) the root, then serves the port. Fails
 * with `StorageError` when the root is unusable (a symlink, foreign-owned,
 * group/other-writable).
 *
 * @since 0.1.0
 */
export const make = (options: Options): Effect.Effect<Persistence.Persistence["Service"], StorageError> =>
  Effect.gen(function*() {
    const r = yield* resolveWith(options)
    const ctx = r.ctx
    if (options.createRoot === false) {
      const present = yield* Open.checkDir(ctx, ctx.root).pipe(
        Effect.as(true),
        Effect.catchIf((e) => Base.hasCode(e, "ENOENT"), () => Effect.succeed(false))
      )
      if (!present) return yield* Persistence.makeAbsent(`there is no journal at ${ctx.root}`)
    } else yield* ensureRoot(ctx)
    const dirOf = (id: string) => path.join(ctx.root, id)

    const loadTags: ReadonlyArray<Persistence.LoadError["_tag"]> = [
      "StorageError",
      "CorruptJournal",
      "IntegrityViolation"
    ]

    const readHandle = (id: string, caps: JournalState.Caps | undefined): Persistence.ReadHandle => {
      const dir = dirOf(id)
      return {
        id,
        load: toDeclaredErrors<Persistence.Loaded, Persistence.LoadError>(
          Effect.map(Load.load(ctx, dir, id, loadOptions(r, caps, "load")), (l) => l.loaded),
          loadTags,
          "load"
        ),
        verify: toDeclaredErrors<Persistence.Loaded, Persistence.LoadError>(
          Effect.map(Load.load(ctx, dir, id, loadOptions(r, caps, "verify")), (l) => l.loaded),
          loadTags,
          "verify"
        )
      }
    }

    const openRead = (
      id: string,
      caps: JournalState.Caps | undefined
    ): Effect.Effect<Persistence.ReadHandle, StorageError> =>
      isSafeSessionId(id) ? Effect.succeed(readHandle(id, caps)) : Effect.fail(invalidId("open", id))

    const openWrite = (
      id: string,
      caps: JournalState.Caps | undefined
    ): Effect.Effect<Persistence.WriteHandle, StorageError | SessionLocked, Scope.Scope> =>
      Effect.gen(function*() {
        if (!isSafeSessionId(id)) return yield* invalidId("open", id)
        const dir = dirOf(id)
        // The lock is released after the writer's handle is closed (finalizers run
        // in reverse order).
        const held = yield* lockSession(r, id, true)
        const writer = yield* Effect.acquireRelease(
          Effect.sync(() =>
            new Writer.SegmentWriter(ctx, dir, id, caps, {
              removeCheckpointedSegments: r.removeCheckpointedSegments,
              segmentMinBytes: r.segmentMinBytes,
              turns: r.turns,
              lockCheck: held?.check
            })
          ),
          (writer) => writer.close()
        )
        const handle: Persistence.WriteHandle = {
          id,
          // The writer refuses an entry whose line would pass the line bound before it
          // joins a batch, so only its own caller fails.
          maxRecordBytes: ctx.maxLineBytes - Segment.ENTRY_LINE_OVERHEAD,
          load: toDeclaredErrors<Persistence.Loaded, Persistence.LoadError>(
            Effect.map(writer.load(), (l) => l.loaded),
            loadTags,
            "load"
          ),
          verify: readHandle(id, caps).verify,
          append: (request) =>
            toDeclaredErrors<Persistence.Appended, StorageError | SequenceConflict>(
              writer.append(request),
              ["StorageError", "SequenceConflict"],
              "append"
            ),
          checkpoint: (document) =>
            toDeclaredErrors<number, StorageError>(writer.checkpoint(document), [], "checkpoint"),
          // The same document, written piece by piece into a reused buffer.
          checkpointState: (state) =>
            toDeclaredErrors<number, StorageError>(writer.checkpointState(state), [], "checkpoint")
        }
        return handle
      })

    const open = Persistence.makeOpen({ read: openRead, write: openWrite })

    type ReadError = StorageError | CorruptJournal | SessionNotFound
    const readTags: ReadonlyArray<ReadError["_tag"]> = ["StorageError", "CorruptJournal", "SessionNotFound"]

    const readerFor = (id: string, from: number): Effect.Effect<Reader.Reader, ReadError> =>
      Effect.gen(function*() {
        const dir = dirOf(id)
        if (!(yield* Open.confineSessionDir(ctx, dir))) return yield* new SessionNotFound({ id })
        const list = yield* Load.listing(ctx, dir)
        if (list.segments.length === 0 && !list.hasCheckpoint) return yield* new SessionNotFound({ id })
        return new Reader.Reader(ctx, dir, from)
      })

    const history = (
      id: string,
      historyOptions?: Persistence.HistoryOptions
    ): Stream.Stream<Entry.Entry, ReadError> => {
      if (!isSafeSessionId(id)) return Stream.fail(invalidId("history", id))
      const limit = historyOptions?.limit ?? Number.POSITIVE_INFINITY
      return Stream.unwrap(Effect.map(
        toDeclaredErrors<Reader.Reader, ReadError>(readerFor(id, historyOptions?.from ?? 0), readTags, "history"),
        (reader) => {
          let remaining = limit
          return Stream.paginate(
            undefined,
            () =>
              toDeclaredErrors<readonly [Array<Entry.Entry>, Option.Option<undefined>], ReadError>(
                Effect.suspend(() => {
                  if (remaining <= 0) return Effect.succeed([[], Option.none()] as const)
                  return Effect.map(reader.page(Math.min(512, remaining)), (page) => {
                    remaining -= page.entries.length
                    return [
                      page.entries,
                      page.atEnd || remaining <= 0 ? Option.none() : Option.some(undefined)
                    ] as const
                  })
                }),
                readTags,
                "history"
              )
          )
        }
      ))
    }

    // An idle follower waits on a watch of the session directory (set up before its
    // first read, so nothing written after that read is missed) and reads only what
    // the watch names; every `FOLLOW_SAFETY_POLL` (or `pollInterval`, if longer) it looks
    // itself, for filesystems whose watches miss events. Where the directory cannot
    // be watched it reads everything every `pollInterval`.
    const follow = (id: string, from: number): Stream.Stream<Entry.Entry, ReadError> => {
      if (!isSafeSessionId(id)) return Stream.fail(invalidId("follow", id))
      const safety = Duration.max(r.pollInterval, FOLLOW_SAFETY_POLL)
      return Stream.unwrap(Effect.gen(function*() {
        const watch = yield* Watch.make(dirOf(id))
        const reader = yield* toDeclaredErrors<Reader.Reader, ReadError>(readerFor(id, from), readTags, "follow")
        // Once a page found the end, the next read waits for a change first.
        let waitFirst = false
        const changes: Effect.Effect<ReadonlySet<string> | null | undefined> = Effect.suspend(() =>
          watch.watching() ? watch.next(safety) : Effect.as(Effect.sleep(r.pollInterval), undefined)
        )
        return Stream.paginate(undefined, () =>
          Effect.gen(function*() {
            for (;;) {
              const changed = waitFirst ? yield* changes : undefined
              const page = yield* toDeclaredErrors<{ entries: Array<Entry.Entry>; atEnd: boolean }, ReadError>(
                reader.page(512, changed),
                readTags,
                "follow"
              )
              waitFirst = page.atEnd || page.entries.length === 0
              if (page.entries.length > 0) return [page.entries, Option.some(undefined)] as const
            }
          }))
      }))
    }

    const info = Effect.fnUntraced(function*(id: string) {
      const dir = dirOf(id)
      const st = yield* Effect.option(Base.call("lstat", dir, () => ctx.fs.lstat(dir)))
      if (Option.isNone(st) || !st.value.isDirectory() || st.value.isSymbolicLink()) return null
      const files = yield* Load.listing(ctx, dir)
      if (files.segments.length === 0 && !files.hasCheckpoint) return null
      let bytes = 0
      let updatedAt = 0
      for (const n of files.names) {
        const fst = yield* Effect.option(
          Base.call("lstat", path.join(dir, n), () => ctx.fs.lstat(path.join(dir, n)))
        )
        if (Option.isNone(fst) || !fst.value.isFile()) continue
        bytes += fst.value.size
        if (n === Load.CHECKPOINT_FILE || Segment.parseName(n) !== null) {
          updatedAt = Math.max(updatedAt, fst.value.mtimeMs)
        }
      }
      // A session that does not load cleanly is listed with what is wrong, never
      // as if its checkpoint's claims held.
      const loaded = yield* Effect.result(Load.load(ctx, dir, id, loadOptions(r, undefined, "load")))
      const state = loaded._tag === "Success" ? loaded.success.loaded.state : null
      const stopped = loaded._tag === "Success" ? loaded.success.loaded.recovery.stopped : null
      const session: Persistence.SessionInfo = {
        id,
        entries: state?.next_sequence ?? 0,
        head: state === null ? Entry.ZERO_HASH : JournalState.head(state),
        lastHash: state === null ? Entry.ZERO_HASH : JournalState.lastHash(state),
        updatedAt: updatedAt === 0 ? null : Math.floor(updatedAt),
        bytes,
        problem: loaded._tag === "Failure"
          ? `unreadable: ${loaded.failure.message}`
          : stopped === null
          ? null
          : `${stopped.reason}: ${stopped.detail}`
      }
      return session
    })

    const list = toDeclaredErrors<ReadonlyArray<Persistence.SessionInfo>, StorageError>(
      Effect.gen(function*() {
        yield* Open.checkDir(ctx, ctx.root)
        const out: Array<Persistence.SessionInfo> = []
        for (const id of (yield* Replace.listDir(ctx, ctx.root)).sort()) {
          if (!isSafeSessionId(id)) continue
          const one = yield* info(id)
          if (one !== null) out.push(one)
        }
        return out
      }),
      [],
      "list"
    )

    const remove = (id: string) =>
      Effect.gen(function*() {
        if (!isSafeSessionId(id)) return yield* invalidId("delete", id)
        const dir = dirOf(id)
        yield* toDeclaredErrors<void, StorageError | SessionLocked | SessionNotFound>(
          Effect.scoped(Effect.gen(function*() {
            const held = yield* lockSession(r, id, false)
            if (held === null) return yield* new SessionNotFound({ id })
            const files = yield* Load.listing(ctx, dir)
            if (files.segments.length === 0 && !files.hasCheckpoint) return yield* new SessionNotFound({ id })
            // Rename first, so the session disappears at once and a crash half way
            // leaves a trash directory (cleared later), never half a session. The lock
            // file goes with the directory; its release then finds no lock of ours.
            const trash = path.join(ctx.root, `${TRASH_PREFIX}${id}-${held.record.token}`)
            yield* Base.call("rename", dir, () => ctx.fs.rename(dir, trash))
            yield* Open.syncDir(ctx, ctx.root)
            yield* removeTree(ctx, trash)
            yield* Open.syncDir(ctx, ctx.root)
          })),
          ["StorageError", "SessionLocked", "SessionNotFound"],
          "delete"
        )
      })

    return Persistence.Persistence.of({ open, history, follow, list, delete: remove })
  })

/**
 * The filesystem adapter as a layer.
 *
 * @since 0.1.0
 */
export const layer = (options: Options): Layer.Layer<Persistence.Persistence, StorageError> =>
  options.nodeSha256 === false
    ? Layer.effect(Persistence.Persistence, make(options))
    : Layer.merge(
      Layer.effect(Persistence.Persistence, make(options)),
      options.nodeSha256 === "bulk" ? NodeSha256.layerBulk : NodeSha256.layer
    )

export {
  /**
   * Checks a session without changing it and without the lock (see the maintenance module).
   *
   * @since 0.1.0
   */
  inspect,
  /**
   * Kind of the entry every repair appends.
   *
   * @since 0.1.0
   */
  RECOVERY_KIND,
  /**
   * Makes a damaged session writable again without deleting a byte (see the maintenance module).
   *
   * @since 0.1.0
   */
  repair,
  /**
   * Removes a stale lock whose holder is proved gone; refuses while it may be alive (see the maintenance module).
   *
   * @since 0.1.0
   */
  unlock
} from "./internal/maintenance.ts"

export type {
  /**
   * What `inspect` found.
   *
   * @since 0.1.0
   */
  InspectReport,
  /**
   * What `repair` did.
   *
   * @since 0.1.0
   */
  RepairReport,
  /**
   * Integrity of one segment file, as `inspect` found it.
   *
   * @since 0.1.0
   */
  SegmentReport,
  /**
   * What `unlock` did.
   *
   * @since 0.1.0
   */
  UnlockReport
} from "./internal/maintenance.ts"
