/**
 * `session-journal serve`: a read-only local web viewer of the journal, on the
 * Effect platform's HTTP server (`HttpRouter` routes served by
 * `NodeHttpServer`). The list of sessions, each session's page as in the
 * report, verification on demand, and new entries appended live through
 * server-sent events fed by the journal's `follow` (which also sees entries
 * other processes write). It only reads: no route writes, and only GET (and
 * HEAD) are routed. Every value shown is escaped; pages forbid inline scripts
 * and load only the viewer's own script. It binds 127.0.0.1 by default and then
 * answers only requests addressed to a loopback name (no DNS rebinding).
 *
 * @since 0.3.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Entry, type Follow, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { HttpRouter, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as http from "node:http"
import { NotAvailable } from "./Failure.ts"
import * as Html from "./Html.ts"
import * as Output from "./Output.ts"
import * as Report from "./Report.ts"
import * as Storage from "./Storage.ts"
import * as Timeline from "./Timeline.ts"
import * as Verify from "./Verify.ts"
import { VIEWER_SCRIPT } from "./ViewerScript.ts"

/**
 * Options of `serve`.
 *
 * @since 0.3.0
 */
export interface Options {
  readonly port: number
  readonly host: string
  readonly storage: Storage.Options
}

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
  page(Report.documentStart("session-journal", false) +
    `<p><a href="/">← all sessions</a></p><h1>${status}</h1><p id="error">${Html.escape(message)}</p></main></body></html>\n`, status)

// Failures of a read become a page: an unknown or invalid session is 404 / 400,
// damaged storage 500 with the reason; the server keeps running.
const failurePage = (e: { readonly _tag: string; readonly message: string }) =>
  Effect.succeed(
    e._tag === "SessionNotFound"
      ? errorPage(404, e.message)
      : e._tag === "InvalidSessionId"
      ? errorPage(400, e.message)
      : errorPage(500, e.message)
  )

const sessionLink = (id: string): string => `/sessions/${encodeURIComponent(id)}`

const idParam = Effect.map(HttpRouter.params, (p) => p["id"] ?? "")

const listPage = Effect.gen(function*() {
  const journal = yield* SessionJournal.SessionJournal
  const sessions = yield* journal.list
  const titles = yield* Effect.forEach(sessions, (s) =>
    Effect.map(Effect.result(journal.state(s.id)), (r) => (r._tag === "Success" ? r.success.meta?.title ?? "" : "")), { concurrency: 4 })
  const rows = sessions.map((s, i) =>
    `<tr data-id="${Html.escape(s.id)}"><td class="mono"><a href="${Html.escape(sessionLink(s.id))}">${Html.escape(s.id)}</a></td>` +
    `<td>${Html.escape(titles[i] ?? "")}</td><td>${s.entries}</td>` +
    `<td class="mono" title="${Html.escape(s.head)}">${Html.escape(s.head.slice(0, 16))}</td>` +
    `<td>${s.updatedAt === null ? "—" : Html.escape(new Date(s.updatedAt).toISOString())}</td>` +
    `<td>${s.problem === null ? "" : `<span class="badge bad">DAMAGED</span> ${Html.escape(s.problem)} `}` +
    `<a href="${Html.escape(sessionLink(s.id))}/verify">verify</a></td></tr>`
  )
  return page(
    Report.documentStart("sessions · session-journal", false) +
      `<h1>Sessions</h1><p class="muted">read-only view of the journal; ${sessions.length} session${sessions.length === 1 ? "" : "s"}</p>` +
      (sessions.length === 0
        ? `<p>no sessions</p>`
        : `<table class="list" id="sessions"><thead><tr><th>id</th><th>title</th><th>entries</th><th>head</th><th>updated</th><th>status</th></tr></thead><tbody>` +
          rows.join("\n") + `</tbody></table>`) +
      `</main></body></html>\n`
  )
}).pipe(Effect.catch(failurePage))

const sessionPage = (storage: Storage.Options) =>
  Effect.gen(function*() {
    const id = yield* idParam
    const model = yield* Report.collect(id, storage)
    const next = model.entries.length === 0 ? 0 : model.entries[model.entries.length - 1]!.sequence + 1
    return page(Array.from(Report.render(model, { link: sessionLink, back: "/", live: { script: "/viewer.js", from: next } })).join(""))
  }).pipe(Effect.catch(failurePage))

const verifyPage = (storage: Storage.Options) =>
  Effect.gen(function*() {
    const id = yield* idParam
    yield* Effect.fromResult(Entry.validateSessionId(id))
    const report = yield* Verify.session(id, storage)
    return page(
      Report.documentStart(`verify ${id} · session-journal`, false) +
        `<p><a href="/">← all sessions</a> · <a href="${Html.escape(sessionLink(id))}">${Html.escape(id)}</a></p>` +
        `<h1>${Html.escape(id)}</h1>` + Report.verifyBox(id, report) + `</main></body></html>\n`
    )
  }).pipe(Effect.catch(failurePage))

const encoder = new TextEncoder()

/**
 * One server-sent event: its name, id and JSON data on one `data:` line.
 *
 * @since 0.3.0
 */
