/**
 * Custody of Codex rollout files (docs/codex-PROTOCOL.md (e)): every
 * `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl` brought
 * into its own journal session (`Hook.rolloutSessionId` of its thread id), byte
 * for byte, as `@session-journal/claude-code` keeps Claude Code transcripts:
 * one `claude-code.line` entry per complete line (its text, or base64 when it is
 * not UTF-8; a line past the bound as size and SHA-256 only), a rewritten file
 * recorded as a divergence before its new lines, a vanished one as missing
 * (Codex's `codex archive` moves a rollout away), and as reappeared when it
 * comes back. The
 * line journaling is claude-code's own (`Planner`, `Sync.split`, its checked
 * walk of the source), so `Archive.restore` (`codex export`) gives the file back.
 *
 * The rollout's session and the hooked session of the same Codex session name
 * each other: this session's metadata has `hooked_session` (a sub-agent's
 * rollout: the parent's, whose `session_id` its hooks carry), the hooked
 * session's has `custody_session`.
 *
 * `follow` reads only what was appended to a file it read before (Codex only
 * appends, docs/codex-PROTOCOL.md (e)), after checking that the last line it read is still
 * there and the session's head is still the one it wrote.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import type { SourceError } from "@session-journal/claude-code"
import * as Source from "@session-journal/claude-code/FileSource"
import * as Planner from "@session-journal/claude-code/Planner"
import * as Sync from "@session-journal/claude-code/Sync"
import * as Transcript from "@session-journal/claude-code/Transcript"
import { messageOf, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import * as os from "node:os"
import * as path from "node:path"
import * as Hook from "./Hook.ts"

/**
 * The rollouts directory: `$CODEX_HOME/sessions`, else `~/.codex/sessions`.
 *
 * @since 0.1.0
 */
export const defaultSource = (env: Readonly<Record<string, string | undefined>> = process.env): string => {
  const home = env["CODEX_HOME"]
  return home !== undefined && home !== ""
    ? path.join(home, "sessions")
    : path.join(os.homedir(), ".codex", "sessions")
}

const ROLLOUT = /^rollout-.+-([0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})\.jsonl$/

/**
 * The thread id a rollout file's name ends with, or null for a file that is not
 * a rollout.
 *
 * @since 0.1.0
 */
export const threadOf = (name: string): string | null => ROLLOUT.exec(name)?.[1] ?? null

/**
 * The parent thread a rollout's first line (`session_meta`) names, for a
 * sub-agent's rollout; null otherwise or when the line does not say.
 *
 * @since 0.1.0
 */
export const parentThreadOf = (firstLine: Transcript.LineValue | undefined): string | null => {
  if (firstLine === undefined || !("text" in firstLine)) return null
  try {
    const line: unknown = JSON.parse(firstLine.text)
    const payload = field(line, "payload")
    const direct = field(payload, "parent_thread_id")
    if (typeof direct === "string" && direct !== "") return direct
    const spawned = field(field(field(field(payload, "source"), "subagent"), "thread_spawn"), "parent_thread_id")
    return typeof spawned === "string" && spawned !== "" ? spawned : null
  } catch {
    return null
  }
}

const field = (o: unknown, key: string): unknown =>
  typeof o === "object" && o !== null && !Array.isArray(o) ? (o as Record<string, unknown>)[key] : undefined

/**
 * The metadata of a rollout's session: where the file is, its thread, the
 * parent thread of a sub-agent, and the hooked session it belongs to.
 *
 * @since 0.1.0
 */
export const metaData = (
  file: string,
  thread: string,
  parent: string | null
): { readonly [key: string]: Schema.Json } => ({
  source: file,
  codex_thread: thread,
  transcript: parent === null ? "main" : "subagent",
  parent_thread: parent,
  hooked_session: Hook.sessionId(parent ?? thread)
})

/**
 * Where a rollout was read to, so that the next pass reads only what was
 * appended (see the module header).
 *
 * @since 0.1.0
 */
