/**
 * The report of one session as one self-contained HTML page: a header (id,
 * title, labels, time span, counts and the verification done while the report
 * was made, with how to re-check it), charts as inline SVG and the timeline.
 * No network, no external assets and no script: it opens from `file://` or as
 * a mail attachment, and its Content-Security-Policy forbids scripts outright.
 * The live viewer (`Serve`) renders the same page with one script of its own.
 *
 * @since 0.3.0
 */
import { Entry, JournalState, SessionJournal } from "@session-journal/core"
import type { CorruptJournal, SessionMeta } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import * as Verify from "../commands/Verify.ts"
import type * as Storage from "../Storage.ts"
import * as Charts from "./Charts.ts"
import * as Conversation from "./Conversation.ts"
import * as Denials from "./Denials.ts"
import * as Html from "./Html.ts"
import * as Timeline from "./Timeline.ts"

/**
 * Figures of a session computed in one pass over its entries.
 *
 * @since 0.3.0
 */
export interface Summary {
  readonly entries: number
  /** Message entries and transcript lines of the user or the assistant. */
  readonly messages: number
  readonly tools: number
  readonly others: number
  readonly denied: number
  /** The earliest and the latest time (a transcript line's: the time it states). */
  readonly firstSecs: number | null
  readonly lastSecs: number | null
  /** Calls per tool name, denied calls included (as `stats` counts them). */
  readonly toolCounts: ReadonlyMap<string, number>
  /** Denials per guard reason, where entries record one (see `deniedReasons`). */
  readonly reasons: ReadonlyMap<string, number>
  /** The denied calls with the guards that denied them (`Denials`). */
  readonly denials: Denials.Result
  /** Bytes read and written up to and including each entry. */
  readonly cumulativeRead: ReadonlyArray<number>
  readonly cumulativeWritten: ReadonlyArray<number>
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * The guard reasons a payload records for denied calls: objects
 * `{"type":"execution-denied","reason":…}` (what `@session-journal/ai` returns to
 * the model for a denied call), `denied_reason` fields (as `demo --json`
 * prints them) and decision entries `{"verdict":"deny","reason":…}` (`Denials`),
 * searched a few levels deep.
 *
 * @since 0.3.0
 */
export const deniedReasons = (payload: unknown): Array<string> => {
  const out: Array<string> = []
  const visit = (v: unknown, depth: number) => {
    if (depth > 6) return
    if (Array.isArray(v)) {
      for (const x of v) visit(x, depth + 1)
    } else if (isRecord(v)) {
      if (v["type"] === "execution-denied" && typeof v["reason"] === "string") out.push(v["reason"])
      if (typeof v["denied_reason"] === "string") out.push(v["denied_reason"])
      if (v["verdict"] === "deny" && typeof v["reason"] === "string") out.push(v["reason"])
      for (const k in v) visit(v[k], depth + 1)
    }
  }
  visit(payload, 0)
  return out
}

/**
 * A summary built one entry at a time, for a history read as a stream: `add`
 * each entry in order, then `summary`. It keeps the counts and the two
 * cumulative byte series (one number per entry), not the entries.
 *
 * @since 0.3.0
 */
export interface Summarizer {
  readonly add: (entry: Entry.Entry) => void
  readonly summary: () => Summary
}

/**
 * A new, empty `Summarizer`.
 *
 * @since 0.3.0
 */
export const summarizer = (): Summarizer => {
  let count = 0, messages = 0, tools = 0, others = 0, denied = 0, read = 0, written = 0
  let firstSecs: number | null = null
  let lastSecs: number | null = null
  const toolCounts = new Map<string, number>()
  const reasons = new Map<string, number>()
  const cumulativeRead: Array<number> = []
  const cumulativeWritten: Array<number> = []
  const denials = Denials.tally()
  return {
    add: (e) => {
      count++
      denials.add(e)
      // A transcript line happened when the transcript says, not when it was journaled.
      const turn = e.kind === Conversation.LINE_KIND ? Conversation.ofEntry(e) : null
      const secs = turn?.timestamp == null ? e.timestamp_secs : Math.floor(turn.timestamp / 1000)
      firstSecs = firstSecs === null || secs < firstSecs ? secs : firstSecs
      lastSecs = lastSecs === null || secs > lastSecs ? secs : lastSecs
      if (Entry.isTool(e)) {
        tools++
        if (!e.allowed) denied++
        toolCounts.set(e.tool_name, (toolCounts.get(e.tool_name) ?? 0) + 1)
        read += e.bytes_read
        written += e.bytes_written
      } else {
        if (e.kind === "message" || (turn !== null && turn.role !== "note")) messages++
        else others++
        // An outcome's bytes count as `stats` counts them (docs/DESIGN.md §13).
        if (e.kind === Entry.OUTCOME_KIND) {
          const flow = Entry.outcomeBytes(e.payload)
          read += flow.read
          written += flow.written
        }
        for (const r of deniedReasons(e.payload)) reasons.set(r, (reasons.get(r) ?? 0) + 1)
      }
      cumulativeRead.push(read)
      cumulativeWritten.push(written)
    },
    summary: () => ({
      entries: count,
      messages,
      tools,
      others,
      denied,
      firstSecs,
      lastSecs,
      toolCounts,
      reasons,
      denials: denials.result(),
      cumulativeRead,
      cumulativeWritten
    })
  }
}

/**
 * Computes the summary of a session's entries.
 *
 * @since 0.3.0
 */
export const summarize = (entries: ReadonlyArray<Entry.Entry>): Summary => {
  const s = summarizer()
  for (const e of entries) s.add(e)
  return s.summary()
}

const SUB_KEYS = ["sub_sessions", "subagent_sessions", "sub_agents", "subagents", "child_sessions", "children"]
const PARENT_KEYS = ["parent_session", "parent"]

const sessionRef = (v: unknown): string | null => {
  const id = isRecord(v) ? (v["id"] ?? v["session_id"]) : v
  return Entry.isSessionId(id) ? id : null
}

/**
 * Sessions the metadata names: sub-agent sessions (`data.sub_sessions`,
 * `subagent_sessions`, `sub_agents`, `subagents`, `child_sessions` or `children`:
 * a list of ids or of `{id}` objects), the parent (`data.parent_session` or
 * `data.parent`), and the two records of one Claude Code session: the live hooked
 * session (`data.hooked_session`, named by custody of its transcript) and the
 * custody of its transcript (`data.custody_session`, named by the hooked
 * session). Only valid session ids are kept.
 *
 * @since 0.3.0
 */
export const relatedSessions = (meta: SessionMeta.SessionMeta | null): {
  readonly parent: string | null
  readonly subs: ReadonlyArray<string>
  readonly hooked: string | null
  readonly custody: string | null
} => {
  const data = meta?.data
  if (!isRecord(data)) return { parent: null, subs: [], hooked: null, custody: null }
  const subs = new Set<string>()
  for (const k of SUB_KEYS) {
    const list = data[k]
    if (Array.isArray(list)) {
      for (const v of list) {
        const id = sessionRef(v)
        if (id !== null) subs.add(id)
      }
    }
  }
  let parent: string | null = null
  for (const k of PARENT_KEYS) parent ??= sessionRef(data[k])
  return {
    parent,
    subs: [...subs],
    hooked: sessionRef(data["hooked_session"]),
    custody: sessionRef(data["custody_session"])
  }
}

/**
 * Which session counts this session's tool calls: the hooked session its
 * metadata names (`data.hooked_session`) when that session exists, whose counters
 * are then authoritative (it decided the calls; the tool entries here are copies
 * of them from the transcript), else null: this session counts its own calls.
 * Summing both would count every call twice.
 *
 * @since 0.4.0
 */
export const countedIn = (meta: SessionMeta.SessionMeta | null) =>
  Effect.gen(function*() {
    const hooked = relatedSessions(meta).hooked
    return hooked !== null && (yield* exists(hooked)) ? hooked : null
  })

/**
 * Whether session `id` exists in the journal; one that exists but does not load
 * cleanly still exists.
 *
 * @since 0.8.0
 */
export const exists = (id: string): Effect.Effect<boolean, never, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const found = yield* Effect.result(journal.head(id))
    return found._tag === "Success" || found.failure._tag !== "SessionNotFound"
  })

