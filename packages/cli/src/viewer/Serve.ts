/**
 * `session-journal serve`: a read-only local web viewer of the journal, on the
 * Effect platform's HTTP server (`HttpRouter` routes served by
 * `NodeHttpServer`). The list of sessions (the journal sessions of one agent
 * session grouped as one story, as `list` groups them: `Stories`), each
 * session's page as in the report, verification on demand, and new entries appended live through
 * server-sent events fed by the journal's `follow` (which also sees entries
 * other processes write). Everything above a page's timeline follows too: one
 * live header per followed session (`Snapshot`), shared by its pages, adds each
 * entry followed to the same counts, charts, denials and time axis and sends
 * them redrawn; the list page's events send the list again when it changed.
 * It only reads: no route writes, and only GET (and HEAD) are routed. Every value shown is escaped; pages forbid inline scripts
 * and load only the viewer's own script.
 *
 * It binds 127.0.0.1 by default and answers only requests addressed to
 * `127.0.0.1`, `localhost` or `[::1]` with its port (`HostCheck`: no DNS
 * rebinding); another address must be asked for with `allowRemote`, and the
 * Host check still applies, to the loopback names and `allowedHosts`.
 *
 * Memory does not grow with a session's length: a session page shows a window
 * of `WINDOW` entries (the newest by default, `?from=N` for the window starting
 * at sequence N) and is written out as it is read. Its header and charts come
 * from one pass over the history with a verification beside it, done once per
 * state of the session (its head and next sequence) and shared by every
 * request for that state; a verification asked for on `/verify` is done
 * afresh, shared only by the requests that arrive while it runs.
 *
 * @since 0.1.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import {
  Entry,
  type Follow,
  InvalidSessionId,
  JournalState,
  type Persistence,
  SessionJournal
} from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Cache from "effect/Cache"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Option from "effect/Option"
import * as PubSub from "effect/PubSub"
import * as RcMap from "effect/RcMap"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import * as http from "node:http"
import { InvalidInput, NotAvailable } from "../Failure.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"
import * as Verify from "../Verify.ts"
import * as Calls from "./Calls.ts"
import * as Conversation from "./Conversation.ts"
import * as HostCheck from "./HostCheck.ts"
import * as Html from "./Html.ts"
import * as LiveGate from "./LiveGate.ts"
import * as Report from "./Report.ts"
import * as ReportModel from "./ReportModel.ts"
import * as Stories from "./Stories.ts"
import * as Timeline from "./Timeline.ts"
import { VIEWER_SCRIPT } from "./ViewerScript.ts"
import * as Waterfall from "./Waterfall.ts"

/**
 * Options of `serve`.
 *
 * @since 0.1.0
 */
export interface Options {
  readonly port: number
  /** The address to bind; one that is not loopback needs `allowRemote`. */
  readonly host: string
  /** Whether `host` may be an address other machines reach (default false). */
  readonly allowRemote?: boolean | undefined
  /** Names requests may be addressed to besides the loopback names, `NAME` or `NAME:PORT`. */
  readonly allowedHosts?: ReadonlyArray<string> | undefined
  readonly storage: Storage.Options
}

/**
 * Entries a session page shows at once.
 *
 * @since 0.1.0
 */
export const WINDOW = Timeline.PAGE_SIZE

/**
 * How long the header of a session page (its counts, charts and verification)
 * is reused while the session does not change. A change of the session (a new
 * head) makes a new one at once; the time bounds how stale a verification of
 * an unchanged session may be (an in-place edit that leaves the head alone).
 *
 * @since 0.1.0
 */
export const OVERVIEW_TTL = "1 minute"

const SECURITY_HEADERS = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store",
  "x-frame-options": "DENY"
}

const page = (body: string, status = 200) =>
  HttpServerResponse.text(body, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: SECURITY_HEADERS
  })

const errorPage = (status: number, message: string) =>
  page(
    Report.documentStart("session-journal", false) +
      `<p><a href="/">← all sessions</a></p><h1>${status}</h1><p id="error">${
        Html.escape(message)
      }</p></main></body></html>\n`,
    status
  )

// A storage may refuse an id the pattern allows (the filesystem refuses the
// device names Windows reserves, CON, NUL, COM1, …): that is a bad request too.
const refusedId = (e: { readonly _tag: string; readonly cause?: unknown }): InvalidSessionId | null =>
  e._tag === "StorageError" && e.cause instanceof InvalidSessionId ? e.cause : null

const invalidIdMessage = (e: InvalidSessionId): string =>
  Entry.isSessionId(e.id) && !NodePersistence.isSafeSessionId(e.id)
    ? `invalid session id ${
      JSON.stringify(e.id)
    }: a device name Windows reserves (CON, PRN, AUX, NUL, COM0–9, LPT0–9), which no session directory may have`
    : e.message