export interface Resume extends Sync.ReadTo {
  readonly lines: number
  readonly parent: string | null
}

// Bytes of the last line a resumed pass checks.
const CHECKED_BYTES = 64 * 1024
// Lines and bytes per durable append.
const BATCH_LINES = 2_048
const BATCH_BYTES = 4 * 1024 * 1024

const hashOf = (bytes: Uint8Array): string => bytesToHex(sha256(bytes))

/**
 * Brings one rollout file (its location under the source) into its session.
 * Never fails: a failure is the report's `failed` status, with lines written
 * before it counted.
 *
 * @since 0.1.0
 */
export const syncRollout = (
  loc: Source.Location,
  thread: string,
  limits: Sync.Limits,
  resume?: Resume | undefined
): Effect.Effect<
  { readonly report: Sync.FileReport; readonly resume: Resume | undefined },
  never,
  SessionJournal.SessionJournal
> => {
  const session = Hook.rolloutSessionId(thread)
  const file = Source.pathOf(loc)
  const done = { lines: 0 }
  return Effect.scoped(Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const opened = yield* Source.open(loc)
    const st = opened.stat
    if (st.size > limits.maxFileBytes) {
      return yield* Effect.fail(`file is ${st.size} bytes, above the bound of ${limits.maxFileBytes} bytes`)
    }
    const from = yield* Sync.stillHolds(resume, session, opened)
    const offset = from?.offset ?? 0
    const bytes = from === undefined
      ? yield* Source.readAll(opened, limits.maxFileBytes)
      : yield* Source.readAt(opened, offset, st.size - offset)
    const { consumed, lastStart, lines, pendingBytes } = Sync.split(bytes, limits)
    const base = from?.lines ?? 0

    const { existed, head: journaledHead, missing, plan } = yield* Sync.planLines(journal, session, lines, from)
    let head = journaledHead
    const start = Planner.firstNew(plan, lines.length)
    const parent = from?.parent ?? parentThreadOf(lines[0])

    const batches: Array<Array<SessionJournal.WriteItem>> = []
    let batch: Array<SessionJournal.WriteItem> = []
    let batchBytes = 0
    if (missing) batch.push({ _tag: "Other", kind: Planner.REAPPEARED_KIND, payload: { path: file } })
    if (plan._tag === "Diverge") batch.push(Planner.divergenceItem(plan))
    let marked = 0
    for (let i = start; i < lines.length; i++) {
      const value = lines[i]!
      batch.push(Planner.lineItem(base + i + 1, value))
      if (Transcript.isOversized(value)) marked++
      batchBytes += "text" in value ? value.text.length : "base64" in value ? value.base64.length : 64
      if (batch.length >= BATCH_LINES || batchBytes >= BATCH_BYTES) {
        batches.push(batch)
        batch = []
        batchBytes = 0
      }
    }
    if (batch.length > 0) batches.push(batch)

    const title = `Codex rollout ${thread}`
    const data = metaData(file, thread, parent)
    const current = existed && from === undefined ? (yield* journal.state(session)).meta : null
    const meta = from === undefined &&
        (current === null || current.title !== title || JSON.stringify(current.data) !== JSON.stringify(data))
      ? { title, labels: ["codex"], data }
      : undefined
    if (meta !== undefined && batches.length === 0) yield* journal.setMeta(session, meta)
    for (let b = 0; b < batches.length; b++) {
      const items = batches[b]!
      const written = b === 0 && meta !== undefined
        ? (yield* journal.writeFrom(session, () => ({ items, meta, result: undefined }))).entries
        : yield* journal.writeAll(session, items)
      for (const e of written) {
        head = e.entry_hash
        if (Planner.isLineEntry(e)) done.lines++
      }
    }

    const added = lines.length - start
    const report: Sync.FileReport = {
      path: file,
      session,
      status: plan._tag === "Diverge"
        ? "diverged"
        : !existed
        ? "created"
        : added > 0
        ? "extended"
        : missing
        ? "reappeared"
        : "unchanged",
      lines: added,
      tools: 0,
      divergedAt: plan._tag === "Diverge" ? plan.line : undefined,
      pendingBytes,
      ...(marked > 0 ? { oversized: marked } : {}),
      ...(from !== undefined ? { incremental: true } : {})
    }
    const checked = Math.max(lastStart, consumed - 1 - CHECKED_BYTES)
    const last = lastStart < 0
      ? from?.last ?? null
      : { start: offset + checked, sha256: hashOf(bytes.subarray(checked, consumed - 1)) }
    const next: Resume | undefined = head === null ? undefined : {
      session,
      dev: st.dev,
      ino: st.ino,
      offset: offset + consumed,
      lines: base + lines.length,
      last,
      head,
      parent
    }
    return { report, resume: next }
  })).pipe(
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause as Cause.Cause<never>)
        : Effect.succeed({
          report: {
            path: file,
            session,
            status: "failed" as const,
            lines: done.lines,
            tools: 0,
            pendingBytes: 0,
            reason: messageOf(Cause.squash(cause))
          },
          resume: undefined
        })
    )
  )
}

