/**
 * Custody of a whole transcripts tree (`~/.claude/projects`): `archive` brings
 * every transcript of every project (or of one) into its journal session, main
 * transcripts before their sub-agents so a sub-agent's metadata can name the
 * parent's entry that spawned it; records transcripts that disappeared; reports
 * symbolic links and per-file failures without stopping. `follow` repeats that
 * for files whose size or identity changed, until interrupted. `restore` gives
 * back the current version of a transcript from its journal, byte for byte.
 *
 * @since 0.1.0
 */
import { Entry, JournalState, Persistence, SessionJournal, StorageError, StorageReason } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as os from "node:os"
import * as path from "node:path"
import type { SourceError } from "./Errors.ts"
import * as Source from "./internal/source.ts"
import * as Planner from "./Planner.ts"
import * as ProjectDir from "./ProjectDir.ts"
import * as SessionIds from "./SessionIds.ts"
import * as Sync from "./Sync.ts"
import * as Transcript from "./Transcript.ts"

/**
 * Options of a run.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The projects directory (default `defaultSource()`). */
  readonly source?: string | undefined
  /** Only the project directory of this working directory (encoded, never decoded). */
  readonly project?: string | undefined
  /** Read bounds (default `Sync.DEFAULT_LIMITS`). */
  readonly limits?: Partial<Sync.Limits> | undefined
}

/**
 * A path under the source that was not read: a symbolic link, or unreadable.
 *
 * @since 0.1.0
 */
export interface Refused {
  readonly path: string
  readonly reason: string
}

/**
 * The outcome of a run: one report per transcript that was looked at (and per
 * disappearance recorded), and the paths refused.
 *
 * @since 0.1.0
 */
export interface Report {
  readonly source: string
  readonly files: ReadonlyArray<Sync.FileReport>
  readonly refused: ReadonlyArray<Refused>
}

/**
 * `$CLAUDE_CONFIG_DIR/projects` when the variable is set, else `~/.claude/projects`.
 *
 * @since 0.1.0
 */
export const defaultSource = (env: Record<string, string | undefined> = process.env): string => {
  const dir = env["CLAUDE_CONFIG_DIR"]
  return dir !== undefined && dir.length > 0
    ? path.join(dir, "projects")
    : path.join(os.homedir(), ".claude", "projects")
}

/**
 * What `follow` remembers between passes: each file's stamp when it was last
 * brought in completely, where each recently read transcript was read to, the
 * spawns of each main transcript, sub-agents still waiting for their parent's
 * entry, sessions already recorded as missing, and the transcripts last seen.
 *
 * @since 0.1.0
 */
export class Cache {
  /** Each file's stamp when last brought in, and until when a failed file is left alone (ms since the epoch). */
  readonly stamps = new Map<string, { readonly stamp: Source.Stamp; readonly retryAt: number | null }>()
  /**
   * Where each recently read transcript was read to, by path, so that a grown file
   * is read from there on (at most 256, the least recently used forgotten).
   *
   * @since 0.1.0
   */
  readonly resumes = new Map<string, Sync.Resume>()
  /** The spawns of each main transcript, by its session id. */
  readonly spawns = new Map<string, Sync.Spawns>()
  /** Sub-agent sessions whose parent entry is not known yet. */
  readonly unlinked = new Set<string>()
  /** Sessions already recorded as missing. */
  readonly missing = new Set<string>()
  /**
   * The transcripts of the source as last seen, by path; null before the first pass.
   *
   * @since 0.1.0
   */
  known: Map<string, SessionIds.Transcript> | null = null
}

// How long a file that failed is left alone while it does not change.
const RETRY_MILLIS = 5_000

// Resumes kept (each holds a transcript's pairing and sub-agent state).
const MAX_RESUMES = 256

const sameStamp = (a: Source.Stamp | undefined, b: Source.Stamp | null) =>
  a !== undefined && b !== null && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ino === b.ino && a.dev === b.dev

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

