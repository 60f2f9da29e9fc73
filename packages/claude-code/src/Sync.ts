/**
 * One transcript file brought into its journal session: read the file (bounded),
 * fold the session's history against its lines, plan (extend, diverge or
 * nothing), or, given where an earlier run read it to (`Resume`) and that
 * prefix still checks, read only what was appended and extend; then write the new line entries with the tool entries each line
 * completes, in batches that each end after a line and its tool entries (so a
 * crash between batches leaves a journal the next run continues with no gap
 * and no duplicate), and keep the session's metadata current. Each `tool_use`
 * id yields at most one tool entry on a session's chain, so a rewritten
 * transcript does not count the calls it repeats twice. A failure of
 * this one file is returned in its report, never raised.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { type Entry, JournalState, messageOf, SessionJournal, type SessionMeta } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { SourceError } from "./Errors.ts"
import * as Hook from "./Hook.ts"
import * as Source from "./internal/source.ts"
import * as Planner from "./Planner.ts"
import * as SessionIds from "./SessionIds.ts"
import * as Transcript from "./Transcript.ts"

/**
 * Read bounds.
 *
 * @since 0.1.0
 */
export interface Limits {
  /** Largest transcript file read (default 512 MiB); a larger one is a failure of that file. */
  readonly maxFileBytes: number
  /**
   * Largest transcript line journaled (default 4 MiB, so that its entry fits the
   * filesystem adapter's 8 MiB record whatever JSON escaping costs). A longer
   * line is journaled as a `claude-code.oversized-line` marker (its size and
   * SHA-256, no payload) and custody goes on after it.
   */
  readonly maxLineBytes: number
}

/**
 * The default read bounds.
 *
 * @since 0.1.0
 */
export const DEFAULT_LIMITS: Limits = { maxFileBytes: 512 * 1024 * 1024, maxLineBytes: 4 * 1024 * 1024 }

// Line entries (with their tool entries) per durable append, and their bytes: each
// append is a durable write and may be followed by a checkpoint, so a transcript
// of a few thousand lines is one or two appends.
const BATCH_LINES = 2_048
const BATCH_BYTES = 4 * 1024 * 1024
// An escaped line entry must fit the adapter's 8 MiB record with room for the envelope.
const MAX_ESCAPED_BYTES = 7 * 1024 * 1024
// Bytes of the last line a resumed run checks (all of a line up to this size).
const CHECKED_BYTES = 64 * 1024

/**
 * What happened to one transcript in a run.
 *
 * @since 0.1.0
 */
export interface FileReport {
  /** The transcript file. */
  readonly path: string
  /** Its journal session. */
  readonly session: string
  /**
   * `created` (new session), `extended`, `unchanged`, `diverged` (rewritten: a
   * divergence entry, then the new content), `reappeared`, `missing` (the file is
   * gone; recorded), `failed` (see `reason`).
   */
  readonly status: "created" | "extended" | "unchanged" | "diverged" | "reappeared" | "missing" | "failed"
  /** Line entries written. */
  readonly lines: number
  /** Tool entries written. */
  readonly tools: number
  /** For `diverged`: the first line that differs. */
  readonly divergedAt?: number | undefined
  /** Bytes after the last newline, not journaled until their line is complete. */
  readonly pendingBytes: number
  /** For `failed`: why (lines before the failure may have been journaled). */
  readonly reason?: string | undefined
  /** Of the line entries written, how many are oversized-line markers (size and hash only). */
  readonly oversized?: number | undefined
  /** Whether only the appended bytes were read (the remembered prefix checked), not the whole file. */
  readonly incremental?: boolean | undefined
}

/**
 * A sub-agent call of a main transcript: the `tool_use` id and the entry of the
 * line holding it (null until that line is journaled).
 *
 * @since 0.1.0
 */
export interface Spawn {
  readonly toolUseId: string
  readonly entry: Planner.EntryRef | null
}

/**
 * The sub-agent calls of a main transcript, by sub-agent id (known once the call
 * reports it) and by prompt (known from the call itself).
 *
 * @since 0.1.0
 */
export interface Spawns {
  readonly byAgent: ReadonlyMap<string, Spawn>
  readonly byPrompt: ReadonlyMap<string, Spawn>
}

/**
 * A file's bytes cut into lines (`split`).
 *
 * @since 0.1.0
 */
export interface Split {
  readonly lines: Array<Transcript.LineValue>
  /** Bytes up to and including the last newline. */
  readonly consumed: number
  /** Where the last complete line starts, or -1 when there is none. */
  readonly lastStart: number
  readonly pendingBytes: number
}