/**
 * Options of a run.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The rollouts directory (default `defaultSource()`). */
  readonly source?: string | undefined
  /** Read bounds (default `Sync.DEFAULT_LIMITS`). */
  readonly limits?: Partial<Sync.Limits> | undefined
}

/**
 * The outcome of a pass: one report per rollout looked at, and the paths refused
 * (symbolic links, unreadable entries).
 *
 * @since 0.1.0
 */
export interface Report {
  readonly source: string
  readonly files: ReadonlyArray<Sync.FileReport>
  readonly refused: ReadonlyArray<{ readonly path: string; readonly reason: string }>
}

/**
 * What `follow` remembers between passes: each rollout's stamp when last
 * brought in and where it was read to.
 *
 * @since 0.1.0
 */
export class Cache {
  readonly stamps = new Map<string, Source.Stamp>()
  readonly resumes = new Map<string, Resume>()
  /** Paths already reported as refused (each is reported once). */
  readonly refused = new Set<string>()
  /** Sessions already recorded as missing. */
  readonly missing = new Set<string>()
  /** Whether a pass looked for vanished rollouts yet (later passes look only when a known one is gone). */
  looked = false
}

const sameStamp = (a: Source.Stamp | undefined, b: Source.Stamp) =>
  a !== undefined && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ino === b.ino && a.dev === b.dev

// Year directories under the source: sessions/YYYY/MM/DD/rollout-….jsonl.
const isYear = (name: string): boolean => /^\d{4}$/.test(name)

// Records, once, each rollout session of `root` whose file is no longer there
// (its last entry then says so); a file that comes back is `reappeared`.
const vanished = (
  root: string,
  present: ReadonlySet<string>,
  cache: Cache | undefined
): Effect.Effect<Array<Sync.FileReport>, never, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const files: Array<Sync.FileReport> = []
    const sessions = yield* Effect.orElseSucceed(journal.list, () => [])
    for (const info of sessions) {
      if (!info.id.startsWith(Hook.ROLLOUT_PREFIX) || present.has(info.id) || cache?.missing.has(info.id) === true) {
        continue
      }
      const state = yield* Effect.option(journal.state(info.id))
      if (state._tag === "None") continue
      const source = field(state.value.meta?.data, "source")
      const loc = typeof source === "string" ? Source.locate(root, source) : null
      if (typeof source !== "string" || loc === null) continue
      // Present, or refused (a link now stands there: reported by the walk, not taken for a deletion).
      const now = yield* Effect.result(Source.stamp(loc))
      if (now._tag === "Failure" || now.success !== null) continue
      const last = yield* Effect.option(
        Stream.runCollect(journal.entries(info.id, { from: state.value.next_sequence - 1, limit: 1 }))
      )
      if (last._tag === "Some" && last.value[0]?.kind === Planner.MISSING_KIND) {
        cache?.missing.add(info.id)
        continue
      }
      const recorded = yield* Effect.result(journal.append(info.id, Planner.MISSING_KIND, { path: source }))
      files.push({
        path: source,
        session: info.id,
        status: recorded._tag === "Success" ? "missing" : "failed",
        lines: 0,
        tools: 0,
        pendingBytes: 0,
        ...(recorded._tag === "Success" ? {} : { reason: recorded.failure.message })
      })
      if (recorded._tag === "Success" && cache !== undefined) {
        cache.missing.add(info.id)
        cache.stamps.delete(source)
        cache.resumes.delete(source)
      }
    }
    return files
  })