// Failures of a read become a page: an unknown or invalid session is 404 / 400,
// damaged storage 500 with the reason; the server keeps running.
const failurePage = (e: { readonly _tag: string; readonly message: string; readonly cause?: unknown }) =>
  Effect.sync(() => {
    const refused = refusedId(e)
    if (refused !== null) return errorPage(400, invalidIdMessage(refused))
    return e._tag === "SessionNotFound"
      ? errorPage(404, e.message)
      : e._tag === "InvalidSessionId" || e._tag === "InvalidInput"
      ? errorPage(400, e instanceof InvalidSessionId ? invalidIdMessage(e) : e.message)
      : errorPage(500, e.message)
  })

const sessionLink = (id: string): string => `/sessions/${encodeURIComponent(id)}`

const idParam = Effect.map(HttpRouter.params, (p) => p["id"] ?? "")

// The id of a session route is checked before anything is read, against the
// pattern and against what the storage can hold (a session directory is never
// named CON, NUL, …), so a bad one is a 400 on every route, the event stream too.
const withValidId = <E, R>(
  storage: Storage.Options,
  handler: Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>
) =>
  Effect.gen(function*() {
    const id = yield* idParam
    const valid = Entry.validateSessionId(id)
    if (Result.isFailure(valid)) return yield* failurePage(valid.failure)
    if (Storage.isFilesystem(storage) && !NodePersistence.isSafeSessionId(id)) {
      return yield* failurePage(new InvalidSessionId({ id }))
    }
    return yield* handler
  })

/**
 * The list of sessions as the list page shows it: how many, and the table.
 *
 * @since 0.1.0
 */
export interface SessionList {
  readonly count: number
  readonly html: string
}

// What the list shows of a session from its state: its title, and what it is of
// an agent session's story (`Stories.memberOf`). `key` is the id, its head and
// when it was updated, so a session is read again only when it changed.
interface Facts {
  readonly title: string
  readonly member: Stories.Member | null
}

const factsOf = (key: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const id = key.slice(0, key.indexOf("\n"))
    const r = yield* Effect.result(journal.state(id))
    const meta = r._tag === "Success" ? r.success.meta : null
    const facts: Facts = { title: meta?.title ?? "", member: Stories.memberOf(id, meta) }
    return facts
  })

const sessionRow = (s: Persistence.SessionInfo, facts: Facts | undefined): string => {
  const member = facts?.member ?? null
  const story = member === null
    ? ""
    : ` data-story="${Html.escape(member.agentSession)}" data-role="${member.role}"`
  const role = member === null ? "" : ` <span class="badge role">${Html.escape(Stories.roleText(member))}</span>`
  return `<tr data-id="${Html.escape(s.id)}" data-entries="${s.entries}"${story}><td class="mono"><a href="${
    Html.escape(sessionLink(s.id))
  }">${Html.escape(s.id)}</a>${role}</td>` +
    `<td>${Html.escape(facts?.title ?? "")}</td><td class="entries">${s.entries}</td>` +
    `<td class="mono" title="${Html.escape(s.head)}">${Html.escape(s.head.slice(0, 16))}</td>` +
    `<td>${s.updatedAt === null ? "—" : Html.escape(new Date(s.updatedAt).toISOString())}</td>` +
    `<td>${s.problem === null ? "" : `<span class="badge bad">DAMAGED</span> ${Html.escape(s.problem)} `}` +
    `<a href="${Html.escape(sessionLink(s.id))}/verify">verify</a></td></tr>`
}

// The table's bodies in the journal's order: each agent session's story as one
// body of its own (its members together, where its first one is listed), the
// sessions of no story in the bodies between.
const sessionBodies = (
  sessions: ReadonlyArray<Persistence.SessionInfo>,
  facts: ReadonlyArray<Facts>
): string => {
  const { byId, stories } = Stories.group(facts.map((f) => f.member))
  const index = new Map(sessions.map((s, i) => [s.id, i]))
  const row = (id: string) => sessionRow(sessions[index.get(id)!]!, facts[index.get(id)!])
  const bodies: Array<string> = []
  let plain: Array<string> = []
  const shown = new Set<string>()
  for (const s of sessions) {
    const member = byId.get(s.id)
    if (member === undefined) {
      plain.push(sessionRow(s, facts[index.get(s.id)!]))
      continue
    }
    if (shown.has(member.agentSession)) continue
    shown.add(member.agentSession)
    if (plain.length > 0) bodies.push(`<tbody>${plain.join("\n")}</tbody>`)
    plain = []
    const members = stories.get(member.agentSession) ?? [member]
    bodies.push(
      `<tbody class="story" data-story="${Html.escape(member.agentSession)}">` +
        `<tr class="story-head"><th colspan="6" scope="rowgroup">Claude Code session <span class="mono">${
          Html.escape(member.agentSession)
        }</span> <span class="muted">one story: ${members.length} journal session${members.length === 1 ? "" : "s"} (${
          Stories.ROLES.filter((r) => members.some((m) => m.role === r)).join(", ")
        })</span></th></tr>` +
        Stories.ordered(members).map((m) => row(m.id)).join("\n") + `</tbody>`
    )
  }
  if (plain.length > 0) bodies.push(`<tbody>${plain.join("\n")}</tbody>`)
  return bodies.join("\n")
}

