/**
 * The filesystem adapter of the `Persistence` port (DESIGN §6): one directory per
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
  CorruptJournal,
  Entry,
  IntegrityViolation,
  InvalidSessionId,
  JournalState,
  Persistence,
  SequenceConflict,
  SessionLocked,
  SessionNotFound,
  StorageError
} from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as path from "node:path"
import * as FileOps from "./internal/fileOps.ts"
import * as Segment from "./internal/segment.ts"
import * as Session from "./internal/session.ts"
import * as Lock from "./Lock.ts"

/**
 * Options of the filesystem adapter.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The journal root; created (0700) when missing, its parent must exist. */
  readonly root: string
  /**
   * Remove segments once a checkpoint covers them (default false: every segment is
   * kept as audit history). History then starts at the oldest kept segment; the
   * checkpoint's `evicted_head` still commits to the removed entries.
   */
  readonly removeCheckpointedSegments?: boolean | undefined
  /** How often `follow` polls for entries written by other processes (default 50 ms). */
  readonly pollMillis?: number | undefined
  /** Largest file read (default 1 GiB). */
  readonly maxFileBytes?: number | undefined
  /** Largest segment line (default 8 MiB); a longer record is refused on append. */
  readonly maxLineBytes?: number | undefined
  /** The filesystem calls to use (default `node:fs/promises`); tests inject failures here. */
  readonly fs?: FileOps.Fs | undefined
}

/**
 * The filesystem calls the adapter makes; implement it (usually by wrapping
 * `nodeFs`) to inject failures in tests.
 *
 * @since 0.1.0
 */
export type Fs = FileOps.Fs

/**
 * The real filesystem (`node:fs/promises`).
 *
 * @since 0.1.0
 */
export const nodeFs: Fs = FileOps.nodeFs

/**
 * Largest segment line read or written: 8 MiB.
 *
 * @since 0.1.0
 */
export const MAX_LINE_BYTES = FileOps.MAX_LINE_BYTES

/**
 * Largest file read: 1 GiB.
 *
 * @since 0.1.0
 */
export const MAX_FILE_BYTES = FileOps.MAX_FILE_BYTES

const WINDOWS_NAMES = /^(?:con|prn|aux|nul|com[0-9]|lpt[0-9])$/i

const invalidId = (operation: string, id: string) =>
  new StorageError({ operation, reason: new InvalidSessionId({ id }).message, cause: new InvalidSessionId({ id }) })

/**
 * Whether `id` may name a session directory: the session id pattern of DESIGN §2,
 * and none of the device names Windows reserves (so a journal copied there stays
 * readable).
 *
 * @since 0.1.0
 */
export const isSafeSessionId = (id: unknown): id is string => Entry.isSessionId(id) && !WINDOWS_NAMES.test(id)

interface Resolved {
  readonly ctx: FileOps.Context
  readonly removeCheckpointedSegments: boolean
  readonly pollMillis: number
}

const resolve = (options: Options): Resolved => ({
  ctx: {
    fs: options.fs ?? FileOps.nodeFs,
    root: path.resolve(options.root),
    uid: typeof process.getuid === "function" ? process.getuid() : null,
    maxFileBytes: options.maxFileBytes ?? FileOps.MAX_FILE_BYTES,
    maxLineBytes: options.maxLineBytes ?? FileOps.MAX_LINE_BYTES
  },
  removeCheckpointedSegments: options.removeCheckpointedSegments ?? false,
  pollMillis: options.pollMillis ?? 50
})

type Known = StorageError | CorruptJournal | SessionLocked | SessionNotFound | SequenceConflict | IntegrityViolation

const isKnown = (e: unknown): e is Known =>
  e instanceof StorageError || e instanceof CorruptJournal || e instanceof SessionLocked ||
  e instanceof SessionNotFound || e instanceof SequenceConflict || e instanceof IntegrityViolation

// The edge between the async primitives and the error channel: typed failures
// pass through, anything else becomes a StorageError naming the operation.
const attempt = <A>(operation: string, where: string, f: () => Promise<A>): Effect.Effect<A, Known> =>
  Effect.tryPromise({
    try: f,
    catch: (cause) => isKnown(cause) ? cause : new StorageError({ operation, path: where, cause })
  })