/**
 * Cuts bytes into their complete lines (each strict UTF-8 text, else base64; one
 * past `maxLineBytes`, or one whose escaped text would not fit a record, an
 * oversized-line marker of its size and SHA-256), with where they end and what
 * waits for its newline. Shared by every custody of JSONL files.
 *
 * @since 0.1.0
 */
export const split = (bytes: Uint8Array, limits: Limits): Split => {
  const decoder = Transcript.strictDecoder()
  const lines: Array<Transcript.LineValue> = []
  let start = 0
  let lastStart = -1
  for (;;) {
    const end = bytes.indexOf(0x0a, start)
    if (end < 0) break
    const length = end - start
    const raw = bytes.subarray(start, end)
    let value = length > limits.maxLineBytes ? undefined : Transcript.decodeLine(raw, decoder)
    // Below 1 MiB even six-fold escaping of control characters fits the record.
    if (
      value === undefined ||
      (length > 1024 * 1024 && "text" in value && Transcript.utf8Length(JSON.stringify(value.text)) > MAX_ESCAPED_BYTES)
    ) {
      value = Transcript.oversized(raw)
    }
    lines.push(value)
    lastStart = start
    start = end + 1
  }
  return { lines, consumed: start, lastStart, pendingBytes: bytes.length - start }
}

const infoOf = (value: Transcript.LineValue): Transcript.LineInfo =>
  "text" in value ? Transcript.parse(value.text) : Transcript.parse("")

const hashOf = (bytes: Uint8Array): string => bytesToHex(sha256(bytes))

/**
 * What a transcript's run learnt of its sub-agent calls: the line of each spawning
 * `tool_use` and, once journaled, its entry; the calls by sub-agent id and by
 * prompt; the first plain user text.
 *
 * @since 0.1.0
 */
export interface Tracker {
  readonly spawnLine: Map<string, number>
  readonly spawnRef: Map<string, Planner.EntryRef>
  readonly byAgentId: Map<string, string>
  readonly byPromptId: Map<string, string>
  userText: string | undefined
}

const emptyTracker = (): Tracker => ({
  spawnLine: new Map(),
  spawnRef: new Map(),
  byAgentId: new Map(),
  byPromptId: new Map(),
  userText: undefined
})

/**
 * Where a transcript was read to, so that the next run reads only what was
 * appended: the file's identity, the end of its last complete line (`offset`),
 * the number of lines, the last line's place and SHA-256 (the prefix check), the
 * hash of the session's newest entry after the run, and the pairing and sub-agent state at that
 * point. A run given a resume whose file is the same inode, no shorter than
 * `offset`, whose last line still hashes the same and whose session's head is
 * unchanged reads from `offset` on; otherwise it reads and compares the whole
 * file. Mutated by the run it is given to; a failed run returns none.
 *
 * @since 0.1.0
 */
export interface Resume {
  readonly session: string
  readonly dev: number
  readonly ino: number
  readonly offset: number
  readonly lines: number
  readonly last: { readonly start: number; readonly sha256: string } | null
  readonly head: string
  readonly pairing: Transcript.Pairing
  readonly tracker: Tracker
  readonly meta: { readonly title: string; readonly data: Schema.Json | undefined } | null
}

/**
 * Where a file was read to, as a resume needs it checked: the session, the
 * file's identity, the end of its last complete line, that line's place and
 * SHA-256, and the session's newest entry after that read.
 *
 * @since 0.1.0
 */
export interface ReadTo {
  readonly session: string
  readonly dev: number
  readonly ino: number
  readonly offset: number
  readonly last: { readonly start: number; readonly sha256: string } | null
  readonly head: string
}

/**
 * `resume` when reading only what was appended to the opened file is sound: it
 * is for `session`, the file is the same inode and no shorter, its last line
 * read still hashes the same, and the session's head is still the one written
 * after it; else undefined (read and compare the whole file).
 *
 * @since 0.1.0
 */
export const stillHolds = <R extends ReadTo>(
  resume: R | undefined,
  session: string,
  opened: Source.OpenFile
): Effect.Effect<R | undefined, SourceError, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const st = opened.stat
    if (
      resume === undefined || resume.session !== session || resume.dev !== st.dev || resume.ino !== st.ino ||
      st.size < resume.offset
    ) {
      return undefined
    }
    if (resume.last !== null) {
      const length = resume.offset - resume.last.start
      const tail = yield* Source.readAt(opened, resume.last.start, length)
      if (
        tail.length !== length || tail[length - 1] !== 0x0a ||
        hashOf(tail.subarray(0, length - 1)) !== resume.last.sha256
      ) {
        return undefined
      }
    }
    const journal = yield* SessionJournal.SessionJournal
    const head = yield* Effect.result(Effect.map(journal.state(session), JournalState.lastHash))
    return head._tag === "Failure" || head.success !== resume.head ? undefined : resume
  })