const sessionList = (cache: Cache.Cache<string, Facts, never, SessionJournal.SessionJournal>) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const sessions = yield* journal.list
    const facts = yield* Effect.forEach(
      sessions,
      (s) => Cache.get(cache, `${s.id}\n${s.head}\n${s.updatedAt ?? ""}`),
      { concurrency: 4 }
    )
    const list: SessionList = {
      count: sessions.length,
      html:
        `<p class="muted" id="session-count">read-only view of the journal; ${sessions.length} session${
          sessions.length === 1 ? "" : "s"
        }</p>` +
        (sessions.length === 0
          ? `<p>no sessions</p>`
          : `<table class="list" id="sessions"><thead><tr><th>id</th><th>title</th><th>entries</th><th>head</th><th>updated</th><th>status</th></tr></thead>` +
            sessionBodies(sessions, facts) + `</table>`)
    }
    return list
  })

const listPage = (viewer: Viewer) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const query = (new URL(request.url, "http://localhost").searchParams.get("q") ?? "").slice(0, 200)
    const list = yield* viewer.list
    return page(
      Report.documentStart("sessions · session-journal", true) +
        `<h1>Sessions</h1>` +
        // Filtered by the viewer's script as typed; `?q=` fills it in.
        `<form class="filters" id="list-filters" method="get" action="/"><input type="search" id="list-filter" name="q" value="${
          Html.escape(query)
        }" placeholder="find a session or story by any of its ids" aria-label="find by id" size="48">` +
        `<span class="muted" id="list-shown"></span></form>` +
        `<div id="session-list" data-live="/events">${list.html}</div>` +
        `<p class="muted" id="list-status">the list follows the journal while this page is open</p>` +
        `</main><script src="/viewer.js" defer></script></body></html>\n`
    )
  }).pipe(Effect.catch(failurePage))

/**
 * What a session page shows above its entries, made once per state of the
 * session: the header and charts as HTML, the title, the sequences of the
 * first and last entry read, where the verified history ends when the
 * verification failed (`failedAt`: entries from there on are not shown), and
 * `check`, the ordinal of the verification this server did for it (1 for its
 * first).
 *
 * @since 0.1.0
 */
export interface Top {
  readonly title: string
  /** The header, charts, denials and time axis, in their `#overview` element. */
  readonly html: string
  readonly entries: number
  readonly first: number | null
  readonly last: number | null
  readonly failedAt: number | null
  readonly check: number
}

// What names a state of a session: its head and next sequence; a session whose
// state cannot be read for damage is named by the damage (a damaged session
// takes no writes until it is repaired, which changes its state).
const stateKey = (id: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    return yield* journal.state(id).pipe(
      Effect.map((s) => `${s.next_sequence}:${JournalState.head(s)}`),
      Effect.catchTags({
        CorruptJournal: (e) => Effect.succeed(`damaged:${e.message}`),
        IntegrityViolation: (e) => Effect.succeed(`damaged:${e.message}`)
      })
    )
  })

// What `#overview` holds: the header, the charts, the denials and the time axis.
const overviewBody = (
  o: Omit<ReportModel.Model, "entries" | "summary">,
  summary: ReportModel.Summary,
  waterfall: Waterfall.Builder,
  note = ""
) =>
  // A session page stops its timeline where verification failed: nothing is shown apart.
  Report.header({ ...o, summary }, sessionLink, false) + note + Report.charts(summary) + Report.denials(summary) +
  Report.timeAxis(waterfall.render({ link: entryLink(o.id) }))

/**
 * Sessions whose live header is kept at once (each while a page follows it).
 *
 * @since 0.1.0
 */
export const MAX_LIVE = 256

/**
 * How long a session's live header is kept after its last follower left.
 *
 * @since 0.1.0
 */
export const LIVE_IDLE = "5 seconds"

/**
 * How many times a page's live events take a new shared header after the one
 * they followed stopped on another history than the page's.
 *
 * @since 0.1.0
 */
export const LIVE_RENEWALS = 8

/**
 * How often the list page's live events read the list of sessions.
 *
 * @since 0.1.0
 */
export const LIST_POLL = "400 millis"

/**
 * The longest a live header waits to gather entries written together before it
 * is drawn again.
 *
 * @since 0.1.0
 */
export const LIVE_GATHER = "150 millis"

/**
 * A live header (`LiveGate.Snapshot`).
 *
 * @since 0.1.0
 */
export type Snapshot = LiveGate.Snapshot

// A session's live header and whether its follower has ended: a header that
// follows no more is not handed to a page that comes later (that page gets a new
// one, from storage as it is then).
interface Live {
  readonly snapshots: PubSub.PubSub<Snapshot>
  readonly ended: { value: boolean }
}