const narrow = <A, E extends Known>(effect: Effect.Effect<A, Known>, keep: ReadonlyArray<Known["_tag"]>, operation: string) =>
  Effect.catch(effect, (e): Effect.Effect<never, E> =>
    keep.includes(e._tag)
      ? Effect.fail(e as E)
      : Effect.fail((e instanceof StorageError ? e : new StorageError({ operation, reason: e.message, cause: e })) as E))

const ensureRoot = async (ctx: FileOps.Context): Promise<void> => {
  await FileOps.ensureDir(ctx, ctx.root, path.dirname(ctx.root))
  // Leftovers of a delete interrupted by a crash.
  for (const n of await FileOps.listDir(ctx, ctx.root)) {
    if (n.startsWith(TRASH_PREFIX)) await removeTree(ctx, path.join(ctx.root, n)).catch(() => undefined)
  }
}

const TRASH_PREFIX = ".trash-"

const removeTree = async (ctx: FileOps.Context, dir: string): Promise<void> => {
  const st = await FileOps.call("lstat", dir, () => ctx.fs.lstat(dir))
  if (!st.isDirectory() || st.isSymbolicLink()) throw new StorageError({ operation: "delete", path: dir, reason: "not a directory" })
  for (const n of await FileOps.listDir(ctx, dir)) await FileOps.unlinkIfExists(ctx, path.join(dir, n))
  await FileOps.call("rmdir", dir, () => ctx.fs.rmdir(dir))
}

/**
 * Takes the lock of a session for maintenance or writing: confines the root,
 * creates the session directory when asked, takes the lock and clears temp files
 * left by dead writers.
 */
const lockSession = async (r: Resolved, id: string, create: boolean): Promise<Lock.Held | null> => {
  const dir = path.join(r.ctx.root, id)
  await FileOps.checkDir(r.ctx, r.ctx.root)
  if (create) await FileOps.ensureDir(r.ctx, dir, r.ctx.root)
  else if (!(await FileOps.confineSessionDir(r.ctx, dir))) return null
  const held = await Lock.acquire(r.ctx, dir, id)
  try {
    const names = await FileOps.listDir(r.ctx, dir)
    for (const n of names) {
      if (n.startsWith(FileOps.TEMP_PREFIX)) await FileOps.unlinkIfExists(r.ctx, path.join(dir, n))
    }
    await Lock.clearStaleTemps(r.ctx, dir, names)
  } catch (e) {
    await held.release().catch(() => undefined)
    throw e
  }
  return held
}

const loadOptions = (
  r: Resolved,
  caps: JournalState.Caps | undefined,
  mode: Session.LoadOptions["mode"]
): Session.LoadOptions => ({ caps, mode, retention: r.removeCheckpointedSegments })

/**
 * Builds the adapter: checks (or creates) the root, then serves the port. Fails
 * with `StorageError` when the root is unusable (a symlink, foreign-owned,
 * group/other-writable).
 *
 * @since 0.1.0
 */