const pass = (
  options: Options | undefined,
  cache: Cache | undefined
): Effect.Effect<Report, SourceError, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const limits: Sync.Limits = { ...Sync.DEFAULT_LIMITS, ...options?.limits }
    const root = yield* Source.checkRoot(options?.source ?? defaultSource())
    const scanned = yield* Source.scan(root, isYear)
    const files: Array<Sync.FileReport> = []
    const found = scanned.files
      .map((f) => ({ f, thread: threadOf(path.posix.basename(f.relative)) }))
      .filter((x): x is { f: Source.Found; thread: string } => x.thread !== null)
      .sort((a, b) => a.f.path.localeCompare(b.f.path))
    for (const { f, thread } of found) {
      if (cache !== undefined && sameStamp(cache.stamps.get(f.path), f.stamp)) continue
      const loc: Source.Location = { root, parts: [f.project, ...f.relative.split("/")] }
      const { report, resume } = yield* syncRollout(loc, thread, limits, cache?.resumes.get(f.path))
      files.push(report)
      cache?.missing.delete(report.session)
      if (cache !== undefined) {
        if (resume === undefined || report.status === "failed") {
          cache.resumes.delete(f.path)
          cache.stamps.delete(f.path)
        } else {
          cache.resumes.set(f.path, resume)
          cache.stamps.set(f.path, f.stamp)
        }
      }
    }
    // Sessions of this source whose rollout is gone (Codex's own `codex archive` moves it away).
    const gone = cache === undefined || !cache.looked ||
      [...cache.stamps.keys()].some((p) => !found.some((x) => x.f.path === p))
    if (gone) files.push(...(yield* vanished(root, new Set(found.map((x) => Hook.rolloutSessionId(x.thread))), cache)))
    if (cache !== undefined) cache.looked = true
    const refused = cache === undefined ? scanned.refused : scanned.refused.filter((r) => !cache.refused.has(r.path))
    for (const r of refused) cache?.refused.add(r.path)
    return { source: root, files, refused }
  })

/**
 * Brings every rollout under the source into its session, once.
 *
 * @since 0.1.0
 */
export const archive = (options?: Options): Effect.Effect<Report, SourceError, SessionJournal.SessionJournal> =>
  pass(options, undefined).pipe(Effect.withSpan("Codex.archive"))

/**
 * Archives, then every `interval` (default 1 s) brings in the rollouts that
 * changed since the pass before, reading only what was appended; `onReport` gets
 * each pass's report of the files that changed. Runs until interrupted.
 *
 * @since 0.1.0
 */
export const follow = <E, R>(
  options: Options | undefined,
  onReport: (report: Report) => Effect.Effect<void, E, R>,
  interval: Duration.Input = Duration.seconds(1)
): Effect.Effect<never, SourceError | E, SessionJournal.SessionJournal | R> =>
  Effect.gen(function*() {
    const cache = new Cache()
    for (;;) {
      const report = yield* pass(options, cache)
      if (report.files.length > 0 || report.refused.length > 0) yield* onReport(report)
      yield* Effect.sleep(interval)
    }
  })