// One session's live header: a pass over its history with a verification beside
// it, then every entry written after it, each checked as it comes (`follow`, from
// the last entry of the pass), added to the same counts, charts and waterfall.
// Every follower reads the newest snapshot; a slow one skips to it.
const liveOverview = (storage: Storage.Options) => (id: string) =>
  Effect.gen(function*() {
    const snapshots = yield* PubSub.sliding<Snapshot>({ capacity: 1, replay: 1 })
    yield* Effect.addFinalizer(() => PubSub.shutdown(snapshots))
    const ended = { value: false }
    yield* Effect.forkScoped(
      followOverview(id, storage, snapshots).pipe(Effect.ensuring(Effect.sync(() => (ended.value = true))))
    )
    const live: Live = { snapshots, ended }
    return live
  })

const stoppedBanner = (reason: string, last: number | null) =>
  `<p id="live-stopped"><span class="badge bad">NOT FOLLOWED</span> ${Html.escape(reason)}. ` +
  `The counts, charts and time axis here stop at ${
    last === null ? "the start" : `entry ${last}`
  }; nothing stored after it is vouched for on this page. Reload it to verify the session again.</p>`

const followOverview = (id: string, storage: Storage.Options, snapshots: PubSub.PubSub<Snapshot>) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const summary = ReportModel.summarizer()
    const waterfall = Waterfall.builder(id)
    let lastHash: string | null = null
    const o = yield* ReportModel.overview(id, storage, {
      summarizer: summary,
      each: (entry) => {
        waterfall.add(entry)
        lastHash = entry.entry_hash
      }
    })
    let last = o.last
    let since = 0
    const publish = (stopped: string | null) =>
      Effect.suspend(() => {
        const s = summary.summary()
        const note = since === 0
          ? ""
          : `<p class="muted" id="live-since">${since} entr${
            since === 1 ? "y" : "ies"
          } written since the verification above, each checked against the one before it as it came</p>`
        const html = overviewBody(o, s, waterfall, note + (stopped === null ? "" : stoppedBanner(stopped, last)))
        return PubSub.publish(snapshots, { entries: s.entries, last, lastHash, html, stopped })
      })
    yield* publish(null)
    // A session that did not verify is shown as it verified; nothing after is followed.
    if (o.verify !== null && !o.verify.ok) return
    // What is followed continues the entries the pass read, or the stream fails.
    yield* journal.follow(id, last === null || lastHash === null ? 0 : { after: { sequence: last, hash: lastHash } })
      .pipe(
        Stream.takeUntil((event) => event._tag === "Recovered"),
        Stream.groupedWithin(4096, LIVE_GATHER),
        Stream.runForEach((events) => {
          let stopped: string | null = null
          for (const event of events) {
            if (event._tag === "Recovered") {
              stopped = recoveredMessage(event)
              break
            }
            summary.add(event.entry)
            waterfall.add(event.entry)
            last = event.entry.sequence
            lastHash = event.entry.entry_hash
            since++
          }
          return publish(stopped)
        }),
        Effect.catch((e) => publish(e.message))
      )
  }).pipe(
    Effect.catch((e) =>
      PubSub.publish(snapshots, {
        entries: 0,
        last: null,
        lastHash: null,
        html: stoppedBanner(e.message, null),
        stopped: e.message
      })
    )
  )

const entryLink = (id: string) => (sequence: number) => `${sessionLink(id)}?from=${sequence}#e${sequence}`

const makeViewer = (storage: Storage.Options) =>
  Effect.gen(function*() {
    let checks = 0
    const counted = (id: string) => Effect.map(Verify.session(id, storage), (report) => ({ report, check: ++checks }))
    // Requests for one session that arrive together read its state once.
    const keys = yield* Cache.make({ capacity: 1024, timeToLive: 0, lookup: stateKey })
    const tops = yield* Cache.makeWith((key: string) =>
      Effect.gen(function*() {
        const id = key.slice(0, key.indexOf(" "))
        // One pass over the history with the verification beside it.
        const waterfall = Waterfall.builder(id)
        const o = yield* ReportModel.overview(id, storage, { each: waterfall.add })
        const check = ++checks
        const top: Top = {
          title: `${o.meta?.title ?? id} · session-journal`,
          html: `<div id="overview" data-check="${check}" data-last="${o.last ?? -1}">` +
            overviewBody(o, o.summary, waterfall) + `</div>`,
          entries: o.summary.entries,
          first: o.first,
          last: o.last,
          failedAt: o.verify === null || o.verify.ok
            ? null
            : (o.verify.violation?.sequence ?? o.verify.corruption?.sequence ?? null),
          check
        }
        return top
      }), {
      capacity: 64,
      timeToLive: (exit) => (Exit.isSuccess(exit) ? OVERVIEW_TTL : 0)
    })
    const fresh = yield* Cache.make({ capacity: 1024, timeToLive: 0, lookup: counted })
    const live = yield* RcMap.make({ lookup: liveOverview(storage), idleTimeToLive: LIVE_IDLE, capacity: MAX_LIVE })
    const facts = yield* Cache.make({ capacity: 4096, lookup: factsOf })
    // The list's live events share one read of it per `LIST_POLL`.
    const lists = yield* Cache.make({ capacity: 1, timeToLive: LIST_POLL, lookup: (_: "") => sessionList(facts) })
    return {
      /** The list of sessions as of now. */
      list: sessionList(facts),
      /** The list of sessions, read at most once per `LIST_POLL` for all who ask. */
      sharedList: Cache.get(lists, ""),
      /**
       * The live header of a session, shared by its followers while any follows;
       * a new one when the one kept follows no more.
       */
      live: (id: string) =>
        Effect.flatMap(
          RcMap.get(live, id),
          (kept) =>
            kept.ended.value
              ? Effect.flatMap(RcMap.invalidate(live, id), () => RcMap.get(live, id))
              : Effect.succeed(kept)
        ).pipe(Effect.map((l) => l.snapshots)),
      /** The header of a session page for the session's current state. */
      top: (id: string) => Effect.flatMap(Cache.get(keys, id), (key) => Cache.get(tops, `${id} ${key}`)),
      /** A fresh verification and its ordinal. */
      verify: (id: string) => Cache.get(fresh, id)
    }
  })

