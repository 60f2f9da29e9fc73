/**
 * The time axis of a session: a waterfall of its calls, each a bar from the
 * time of its tool entry to the time of its outcome (the outcome's recorded
 * `duration_ms` when it has one, the journal's seconds otherwise), with
 * sub-agents as a tree: a sub-agent's row (its type where the journal has it)
 * sits under the `Agent` / `Task` call that started it, or under the session,
 * and its calls under it. The structure is the one the OpenTelemetry export
 * sends (`otel/Spans`), so the page and a trace viewer agree. A session of
 * transcript lines (custody's, the Agent SDK store's: `Conversation`) is drawn
 * from its lines instead, at the times the transcript states: a call from its
 * tool use to its tool result, a sub-agent's lines under the Agent call that
 * started it; the tool entries such a session holds are copies written when
 * the lines were archived, and are not drawn twice.
 *
 * Fed one verified entry at a time (`builder`), in chain order; memory is
 * bounded whatever the session's length: at most `MAX_SPANS` rows are kept (and
 * a batch of 64 more before they leave together), the oldest finished rows
 * leaving first, and `render` draws what is kept as HTML
 * (no script needed). The page's entries past a failed verification are never
 * fed to it.
 *
 * @since 0.1.0
 */
import { Entry } from "@session-journal/core"
import * as Spans from "../otel/Spans.ts"
import * as CallLine from "./CallLine.ts"
import * as Conversation from "./Conversation.ts"
import * as Denials from "./Denials.ts"
import * as Html from "./Html.ts"

/**
 * The most rows (calls and sub-agents) a waterfall keeps; past it the oldest
 * finished row leaves (the newest calls stay).
 *
 * @since 0.1.0
 */
export const MAX_SPANS = 400

const EVICT_BATCH = 64

const AGENT_TOOLS = new Set(["Agent", "Task"])

/**
 * One row of the waterfall: the session, a sub-agent or a call.
 *
 * @since 0.1.0
 */
export interface Row {
  readonly key: string
  readonly parent: string | null
  readonly kind: "session" | "agent" | "call"
  /** The tool's name, or the agent's type (its id when no type is recorded). */
  name: string
  readonly agentId: string | null
  /** What the call did, in one line (`CallLine`), once its decision names its input. */
  what: string
  /** The entry the row stands for. */
  readonly sequence: number
  /** Nanoseconds since the epoch. */
  readonly start: bigint
  end: bigint | null
  verdict: "allow" | "ask" | "deny" | null
  error: string | null
  /** Rows kept under this one. */
  children: number
}

/**
 * A waterfall being built: `add` each verified entry in order, `render` at any
 * point.
 *
 * @since 0.1.0
 */
export interface Builder {
  readonly add: (entry: Entry.Entry) => void
  /** The rows kept, in the order they started. */
  readonly rows: () => ReadonlyArray<Row>
  /** Calls seen, kept or not. */
  readonly calls: () => number
  readonly render: (options: RenderOptions) => string
}

/**
 * How rows link to their entries.
 *
 * @since 0.1.0
 */