const under = (p: string, entry: string) => p === entry || p.startsWith(entry + path.sep)

interface Pass {
  readonly report: Report
  /** Files that failed, to be looked at again after a while. */
  readonly failed: ReadonlyArray<string>
}

/**
 * One pass: over the whole source (`entries` null) or over some entries of it
 * (each a file, or a directory and what is under it, by its names from the source).
 */
const pass = (
  options: Options | undefined,
  cache: Cache | undefined,
  entries: ReadonlyArray<ReadonlyArray<string>> | null,
  beforeList?: (dir: string) => Effect.Effect<void>
): Effect.Effect<Pass, SourceError, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const limits: Sync.Limits = { ...Sync.DEFAULT_LIMITS, ...options?.limits }
    const root = yield* Source.checkRoot(options?.source ?? defaultSource())
    const project = options?.project
    const wanted = (name: string) => project === undefined || ProjectDir.matches(name, project)
    const refused: Array<Refused> = []
    const found = new Map<string, SessionIds.Transcript>()
    const stamps = new Map<string, Source.Stamp>()
    const take = (scanned: Source.Scanned): Set<string> => {
      refused.push(...scanned.refused)
      const here = new Set<string>()
      for (const f of scanned.files) {
        const t = SessionIds.classify(f.project, f.relative)
        if (t === null) continue
        found.set(f.path, t)
        stamps.set(f.path, f.stamp)
        here.add(f.path)
      }
      return here
    }
    const previous = cache?.known ?? null
    const known = entries === null || previous === null ? new Map<string, SessionIds.Transcript>() : previous
    let removed = previous === null
    if (entries === null || previous === null) {
      take(yield* Source.scan(root, wanted, [], beforeList))
      for (const p of previous?.keys() ?? []) if (!found.has(p)) removed = true
      for (const [p, t] of found) known.set(p, t)
    } else {
      for (const parts of entries) {
        const now = take(yield* Source.scan(root, wanted, parts, beforeList))
        const entry = path.join(root, ...parts)
        for (const p of Array.from(known.keys())) {
          if (under(p, entry) && !now.has(p)) {
            known.delete(p)
            removed = true
          }
        }
        for (const p of now) known.set(p, found.get(p)!)
      }
    }
    if (cache !== undefined) cache.known = known
    // The sessions journaled before this pass writes any: one whose transcript is
    // gone is among them (a session this pass creates has its transcript), and
    // listing them now does not read back what the pass writes.
    const sessions = removed ? yield* Effect.orElseSucceed(journal.list, () => []) : []
    const mains: Array<{ t: SessionIds.Transcript; file: string }> = []
    const subs: Array<{ t: Extract<SessionIds.Transcript, { _tag: "SubAgent" }>; file: string }> = []
    for (const [file, t] of found) {
      if (t._tag === "Main") mains.push({ t, file })
      else subs.push({ t, file })
    }
    mains.sort((a, b) => (a.file < b.file ? -1 : 1))
    subs.sort((a, b) => (a.file < b.file ? -1 : 1))
    const files: Array<Sync.FileReport> = []
    const failed: Array<string> = []
    const seen = new Set<string>()
    const spawnsOf = new Map<string, Sync.Spawns>()
    const changedParents = new Set<string>()

    const one = (t: SessionIds.Transcript, file: string, parent: Sync.Spawns | undefined, force: boolean) =>
      Effect.gen(function*() {
        seen.add(SessionIds.sessionId(t))
        // As the walk saw it (a forced sub-agent the walk did not visit is stamped here).
        const walked = stamps.get(file)
        const before = cache === undefined
          ? null
          : walked ?? (yield* Effect.orElseSucceed(Source.stamp(Sync.locationOf(root, t)), () => null))
        const known = cache?.stamps.get(file)
        const now = yield* Clock.currentTimeMillis
        if (
          !force && known !== undefined && sameStamp(known.stamp, before) &&
          (known.retryAt === null || known.retryAt > now)
        ) return undefined
        const resume = cache?.resumes.get(file)
        const result = yield* Sync.syncFile(t, root, limits, parent, resume)
        if (result.report.status === "failed") failed.push(file)
        if (cache !== undefined) {
          // A file is looked at again when it changes; one that failed also after a while
          // (a lock held by another writer goes away without the file changing).
          if (before === null) cache.stamps.delete(file)
          else {
            const retryAt = result.report.status === "failed" ? (yield* Clock.currentTimeMillis) + RETRY_MILLIS : null
            cache.stamps.set(file, { stamp: before, retryAt })
          }
          cache.missing.delete(SessionIds.sessionId(t))
          cache.resumes.delete(file)
          if (result.resume !== undefined) {
            cache.resumes.set(file, result.resume)
            if (cache.resumes.size > MAX_RESUMES) cache.resumes.delete(cache.resumes.keys().next().value!)
          }
        }
        if (cache === undefined || result.report.status !== "unchanged") files.push(result.report)
        return result
      })

    for (const { t, file } of mains) {
      const result = yield* one(t, file, undefined, false)
      const key = SessionIds.sessionId(t)
      if (result?.spawns !== undefined) {
        spawnsOf.set(key, result.spawns)
        cache?.spawns.set(key, result.spawns)
        changedParents.add(key)
      }
    }
    // A sub-agent still waiting for its parent's entry is looked at again when the parent changed.
    if (entries !== null && cache !== undefined) {
      for (const [file, t] of known) {
        if (
          t._tag === "SubAgent" && !found.has(file) && cache.unlinked.has(SessionIds.sessionId(t)) &&
          changedParents.has(SessionIds.parentId(t))
        ) {
          subs.push({ t, file })
        }
      }
    }
    for (const { t, file } of subs) {
      const parentKey = SessionIds.parentId(t)
      const parent = spawnsOf.get(parentKey) ?? cache?.spawns.get(parentKey)
      const id = SessionIds.sessionId(t)
      const force = cache !== undefined && cache.unlinked.has(id) && changedParents.has(parentKey)
      const result = yield* one(t, file, parent, force)
      if (result !== undefined && cache !== undefined) {
        if (result.linked) cache.unlinked.delete(id)
        else cache.unlinked.add(id)
      }
    }

    // Sessions of this source whose transcript is gone. A follow pass looks only
    // when a transcript it knew is no longer there.
    for (const info of sessions) {
      if (!info.id.startsWith(SessionIds.PREFIX) || seen.has(info.id) || cache?.missing.has(info.id) === true) continue
      const state = yield* Effect.option(journal.state(info.id))
      if (state._tag === "None") continue
      const data = state.value.meta?.data
      if (!isRecord(data) || typeof data["source"] !== "string" || typeof data["project"] !== "string") continue
      const source = data["source"]
      const loc = Source.locate(root, source)
      if (loc === null || !wanted(data["project"])) continue
      // Present, or refused (a link now stands there: reported by the walk, not taken for a deletion).
      const now = yield* Effect.result(Source.stamp(loc))
      if (now._tag === "Failure" || now.success !== null) continue
      const retained = yield* Effect.option(retainedEntries(journal, info.id, state.value))
      if (retained._tag === "None") continue
      const last = retained.value[retained.value.length - 1]
      if (last !== undefined && last.kind === Planner.MISSING_KIND) {
        cache?.missing.add(info.id)
        continue
      }
      const recorded = yield* Effect.result(
        journal.append(info.id, Planner.MISSING_KIND, { path: source, journaled_lines: countLines(retained.value) })
      )
      files.push({
        path: source,
        session: info.id,
        status: recorded._tag === "Success" ? "missing" : "failed",
        lines: 0,
        tools: 0,
        pendingBytes: 0,
        reason: recorded._tag === "Success" ? undefined : recorded.failure.message
      })
      if (recorded._tag === "Success") cache?.missing.add(info.id)
    }
    return { report: { source: root, files, refused }, failed }
  })