type Viewer = Effect.Success<ReturnType<typeof makeViewer>>

const windowFrom = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const text = new URL(request.url, "http://localhost").searchParams.get("from")
  if (text === null) return null
  const from = /^[0-9]{1,16}$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(from)) {
    return yield* new InvalidInput({
      field: "from",
      reason: `must be a sequence number (a non-negative integer), got ${JSON.stringify(text.slice(0, 40))}`
    })
  }
  return from
})

const windowLink = (id: string, from: number | null) =>
  Html.escape(sessionLink(id) + (from === null ? "" : `?from=${from}`))

// Paging links: to the oldest and the previous window, and to the next and the newest.
const nav = (id: string, top: Top, start: number, more: boolean, where: "top" | "bottom") => {
  const first = top.first ?? 0
  const links: Array<string> = []
  if (start > first) {
    links.push(`<a href="${windowLink(id, first)}" rel="first">oldest</a>`)
    links.push(`<a href="${windowLink(id, Math.max(first, start - WINDOW))}" rel="prev">← older</a>`)
  }
  if (more) {
    links.push(`<a href="${windowLink(id, start + WINDOW)}" rel="next">newer →</a>`)
    links.push(`<a href="${windowLink(id, null)}" rel="last">newest</a>`)
  }
  return `<nav class="window muted" id="window-${where}">${links.join(" · ")}</nav>`
}

const sessionPage = (viewer: Viewer) =>
  Effect.gen(function*() {
    const id = yield* idParam
    const from = yield* windowFrom
    yield* Effect.fromResult(Entry.validateSessionId(id))
    const top = yield* viewer.top(id)
    const journal = yield* SessionJournal.SessionJournal
    // Entries past a failed verification are not shown as if they were history.
    const end = top.last === null ? 0 : top.failedAt === null ? top.last + 1 : Math.min(top.last + 1, top.failedAt)
    const newest = top.last === null ? 0 : Math.max(top.first ?? 0, end - WINDOW)
    // A window past the end is the (empty) window where the next entry will be.
    const start = from === null ? newest : Math.min(from, end)
    const expectedLast = Math.min(start + WINDOW, end) - 1
    const head = Report.documentStart(top.title, true) +
      `<p><a href="/">← all sessions</a></p>` + top.html + `<h2>Timeline</h2>` +
      `<p class="muted" id="window" data-from="${start}" data-window="${WINDOW}">` +
      (expectedLast >= start ? `entries ${start}–${expectedLast} of ${top.entries}` : `no entries from ${start} on`) +
      `</p>` + nav(id, top, start, expectedLast < end - 1, "top") + `<div class="page">` + Timeline.TABLE_START
    // Written out as read: a window more than the stored entries past it, to know
    // whether there are newer ones.
    let shown = 0
    let lastShown: number | null = null
    let lastHash: string | null = null
    let more = false
    let stopped: string | null = null
    let cut = false
    // A call's entries are one row (`Calls`), held until its outcome comes within the window.
    const calls = Calls.grouper(Timeline.row)
    const rows = journal.entries(id, { from: start, limit: WINDOW + 1 }).pipe(
      Stream.mapArray((chunk) => {
        let html = ""
        for (const e of chunk) {
          if (top.failedAt !== null && e.sequence >= top.failedAt) {
            cut = true
            break
          }
          if (shown === WINDOW) {
            more = true
            break
          }
          shown++
          lastShown = e.sequence
          lastHash = e.entry_hash
          html += calls.add(e)
        }
        return [html] as const
      }),
      Stream.catch((e) => {
        stopped = e.message
        return Stream.empty
      })
    )
    const tail = Stream.suspend(() => {
      const parts = [calls.end() + Timeline.TABLE_END + `</div>`]
      if (cut) {
        parts.push(
          `<p id="window-stopped"><span class="badge bad">stopped</span> entries from ${top.failedAt} on are not shown: they are not part of the verified history (see the verification above)</p>`
        )
      }
      if (stopped !== null) {
        parts.push(
          `<p id="window-stopped"><span class="badge bad">stopped</span> the entries after this point could not be read: ${
            Html.escape(stopped)
          }</p>`
        )
      }
      if (shown === 0 && stopped === null) {
        parts.push(
          `<p class="muted" id="no-entries">${
            top.entries === 0 ? "no entries yet" : `no entries from ${start} on yet`
          }</p>`
        )
      }
      parts.push(nav(id, top, start, more, "bottom"))
      // Live updates continue the newest window only.
      if (!more && !cut && stopped === null) {
        const next = lastShown === null ? start : lastShown + 1
        // The live stream continues this page's history: it starts only where the
        // entry before it is still the last one shown here (`prev`).
        const prev = lastHash === null ? "" : ` data-prev="${lastHash}"`
        parts.push(
          `<p class="muted" id="live-status" data-from="${next}"${prev}>live: new entries appear below as they are written</p>`
        )
        parts.push(Timeline.LIVE_TABLE)
      }
      parts.push(
        `<footer class="muted"><p>Written by <code>session-journal</code>. Header and charts as of the verification shown.</p></footer></main>` +
          `<script src="/viewer.js" defer></script></body></html>\n`
      )
      return Stream.succeed(parts.join(""))
    })
    const body = Stream.concat(Stream.concat(Stream.succeed(head), rows), tail).pipe(
      Stream.map((text) => encoder.encode(text))
    )
    return HttpServerResponse.stream(body, { contentType: "text/html; charset=utf-8", headers: SECURITY_HEADERS })
  }).pipe(Effect.catch(failurePage))

