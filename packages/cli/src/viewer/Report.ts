/**
 * The report of one session as one self-contained HTML page: a header (id,
 * title, labels, time span, counts and the verification done while the report
 * was made, with how to re-check it), charts as inline SVG and the timeline.
 * No network, no external assets and no script: it opens from `file://` or as
 * a mail attachment, and its Content-Security-Policy forbids scripts outright.
 * The live viewer (`Serve`) renders the same page with one script of its own.
 * What the page shows is read by `ReportModel`.
 *
 * @since 0.1.0
 */
import type * as Verify from "../Verify.ts"
import * as Charts from "./Charts.ts"
import * as Html from "./Html.ts"
import {
  type Model,
  relatedSessions,
  type Story,
  type Summary,
  type Unverified,
  unverifiedFrom
} from "./ReportModel.ts"
import * as Stories from "./Stories.ts"
import * as Timeline from "./Timeline.ts"
import * as Waterfall from "./Waterfall.ts"

const duration = (secs: number): string => {
  if (secs < 60) return `${secs} s`
  if (secs < 3600) return `${Math.floor(secs / 60)} min ${secs % 60} s`
  return `${Math.floor(secs / 3600)} h ${Math.floor((secs % 3600) / 60)} min`
}

/**
 * The verification box: status, entries checked, the exported head in full and
 * the command that re-checks it; `at` is when it was checked (ms since the epoch).
 * With `apart`, the page shows the entries past a failure apart, marked not
 * verified; without it the box says they are not shown.
 *
 * @since 0.1.0
 */
export const verifyBox = (id: string, r: Verify.Report, at: number, apart = false): string => {
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
      `The stored entries from ${from} on are not vouched for: they count in nothing here and ${
        apart ? "appear only apart, marked not verified" : "are not shown"
      }.</p>`
  return `<section class="verify${r.ok ? "" : " failed"}" id="verification" data-ok="${r.ok}">` +
    `<b>Verification</b> ${status} <span class="muted">at ${Html.escape(new Date(at).toISOString())}</span>` +
    `<dl class="facts"><dt>entries checked</dt><dd id="entries-checked">${r.entries_checked}</dd>` +
    `<dt>exported head</dt><dd class="mono" id="head">${Html.escape(r.head ?? "(none)")}</dd>` +
    `<dt>re-check</dt><dd><code>session-journal verify ${
      Html.escape(id)
    }</code> and compare the head it prints with the one above</dd></dl>` +
    problem + prefix + `</section>`
}

// The agent session this one is of, and every journal session of its story, each
// after its role, linked (this one named, not linked).
const storyFacts = (story: Story, link: (id: string) => string): string =>
  `<dt>agent session</dt><dd id="story" data-story="${Html.escape(story.member.agentSession)}"><span class="mono">${
    Html.escape(story.member.agentSession)
  }</span> <span class="muted">(this is its ${
    Html.escape(Stories.roleText(story.member))
  } session)</span> one story: ` +
  Stories.ordered(story.members).map((m) =>
    `<span class="story-member" data-role="${m.role}">${Html.escape(Stories.roleText(m))} ${
      m.id === story.member.id
        ? `<b class="mono">${Html.escape(m.id)}</b>`
        : `<a class="mono" href="${Html.escape(link(m.id))}">${Html.escape(m.id)}</a>`
    }</span>`
  ).join(" · ") + `</dd>`

/**
 * The header: title, id, labels, time span, counts, related sessions, the story
 * of its agent session and the
 * verification box. `apart` says whether the page shows the entries past a
 * failed verification apart (by default: when the model read any).
 *
 * @since 0.1.0
 */
export const header = (
  m: Omit<Model, "entries">,
  link: (id: string) => string,
  apart: boolean = m.unverified !== null
): string => {
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
      }</a></dd>`,
    m.story == null ? "" : storyFacts(m.story, link)
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
    `<dt>data flow</dt><dd id="data-flow">${Html.escape(Html.bytes(s.read))} read, ` +
    `${Html.escape(Html.bytes(s.written))} written</dd>` +
    rel + `</dl>` +
    (m.verify === null ? "" : verifyBox(m.id, m.verify, m.generatedAt, apart)) + `</header>`
}

/**
 * The charts: calls per tool, cumulative bytes read and written, denials per
 * guard when decision entries name guards (`Denials`), and denials per guard
 * reason when entries record reasons.
 *
 * @since 0.1.0
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
      ], { className: "chart-bytes", title: "cumulative bytes read and written", lastEntry: s.entries - 1 })
    }</div>` + guards + reasons + `</div>`
}

/**
 * The denied calls, when there are any: how many, per guard, how many with no
 * guard recorded (refused by something that names none, such as Claude Code's
 * own permission rules in a transcript), and the newest `Denials.MAX_RECENT` with
 * their tool, agent, guard and reason, each linked to its entry.
 *
 * @since 0.1.0
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
 * unverified, the first (where verification failed) marked as such, or, when the
 * entries from there on are missing (a cut), a row saying which, where they stood.
 *
 * @since 0.1.0
 */
export const unverifiedSection = function*(u: Unverified): Generator<string> {
  const more = u.count > u.entries.length ? ` The first ${u.entries.length} of ${u.count} are shown.` : ""
  yield `<section id="unverified" class="unverified"><h2>Not verified</h2>` +
    `<p><span class="badge bad">NOT VERIFIED</span> ${u.count} stored entr${
      u.count === 1 ? "y" : "ies"
    } from sequence ${u.from} on. ` +
    `Verification failed at entry ${u.from}; nothing after it is vouched for, so these are shown as stored and ` +
    `counted in no total, chart or denial above.${more}</p>` + Timeline.TABLE_START
  // Entries missing where it failed (a cut): the gap is shown where it stands.
  const after = u.entries[0]?.sequence
  if (after !== undefined && after > u.from) {
    const range = after - 1 === u.from ? `entry ${u.from} is` : `entries ${u.from}–${after - 1} are`
    yield `<tr data-verified="false" data-mark="missing" id="missing-${u.from}"><td>${u.from}</td>` +
      `<td colspan="4"><span class="badge bad">MISSING</span> ${range} not stored: verification failed here</td></tr>\n`
  }
  for (const e of u.entries) {
    const mark = e.sequence === u.from ? "failed-here" : "unverified"
    yield Timeline.row(e).replace(/^<tr /, `<tr data-verified="false" data-mark="${mark}" `) + "\n"
  }
  yield Timeline.TABLE_END + `</section>\n`
}

/**
 * The time axis: the waterfall of the calls (`Waterfall`), sub-agents as a tree.
 * Only verified entries are ever drawn on it.
 *
 * @since 0.1.0
 */
export const timeAxis = (waterfall: string): string =>
  `<h2>Time axis</h2><section id="time-axis">${waterfall}</section>`

/**
 * What differs between the report file and the viewer's page.
 *
 * @since 0.1.0
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
 * @since 0.1.0
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
 * @since 0.1.0
 */
export const render = function*(m: Model, options: PageOptions): Generator<string> {
  const live = options.live !== undefined
  yield documentStart(`${m.meta?.title ?? m.id} · session-journal`, live)
  if (options.back !== undefined) yield `<p><a href="${Html.escape(options.back)}">← all sessions</a></p>`
  yield header(m, options.link)
  yield charts(m.summary)
  yield denials(m.summary)
  const waterfall = Waterfall.builder(m.id)
  for (const e of m.entries) waterfall.add(e)
  yield timeAxis(waterfall.render({ link: (sequence) => `#e${sequence}` }))
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