export const sseEvent = (event: string, id: string | null, data: unknown): string =>
  `event: ${event}\n${id === null ? "" : `id: ${id}\n`}data: ${JSON.stringify(data)}\n\n`

/**
 * The event sent for one entry: its sequence and kind, and its row as the
 * timeline renders it (already escaped).
 *
 * @since 0.3.0
 */
export const entryEvent = (entry: Entry.Entry): string =>
  sseEvent("entry", String(entry.sequence), {
    sequence: entry.sequence,
    kind: entry.kind,
    denied: Entry.isTool(entry) && !entry.allowed,
    html: Timeline.row(entry)
  })

const recoveredMessage = (event: Follow.Recovered): string => {
  const { from, to } = event.replaced
  const range = from === to ? `entry ${from}` : `entries ${from}..${to}`
  return `the session was repaired: ${range} shown here ${from === to ? "is" : "are"} no longer part of it (recovery entry ${event.entry.sequence}); reload the page`
}

const eventsRoute = Effect.gen(function*() {
  const id = yield* idParam
  const request = yield* HttpServerRequest.HttpServerRequest
  const url = new URL(request.url, "http://localhost")
  // A reconnecting EventSource says where it got to.
  const lastId = Number(request.headers["last-event-id"] ?? Number.NaN)
  const fromParam = Number(url.searchParams.get("from") ?? "0")
  const from = Number.isSafeInteger(lastId) && lastId >= 0 ? lastId + 1 : Number.isSafeInteger(fromParam) && fromParam >= 0 ? fromParam : 0
  const journal = yield* SessionJournal.SessionJournal
  // Every entry is checked against the one sent before it (`SessionJournal.follow`).
  // The page shows what was sent; when a repair set some of it aside, the page is
  // no longer the session, so the stream stops and says so, as on damage or on
  // history replaced.
  const entries = journal.follow(id, from).pipe(
    Stream.takeUntil((event) => event._tag === "Recovered"),
    Stream.map((event) => event._tag === "Entry" ? entryEvent(event.entry) : sseEvent("failure", null, { message: recoveredMessage(event) })),
    Stream.catch((e) => Stream.succeed(sseEvent("failure", null, { message: e.message })))
  )
  // A comment now and then keeps proxies and idle timers from closing the stream.
  const heartbeat = Stream.fromSchedule(Schedule.spaced("15 seconds")).pipe(Stream.map(() => ": keep-alive\n\n"))
  // The stream ends when the entries do (a failure event was the last), heartbeat or not.
  const body = Stream.merge(Stream.succeed(": live\n\n"), Stream.merge(entries, heartbeat, { haltStrategy: "left" })).pipe(
    Stream.map((text) => encoder.encode(text))
  )
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
 * @since 0.3.0
 */
export const routes = (storage: Storage.Options) =>
  HttpRouter.addAll([
    HttpRouter.route("GET", "/", listPage),
    HttpRouter.route("GET", "/viewer.js", Effect.succeed(script)),
    HttpRouter.route("GET", "/sessions/:id", sessionPage(storage)),
    HttpRouter.route("GET", "/sessions/:id/verify", verifyPage(storage)),
    HttpRouter.route("GET", "/sessions/:id/events", eventsRoute)
  ])

const LOOPBACK = new Set(["127.0.0.1", "localhost", "::1", "[::1]"])

/**
 * Whether the server binds a loopback address only.
 *
 * @since 0.3.0
 */
export const isLoopback = (host: string): boolean => LOOPBACK.has(host) || host.startsWith("127.")

const hostName = (header: string): string => {
  if (header.startsWith("[")) return header.slice(0, header.indexOf("]") + 1)
  const colon = header.lastIndexOf(":")
  return colon < 0 ? header : header.slice(0, colon)
}

/**
 * Runs the viewer until interrupted, printing its address first
 * (`serving DIR read-only at http://HOST:PORT`).
 *
 * @since 0.3.0
 */
export const run = (options: Options) =>
  Effect.gen(function*() {
    const handler = yield* HttpRouter.toHttpEffect(routes(options.storage))
    const loopback = isLoopback(options.host)
    const guarded = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const host = request.headers["host"] ?? ""
      // A page of another site must not reach this server through a name that
      // resolves to 127.0.0.1 (DNS rebinding): loopback binds answer loopback names only.
      if (loopback && !isLoopback(hostName(host)) && !hostName(host).startsWith("127.")) {
        return errorPage(403, "this viewer answers requests to 127.0.0.1 or localhost only")
      }
      return yield* handler
    })
    yield* HttpServer.serveEffect(guarded)
    const where = Storage.isFilesystem(options.storage) ? options.storage.dir : "PostgreSQL"
    yield* HttpServer.addressFormattedWith((address) => Output.write(`serving ${where} read-only at ${address}\n`))
    return yield* Effect.never
  }).pipe(
    Effect.provide(NodeHttpServer.layer(() => http.createServer(), { port: options.port, host: options.host })),
    Effect.catchTag("ServeError", (e) =>
      Effect.fail(new NotAvailable({ feature: "serve", reason: `cannot listen on ${options.host}:${options.port} (${e.message})` })))
  )
