/**
 * The timeline of a session as HTML rows: messages as conversation turns (role
 * and text, collapsed when long), tool calls with their fields and a clear
 * allowed / DENIED mark, decision entries (`Denials`) with their verdict, the
 * guard that denied and its reason, linked to the call they decided (in a page,
 * a call's tool entry, decision and outcome are one row: `Calls`), entries of
 * other kinds as their JSON; transcript lines (custody's and the Agent SDK
 * store's `claude-code.line` entries) as turns of the conversation
 * (`Conversation`), at the time the transcript states. Rows are grouped
 * in pages of `PAGE_SIZE` inside `<details>`, so a long session stays fast to
 * open while every entry stays in the page; no script is needed to read it.
 *
 * @since 0.1.0
 */
import { Entry } from "@session-journal/core"
import * as Calls from "./Calls.ts"
import * as Conversation from "./Conversation.ts"
import * as Denials from "./Denials.ts"
import * as Html from "./Html.ts"

/**
 * Entries per timeline page.
 *
 * @since 0.1.0
 */
export const PAGE_SIZE = 500

/**
 * Text longer than this many characters (or lines) is collapsed behind its start.
 *
 * @since 0.1.0
 */
export const COLLAPSE_CHARS = 600

const COLLAPSE_LINES = 8

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

const partText = (part: unknown): string => {
  if (typeof part === "string") return part
  if (isRecord(part)) {
    if (part["type"] === "text" && typeof part["text"] === "string") return part["text"]
    if (typeof part["type"] === "string") {
      const { type, ...rest } = part
      return `[${type}] ${Html.jsonText(rest, 0)}`
    }
  }
  return Html.jsonText(part, 0)
}

/**
 * The role and text of a message payload: `{role, content}` where content is a
 * string or a list of parts (text parts as their text, other parts as a tagged
 * JSON line); any other payload is shown as its JSON.
 *
 * @since 0.1.0
 */
export const messageText = (payload: unknown): { readonly role: string | null; readonly text: string } => {
  if (isRecord(payload)) {
    const role = typeof payload["role"] === "string" ? payload["role"] : null
    const content = payload["content"] ?? payload["text"]
    if (typeof content === "string") return { role, text: content }
    if (Array.isArray(content)) return { role, text: content.map(partText).join("\n") }
    if (role !== null) {
      const { role: _, ...rest } = payload
      return { role, text: Html.jsonText(rest) }
    }
  }
  return { role: null, text: Html.jsonText(payload) }
}

/**
 * Text as HTML, collapsed behind its first line when long (`<details>`, which
 * opens without script).
 *
 * @since 0.1.0
 */
export const collapsible = (text: string, pre = false): string => {
  const lines = text.split("\n")
  const wrap = (t: string) => (pre ? `<pre>${Html.escape(t)}</pre>` : `<div class="text">${Html.escape(t)}</div>`)
  if (text.length <= COLLAPSE_CHARS && lines.length <= COLLAPSE_LINES) return wrap(text)
  const start = lines[0]!.slice(0, 160)
  return `<details><summary>${
    Html.escape(start)
  }… <span class="muted">(${text.length} characters, ${lines.length} lines)</span></summary>${wrap(text)}</details>`
}

// Compact markup: a 100,000-entry report is mostly these rows. Columns are
// styled by position; <i> is a field label, <code> a value, <em> the verdict.
const cells = (entry: Entry.Entry, kind: string, body: string, time = Html.isoSeconds(entry.timestamp_secs)) =>
  `<td><a href="#e${entry.sequence}">${entry.sequence}</a></td><td>${time}</td>` +
  `<td>${kind}</td><td>${body}</td><td title="${entry.entry_hash}">${Html.shortHash(entry.entry_hash)}</td>`

const partHtml = (part: Conversation.Part): string => {
  switch (part._tag) {
    case "Text":
      return collapsible(part.text)
    case "Thinking":
      return `<details class="thinking"><summary class="muted">thinking</summary>${collapsible(part.text)}</details>`
    case "ToolUse":
      return `<div class="use">→ <b>${Html.escape(part.name)}</b> <code>${Html.escape(part.line)}</code> ` +
        `<span class="muted">${Html.escape(part.id)}</span></div>`
    case "ToolResult":
      return `<div class="result${part.error || part.denied ? " failed" : ""}">← result of <code>${
        Html.escape(part.id)
      }</code>${part.denied ? " <em>refused</em>" : part.error ? " <em>error</em>" : ""}</div>` +
        collapsible(part.text, true)
  }
}

// A transcript line as a turn: its role (a note for records that are not
// messages), the sub-agent it belongs to, its parts, the time the transcript
// states (the time it was journaled in the cell's title) and the line on demand.
const turnRow = (entry: Entry.Entry, turn: Conversation.Turn, attrs: string): string => {
  const recorded = Html.isoSeconds(entry.timestamp_secs)
  const time = turn.timestamp === null
    ? recorded
    : `<span title="journaled ${recorded}">${Html.isoSeconds(Math.floor(turn.timestamp / 1000))}</span>`
  const who = turn.role === "note"
    ? `<span class="muted">${Html.escape(turn.type)}</span>`
    : `<b class="role">${turn.role}</b>`
  const agent = turn.agentId === null
    ? ""
    : ` <span class="agent">sub-agent <code>${Html.escape(turn.agentId)}</code></span>`
  const raw = Entry.isTool(entry) ?
    "" :
    `<details class="raw"><summary class="muted">line</summary>${
      collapsible(Html.jsonText(entry.payload), true)
    }</details>`
  const body = `<div>${who}${agent}</div>` + turn.parts.map(partHtml).join("") + raw
  const cls = `msg turn role-${turn.role}${turn.agentId === null ? "" : " sub"}`
  return `<tr ${attrs} data-agent="${Html.escape(turn.agentId ?? "main")}" class="${cls}">${
    cells(entry, "transcript", body, time)
  }</tr>`
}