/**
 * Entries read past the point where verification failed: `from` is the sequence
 * where it failed, `count` how many such entries were read, `entries` the first
 * `MAX_UNVERIFIED` of them.
 *
 * @since 0.8.0
 */
export interface Unverified {
  readonly from: number
  readonly count: number
  readonly entries: ReadonlyArray<Entry.Entry>
}

/**
 * How many entries past a failed verification a report shows (apart, marked
 * unverified); the rest are only counted.
 *
 * @since 0.8.0
 */
export const MAX_UNVERIFIED = 200

/**
 * The sequence from which a verification report does not vouch for the stored
 * entries: the entry of an integrity violation, or where corruption starts; null
 * when it verified, or when the corruption names no sequence (the history read
 * then stops at the damage by itself).
 *
 * @since 0.8.0
 */
export const unverifiedFrom = (r: Verify.Report | null): number | null =>
  r === null || r.ok ? null : r.violation?.sequence ?? r.corruption?.sequence ?? null

/**
 * Everything a report page shows.
 *
 * @since 0.3.0
 */
export interface Model {
  readonly id: string
  readonly meta: SessionMeta.SessionMeta | null
  readonly entries: ReadonlyArray<Entry.Entry>
  readonly summary: Summary
  /** The verification done for this page (null when not asked for). */
  readonly verify: Verify.Report | null
  /**
   * The stored entries from the first one that did not verify on (`from`), kept
   * apart: counted in nothing, charted nowhere, shown only as unverified. `count`
   * of them were read, the first `MAX_UNVERIFIED` are in `entries`; null when
   * everything read verified (or nothing was verified).
   */
  readonly unverified: Unverified | null
  /** The exported head of the session's state when it was read. */
  readonly head: string
  /** When the page was made, milliseconds since the epoch. */
  readonly generatedAt: number
  /** The session that counts this one's tool calls, when another does (`countedIn`). */
  readonly countedIn?: string | null | undefined
}