const verifyPage = (viewer: Viewer) =>
  Effect.gen(function*() {
    const id = yield* idParam
    yield* Effect.fromResult(Entry.validateSessionId(id))
    const { check, report } = yield* viewer.verify(id)
    const now = yield* Clock.currentTimeMillis
    return page(
      Report.documentStart(`verify ${id} · session-journal`, false) +
        `<p><a href="/">← all sessions</a> · <a href="${Html.escape(sessionLink(id))}">${Html.escape(id)}</a></p>` +
        `<h1>${Html.escape(id)}</h1><div id="overview" data-check="${check}">` + Report.verifyBox(id, report, now) +
        `</div></main></body></html>\n`
    )
  }).pipe(Effect.catch(failurePage))

const encoder = new TextEncoder()

/**
 * One server-sent event: its name, id and JSON data on one `data:` line.
 *
 * @since 0.1.0
 */
export const sseEvent = (event: string, id: string | null, data: unknown): string =>
  `event: ${event}\n${id === null ? "" : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`

/**
 * The event sent for one entry: its sequence and kind, and its row as the
 * timeline renders it (already escaped); for the decision or the outcome of a
 * call already sent, the call's row again, with `replace` the sequence of the
 * row it replaces (`Calls.live`).
 *
 * @since 0.1.0
 */
export const entryEvent = (
  entry: Entry.Entry,
  row: Calls.LiveRow = { html: Timeline.row(entry), replace: null }
): string =>
  sseEvent("entry", `${entry.sequence}:${entry.entry_hash}`, {
    sequence: entry.sequence,
    kind: entry.kind,
    message: entry.kind === "message" || (Conversation.ofEntry(entry)?.role ?? "note") !== "note",
    denied: Entry.isTool(entry) && !entry.allowed,
    html: row.html,
    replace: row.replace
  })

const recoveredMessage = (event: Follow.Recovered): string => {
  const { from, to } = event.replaced
  const range = from === to ? `entry ${from}` : `entries ${from}..${to}`
  return `the session was repaired: ${range} shown here ${
    from === to ? "is" : "are"
  } no longer part of it (recovery entry ${event.entry.sequence}); reload the page`
}

