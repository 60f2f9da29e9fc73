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
import { Entry, JournalState, SessionJournal } from "@session-journal/core"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as os from "node:os"
import * as path from "node:path"
import type { SourceError } from "./Errors.ts"
import * as Source from "./internal/source.ts"
import * as Planner from "./Planner.ts"
import * as ProjectDir from "./ProjectDir.ts"
import * as SessionIds from "./SessionIds.ts"
import * as Sync from "./Sync.ts"

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
  return dir !== undefined && dir.length > 0 ? path.join(dir, "projects") : path.join(os.homedir(), ".claude", "projects")
}

/**
 * What `follow` remembers between passes: each file's stamp when it was last
 * brought in completely, the spawns of each main transcript, sub-agents still
 * waiting for their parent's entry, and sessions already recorded as missing.
 *
 * @since 0.1.0
 */
export class Cache {
  /** Each file's stamp when last brought in, and until when a failed file is left alone (ms since the epoch). */
  readonly stamps = new Map<string, { readonly stamp: Source.Stamp; readonly retryAt: number | null }>()
  /** The spawns of each main transcript, by its session id. */
  readonly spawns = new Map<string, Sync.Spawns>()
  /** Sub-agent sessions whose parent entry is not known yet. */
  readonly unlinked = new Set<string>()
  /** Sessions already recorded as missing. */
  readonly missing = new Set<string>()
  /** Transcript paths of the previous pass; null before the first. */
  seen: ReadonlySet<string> | null = null
}

// How long a file that failed is left alone while it does not change.
const RETRY_MILLIS = 5_000

const sameStamp = (a: Source.Stamp | undefined, b: Source.Stamp | null) =>
  a !== undefined && b !== null && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ino === b.ino

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * One pass over the source. Fails only when the source itself cannot be used;
 * with a `cache` (as `follow` passes), files unchanged since their last complete
 * pass are skipped and not reported.
 *
 * @since 0.1.0
 */
export const archive = (
  options?: Options,
  cache?: Cache
): Effect.Effect<Report, SourceError, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const limits: Sync.Limits = { ...Sync.DEFAULT_LIMITS, ...options?.limits }
    const root = yield* Source.checkRoot(options?.source ?? defaultSource())
    const project = options?.project
    const wanted = (name: string) => project === undefined || ProjectDir.matches(name, project)
    const scanned = yield* Source.scan(root, wanted)
    const refused: Array<Refused> = [...scanned.refused]
    const mains: Array<{ t: SessionIds.Transcript; file: string }> = []
    const subs: Array<{ t: Extract<SessionIds.Transcript, { _tag: "SubAgent" }>; file: string }> = []
    for (const f of scanned.files) {
      const t = SessionIds.classify(f.project, f.relative)
      if (t === null) continue
      if (t._tag === "Main") mains.push({ t, file: f.path })
      else subs.push({ t, file: f.path })
    }
    const files: Array<Sync.FileReport> = []
    const seen = new Set<string>()
    const spawnsOf = new Map<string, Sync.Spawns>()
    let changedParents = new Set<string>()

    const one = (t: SessionIds.Transcript, file: string, parent: Sync.Spawns | undefined, force: boolean) =>
      Effect.gen(function*() {
        seen.add(SessionIds.sessionId(t))
        const before = cache === undefined ? null : yield* Effect.orElseSucceed(Source.stamp(file), () => null)
        const known = cache?.stamps.get(file)
        if (
          !force && known !== undefined && sameStamp(known.stamp, before) &&
          (known.retryAt === null || known.retryAt > Date.now())
        ) return undefined
        const result = yield* Sync.syncFile(t, file, limits, parent)
        if (cache !== undefined) {
          // A file is looked at again when it changes; one that failed also after a while
          // (a lock held by another writer goes away without the file changing).
          if (before === null) cache.stamps.delete(file)
          else {
            const retryAt = result.report.status === "failed" ? Date.now() + RETRY_MILLIS : null
            cache.stamps.set(file, { stamp: before, retryAt })
          }
          cache.missing.delete(SessionIds.sessionId(t))
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
    changedParents = new Set()

    // Sessions of this source whose transcript is gone. A follow pass looks only
    // when a transcript of the previous pass is no longer there.
    const paths = new Set([...mains, ...subs].map((x) => x.file))
    const previous = cache?.seen ?? null
    if (cache !== undefined) cache.seen = paths
    const vanished = previous === null || Array.from(previous).some((p) => !paths.has(p))
    const sessions = vanished ? yield* Effect.orElseSucceed(journal.list, () => []) : []
    for (const info of sessions) {
      if (!info.id.startsWith(SessionIds.PREFIX) || seen.has(info.id) || cache?.missing.has(info.id) === true) continue
      const state = yield* Effect.option(journal.state(info.id))
      if (state._tag === "None") continue
      const data = state.value.meta?.data
      if (!isRecord(data) || typeof data["source"] !== "string" || typeof data["project"] !== "string") continue
      const source = data["source"]
      if (!source.startsWith(root + path.sep) || !wanted(data["project"])) continue
      // Present, or refused (a link now stands there: reported by the walk, not taken for a deletion).
      const now = yield* Effect.result(Source.stamp(source))
      if (now._tag === "Failure" || now.success !== null) continue
      const retained = JournalState.entries(state.value)
      const last = retained[retained.length - 1]
      if (last !== undefined && last.kind === Planner.MISSING_KIND) {
        cache?.missing.add(info.id)
        continue
      }
      const recorded = yield* Effect.result(
        journal.append(info.id, Planner.MISSING_KIND, { path: source, journaled_lines: countLines(retained) })
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
    return { source: root, files, refused }
  }).pipe(Effect.withSpan("ClaudeCode.archive"))

// The highest line number among the retained entries (a hint for the reader only).
const countLines = (entries: ReadonlyArray<Entry.Entry>): number => {
  for (let i = entries.length - 1; i >= 0; i--) {
    const e = entries[i]!
    if (e.kind === Planner.LINE_KIND && isRecord(e.payload) && typeof e.payload["n"] === "number") return e.payload["n"]
  }
  return 0
}

/**
 * Archives, then keeps archiving every `interval` (default 200 ms) what changed,
 * handing each pass's report (only files that changed) to `onPass`, until
 * interrupted. A new complete line is journaled within `interval` plus one pass.
 *
 * @since 0.1.0
 */
export const follow = <E, R>(
  options: Options & { readonly interval?: Duration.Input | undefined },
  onPass: (report: Report) => Effect.Effect<void, E, R>
): Effect.Effect<never, SourceError | E, SessionJournal.SessionJournal | R> =>
  Effect.gen(function*() {
    const cache = new Cache()
    const interval = options.interval ?? Duration.millis(200)
    let reportedRefused = new Set<string>()
    for (;;) {
      const report = yield* archive(options, cache)
      // A refused path is reported when it first shows up, not on every pass.
      const fresh = report.refused.filter((r) => !reportedRefused.has(r.path))
      reportedRefused = new Set(report.refused.map((r) => r.path))
      if (report.files.length > 0 || fresh.length > 0) yield* onPass({ ...report, refused: fresh })
      yield* Effect.sleep(interval)
    }
  })

/**
 * The current version of a transcript, byte for byte, from its journal session:
 * every line after applying each divergence, each followed by its newline.
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
    yield* journal.entries(id).pipe(Stream.runForEachArray((chunk) => Effect.sync(() => {
      for (const e of chunk) restorer.push(e)
    })))
    return Planner.bytesOf(restorer.lines)
  }).pipe(Effect.withSpan("ClaudeCode.restore"))