export const make = (options: Options): Effect.Effect<Persistence.Persistence["Service"], StorageError> =>
  Effect.gen(function*() {
    const r = resolve(options)
    const ctx = r.ctx
    yield* narrow<void, StorageError>(attempt("open root", ctx.root, () => ensureRoot(ctx)), [], "open root")
    const dirOf = (id: string) => path.join(ctx.root, id)

    const loadTags: ReadonlyArray<Known["_tag"]> = ["StorageError", "CorruptJournal", "IntegrityViolation"]

    const readHandle = (id: string, caps: JournalState.Caps | undefined): Persistence.ReadHandle => {
      const dir = dirOf(id)
      return {
        id,
        load: narrow<Persistence.Loaded, Persistence.LoadError>(
          attempt("load", dir, async () => (await Session.load(ctx, dir, id, loadOptions(r, caps, "load"))).loaded),
          loadTags,
          "load"
        ),
        verify: narrow<Persistence.Loaded, Persistence.LoadError>(
          attempt("verify", dir, async () => (await Session.load(ctx, dir, id, loadOptions(r, caps, "verify"))).loaded),
          loadTags,
          "verify"
        )
      }
    }

    const openRead = (id: string, caps: JournalState.Caps | undefined): Effect.Effect<Persistence.ReadHandle, StorageError> =>
      isSafeSessionId(id) ? Effect.succeed(readHandle(id, caps)) : Effect.fail(invalidId("open", id))

    const openWrite = (
      id: string,
      caps: JournalState.Caps | undefined
    ): Effect.Effect<Persistence.WriteHandle, StorageError | SessionLocked, Scope.Scope> =>
      Effect.gen(function*() {
        if (!isSafeSessionId(id)) return yield* invalidId("open", id)
        const dir = dirOf(id)
        const { writer } = yield* Effect.acquireRelease(
          narrow<{ held: Lock.Held; writer: Session.Writer }, StorageError | SessionLocked>(
            attempt("open", dir, async () => {
              const held = (await lockSession(r, id, true))!
              return {
                held,
                writer: new Session.Writer(ctx, dir, id, caps, { removeCheckpointedSegments: r.removeCheckpointedSegments })
              }
            }),
            ["StorageError", "SessionLocked"],
            "open"
          ),
          ({ held, writer }) =>
            Effect.promise(async () => {
              await writer.close().catch(() => undefined)
              await held.release().catch(() => undefined)
            })
        )
        const handle: Persistence.WriteHandle = {
          id,
          load: narrow<Persistence.Loaded, Persistence.LoadError>(
            attempt("load", dir, async () => (await writer.load()).loaded),
            loadTags,
            "load"
          ),
          verify: readHandle(id, caps).verify,
          append: (request) =>
            narrow<Persistence.Appended, StorageError | SequenceConflict>(
              attempt("append", dir, () => writer.append(request)),
              ["StorageError", "SequenceConflict"],
              "append"
            ),
          checkpoint: (document) =>
            narrow<number, StorageError>(attempt("checkpoint", dir, () => writer.checkpoint(document)), [], "checkpoint")
        }
        return handle
      })

    const open = Persistence.makeOpen({ read: openRead, write: openWrite })

    const readerFor = async (id: string, from: number): Promise<Session.Reader> => {
      const dir = dirOf(id)
      if (!(await FileOps.confineSessionDir(ctx, dir))) throw new SessionNotFound({ id })
      const list = await Session.listing(ctx, dir)
      if (list.segments.length === 0 && !list.hasCheckpoint) throw new SessionNotFound({ id })
      return new Session.Reader(ctx, dir, from)
    }

    type ReadError = StorageError | CorruptJournal | SessionNotFound
    const readTags: ReadonlyArray<Known["_tag"]> = ["StorageError", "CorruptJournal", "SessionNotFound"]

    const history = (id: string, historyOptions?: Persistence.HistoryOptions): Stream.Stream<Entry.Entry, ReadError> => {
      if (!isSafeSessionId(id)) return Stream.fail(invalidId("history", id))
      const limit = historyOptions?.limit ?? Number.POSITIVE_INFINITY
      return Stream.unwrap(Effect.map(
        narrow<Session.Reader, ReadError>(attempt("history", dirOf(id), () => readerFor(id, historyOptions?.from ?? 0)), readTags, "history"),
        (reader) => {
          let remaining = limit
          return Stream.paginate(undefined, () =>
            narrow<readonly [Array<Entry.Entry>, Option.Option<undefined>], ReadError>(
              attempt("history", dirOf(id), async () => {
                if (remaining <= 0) return [[], Option.none()] as const
                const page = await reader.page(Math.min(512, remaining))
                remaining -= page.entries.length
                return [page.entries, page.atEnd || remaining <= 0 ? Option.none() : Option.some(undefined)] as const
              }),
              readTags,
              "history"
            ))
        }
      ))
    }

    const follow = (id: string, from: number): Stream.Stream<Entry.Entry, ReadError> => {
      if (!isSafeSessionId(id)) return Stream.fail(invalidId("follow", id))
      return Stream.unwrap(Effect.map(
        narrow<Session.Reader, ReadError>(attempt("follow", dirOf(id), () => readerFor(id, from)), readTags, "follow"),
        (reader) =>
          Stream.paginate(undefined, () =>
            Effect.gen(function*() {
              for (;;) {
                const page = yield* narrow<{ entries: Array<Entry.Entry>; atEnd: boolean }, ReadError>(
                  attempt("follow", dirOf(id), () => reader.page(512)),
                  readTags,
                  "follow"
                )
                if (page.entries.length > 0) return [page.entries, Option.some(undefined)] as const
                yield* Effect.sleep(r.pollMillis)
              }
            }))
      ))
    }

    const list = narrow<ReadonlyArray<Persistence.SessionInfo>, StorageError>(
      attempt("list", ctx.root, async () => {
        await FileOps.checkDir(ctx, ctx.root)
        const out: Array<Persistence.SessionInfo> = []
        for (const id of (await FileOps.listDir(ctx, ctx.root)).sort()) {
          if (!isSafeSessionId(id)) continue
          const dir = dirOf(id)
          const st = await FileOps.call("lstat", dir, () => ctx.fs.lstat(dir)).catch(() => null)
          if (st === null || !st.isDirectory() || st.isSymbolicLink()) continue
          const files = await Session.listing(ctx, dir)
          if (files.segments.length === 0 && !files.hasCheckpoint) continue
          let bytes = 0
          let updatedAt = 0
          for (const n of files.names) {
            const fst = await ctx.fs.lstat(path.join(dir, n)).catch(() => null)
            if (fst === null || !fst.isFile()) continue
            bytes += fst.size
            if (n === Session.CHECKPOINT_FILE || Segment.parseName(n) !== null) updatedAt = Math.max(updatedAt, fst.mtimeMs)
          }
          // A session that does not load cleanly is listed with what is wrong, never
          // as if its checkpoint's claims held.
          const loaded = await Session.load(ctx, dir, id, loadOptions(r, undefined, "load")).then(
            (l) => ({ ok: l } as const),
            (e: unknown) => ({ error: e instanceof Error ? e.message : String(e) } as const)
          )
          const state = "ok" in loaded ? loaded.ok.loaded.state : null
          const stopped = "ok" in loaded ? loaded.ok.loaded.recovery.stopped : null
          out.push({
            id,
            entries: state?.next_sequence ?? 0,
            head: state === null ? Entry.ZERO_HASH : JournalState.head(state),
            lastHash: state === null ? Entry.ZERO_HASH : JournalState.lastHash(state),
            updatedAt: updatedAt === 0 ? null : Math.floor(updatedAt),
            bytes,
            problem: "error" in loaded
              ? `unreadable: ${loaded.error}`
              : stopped === null
              ? null
              : `${stopped.reason}: ${stopped.detail}`
          })
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
        yield* narrow<void, StorageError | SessionLocked | SessionNotFound>(
          attempt("delete", dir, async () => {
            const held = await lockSession(r, id, false)
            if (held === null) throw new SessionNotFound({ id })
            const files = await Session.listing(ctx, dir)
            if (files.segments.length === 0 && !files.hasCheckpoint) {
              await held.release()
              throw new SessionNotFound({ id })
            }
            // Rename first, so the session disappears at once and a crash half way
            // leaves a trash directory (cleared later), never half a session.
            const trash = path.join(ctx.root, `${TRASH_PREFIX}${id}-${held.record.token}`)
            try {
              await FileOps.call("rename", dir, () => ctx.fs.rename(dir, trash))
            } catch (e) {
              await held.release().catch(() => undefined)
              throw e
            }
            await FileOps.syncDir(ctx, ctx.root)
            await removeTree(ctx, trash)
            await FileOps.syncDir(ctx, ctx.root)
          }),
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
  Layer.effect(Persistence.Persistence, make(options))

/**
 * Integrity of one segment file, as `inspect` found it.
 *
 * @since 0.1.0
 */
export type SegmentReport = Session.SegmentReport

/**
 * What `inspect` found: the recovery report of a verify (the whole history
 * replayed from its start, the checkpoint compared field by field with the
 * replay), the checkpoint's status, every segment's integrity, files set aside by
 * earlier repairs, and the lock holder. `ok` is false when anything other than a
 * torn tail is wrong.
 *
 * @since 0.1.0
 */
export interface InspectReport {
  readonly id: string
  readonly ok: boolean
  readonly recovery: Persistence.RecoveryReport
  readonly nextSequence: number
  readonly head: string
  readonly checkpoint:
    | { readonly status: "missing" }
    | { readonly status: "broken"; readonly detail: string }
    | { readonly status: "ok" | "mismatch"; readonly nextSequence: number; readonly detail: string | null }
  readonly segments: ReadonlyArray<SegmentReport>
  readonly setAside: ReadonlyArray<string>
  readonly lock: null | { readonly holder: string; readonly alive: boolean }
}

const inspectAsync = async (r: Resolved, id: string, caps: JournalState.Caps | undefined): Promise<InspectReport> => {
  const ctx = r.ctx
  const dir = path.join(ctx.root, id)
  if (!(await FileOps.confineSessionDir(ctx, dir))) throw new SessionNotFound({ id })
  const files = await Session.listing(ctx, dir)
  if (files.segments.length === 0 && !files.hasCheckpoint) throw new SessionNotFound({ id })
  const verified = await Session.load(ctx, dir, id, loadOptions(r, caps, "verify"))
  const recovery = verified.loaded.recovery
  const stopped = recovery.stopped
  const cp = verified.checkpoint
  const checkpoint: InspectReport["checkpoint"] = !files.hasCheckpoint
    ? { status: "missing" }
    : cp === null
    ? { status: "broken", detail: verified.brokenCheckpoint ?? "checkpoint unusable" }
    : stopped !== null && (stopped.reason === "checkpoint" || stopped.reason === "missing")
    ? { status: "mismatch", nextSequence: cp.next_sequence, detail: stopped.detail }
    : { status: "ok", nextSequence: cp.next_sequence, detail: null }
  const lockInfo = await Lock.inspect(ctx, dir)
  return {
    id,
    ok: stopped === null && checkpoint.status !== "broken",
    recovery,
    nextSequence: verified.loaded.state.next_sequence,
    head: JournalState.head(verified.loaded.state),
    checkpoint,
    segments: verified.segments,
    setAside: files.names.filter((n) => n.includes(".damaged-")).sort(),
    lock: lockInfo === null
      ? null
      : {
        holder: lockInfo.problem ?? (lockInfo.record === null ? "unreadable lock file" : Lock.describe(lockInfo.record)),
        alive: lockInfo.alive
      }
  }
}

/**
 * Checks a session without changing it and without the lock (safe next to a
 * running writer): the load's recovery report, the checkpoint, and every segment's
 * integrity from the oldest entry. For the command line's `verify`: it should fail
 * when `ok` is false.
 *
 * `caps` (default: 4096 each, as in `JournalState.empty`) matter only when the
 * session's checkpoint is missing or broken, because a session's caps live only
 * in its checkpoint (the segment format carries none): a session created with
 * non-default caps must be opened with the same caps when its checkpoint has to
 * be rebuilt. Other caps evict differently, so the replayed head differs, and with
 * `entry_cap: 0` (every `prev_hash` is ZERO_HASH) the links do not verify at all.
 *
 * @since 0.1.0
 */
export const inspect = (
  options: Options,
  id: string,
  caps?: JournalState.Caps | undefined
): Effect.Effect<InspectReport, StorageError | SessionNotFound> =>
  isSafeSessionId(id)
    ? narrow<InspectReport, StorageError | SessionNotFound>(
      attempt("inspect", path.join(path.resolve(options.root), id), () => inspectAsync(resolve(options), id, caps)),
      ["StorageError", "SessionNotFound"],
      "inspect"
    )
    : Effect.fail(invalidId("inspect", id))

/**
 * What `repair` did.
 *
 * @since 0.1.0
 */
export interface RepairReport {
  readonly id: string
  /** The recovery report before the repair (a verify of the whole history). */
  readonly before: Persistence.RecoveryReport
  /** The recovery report after it (`stopped` is null when the session is writable). */
  readonly after: Persistence.RecoveryReport
  /** Files created or renamed to keep the damaged bytes (in the session directory). */
  readonly setAside: ReadonlyArray<string>
  /** Segments cut back to their valid prefix, with the new length. */
  readonly truncated: ReadonlyArray<{ readonly segment: string; readonly length: number }>
  /** Whether the checkpoint was rebuilt from the records (the old one, if any, is set aside). */
  readonly checkpointRebuilt: boolean
  /** Sequences that the session held or claimed and no longer holds, if any. */
  readonly lost: null | { readonly from: number; readonly to: number }
  /** The exported head the session claimed before the repair. */
  readonly previousHead: string
  /** The `recovery` entry appended to the chain, saying what was done (null when nothing was). */
  readonly entry: Entry.Entry | null
  /** Sequence the next entry will get. */
  readonly nextSequence: number
}

/** Kind of the entry every repair appends. */
export const RECOVERY_KIND = "recovery"

const repairAsync = async (r: Resolved, id: string, caps: JournalState.Caps | undefined): Promise<RepairReport> => {
  const ctx = r.ctx
  const dir = path.join(ctx.root, id)
  const held = await lockSession(r, id, false)
  if (held === null) throw new SessionNotFound({ id })
  try {
    const setAside: Array<string> = []
    const truncated: Array<{ segment: string; length: number }> = []
    const before = await Session.load(ctx, dir, id, loadOptions(r, caps, "verify"))
    const claimed = await Session.load(ctx, dir, id, loadOptions(r, caps, "load"))
    const previousHead = JournalState.head(claimed.loaded.state)
    const claimedNext = Math.max(claimed.loaded.state.next_sequence, before.checkpoint?.next_sequence ?? 0)
    // The records carry their own proof; the checkpoint is only a claim about them.
    // So the cut is decided by the records alone, and the checkpoint is then
    // checked against what remains.
    // The caps live only in the checkpoint, which may be the forged part: the records
    // are replayed under every candidate (the checkpoint's, the given ones, the
    // defaults, entry_cap 0) and the caps under which they verify furthest are used.
    let checkpointCaps = true
    const recordsOnly = (): Session.LoadOptions => ({ ...loadOptions(r, caps, "verify"), ignoreCheckpoint: true, checkpointCaps })
    let records = await Session.load(ctx, dir, id, recordsOnly())
    for (const candidate of [caps, {}, { entry_cap: 0 }]) {
      if (records.loaded.recovery.stopped === null) break
      const tried = await Session.load(ctx, dir, id, { ...loadOptions(r, candidate, "verify"), ignoreCheckpoint: true, checkpointCaps: false })
      if (tried.storedNext > records.storedNext) {
        records = tried
        caps = candidate
        checkpointCaps = false
      }
    }
    let fullHistory = (records.listing.segments[0]?.base ?? 0) === 0
    // A damaged line that is no entry (a garbled meta or open record, inserted
    // garbage) is set aside alone when the records after it still continue the
    // chain: the entries that verify stay where they are.
    for (let round = 0; fullHistory && round < 64; round++) {
      const stop = records.loaded.recovery.stopped
      if (stop === null || stop.reason !== "corruption") break
      const kept = await Session.dropLineIfChainContinues(ctx, dir, stop.segment, stop.offset, async () => {
        const again = await Session.load(ctx, dir, id, recordsOnly())
        return again.storedNext > records.storedNext || again.loaded.recovery.stopped === null
      })
      if (kept === null) break
      setAside.push(kept)
      records = await Session.load(ctx, dir, id, recordsOnly())
      fullHistory = (records.listing.segments[0]?.base ?? 0) === 0
    }
    const problem = fullHistory
      ? records.loaded.recovery.stopped
      : claimed.loaded.recovery.stopped !== null && claimed.loaded.recovery.stopped.reason !== "missing" &&
          claimed.loaded.recovery.stopped.reason !== "checkpoint"
      ? claimed.loaded.recovery.stopped
      : null
    const torn = (fullHistory ? records : claimed).loaded.recovery.tornTail
    const cut = problem ?? (torn === null ? null : { segment: torn.segment, offset: torn.offset, sequence: null })
    let lostFrom: number | null = null
    let seenNext = records.storedNext
    for (const s of records.segments) if (s.lastSequence !== null) seenNext = Math.max(seenNext, s.lastSequence + 1)
    if (cut !== null) {
      const name = path.basename(cut.segment)
      const base = Segment.parseName(name)
      if (base !== null && cut.segment === path.join(dir, name)) {
        if (problem !== null) lostFrom = problem.sequence ?? records.storedNext
        // How far the bytes set aside reached, for the report of what is lost.
        for (const s of records.listing.segments) {
          if (s.base < base) continue
          const highest = await Session.highestSequence(ctx, path.join(dir, s.name), s.base === base ? cut.offset : 0)
          if (highest !== null) seenNext = Math.max(seenNext, highest + 1)
        }
        if (cut.offset === 0) setAside.push(await Session.moveAside(ctx, dir, name))
        else {
          setAside.push(await FileOps.copyAside(ctx, dir, name, cut.offset))
          const fh = await FileOps.openWrite(ctx, cut.segment)
          try {
            await FileOps.call("ftruncate", cut.segment, () => fh.truncate(cut.offset))
            await FileOps.call("fdatasync", cut.segment, () => fh.datasync())
          } finally {
            await FileOps.close(fh)
          }
          truncated.push({ segment: name, length: cut.offset })
        }
        // Everything after the damaged point is past the valid prefix: keep it aside.
        for (const s of records.listing.segments) {
          if (s.base > base) setAside.push(await Session.moveAside(ctx, dir, s.name))
        }
      }
    }
    let checkpointRebuilt = false
    if (fullHistory) {
      const remaining = await Session.load(ctx, dir, id, recordsOnly())
      const check = await Session.load(ctx, dir, id, loadOptions(r, caps, "verify"))
      const state = remaining.loaded.state
      if (
        remaining.loaded.recovery.stopped === null && check.listing.hasCheckpoint &&
        (check.loaded.recovery.stopped !== null || check.checkpoint === null)
      ) {
        // The records verify and the checkpoint disagrees with them (or is broken):
        // the checkpoint is what is wrong. Keep it aside, write the truth. (A missing
        // checkpoint is no damage: every load rebuilds it from the records.)
        setAside.push(await Session.moveAside(ctx, dir, Session.CHECKPOINT_FILE))
        await Session.writeCheckpointFile(ctx, dir, state)
        checkpointRebuilt = true
        if (claimedNext > state.next_sequence) lostFrom ??= state.next_sequence
      }
    }
    const lostTo = Math.max(claimedNext, seenNext) - 1
    const lost = lostFrom !== null && lostTo >= lostFrom ? { from: lostFrom, to: lostTo } : null
    let entry: Entry.Entry | null = null
    if (setAside.length > 0 || truncated.length > 0 || checkpointRebuilt) {
      // The chain tells its own history: what was set aside or lost, and the head
      // the session claimed before.
      const writer = new Session.Writer(ctx, dir, id, caps, { removeCheckpointedSegments: r.removeCheckpointedSegments })
      try {
        const loaded = (await writer.load()).loaded
        if (loaded.recovery.stopped === null) {
          const problemText = problem === null
            ? torn !== null ? "torn tail" : "checkpoint disagrees with the stored records"
            : `${problem.reason}: ${problem.detail}`
          entry = JournalState.nextOther(loaded.state, Math.floor(Date.now() / 1000), RECOVERY_KIND, {
            problem: problemText,
            set_aside: setAside,
            truncated: truncated.map((t) => ({ segment: t.segment, length: t.length })),
            checkpoint_rebuilt: checkpointRebuilt,
            lost,
            previous_head: previousHead,
            previous_next_sequence: claimedNext
          })
          await writer.append({
            after: Persistence.tipOf(loaded.state),
            entries: [entry],
            head: JournalState.head(JournalState.fold(loaded.state, entry))
          })
        }
      } finally {
        await writer.close()
      }
    }
    const after = await Session.load(ctx, dir, id, loadOptions(r, caps, "load"))
    return {
      id,
      before: before.loaded.recovery,
      after: after.loaded.recovery,
      setAside,
      truncated,
      checkpointRebuilt,
      lost,
      previousHead,
      entry,
      nextSequence: after.loaded.state.next_sequence
    }
  } finally {
    await held.release().catch(() => undefined)
  }
}

/**
 * Makes a damaged session writable again without deleting a byte: takes the
 * session's lock (fails with `SessionLocked` while a writer runs), copies the bytes
 * from the point where the valid prefix ends into `<segment>.damaged-<offset>` and
 * cuts the segment back to that prefix, renames every later segment and a broken
 * checkpoint to `<name>.damaged-0`, and reloads. Entries past the damage are not
 * lost (they stay in the side files) but are no longer part of the session. For
 * the command line's `repair`.
 *
 * `caps` (default: 4096 each) are used when the checkpoint is missing or broken
 * and the session is replayed from its segments: a session created with
 * non-default caps must be opened with the same caps when its checkpoint has to
 * be rebuilt. With the wrong caps an `entry_cap: 0` session's links do not verify,
 * and `repair` would set valid entries aside as damage.
 *
 * @since 0.1.0
 */
export const repair = (
  options: Options,
  id: string,
  caps?: JournalState.Caps | undefined
): Effect.Effect<RepairReport, StorageError | SessionLocked | SessionNotFound | CorruptJournal> =>
  isSafeSessionId(id)
    ? narrow<RepairReport, StorageError | SessionLocked | SessionNotFound | CorruptJournal>(
      attempt("repair", path.join(path.resolve(options.root), id), () => repairAsync(resolve(options), id, caps)),
      ["StorageError", "SessionLocked", "SessionNotFound", "CorruptJournal"],
      "repair"
    )
    : Effect.fail(invalidId("repair", id))
