/**
 * One transcript file brought into its journal session: read the file (bounded),
 * fold the session's history against its lines, plan (extend, diverge or
 * nothing), then write the new line entries with the tool entries each line
 * completes, in batches that each end after a line and its tool entries (so a
 * crash between batches leaves a journal the next run continues with no gap
 * and no duplicate), and keep the session's metadata current. Each `tool_use`
 * id yields at most one tool entry on a session's chain, so a rewritten
 * transcript does not count the calls it repeats twice. A failure of
 * this one file is returned in its report, never raised.
 *
 * @since 0.1.0
 */
import { type Entry, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
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
   * filesystem adapter's 8 MiB record whatever JSON escaping costs). The lines
   * before a longer one are journaled; the file is then reported as failed at it.
   */
  readonly maxLineBytes: number
}

/**
 * The default read bounds.
 *
 * @since 0.1.0
 */
export const DEFAULT_LIMITS: Limits = { maxFileBytes: 512 * 1024 * 1024, maxLineBytes: 4 * 1024 * 1024 }

// Line entries (with their tool entries) per durable append, and their bytes.
const BATCH_LINES = 512
const BATCH_BYTES = 4 * 1024 * 1024
// An escaped line entry must fit the adapter's 8 MiB record with room for the envelope.
const MAX_ESCAPED_BYTES = 7 * 1024 * 1024

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

interface Split {
  readonly lines: Array<Transcript.LineValue>
  readonly pendingBytes: number
  readonly tooLong: { readonly line: number; readonly bytes: number } | null
}

const split = (bytes: Uint8Array, limits: Limits): Split => {
  const decoder = Transcript.strictDecoder()
  const lines: Array<Transcript.LineValue> = []
  let start = 0
  for (;;) {
    const end = bytes.indexOf(0x0a, start)
    if (end < 0) break
    const length = end - start
    const value = length > limits.maxLineBytes ? undefined : Transcript.decodeLine(bytes.subarray(start, end), decoder)
    // Below 1 MiB even six-fold escaping of control characters fits the record.
    if (
      value === undefined ||
      (length > 1024 * 1024 && "text" in value && Transcript.utf8Length(JSON.stringify(value.text)) > MAX_ESCAPED_BYTES)
    ) {
      return { lines, pendingBytes: bytes.length - start, tooLong: { line: lines.length + 1, bytes: length } }
    }
    lines.push(value)
    start = end + 1
  }
  return { lines, pendingBytes: bytes.length - start, tooLong: null }
}

const infoOf = (value: Transcript.LineValue): Transcript.LineInfo =>
  "text" in value ? Transcript.parse(value.text) : Transcript.parse("")

/**
 * The metadata data of a transcript's session.
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
 * Brings one transcript into its session. `parent` holds the spawns of the
 * parent's main transcript (for a sub-agent). Returns the report, and for a main
 * transcript its sub-agent calls.
 *
 * @since 0.1.0
 */