/**
 * What a page says about a session besides its entries: everything of the
 * `Model` but the entries, and the sequences of the first and last entry read
 * (null when none could be).
 *
 * @since 0.3.0
 */
export interface Overview extends Omit<Model, "entries"> {
  readonly first: number | null
  readonly last: number | null
}

/**
 * Reads a session for its report: its state, its full history as a stream
 * (each entry handed to `each` in order, and summarized) and, unless `verify`
 * is false, a verification of the whole stored history. Only what `each` keeps
 * of the entries stays in memory.
 *
 * @since 0.3.0
 */
export const overview = (
  id: string,
  storage: Storage.Options,
  options?: { readonly verify?: boolean; readonly each?: (entry: Entry.Entry) => void }
) =>
  Effect.gen(function*() {
    yield* Effect.fromResult(Entry.validateSessionId(id))
    const journal = yield* SessionJournal.SessionJournal
    const isDamage = (e: { readonly _tag: string }) => e._tag === "CorruptJournal" || e._tag === "IntegrityViolation"
    const summary = summarizer()
    const each = options?.each
    let first: number | null = null
    let last: number | null = null
    // The verification comes first: it says from which entry on the stored history
    // is not vouched for, and those entries are kept apart, out of every count and
    // chart. A read that meets damage keeps the valid prefix; that is allowed only
    // when the verification found the damage too.
    let damage: CorruptJournal | undefined
    const report = options?.verify === false ? null : yield* Verify.session(id, storage)
    const from = unverifiedFrom(report)
    const apart: Array<Entry.Entry> = []
    let apartCount = 0
    yield* Stream.runForEachArray(
      journal.entries(id).pipe(
        Stream.catch((e) => {
          if (e._tag !== "CorruptJournal") return Stream.fail(e)
          damage = e
          return Stream.empty
        })
      ),
      (chunk) =>
        Effect.sync(() => {
          for (const e of chunk) {
            if (from !== null && e.sequence >= from) {
              apartCount++
              if (apart.length < MAX_UNVERIFIED) apart.push(e)
              continue
            }
            first ??= e.sequence
            last = e.sequence
            summary.add(e)
            each?.(e)
          }
        })
    )
    const damaged = report !== null && !report.ok
    if (damage !== undefined && !damaged) return yield* Effect.fail(damage)
    const state = yield* journal.state(id).pipe(
      Effect.map((s) => ({ meta: s.meta, head: JournalState.head(s) })),
      Effect.catch((
        e
      ) => (damaged && isDamage(e) ? Effect.succeed({ meta: null, head: report.head ?? "" }) : Effect.fail(e)))
    )
    const counted = yield* countedIn(state.meta)
    const result: Overview = {
      id,
      meta: state.meta,
      countedIn: counted,
      summary: summary.summary(),
      verify: report,
      unverified: from === null || apartCount === 0 ? null : { from, count: apartCount, entries: apart },
      head: report?.head ?? state.head,
      generatedAt: Date.now(),
      first,
      last
    }
    return result
  })