/**
 * The journal session the hooks (`Hook.handle`) record the Claude Code session of
 * a transcript in, the live session custody's session names: a sub-agent's
 * transcript belongs to its parent's, whose hooks carry the parent's
 * `session_id`. Computed by `Hook.sessionId` from the input its hooks get, whose
 * `transcript_path` is `<source>/<project>/<session>.jsonl`, so both always agree.
 *
 * @since 0.1.0
 */
export const hookedSessionId = (t: SessionIds.Transcript): string =>
  Hook.sessionId({
    session_id: t.session,
    cwd: "",
    hook_event_name: "SessionStart",
    transcript_path: `/${t.project}/${t.session}.jsonl`
  })

/**
 * The metadata data of a transcript's session. `hooked_session` names the live
 * hooked session of the same Claude Code session (`hookedSessionId`), whose
 * counters are the authoritative ones when it exists: this session's tool
 * entries are then copies of calls that session decided and counted.
 *
 * @since 0.1.0
 */
export const metaData = (
  t: SessionIds.Transcript,
  file: string,
  spawn: Spawn | undefined
): { readonly [key: string]: Schema.Json } => ({
  source: file,
  project: t.project,
  claude_session_id: t.session,
  transcript: t._tag === "Main" ? "main" : "subagent",
  hooked_session: hookedSessionId(t),
  ...(t._tag === "SubAgent"
    ? {
      agent_id: t.agentId,
      parent_session: SessionIds.parentId(t),
      parent_tool_use_id: spawn?.toolUseId ?? null,
      parent_entry: spawn?.entry == null ? null : { sequence: spawn.entry.sequence, entry_hash: spawn.entry.entry_hash }
    }
    : {})
})

/**
 * The location of a transcript under the source `root`.
 *
 * @since 0.1.0
 */
export const locationOf = (root: string, t: SessionIds.Transcript): Source.Location => ({
  root,
  parts: [t.project, ...SessionIds.relativePath(t).split("/")]
})

/**
 * How a file's `lines` continue its journal session: from what an earlier run of
 * this process remembers (`from`: its lines are all new), else from the stored
 * entries read once (`Planner.observe` over the session, then `Planner.plan`),
 * with whether the session existed, whether stored lines are missing from the
 * file, the newest stored entry's hash, and the planner's state (null when `from`
 * was used). Claude Code's transcripts and Codex's rollouts are planned alike.
 *
 * @since 0.1.0
 */
export const planLines = (
  journal: SessionJournal.SessionJournal["Service"],
  session: string,
  lines: ReadonlyArray<Transcript.LineValue>,
  from: { readonly head: string | null } | undefined
) =>
  Effect.gen(function*() {
    let head = from?.head ?? null
    if (from !== undefined) {
      const plan: Planner.Plan = lines.length === 0 ? { _tag: "Unchanged" } : { _tag: "Extend", from: 0 }
      return { plan, existed: true, missing: false, head, state: null }
    }
    const state = Planner.empty()
    const existed = yield* journal.entries(session).pipe(
      Stream.runForEachArray((chunk) =>
        Effect.sync(() => {
          for (const e of chunk) {
            Planner.observe(state, e, lines)
            head = e.entry_hash
          }
        })
      ),
      Effect.as(true),
      Effect.catchTag("SessionNotFound", () => Effect.succeed(false))
    )
    return { plan: Planner.plan(state, lines.length), existed, missing: state.missing, head, state }
  })

/**
 * Brings one transcript, under the source directory `root`, into its session.
 * `parent` holds the spawns of the parent's main transcript (for a sub-agent);
 * `resume` where an earlier run read it to (see `Resume`). The file is reached
 * from `root` through directory handles opened without following links, so a
 * directory on its way that is (or became) a symbolic link is a failure of this
 * file. Returns the report, for a main transcript its sub-agent calls, and the
 * resume for the next run (none after a failure).
 *
 * @since 0.1.0
 */