export const syncFile = (
  t: SessionIds.Transcript,
  file: string,
  limits: Limits,
  parent: Spawns | undefined
): Effect.Effect<{ readonly report: FileReport; readonly spawns: Spawns | undefined; readonly linked: boolean }, never, SessionJournal.SessionJournal> => {
  const session = SessionIds.sessionId(t)
  // What is durable so far, so that a failure after some batches reports them.
  const done = { lines: 0, tools: 0 }
  const failed = (reason: string) => ({
    report: { path: file, session, status: "failed" as const, lines: done.lines, tools: done.tools, pendingBytes: 0, reason },
    spawns: undefined,
    linked: false
  })
  return Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const bytes = yield* Source.read(file, limits.maxFileBytes)
    const { lines, pendingBytes, tooLong } = split(bytes, limits)
    const state = Planner.empty()
    const existed = yield* journal.entries(session).pipe(
      Stream.runForEachArray((chunk) => Effect.sync(() => {
        for (const e of chunk) Planner.observe(state, e, lines)
      })),
      Effect.as(true),
      Effect.catchTag("SessionNotFound", () => Effect.succeed(false))
    )
    const planned = Planner.plan(state, lines.length)
    // Past a line above the bound the file is not seen: lines journaled there (under a
    // larger bound) are not "gone", and the run does nothing beyond the failure.
    const plan: Planner.Plan = tooLong !== null && planned._tag === "Diverge" && planned.line > lines.length
      ? { _tag: "Unchanged" }
      : planned
    const start = Planner.firstNew(plan, lines.length)
    const refs = state.refs.slice(0, start)

    const agentId = t._tag === "Main" ? "main" : t.agentId
    const depth = t._tag === "Main" ? 0 : 1
    // Each tool_use id yields one tool entry on the whole chain: after a rewrite,
    // calls already recorded from an earlier version are not recorded again.
    const pairing = Transcript.emptyPairing()
    if (state.diverged || plan._tag === "Diverge") {
      const earlier = Transcript.emptyPairing()
      yield* journal.entries(session).pipe(Stream.runForEachArray((chunk) => Effect.sync(() => {
        for (const e of chunk) {
          const value = e.kind === Planner.LINE_KIND ? Planner.lineOf(e.payload) : undefined
          if (value !== undefined) Transcript.pair(earlier, infoOf(value), agentId, depth)
        }
      })))
      for (const id of earlier.paired) pairing.paired.add(id)
    }
    const spawnLine = new Map<string, number>()
    const byAgentId = new Map<string, string>()
    const byPromptId = new Map<string, string>()
    let userText: string | undefined
    const track = (info: Transcript.LineInfo, n: number) => {
      if (userText === undefined && info.userText !== undefined) userText = info.userText
      if (t._tag !== "Main") return
      for (const use of info.toolUses) {
        if (!Transcript.SPAWN_TOOLS.has(use.name) || spawnLine.has(use.id)) continue
        spawnLine.set(use.id, n)
        if (use.prompt !== undefined && !byPromptId.has(use.prompt)) byPromptId.set(use.prompt, use.id)
      }
      if (info.agentLink !== undefined) byAgentId.set(info.agentLink.agentId, info.agentLink.toolUseId)
    }
    for (let i = 0; i < start; i++) {
      const info = infoOf(lines[i]!)
      Transcript.pair(pairing, info, agentId, depth)
      track(info, i + 1)
    }

    // Batches end after a line and the tool entries it completes.
    const batches: Array<Array<SessionJournal.WriteItem>> = []
    let batch: Array<SessionJournal.WriteItem> = []
    let batchLines = 0
    let batchBytes = 0
    if (state.missing) batch.push({ _tag: "Other", kind: Planner.REAPPEARED_KIND, payload: { path: file } })
    if (plan._tag === "Diverge") batch.push(Planner.divergenceItem(plan))
    let tools = 0
    for (let i = start; i < lines.length; i++) {
      const value = lines[i]!
      const info = infoOf(value)
      batch.push(Planner.lineItem(i + 1, value))
      for (const params of Transcript.pair(pairing, info, agentId, depth)) {
        batch.push({ _tag: "Tool", params })
        tools++
      }
      track(info, i + 1)
      batchLines++
      batchBytes += "text" in value ? value.text.length : value.base64.length
      if (batchLines >= BATCH_LINES || batchBytes >= BATCH_BYTES) {
        batches.push(batch)
        batch = []
        batchLines = 0
        batchBytes = 0
      }
    }
    if (batch.length > 0) batches.push(batch)
    for (const items of batches) {
      const written: Array<Entry.Entry> = yield* journal.writeAll(session, items)
      for (const e of written) {
        if (e.kind === Planner.LINE_KIND) {
          refs.push({ sequence: e.sequence, entry_hash: e.entry_hash })
          done.lines++
        } else if (e.kind === "tool") done.tools++
      }
    }

    const spawnOf = (id: string | undefined): Spawn | undefined => {
      if (id === undefined) return undefined
      const n = spawnLine.get(id)
      return { toolUseId: id, entry: n === undefined ? null : refs[n - 1] ?? null }
    }
    const spawns: Spawns | undefined = t._tag === "Main"
      ? {
        byAgent: new Map(Array.from(byAgentId, ([a, id]) => [a, spawnOf(id)!])),
        byPrompt: new Map(Array.from(byPromptId, ([p, id]) => [p, spawnOf(id)!]))
      }
      : undefined
    const spawn = t._tag === "SubAgent" && parent !== undefined
      ? parent.byAgent.get(t.agentId) ?? (userText === undefined ? undefined : parent.byPrompt.get(userText))
      : undefined
    const title = t._tag === "Main" ? `Claude Code ${t.session}` : `Claude Code ${t.session} sub-agent ${t.agentId}`
    const current = existed || batches.length > 0 ? (yield* journal.state(session)).meta : null
    const known = current?.data
    // A link once found is kept: a run that cannot see the parent's call (the
    // parent failed this time, or was rewritten) does not take it back.
    const keep = spawn?.entry == null && isJsonObject(known) && known["parent_entry"] != null
    const data = keep
      ? { ...metaData(t, file, undefined), parent_tool_use_id: known["parent_tool_use_id"] ?? null, parent_entry: known["parent_entry"] ?? null }
      : metaData(t, file, spawn)
    if (current === null || current.title !== title || JSON.stringify(current.data) !== JSON.stringify(data)) {
      yield* journal.setMeta(session, { title, labels: ["claude-code"], data })
    }

    const added = lines.length - start
    const status: FileReport["status"] = plan._tag === "Diverge"
      ? "diverged"
      : !existed
      ? "created"
      : added > 0
      ? "extended"
      : state.missing
      ? "reappeared"
      : "unchanged"
    const report: FileReport = {
      path: file,
      session,
      status: tooLong === null ? status : "failed",
      lines: added,
      tools,
      divergedAt: plan._tag === "Diverge" ? plan.line : undefined,
      pendingBytes: tooLong === null ? pendingBytes : 0,
      reason: tooLong === null
        ? undefined
        : `line ${tooLong.line} is ${tooLong.bytes} bytes, above the bound of ${limits.maxLineBytes} bytes (the ${lines.length} lines before it are journaled)`
    }
    return { report, spawns, linked: spawn?.entry != null || keep }
  }).pipe(
    Effect.catchCause((cause) =>
      Cause.hasInterruptsOnly(cause)
        ? Effect.failCause(cause as Cause.Cause<never>)
        : Effect.succeed(failed(describe(Cause.squash(cause))))
    )
  )
}

const describe = (e: unknown): string => (e instanceof Error ? e.message : String(e))

const isJsonObject = (v: Schema.Json | undefined): v is { readonly [key: string]: Schema.Json } =>
  typeof v === "object" && v !== null && !Array.isArray(v)