export interface RenderOptions {
  /** The link to an entry of the session by its sequence. */
  readonly link: (sequence: number) => string
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * A new, empty waterfall of session `id`.
 *
 * @since 0.1.0
 */
export const builder = (id: string): Builder => {
  // The fold's metadata only names the session's root span, which the page names itself.
  const fold = Spans.fold(id, null)
  const kept = new Map<string, Row>() // in start order
  const callOf = new Map<number, string>() // tool entry sequence → key, of kept calls
  let calls = 0
  let latest = 0n
  // Transcript lines seen: the session's calls are read from them, at the times they state.
  let transcript = false
  let latestTurn = 0n
  const hosting = new Set<string>() // transcript Agent / Task calls that host a sub-agent

  // Rows leave in batches: a scan past open rows is paid once per `EVICT_BATCH` rows, not per row.
  const evict = () => {
    if (kept.size <= MAX_SPANS + EVICT_BATCH) return
    for (const row of kept.values()) {
      if (kept.size <= MAX_SPANS) return
      if (row.kind === "session" || row.children > 0 || row.end === null) continue
      kept.delete(row.key)
      hosting.delete(row.key)
      if (row.kind === "call") callOf.delete(row.sequence)
      const parent = row.parent === null ? undefined : kept.get(row.parent)
      if (parent !== undefined) parent.children--
    }
    // Every kept row open or with rows under it: the oldest call goes regardless.
    for (const row of kept.values()) {
      if (kept.size <= MAX_SPANS) return
      if (row.kind !== "call" || row.children > 0) continue
      kept.delete(row.key)
      hosting.delete(row.key)
      callOf.delete(row.sequence)
      const parent = row.parent === null ? undefined : kept.get(row.parent)
      if (parent !== undefined) parent.children--
    }
  }

  const keep = (row: Row) => {
    kept.set(row.key, row)
    if (row.kind === "call") calls++
    const parent = row.parent === null ? undefined : kept.get(row.parent)
    if (parent !== undefined) parent.children++
    evict()
  }

  // A sub-agent's transcript lines: its row, under the oldest open Agent / Task
  // call that hosts none yet (as `Spans` nests it), lasting to its latest line.
  const turnAgent = (sequence: number, agentId: string, time: bigint): string => {
    const key = `turn-agent:${agentId}`
    const known = kept.get(key)
    if (known !== undefined) {
      if (known.end === null || time > known.end) known.end = time
      return key
    }
    let host: Row | undefined
    for (const row of kept.values()) {
      if (row.kind === "call" && row.end === null && AGENT_TOOLS.has(row.name) && !hosting.has(row.key)) {
        host = row
        break
      }
    }
    if (host !== undefined) hosting.add(host.key)
    keep({
      key,
      parent: host?.key ?? Spans.SESSION_KEY,
      kind: "agent",
      name: agentId,
      agentId,
      what: "",
      sequence,
      start: time,
      end: time,
      verdict: null,
      error: null,
      children: 0
    })
    return key
  }

  // A transcript line: its tool uses start calls, its tool results end them.
  const addTurn = (entry: Entry.Entry, turn: Conversation.Turn) => {
    transcript = true
    const ms = turn.timestamp
    const time = ms !== null && Number.isSafeInteger(ms) && ms >= 0
      ? BigInt(ms) * 1_000_000n
      : BigInt(entry.timestamp_secs) * 1_000_000_000n
    if (time > latestTurn) latestTurn = time
    const parent = turn.agentId === null ? Spans.SESSION_KEY : turnAgent(entry.sequence, turn.agentId, time)
    for (const part of turn.parts) {
      if (part._tag === "ToolUse") {
        const key = `use:${part.id}`
        if (kept.has(key)) continue
        keep({
          key,
          parent,
          kind: "call",
          name: part.name,
          agentId: null,
          what: part.line,
          sequence: entry.sequence,
          start: time,
          end: null,
          verdict: null,
          error: null,
          children: 0
        })
      } else if (part._tag === "ToolResult") {
        const row = kept.get(`use:${part.id}`)
        if (row === undefined || row.end !== null) continue
        row.end = time < row.start ? row.start : time
        if (part.denied) row.verdict = "deny"
        else if (part.error) row.error = "error"
      }
    }
  }

  const apply = (op: Spans.Op) => {
    switch (op._tag) {
      case "Start": {
        const a = op.attributes
        const kind = op.parent === null ? "session" : a[Spans.Attr.operation] === "execute_tool" ? "call" : "agent"
        const sequence = Number(a["session_journal.entry.sequence"] ?? -1)
        const agentId = kind === "agent" ? String(a[Spans.Attr.agentId] ?? "") : null
        const name = kind === "call"
          ? String(a[Spans.Attr.toolName] ?? "")
          : String(a[Spans.Attr.agentName] ?? agentId ?? "")
        if (kind === "call") callOf.set(sequence, op.key)
        keep({
          key: op.key,
          parent: op.parent,
          kind,
          name,
          agentId,
          what: "",
          sequence,
          start: op.time,
          end: null,
          verdict: null,
          error: null,
          children: 0
        })
        return
      }
      case "Annotate": {
        const row = kept.get(op.key)
        if (row === undefined) return
        const type = op.attributes[Spans.Attr.agentName]
        if (row.kind === "agent" && typeof type === "string") row.name = type
        const verdict = op.attributes["session_journal.verdict"]
        if (verdict === "allow" || verdict === "ask" || verdict === "deny") row.verdict = verdict
        return
      }
      case "Event":
        return
      case "End": {
        const row = kept.get(op.key)
        if (row === undefined) return
        row.end = op.time
        row.error = op.error
        return
      }
    }
  }

  return {
    add: (entry) => {
      const time = BigInt(entry.timestamp_secs) * 1_000_000_000n
      if (time > latest) latest = time
      // A session of transcript lines holds its calls as tool entries too, written
      // when they were archived: copies, read from the lines instead.
      if (transcript && Entry.isTool(entry)) return
      for (const op of fold.add(entry)) apply(op)
      const turn = entry.kind === Conversation.LINE_KIND ? Conversation.ofEntry(entry) : null
      if (turn !== null) return addTurn(entry, turn)
      if (Entry.isTool(entry)) {
        // A tool entry the hooks denied has no decision entry saying so.
        if (!entry.allowed) {
          const row = kept.get(callOf.get(entry.sequence) ?? "")
          if (row !== undefined) row.verdict = "deny"
        }
        return
      }
      const decision = Denials.decisionOf(entry)
      if (decision === null) return
      const row = kept.get(callOf.get(decision.toolSequence ?? entry.sequence - 1) ?? "")
      if (row === undefined) return
      const input = isRecord(entry.payload) ? entry.payload["tool_input"] : undefined
      if (input !== undefined) row.what = CallLine.summary(row.name, input)
      if (decision.verdict === "deny") row.verdict = "deny"
    },
    rows: () => [...kept.values()],
    calls: () => calls,
    render: (options) => render([...kept.values()], calls, transcript ? latestTurn : latest, options)
  }
}

const took = (ms: number): string =>
  ms < 1000 ? `${ms} ms` : ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`

const percent = (x: number): string => `${(Math.round(x * 10_000) / 100).toFixed(2)}%`

/**
 * The waterfall of `rows` as HTML: a table with a row per call and sub-agent,
 * depth first (each row's `data-depth`, `data-parent`, `data-span`,
 * `data-entry`, `data-verdict` and `data-ms`), each bar placed on the axis from
 * the earliest start to the latest end shown. `calls` is how many calls were
 * seen in all, `latest` the latest time seen (nanoseconds).
 *
 * @since 0.1.0
 */
export const render = (
  rows: ReadonlyArray<Row>,
  calls: number,
  latest: bigint,
  options: RenderOptions
): string => {
  const shown = rows.filter((r) => r.kind !== "session")
  if (shown.length === 0) return `<p class="muted" id="waterfall-none">no calls recorded</p>`
  const keys = new Set(rows.map((r) => r.key))
  const under = new Map<string, Array<Row>>()
  for (const r of shown) {
    // A row whose parent left the waterfall stands at the top.
    const parent = r.parent !== null && keys.has(r.parent) ? r.parent : Spans.SESSION_KEY
    const list = under.get(parent)
    if (list === undefined) under.set(parent, [r])
    else list.push(r)
  }
  let t0 = shown[0]!.start
  let t1 = latest
  for (const r of shown) {
    if (r.start < t0) t0 = r.start
    const end = r.end ?? r.start
    if (end > t1) t1 = end
  }
  const spanNs = t1 > t0 ? t1 - t0 : 1_000_000_000n
  const at = (t: bigint) => Number(t - t0) / Number(spanNs)
  const out: Array<string> = []
  const visit = (parent: string, depth: number) => {
    for (const r of under.get(parent) ?? []) {
      const ms = r.end === null ? null : Number((r.end - r.start) / 1_000_000n)
      const left = at(r.start)
      const width = r.end === null ? 0 : at(r.end) - left
      const verdict = r.kind === "call" ? (r.verdict ?? "allow") : ""
      const label = r.kind === "agent"
        ? `<span class="wf-agent">sub-agent <b>${Html.escape(r.name)}</b>${
          r.agentId !== null && r.agentId !== r.name ? ` <code>${Html.escape(r.agentId)}</code>` : ""
        }</span>`
        : `<a href="${Html.escape(options.link(r.sequence))}">${r.sequence}</a> <b>${Html.escape(r.name)}</b>${
          r.what === "" ? "" : ` <code class="what">${Html.escape(r.what)}</code>`
        }`
      const state = r.kind !== "call"
        ? ""
        : verdict === "deny"
        ? ` <em>DENIED</em>`
        : r.error !== null
        ? ` <span class="err">error</span>`
        : ""
      const time = ms === null ? `<span class="muted">open</span>` : took(ms)
      out.push(
        `<tr class="wf-${r.kind}${verdict === "deny" ? " wf-denied" : ""}" data-key="${Html.escape(r.key)}" ` +
          `data-span="${r.kind}" data-depth="${depth}" data-parent="${
            Html.escape(parent)
          }" data-entry="${r.sequence}" ` +
          `data-verdict="${verdict}" data-ms="${ms ?? ""}"${
            r.agentId === null ? "" : ` data-agent="${Html.escape(r.agentId)}"`
          }>` +
          `<td class="wf-label" style="padding-left:${6 + depth * 16}px">${label}${state}</td>` +
          `<td class="wf-time">${time}</td>` +
          `<td class="wf-axis"><span class="wf-bar${r.end === null ? " open" : ""}" style="left:${
            percent(left)
          };width:${percent(width)}" title="${Html.escape(Html.isoSeconds(Number(r.start / 1_000_000_000n)))}${
            ms === null ? "" : ` + ${took(ms)}`
          }"></span></td></tr>`
      )
      visit(r.key, depth + 1)
    }
  }
  visit(Spans.SESSION_KEY, 0)
  const keptCalls = shown.filter((r) => r.kind === "call").length
  const more = keptCalls < calls ? ` <span class="muted">(the newest ${keptCalls} of ${calls} calls)</span>` : ""
  const from = Html.isoSeconds(Number(t0 / 1_000_000_000n))
  const to = Html.isoSeconds(Number(t1 / 1_000_000_000n))
  return `<p class="muted" id="waterfall-range">${Html.escape(from)} → ${Html.escape(to)} (${
    took(Number(spanNs / 1_000_000n))
  })${more}</p>` +
    `<table class="wf" id="waterfall" data-calls="${calls}"><colgroup><col><col class="wf-time"><col class="wf-axis"></colgroup>` +
    `<thead><tr><th>call</th><th>took</th><th>time axis</th></tr></thead><tbody>\n${out.join("\n")}</tbody></table>`
}