/**
 * One entry as a table row, with `id="eN"` and `data-seq` / `data-kind`.
 *
 * @since 0.1.0
 */
export const row = (entry: Entry.Entry): string => {
  const attrs = `id="e${entry.sequence}" data-seq="${entry.sequence}" data-kind="${Html.escape(entry.kind)}"`
  if (Entry.isTool(entry)) {
    const body = `<b>${Html.escape(entry.tool_name)}</b> <i>server</i> <code>${Html.escape(entry.server_id)}</code> ` +
      `<i>agent</i> <code>${Html.escape(entry.agent_id)}</code> · <i>read</i> ${Html.bytes(entry.bytes_read)} · ` +
      `<i>written</i> ${Html.bytes(entry.bytes_written)} · <i>depth</i> ${entry.delegation_depth} · ` +
      (entry.allowed ? `<em>allowed</em>` : `<em>DENIED</em>`)
    return `<tr ${attrs} class="tool ${entry.allowed ? "allowed" : "denied"}">${cells(entry, "tool", body)}</tr>`
  }
  const turn = Conversation.ofEntry(entry)
  if (turn !== null) return turnRow(entry, turn, attrs)
  if (entry.kind === "message") {
    const { role, text } = messageText(entry.payload)
    const roleClass = role === null ? "" : ` role-${Html.escape(role.replace(/[^A-Za-z0-9_-]/g, "_"))}`
    const body = (role === null ? "" : `<b class="role">${Html.escape(role)}</b>`) + collapsible(text)
    return `<tr ${attrs} class="msg${roleClass}">${cells(entry, "message", body)}</tr>`
  }
  const decision = Denials.decisionOf(entry)
  if (decision !== null) {
    const deny = decision.verdict === "deny"
    const call = decision.toolSequence === null
      ? ""
      : ` <i>call</i> <a href="#e${decision.toolSequence}">${decision.toolSequence}</a>`
    const head = `<em>${deny ? "DENIED" : decision.verdict === "ask" ? "asked" : "allowed"}</em>` + call +
      (decision.guard === null ? "" : ` <i>by</i> <code class="guard">${Html.escape(decision.guard)}</code>`) +
      (decision.reason === null ? "" : ` · ${Html.escape(decision.reason)}`)
    const body = `<div>${head}</div>` + collapsible(Html.jsonText(entry.payload), true)
    return `<tr ${attrs} class="other decision ${deny ? "denied" : "allowed"}">${
      cells(entry, `<code>${Html.escape(entry.kind)}</code>`, body)
    }</tr>`
  }
  const body = collapsible(Html.jsonText(entry.payload), true)
  return `<tr ${attrs} class="other">${cells(entry, `<code>${Html.escape(entry.kind)}</code>`, body)}</tr>`
}

const colgroup =
  `<table class="tl"><colgroup><col class="seq"><col class="time"><col class="kind"><col><col class="hash"></colgroup>`

/**
 * The opening of a timeline table up to its body, where `row`s follow; then
 * `TABLE_END`. For pages written out row by row (the viewer's window).
 *
 * @since 0.1.0
 */
export const TABLE_START = colgroup +
  `<thead><tr><th>#</th><th>time (UTC)</th><th>kind</th><th>entry</th><th>hash</th></tr></thead><tbody>\n`

/**
 * The end of a table `TABLE_START` opened.
 *
 * @since 0.1.0
 */
export const TABLE_END = `</tbody></table>`

/**
 * The empty table body with id `live` where the viewer appends new rows; it
 * continues the columns of the table before it, without a header of its own.
 *
 * @since 0.1.0
 */
export const LIVE_TABLE = colgroup + `<tbody id="live"></tbody></table>\n`

/**
 * The timeline as HTML chunks (a page's opening, each row, its end), so a caller
 * can write them out as they are made. Pages are open when there are at most four of them; otherwise
 * the first and the last are. With `live`, an empty table body with id `live`
 * follows, where the viewer appends new rows.
 *
 * @since 0.1.0
 */
export const pages = function*(
  entries: ReadonlyArray<Entry.Entry>,
  options?: { readonly live?: boolean }
): Generator<string> {
  const count = Math.ceil(entries.length / PAGE_SIZE)
  for (let p = 0; p < count; p++) {
    const slice = entries.slice(p * PAGE_SIZE, (p + 1) * PAGE_SIZE)
    const open = count <= 4 || p === 0 || p === count - 1
    const first = slice[0]!.sequence
    const last = slice[slice.length - 1]!.sequence
    const denied = slice.reduce((n, e) => n + (Entry.isTool(e) && !e.allowed ? 1 : 0), 0)
    yield `<details class="page"${open ? " open" : ""}><summary>entries ${first}–${last}` +
      `${denied > 0 ? ` <span class="badge bad">${denied} denied</span>` : ""}</summary><div>` +
      TABLE_START
    // Row by row: joining a page first costs more than the rows themselves. A
    // call's entries (tool entry, decision, outcome) are one row (`Calls`).
    const calls = Calls.grouper(row)
    for (const entry of slice) {
      const html = calls.add(entry)
      if (html !== "") yield html
    }
    yield calls.end() + TABLE_END + `</div></details>\n`
  }
  if (entries.length === 0) yield `<p class="muted" id="no-entries">no entries yet</p>`
  // Live rows continue the last page's columns, without a header of their own.
  if (options?.live === true) yield LIVE_TABLE
}