const eventsRoute = (viewer: Viewer) =>
  Effect.gen(function*() {
    const id = yield* idParam
    const request = yield* HttpServerRequest.HttpServerRequest
    const url = new URL(request.url, "http://localhost")
    // A reconnecting EventSource says where it got to: the last entry's sequence and hash.
    const last = /^([0-9]{1,15}):([0-9a-f]{64})$/.exec(String(request.headers["last-event-id"] ?? ""))
    const fromParam = Number(url.searchParams.get("from") ?? "0")
    const prevParam = url.searchParams.get("prev")
    const from = last !== null
      ? Number(last[1]) + 1
      : Number.isSafeInteger(fromParam) && fromParam >= 0
      ? fromParam
      : 0
    const prev = last !== null ? last[2]! : prevParam !== null && /^[0-9a-f]{64}$/.test(prevParam) ? prevParam : null
    const journal = yield* SessionJournal.SessionJournal
    // The page's last entry must still be the entry before `from`: a history replaced
    // since the page was drawn is not continued on it.
    if (prev !== null && from > 0) {
      const before = yield* journal.entries(id, { from: from - 1, limit: 1 }).pipe(
        Stream.runHead,
        Effect.map(Option.getOrUndefined),
        Effect.orElseSucceed(() => undefined)
      )
      if (before === undefined || before.sequence !== from - 1 || before.entry_hash !== prev) {
        const message = `the session's history changed since this page was drawn: entry ${
          from - 1
        } is not the one shown here; reload the page`
        return HttpServerResponse.text(sseEvent("failure", null, { message }), {
          contentType: "text/event-stream",
          headers: { ...SECURITY_HEADERS }
        })
      }
    }
    // Every entry is checked against the one sent before it (`SessionJournal.follow`,
    // after the page's last entry when the page says which it is). The page shows
    // what was sent; when a repair set some of it aside, the page is no longer the
    // session, so the stream stops and says so, as on damage or on history replaced.
    const shown = prev !== null && from > 0 ? { sequence: from - 1, hash: prev } : null
    const calls = Calls.live(Timeline.row)
    const entries = journal.follow(id, shown === null ? from : { after: shown })
      .pipe(
        Stream.takeUntil((event) => event._tag === "Recovered"),
        Stream.map((event): LiveGate.Item =>
          event._tag === "Entry"
            ? { _tag: "Entry", entry: event.entry, text: entryEvent(event.entry, calls.add(event.entry)) }
            : { _tag: "Failure", text: sseEvent("failure", null, { message: recoveredMessage(event) }) }
        ),
        Stream.catch((e) =>
          Stream.succeed<LiveGate.Item>({ _tag: "Failure", text: sseEvent("failure", null, { message: e.message }) })
        )
      )
    // The header, charts, denials and time axis as of the newest entry, redrawn as
    // entries come; each sent once this stream has sent its last entry (`LiveGate`).
    const gate = LiveGate.gate(shown, (snapshot) => sseEvent("overview", null, snapshot))
    // A shared header that stopped on another history than this page's (replaced
    // under it after it joined) is followed by a new one, from storage as it is then;
    // at most `LIVE_RENEWALS` times, so storage replaced over and over cannot keep a
    // page drawing.
    const headers = (renewals: number): Stream.Stream<LiveGate.Snapshot> =>
      Stream.unwrap(Effect.map(viewer.live(id), (snapshots) => {
        let replaced = false
        return Stream.fromPubSub(snapshots).pipe(
          Stream.takeUntil((s) => (replaced = s.stopped !== null && gate.judge(s) === "drop")),
          Stream.concat(Stream.suspend(() => replaced && renewals > 0 ? headers(renewals - 1) : Stream.empty))
        )
      })).pipe(Stream.catch(() => Stream.empty))
    const overviews = headers(LIVE_RENEWALS).pipe(
      Stream.map((snapshot): LiveGate.Item => ({ _tag: "Overview", snapshot }))
    )
    // The stream ends when the entries do (a failure event was the last), heartbeat or not.
    const body = Stream.merge(
      Stream.succeed(": live\n\n"),
      Stream.merge(
        Stream.merge(entries, overviews, { haltStrategy: "left" }).pipe(
          Stream.map(gate),
          Stream.filter((text) => text.length > 0)
        ),
        heartbeat,
        { haltStrategy: "left" }
      )
    )
      .pipe(
        Stream.map((text) => encoder.encode(text))
      )
    return HttpServerResponse.stream(body, {
      contentType: "text/event-stream",
      headers: { ...SECURITY_HEADERS, connection: "keep-alive" }
    })
  })

// A comment now and then keeps proxies and idle timers from closing a stream.
const heartbeat = Stream.fromSchedule(Schedule.spaced("15 seconds")).pipe(Stream.map(() => ": keep-alive\n\n"))

// The list page's events: the list again whenever it changed, read once per `LIST_POLL` for everyone.
const listEventsRoute = (viewer: Viewer) =>
  Effect.sync(() => {
    const lists = Stream.fromSchedule(Schedule.spaced(LIST_POLL)).pipe(
      Stream.mapEffect(() => viewer.sharedList),
      Stream.changesWith((a, b) => a.html === b.html),
      Stream.map((list) => sseEvent("sessions", null, list)),
      Stream.catch((e) => Stream.succeed(sseEvent("failure", null, { message: e.message })))
    )
    const body = Stream.merge(Stream.succeed(": live\n\n"), Stream.merge(lists, heartbeat, { haltStrategy: "left" }))
      .pipe(Stream.map((text) => encoder.encode(text)))
    return HttpServerResponse.stream(body, {
      contentType: "text/event-stream",
      headers: { ...SECURITY_HEADERS, connection: "keep-alive" }
    })
  })