/**
 * Reads a session for its report: its state, its full history and (unless
 * `verify` is false) a verification of the whole stored history.
 *
 * @since 0.3.0
 */
export const collect = (id: string, storage: Storage.Options, options?: { readonly verify?: boolean }) =>
  Effect.suspend(() => {
    const entries: Array<Entry.Entry> = []
    return Effect.map(overview(id, storage, { ...options, each: (e) => entries.push(e) }), (o): Model => ({
      id: o.id,
      meta: o.meta,
      entries,
      summary: o.summary,
      verify: o.verify,
      unverified: o.unverified,
      head: o.head,
      generatedAt: o.generatedAt,
      countedIn: o.countedIn
    }))
  })

const duration = (secs: number): string => {
  if (secs < 60) return `${secs} s`
  if (secs < 3600) return `${Math.floor(secs / 60)} min ${secs % 60} s`
  return `${Math.floor(secs / 3600)} h ${Math.floor((secs % 3600) / 60)} min`
}

/**
 * The verification box: status, entries checked, the exported head in full and
 * the command that re-checks it.
 *
 * @since 0.3.0
 */
export const verifyBox = (id: string, r: Verify.Report, at: number = Date.now()): string => {
  const status = !r.ok
    ? (r.violation !== null
      ? `<span class="badge bad">INTEGRITY VIOLATION</span>`
      : `<span class="badge bad">CORRUPTION</span>`)
    : r.torn_tail !== null
    ? `<span class="badge warn">ok, torn tail</span>`
    : `<span class="badge ok">verified ok</span>`
  const problem = r.violation !== null
    ? `<p>at sequence ${r.violation.sequence}: ${Html.escape(r.violation.what)} expected <code>${
      Html.escape(r.violation.expected)
    }</code>, found <code>${Html.escape(r.violation.actual)}</code></p>`
    : r.corruption !== null
    ? `<p>in <code>${Html.escape(r.corruption.segment)}</code> at offset ${r.corruption.offset}: ${
      Html.escape(r.corruption.reason)
    }</p>`
    : r.torn_tail !== null
    ? `<p class="muted">a torn tail of ${r.torn_tail.bytes} bytes (an unfinished last write, benign) in <code>${
      Html.escape(r.torn_tail.segment)
    }</code></p>`
    : ""
  const from = unverifiedFrom(r)
  const prefix = r.ok
    ? ""
    : from === null
    ? `<p>The counts, charts and timeline below hold only the entries that could be read before the damage.</p>`
    : `<p>The counts, charts and timeline below hold only the entries before sequence ${from}, which verified. ` +
      `The stored entries from ${from} on are not vouched for: they count in nothing here and appear only apart, ` +
      `marked not verified.</p>`
  return `<section class="verify${r.ok ? "" : " failed"}" id="verification" data-ok="${r.ok}">` +
    `<b>Verification</b> ${status} <span class="muted">at ${Html.escape(new Date(at).toISOString())}</span>` +
    `<dl class="facts"><dt>entries checked</dt><dd id="entries-checked">${r.entries_checked}</dd>` +
    `<dt>exported head</dt><dd class="mono" id="head">${Html.escape(r.head ?? "(none)")}</dd>` +
    `<dt>re-check</dt><dd><code>session-journal verify ${
      Html.escape(id)
    }</code> and compare the head it prints with the one above</dd></dl>` +
    problem + prefix + `</section>`
}

/**
 * The header: title, id, labels, time span, counts, related sessions and the
 * verification box.
 *
 * @since 0.3.0
 */