/**
 * One pass over the source. Fails only when the source itself cannot be used;
 * with a `cache` (as `follow` passes), files unchanged since their last complete
 * pass are skipped and not reported, and a grown file is read from where the
 * last pass left it.
 *
 * @since 0.1.0
 */
export const archive = (
  options?: Options,
  cache?: Cache
): Effect.Effect<Report, SourceError, SessionJournal.SessionJournal> =>
  Effect.map(pass(options, cache, null), (p) => p.report).pipe(Effect.withSpan("ClaudeCode.archive"))

// The highest line number among the retained entries (a hint for the reader only).
// The retained entries of a session's state (the newest `entry_cap`): the state's
// window when it holds them all, otherwise read from storage (a state keeps only the
// newest entries within its byte budget in memory).
const retainedEntries = (
  journal: SessionJournal.SessionJournal["Service"],
  id: string,
  state: JournalState.JournalState
) => {
  const count = JournalState.entryCount(state)
  const inMemory = JournalState.entries(state)
  return inMemory.length === count
    ? Effect.succeed(inMemory)
    : Stream.runCollect(journal.entries(id, { from: state.next_sequence - count, limit: count }))
}

const countLines = (entries: ReadonlyArray<Entry.Entry>): number => {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!
    if (e.kind === Planner.LINE_KIND && isRecord(e.payload) && typeof e.payload["n"] === "number") return e.payload["n"]
  }
  return 0
}