const script = HttpServerResponse.text(VIEWER_SCRIPT, {
  contentType: "text/javascript; charset=utf-8",
  headers: SECURITY_HEADERS
})

/**
 * The viewer's routes, read-only.
 *
 * @since 0.1.0
 */
export const routes = (storage: Storage.Options) =>
  HttpRouter.addAll(Effect.map(makeViewer(storage), (viewer) => [
    HttpRouter.route("GET", "/", listPage(viewer)),
    HttpRouter.route("GET", "/events", listEventsRoute(viewer)),
    HttpRouter.route("GET", "/viewer.js", Effect.succeed(script)),
    HttpRouter.route("GET", "/sessions/:id", withValidId(storage, sessionPage(viewer))),
    HttpRouter.route("GET", "/sessions/:id/verify", withValidId(storage, verifyPage(viewer))),
    HttpRouter.route("GET", "/sessions/:id/events", withValidId(storage, eventsRoute(viewer)))
  ]))

/**
 * Whether the server binds a loopback address only (see
 * `HostCheck.isLoopbackAddress`).
 *
 * @since 0.1.0
 */
export const isLoopback = (host: string): boolean => HostCheck.isLoopbackAddress(host)

// The bind address as a Host header names it, when it is an address of its own
// (127.0.0.2 is reached as itself; no DNS is involved in an address).
const bindName = (host: string): ReadonlyArray<string> => {
  if (host.toLowerCase() === "localhost") return []
  return [host.includes(":") && !host.startsWith("[") ? `[${host}]` : host]
}

// What is checked before binding: a non-loopback address must be asked for, and
// every extra name must be a host name or address.
const checkOptions = (options: Options) =>
  Effect.gen(function*() {
    if (!isLoopback(options.host) && options.allowRemote !== true) {
      return yield* new InvalidInput({
        field: "--host",
        reason:
          `${options.host} is not a loopback address: anyone who reaches it could read every session (no login, no TLS); ` +
          `pass --allow-remote to serve it anyway, with --allowed-host NAME for each name clients use`
      })
    }
    for (const name of options.allowedHosts ?? []) {
      if (HostCheck.parseName(name) === null) {
        return yield* new InvalidInput({
          field: "--allowed-host",
          reason: `${JSON.stringify(name)} is not a host name or address, NAME or NAME:PORT`
        })
      }
    }
  })

/**
 * Runs the viewer until interrupted, printing its address first
 * (`serving DIR read-only at http://HOST:PORT`). A non-loopback `host` without
 * `allowRemote` fails with `InvalidInput` before anything listens; with it, a
 * warning goes to stderr.
 *
 * @since 0.1.0
 */
export const run = (options: Options) =>
  Effect.gen(function*() {
    yield* checkOptions(options)
    const loopback = isLoopback(options.host)
    let node: http.Server | undefined
    return yield* Effect.gen(function*() {
      const handler = yield* HttpRouter.toHttpEffect(routes(options.storage))
      const server = yield* HttpServer.HttpServer
      const port = "port" in server.address ? server.address.port : 0
      const policy = HostCheck.policy(port, [
        ...(loopback ? bindName(options.host) : []),
        ...(options.allowedHosts ?? [])
      ])
      const guarded = Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        // A page of another site must not reach this server through a name of its
        // own that resolves here (DNS rebinding): only the names accepted, with the port.
        if (!HostCheck.allows(policy, request.headers["host"])) {
          return errorPage(403, `this viewer answers requests addressed to ${[...policy.accepted].join(", ")} only`)
        }
        return yield* handler
      })
      yield* HttpServer.serveEffect(guarded)
      // Closing the server (a finalizer of serving, run after this one) waits for every connection to end, and a page that
      // follows a session never ends its own: when the viewer stops, they are closed.
      yield* Effect.addFinalizer(() => Effect.sync(() => node?.closeAllConnections()))
      if (!loopback) {
        yield* Output.errorLine(
          `session-journal: warning: serving on ${options.host}, which other machines may reach: anyone who connects can read every session ` +
            `(no login, no TLS); answering requests addressed to ${[...policy.accepted].join(", ")}`
        )
      }
      const where = Storage.isFilesystem(options.storage) ? options.storage.dir : "PostgreSQL"
      yield* HttpServer.addressFormattedWith((address) => Output.write(`serving ${where} read-only at ${address}\n`))
      return yield* Effect.never
    }).pipe(
      Effect.scoped,
      Effect.provide(
        NodeHttpServer.layer(() => (node = http.createServer()), { port: options.port, host: options.host })
      ),
      Effect.catchTag("ServeError", (e) =>
        Effect.fail(
          new NotAvailable({
            feature: "serve",
            reason: `cannot listen on ${options.host}:${options.port} (${e.message})`
          })
        ))
    )
  })