export const header = (m: Omit<Model, "entries">, link: (id: string) => string): string => {
  const s = m.summary
  const title = m.meta?.title
  const labels = (m.meta?.labels ?? []).map((l) => `<span class="badge label">${Html.escape(l)}</span>`).join(" ")
  const span = s.firstSecs === null || s.lastSecs === null
    ? "—"
    : `${Html.escape(Html.isoSeconds(s.firstSecs))} → ${Html.escape(Html.isoSeconds(s.lastSecs))} (${
      duration(s.lastSecs - s.firstSecs)
    })`
  const related = relatedSessions(m.meta)
  const rel = [
    related.parent === null
      ? ""
      : `<dt>parent session</dt><dd><a href="${Html.escape(link(related.parent))}">${
        Html.escape(related.parent)
      }</a></dd>`,
    related.subs.length === 0
      ? ""
      : `<dt>sub-agent sessions</dt><dd id="sub-sessions">${
        related.subs.map((id) => `<a href="${Html.escape(link(id))}">${Html.escape(id)}</a>`).join(", ")
      }</dd>`,
    // Named only when it exists: a session never hooked has none to link to.
    related.hooked === null || m.countedIn !== related.hooked
      ? ""
      : `<dt>hooked session</dt><dd id="hooked-session"><a href="${Html.escape(link(related.hooked))}">${
        Html.escape(related.hooked)
      }</a>` +
        ` <span class="muted">(it decided and counted these calls: the tool entries here are copies from the transcript; read its counters)</span></dd>`,
    related.custody === null
      ? ""
      : `<dt>transcript custody</dt><dd id="custody-session"><a href="${Html.escape(link(related.custody))}">${
        Html.escape(related.custody)
      }</a></dd>`
  ].join("")
  return `<header><h1 id="title">${Html.escape(title ?? m.id)}</h1>` +
    `<dl class="facts"><dt>session</dt><dd class="mono" id="session-id">${Html.escape(m.id)}</dd>` +
    (labels === "" ? "" : `<dt>labels</dt><dd id="labels">${labels}</dd>`) +
    `<dt>time span</dt><dd id="span">${span}</dd>` +
    `<dt>entries</dt><dd><span id="count-entries">${s.entries}</span>: <span id="count-messages">${s.messages}</span> messages, ` +
    `<span id="count-tools">${s.tools}</span> tool calls (<span id="count-denied" class="${
      s.denied > 0 ? "badge bad" : ""
    }">${s.denied} denied</span>)` +
    (m.countedIn == null
      ? ""
      : ` <span class="muted" id="counted-in">copies, counted in ${Html.escape(m.countedIn)}</span>`) +
    (s.others > 0 ? `, <span id="count-others">${s.others}</span> other` : "") + `</dd>` +
    `<dt>data flow</dt><dd>${Html.escape(Html.bytes(s.cumulativeRead[s.entries - 1] ?? 0))} read, ` +
    `${Html.escape(Html.bytes(s.cumulativeWritten[s.entries - 1] ?? 0))} written</dd>` +
    rel + `</dl>` +
    (m.verify === null ? "" : verifyBox(m.id, m.verify, m.generatedAt)) + `</header>`
}

/**
 * The charts: calls per tool, cumulative bytes read and written, denials per
 * guard when decision entries name guards (`Denials`), and denials per guard
 * reason when entries record reasons.
 *
 * @since 0.3.0
 */
export const charts = (s: Summary): string => {
  const guards = s.denials.byGuard.length === 0
    ? ""
    : `<div class="chart"><h3>Denials per guard</h3>${
      Charts.bars(s.denials.byGuard, { className: "chart-guards", title: "denials per guard", color: "#cf222e" })
    }</div>`
  const reasons = s.reasons.size === 0
    ? ""
    : `<div class="chart"><h3>Denials per guard reason</h3>${
      Charts.bars([...s.reasons], { className: "chart-reasons", title: "denials per guard reason", color: "#cf222e" })
    }</div>`
  return `<h2>Charts</h2><div class="charts">` +
    `<div class="chart"><h3>Calls per tool</h3>${
      Charts.bars([...s.toolCounts], { className: "chart-tools", title: "calls per tool" })
    }</div>` +
    `<div class="chart"><h3>Bytes over the session (cumulative)</h3>${
      Charts.lines([
        { name: "read", color: "#0969da", values: s.cumulativeRead },
        { name: "written", color: "#bf3989", values: s.cumulativeWritten }
      ], { className: "chart-bytes", title: "cumulative bytes read and written" })
    }</div>` + guards + reasons + `</div>`
}

/**
 * The denied calls, when there are any: how many, per guard, how many with no
 * guard recorded (refused by something that names none, such as Claude Code's
 * own permission rules in a transcript), and the newest `Denials.MAX_RECENT` with
 * their tool, agent, guard and reason, each linked to its entry.
 *
 * @since 0.4.0
 */