// Changed entries noted between passes before a full pass is cheaper than keeping count.
const MAX_PENDING = 4_096

// The longest wait between full passes when the tree cannot be watched and nothing changes.
const MAX_POLL_MILLIS = 5_000

/**
 * Archives, then follows the tree: every directory of it is watched
 * (`fs.watch`, one directory each, started before the walk lists it), and every `interval` (default 200 ms) the
 * entries that changed are looked at again (a file: brought in when its size,
 * modification time or inode changed, reading only what was appended when its
 * remembered prefix still holds; a new directory: walked), each pass's report
 * (only files that changed) handed to `onPass`, until interrupted. An idle
 * follow does no file-system work between full passes, which walk the whole tree
 * every `rescan` (default 1 minute) in case an event was lost. Where a directory
 * cannot be watched (no inotify watches left, say), it falls back to full passes
 * every `interval`, backing off to every 5 s while nothing changes. A new
 * complete line is journaled within `interval` plus one pass (when watching).
 * An `interval` or `rescan` that is no duration, or a negative one, fails with a
 * `StorageError` whose reason is `InvalidOption` naming it.
 *
 * @since 0.1.0
 */
export const follow = <E, R>(
  options: Options & {
    readonly interval?: Duration.Input | undefined
    /** How often the whole tree is walked in case an event was lost (default 1 minute). */
    readonly rescan?: Duration.Input | undefined
  },
  onPass: (report: Report) => Effect.Effect<void, E, R>
): Effect.Effect<never, SourceError | StorageError | E, SessionJournal.SessionJournal | R> =>
  Effect.scoped(Effect.gen(function*() {
    const cache = new Cache()
    const interval = Duration.toMillis(yield* Persistence.decodeInterval("interval", options.interval, "200 millis"))
    const rescan = Duration.toMillis(yield* Persistence.decodeInterval("rescan", options.rescan, "1 minute"))
    const scope = yield* Effect.scope
    const root = path.resolve(options.source ?? defaultSource())
    // What the watches reported since the last pass: paths of changed entries.
    const pending = new Set<string>()
    let overflow = false
    let unwatched = false
    const note = (p: string) => {
      if (pending.size >= MAX_PENDING) overflow = true
      else pending.add(p)
    }
    const watches = new Map<string, Scope.Closeable>()
    // Each directory is watched before the walk lists it, so nothing written after the listing goes unreported.
    let walked = new Set<string>()
    const watchDir = (dir: string) =>
      Effect.gen(function*() {
        walked.add(dir)
        if (watches.has(dir)) return
        const s = yield* Scope.fork(scope)
        const ok = yield* Source.watch(dir, (name) => note(name === null ? dir : path.join(dir, name)), () => {
          unwatched = true
        }).pipe(Scope.provide(s), Effect.as(true), Effect.orElseSucceed(() => false))
        if (ok) watches.set(dir, s)
        else {
          unwatched = true
          yield* Scope.close(s, Exit.void)
        }
      })
    // After a full walk: the watches of directories no longer there are closed.
    const unwatchGone = Effect.gen(function*() {
      for (const [dir, s] of watches) {
        if (walked.has(dir)) continue
        watches.delete(dir)
        yield* Scope.close(s, Exit.void)
      }
    })
    // Failed files are looked at again after a while, though no event comes.
    const retry = new Map<string, number>()
    let reportedRefused = new Set<string>()
    let lastFull = -Infinity
    let pollDelay = interval
    for (;;) {
      const now = yield* Clock.currentTimeMillis
      for (const [file, at] of retry) {
        if (at > now) continue
        retry.delete(file)
        note(file)
      }
      const full = overflow || pending.has(root) || now - lastFull >= (unwatched ? pollDelay : rescan)
      if (!full && pending.size === 0) {
        yield* Effect.sleep(interval)
        continue
      }
      // The entries to look at: none below another one of them.
      const entries: Array<ReadonlyArray<string>> = []
      for (const p of pending) {
        const loc = Source.locate(root, p)
        if (loc === null) continue
        let covered = false
        for (let up = path.dirname(p); up !== root && up.length > root.length; up = path.dirname(up)) {
          if (pending.has(up)) covered = true
        }
        if (!covered) entries.push(loc.parts)
      }
      pending.clear()
      overflow = false
      if (full) walked = new Set()
      const result = yield* pass(options, cache, full ? null : entries, watchDir)
      if (full) {
        // The next full walk is `rescan` after this one ended, however long it took.
        lastFull = yield* Clock.currentTimeMillis
        yield* unwatchGone
      }
      const ended = yield* Clock.currentTimeMillis
      for (const file of result.failed) retry.set(file, ended + RETRY_MILLIS)
      const { report } = result
      // A refused path is reported when it first shows up, not on every pass.
      const fresh = report.refused.filter((r) => !reportedRefused.has(r.path))
      reportedRefused = full
        ? new Set(report.refused.map((r) => r.path))
        : new Set([...reportedRefused, ...fresh.map((r) => r.path)])
      if (report.files.length > 0 || fresh.length > 0) yield* onPass({ ...report, refused: fresh })
      pollDelay = report.files.length > 0 ? interval : Math.min(pollDelay * 2, MAX_POLL_MILLIS)
      yield* Effect.sleep(interval)
    }
  }))

/**
 * The current version of a transcript, byte for byte, from its journal session:
 * every line after applying each divergence, each followed by its newline. A
 * version holding a line journaled as an oversized-line marker cannot be given
 * back: a `StorageError` (operation `restore`) names the line.
 *
 * @since 0.1.0
 */
export const restore = (
  id: string
): Effect.Effect<Uint8Array, SessionJournal.ReadError, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    yield* Effect.fromResult(Entry.validateSessionId(id))
    const journal = yield* SessionJournal.SessionJournal
    const restorer = new Planner.Restorer()
    yield* journal.entries(id).pipe(Stream.runForEachArray((chunk) =>
      Effect.sync(() => {
        for (const e of chunk) restorer.push(e)
      })
    ))
    const lost = restorer.lines.findIndex(Transcript.isOversized)
    if (lost >= 0) {
      return yield* new StorageError({
        operation: "restore",
        reason: new StorageReason.NotKept({ what: `line ${lost + 1}` })
      })
    }
    return Planner.bytesOf(restorer.lines)
  }).pipe(Effect.withSpan("ClaudeCode.restore"))