export const syncFile = (
  t: SessionIds.Transcript,
  root: string,
  limits: Limits,
  parent: Spawns | undefined,
  resume?: Resume | undefined
): Effect.Effect<
  {
    readonly report: FileReport
    readonly spawns: Spawns | undefined
    readonly linked: boolean
    readonly resume: Resume | undefined
  },
  never,
  SessionJournal.SessionJournal
> => {
  const session = SessionIds.sessionId(t)
  const loc = locationOf(root, t)
  const file = Source.pathOf(loc)
  // What is durable so far, so that a failure after some batches reports them.
  const done = { lines: 0, tools: 0 }
  const failed = (reason: string) => ({
    report: {
      path: file,
      session,
      status: "failed" as const,
      lines: done.lines,
      tools: done.tools,
      pendingBytes: 0,
      reason
    },
    spawns: undefined,
    linked: false,
    resume: undefined
  })
  return Effect.scoped(Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const opened = yield* Source.open(loc)
    const st = opened.stat
    if (st.size > limits.maxFileBytes) {
      return yield* new SourceError({
        path: file,
        reason: `file is ${st.size} bytes, above the bound of ${limits.maxFileBytes} bytes`
      })
    }
    // Only what was appended, when the remembered prefix still holds.
    const from = yield* stillHolds(resume, session, opened)
    const offset = from?.offset ?? 0
    const bytes = from === undefined
      ? yield* Source.readAll(opened, limits.maxFileBytes)
      : yield* Source.readAt(opened, offset, st.size - offset)
    const { consumed, lastStart, lines, pendingBytes } = split(bytes, limits)
    const agentId = t._tag === "Main" ? "main" : t.agentId
    const depth = t._tag === "Main" ? 0 : 1

    // The lines before the file's: `base` (remembered) or none; the first new one is `start` of `lines`.
    const base = from?.lines ?? 0
    const refs: Array<Planner.EntryRef> = []
    const pairing = from?.pairing ?? Transcript.emptyPairing()
    const tracker = from?.tracker ?? emptyTracker()
    const { existed, head: journaledHead, missing, plan, state } = yield* planLines(journal, session, lines, from)
    let head = journaledHead
    if (state !== null) {
      refs.push(...state.refs.slice(0, Planner.firstNew(plan, lines.length)))
      // Each tool_use id yields one tool entry on the whole chain: after a rewrite,
      // calls already recorded from an earlier version are not recorded again.
      if (state.diverged || plan._tag === "Diverge") {
        const earlier = Transcript.emptyPairing()
        yield* journal.entries(session).pipe(Stream.runForEachArray((chunk) =>
          Effect.sync(() => {
            for (const e of chunk) {
              const value = e.kind === Planner.LINE_KIND ? Planner.lineOf(e.payload) : undefined
              if (value !== undefined) Transcript.pair(earlier, infoOf(value), agentId, depth)
            }
          })
        ))
        for (const id of earlier.paired) pairing.paired.add(id)
        Transcript.bound(pairing)
      }
    }
    const start = Planner.firstNew(plan, lines.length)

    const track = (info: Transcript.LineInfo, n: number) => {
      if (tracker.userText === undefined && info.userText !== undefined) tracker.userText = info.userText
      if (t._tag !== "Main") return
      for (const use of info.toolUses) {
        if (!Transcript.SPAWN_TOOLS.has(use.name) || tracker.spawnLine.has(use.id)) continue
        tracker.spawnLine.set(use.id, n)
        if (use.prompt !== undefined && !tracker.byPromptId.has(use.prompt)) tracker.byPromptId.set(use.prompt, use.id)
      }
      if (info.agentLink !== undefined) tracker.byAgentId.set(info.agentLink.agentId, info.agentLink.toolUseId)
    }
    for (let i = 0; i < start; i++) {
      const info = infoOf(lines[i]!)
      Transcript.pair(pairing, info, agentId, depth)
      track(info, base + i + 1)
    }

    // Batches end after a line and the tool entries it completes.
    const batches: Array<Array<SessionJournal.WriteItem>> = []
    let batch: Array<SessionJournal.WriteItem> = []
    let batchLines = 0
    let batchBytes = 0
    if (missing) batch.push({ _tag: "Other", kind: Planner.REAPPEARED_KIND, payload: { path: file } })
    if (plan._tag === "Diverge") batch.push(Planner.divergenceItem(plan))
    let tools = 0
    let marked = 0
    for (let i = start; i < lines.length; i++) {
      const value = lines[i]!
      const info = infoOf(value)
      batch.push(Planner.lineItem(base + i + 1, value))
      if (Transcript.isOversized(value)) marked++
      for (const params of Transcript.pair(pairing, info, agentId, depth)) {
        batch.push({ _tag: "Tool", params })
        tools++
      }
      track(info, base + i + 1)
      batchLines++
      batchBytes += "text" in value ? value.text.length : "base64" in value ? value.base64.length : 64
      if (batchLines >= BATCH_LINES || batchBytes >= BATCH_BYTES) {
        batches.push(batch)
        batch = []
        batchLines = 0
        batchBytes = 0
      }
    }
    if (batch.length > 0) batches.push(batch)

    // The metadata is known before the lines are written (the parent's spawns, this
    // transcript's first user text): it goes into the first append, with its lines.
    const spawn = t._tag === "SubAgent" && parent !== undefined
      ? parent.byAgent.get(t.agentId) ??
        (tracker.userText === undefined ? undefined : parent.byPrompt.get(tracker.userText))
      : undefined
    const title = t._tag === "Main" ? `Claude Code ${t.session}` : `Claude Code ${t.session} sub-agent ${t.agentId}`
    const current = from !== undefined ? from.meta : existed ? (yield* journal.state(session)).meta : null
    const known = current?.data
    // A link once found is kept: a run that cannot see the parent's call (the
    // parent failed this time, or was rewritten) does not take it back.
    const keep = spawn?.entry == null && isJsonObject(known) && known["parent_entry"] != null
    const data = keep
      ? {
        ...metaData(t, file, undefined),
        parent_tool_use_id: known["parent_tool_use_id"] ?? null,
        parent_entry: known["parent_entry"] ?? null
      }
      : metaData(t, file, spawn)
    const meta: SessionMeta.MetaPatch | undefined =
      current === null || current.title !== title || JSON.stringify(current.data) !== JSON.stringify(data)
        ? { title, labels: ["claude-code"], data }
        : undefined
    if (meta !== undefined && batches.length === 0) yield* journal.setMeta(session, meta)
    for (let b = 0; b < batches.length; b++) {
      const items = batches[b]!
      const written: ReadonlyArray<Entry.Entry> = b === 0 && meta !== undefined
        ? (yield* journal.writeFrom(session, () => ({ items, meta, result: undefined }))).entries
        : yield* journal.writeAll(session, items)
      for (const e of written) {
        head = e.entry_hash
        if (Planner.isLineEntry(e)) {
          refs.push({ sequence: e.sequence, entry_hash: e.entry_hash })
          done.lines++
        } else if (e.kind === "tool") done.tools++
      }
    }
    // `refs` holds the entries of lines `base + 1 …` (all of them, read from the journal, on a full run).
    for (const [id, n] of tracker.spawnLine) {
      if (tracker.spawnRef.has(id)) continue
      const ref = refs[n - base - 1]
      if (ref !== undefined) tracker.spawnRef.set(id, ref)
    }

    const spawnOf = (id: string | undefined): Spawn | undefined =>
      id === undefined ? undefined : { toolUseId: id, entry: tracker.spawnRef.get(id) ?? null }
    const spawns: Spawns | undefined = t._tag === "Main"
      ? {
        byAgent: new Map(Array.from(tracker.byAgentId, ([a, id]) => [a, spawnOf(id)!])),
        byPrompt: new Map(Array.from(tracker.byPromptId, ([p, id]) => [p, spawnOf(id)!]))
      }
      : undefined

    const added = lines.length - start
    const status: FileReport["status"] = plan._tag === "Diverge"
      ? "diverged"
      : !existed
      ? "created"
      : added > 0
      ? "extended"
      : missing
      ? "reappeared"
      : "unchanged"
    const report: FileReport = {
      path: file,
      session,
      status,
      lines: added,
      tools,
      divergedAt: plan._tag === "Diverge" ? plan.line : undefined,
      pendingBytes,
      ...(marked > 0 ? { oversized: marked } : {}),
      ...(from !== undefined ? { incremental: true } : {})
    }
    // The prefix check covers the last line, or its last 64 KiB for a longer one.
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
      pairing,
      tracker,
      meta: { title, data }
    }
    return { report, spawns, linked: spawn?.entry != null || keep, resume: next }
  })).pipe(
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause as Cause.Cause<never>)
        : Effect.succeed(failed(messageOf(Cause.squash(cause))))
    )
  )
}

const isJsonObject = (v: Schema.Json | undefined): v is { readonly [key: string]: Schema.Json } =>
  typeof v === "object" && v !== null && !Array.isArray(v)