export const denials = (s: Summary): string => {
  const d = s.denials
  if (d.denied === 0) return ""
  const by = d.byGuard.map(([g, n]) => `<code>${Html.escape(g)}</code> ${n}`)
  if (d.unguarded > 0) by.push(`no guard recorded ${d.unguarded}`)
  const rows = d.recent.map((x) =>
    `<tr><td><a href="#e${x.sequence}">${x.sequence}</a></td><td><b>${Html.escape(x.tool_name)}</b></td>` +
    `<td><code>${Html.escape(x.agent_id)}</code></td><td>${
      x.guard === null ? "—" : `<code>${Html.escape(x.guard)}</code>`
    }</td>` +
    `<td>${x.reason === null ? "—" : Html.escape(x.reason)}</td></tr>`
  ).join("")
  const shown = d.recent.length < d.denied ? ` <span class="muted">(the newest ${d.recent.length})</span>` : ""
  return `<h2>Denials</h2><p id="denials-summary"><span class="badge bad">${d.denied} denied</span> ${
    by.join(" · ")
  }</p>` +
    `<table class="tl" id="denials"><thead><tr><th>#</th><th>tool</th><th>agent</th><th>guard</th><th>reason</th></tr></thead>` +
    `<tbody>${rows}</tbody></table>${shown}`
}

/**
 * The entries past a failed verification, apart from the timeline: each row marked
 * unverified, the first (where verification failed) marked as such.
 *
 * @since 0.8.0
 */
export const unverifiedSection = function*(u: Unverified): Generator<string> {
  const more = u.count > u.entries.length ? ` The first ${u.entries.length} of ${u.count} are shown.` : ""
  yield `<section id="unverified" class="unverified"><h2>Not verified</h2>` +
    `<p><span class="badge bad">NOT VERIFIED</span> ${u.count} stored entr${
      u.count === 1 ? "y" : "ies"
    } from sequence ${u.from} on. ` +
    `Verification failed at entry ${u.from}; nothing after it is vouched for, so these are shown as stored and ` +
    `counted in no total, chart or denial above.${more}</p>` + Timeline.TABLE_START
  for (const e of u.entries) {
    const mark = e.sequence === u.from ? "failed-here" : "unverified"
    yield Timeline.row(e).replace(/^<tr /, `<tr data-verified="false" data-mark="${mark}" `) + "\n"
  }
  yield Timeline.TABLE_END + `</section>\n`
}

/**
 * What differs between the report file and the viewer's page.
 *
 * @since 0.3.0
 */
export interface PageOptions {
  /** The link to another session's page (a file next to this one, or a viewer path). */
  readonly link: (id: string) => string
  /** Extra `<head>` content and the script source, for the viewer. */
  readonly live?: { readonly script: string; readonly from: number } | undefined
  /** A link back to the list, for the viewer. */
  readonly back?: string | undefined
}

const CSP_REPORT = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
const CSP_LIVE =
  "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'"

/**
 * The opening of a page: doctype, metadata, the Content-Security-Policy and the
 * style sheet, then `<body><main>`.
 *
 * @since 0.3.0
 */
export const documentStart = (title: string, live: boolean): string =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
  `<meta http-equiv="Content-Security-Policy" content="${live ? CSP_LIVE : CSP_REPORT}">` +
  `<meta name="viewport" content="width=device-width,initial-scale=1">` +
  `<title>${Html.escape(title)}</title><style>${Html.STYLE}</style></head><body><main>`

/**
 * The page of a session as HTML chunks, in order; joined they are the whole
 * document.
 *
 * @since 0.3.0
 */
export const render = function*(m: Model, options: PageOptions): Generator<string> {
  const live = options.live !== undefined
  yield documentStart(`${m.meta?.title ?? m.id} · session-journal`, live)
  if (options.back !== undefined) yield `<p><a href="${Html.escape(options.back)}">← all sessions</a></p>`
  yield header(m, options.link)
  yield charts(m.summary)
  yield denials(m.summary)
  yield `<h2>Timeline</h2>`
  if (live) {
    yield `<p class="muted" id="live-status" data-from="${
      options.live!.from
    }">live: new entries appear below as they are written</p>`
  }
  yield* Timeline.pages(m.entries, { live })
  if (m.unverified !== null) yield* unverifiedSection(m.unverified)
  yield `<footer class="muted"><p>Written by <code>session-journal</code> at ${
    Html.escape(new Date(m.generatedAt).toISOString())
  }. ` +
    `Charts and header as of then.</p></footer></main>`
  if (live) yield `<script src="${Html.escape(options.live!.script)}" defer></script>`
  yield `</body></html>\n`
}
