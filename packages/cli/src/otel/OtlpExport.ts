/**
 * Finished sessions sent to an OpenTelemetry collector over OTLP/HTTP, as the
 * spans `Spans.fold` says, through Effect's own OTLP tracer and exporter
 * (`effect/observability`: `OtlpTracer`, `OtlpSerialization`, `OtlpExporter`):
 * no encoding of ours. Each span is created while a `Clock` that returns the
 * recorded time is provided, so the tracer takes its start time from the journal,
 * and ended with the recorded end time (`span.end(endTime, exit)`).
 *
 * Only what verified is sent: a session is verified first and entries from the
 * first one that does not verify on are left out (as reports leave them out).
 * Reading never writes: exporting cannot block or fail a journal write. Spans
 * are flushed every `FLUSH_SPANS` spans and awaited, so memory stays bounded
 * whatever the session's length; the whole export is bounded by `timeout`.
 * What the collector accepted is counted from its answers (a 2xx answer to a
 * request carrying n spans delivers n), so a collector that is down, refuses or
 * does not answer in time loses spans, never entries, and `Result` says how many
 * and why.
 *
 * @since 0.1.0
 */
import { Entry, SessionJournal } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { FetchHttpClient, type HttpBody, HttpClient } from "effect/http"
import * as Layer from "effect/Layer"
import { OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type * as Tracer from "effect/Tracer"
import type * as Storage from "../Storage.ts"
import * as Verify from "../Verify.ts"
import * as ReportModel from "../viewer/ReportModel.ts"
import * as Spans from "./Spans.ts"

/**
 * Spans ended between two awaited flushes.
 *
 * @since 0.1.0
 */
export const FLUSH_SPANS = 512

/**
 * How the spans are encoded: OTLP's protobuf (`http/protobuf`, the default) or
 * JSON (`http/json`).
 *
 * @since 0.1.0
 */
export type Protocol = "http/protobuf" | "http/json"

/**
 * Where and how to send.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The traces endpoint, in full (`…/v1/traces`). */
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly protocol: Protocol
  /** The bound on the whole export. */
  readonly timeout: Duration.Duration
  readonly storage: Storage.Options
}

/**
 * What one session came to.
 *
 * @since 0.1.0
 */
export interface SessionResult {
  readonly id: string
  /** Spans made from the verified entries. */
  readonly spans: number
  /** Entries read and made into spans. */
  readonly entries: number
  /** Entries left out because they did not verify (from `unverified_from` on). */
  readonly unverified: number
  readonly unverified_from: number | null
}

/**
 * What an export came to: the sessions, the spans made, the spans the collector
 * accepted (`delivered`), those it never got or refused (`lost`), and why
 * (`problems`: the first few failures, in order).
 *
 * @since 0.1.0
 */
export interface Result {
  readonly url: string
  readonly sessions: ReadonlyArray<SessionResult>
  readonly spans: number
  readonly delivered: number
  readonly lost: number
  readonly problems: ReadonlyArray<string>
}

const MAX_PROBLEMS = 5

// A clock that says the recorded time; sleeping is the real clock's.
const recordedClock = (real: Clock.Clock, ns: bigint): Clock.Clock => {
  const ms = Number(ns / 1_000_000n)
  return {
    currentTimeMillisUnsafe: () => ms,
    currentTimeMillis: Effect.succeed(ms),
    currentTimeNanosUnsafe: () => ns,
    currentTimeNanos: Effect.succeed(ns),
    monotonicTimeNanosUnsafe: () => ns,
    monotonicTimeNanos: Effect.succeed(ns),
    sleep: (d) => real.sleep(d)
  }
}

// What an ended span's status says: an error with the denial or the tool's error.
class CallError extends Error {
  constructor(message: string) {
    super(message)
    this.name = "ToolCallError"
    this.stack = `${this.name}: ${message}`
  }
}

const spanCount = (data: OtlpTracer.TraceData): number => {
  let n = 0
  for (const r of data.resourceSpans) for (const s of r.scopeSpans) n += s.spans.length
  return n
}

const bodyOf = (request: { readonly body: HttpBody.HttpBody }) => request.body

/**
 * Sends sessions `ids` to the collector at `options.url`. Fails only when a
 * session cannot be read; what the collector did is in the result.
 *
 * @since 0.1.0
 */
export const run = Effect.fn("OtlpExport.run")(function*(ids: ReadonlyArray<string>, options: Options) {
  const journal = yield* SessionJournal.SessionJournal
  const real = yield* Clock.Clock
  const deadline = real.currentTimeMillisUnsafe() + Duration.toMillis(options.timeout)
  const remaining = () => Duration.millis(Math.max(0, deadline - real.currentTimeMillisUnsafe()))

  // Which request carried how many spans, and what the collector answered.
  const carried = new WeakMap<HttpBody.HttpBody, number>()
  let delivered = 0
  const problems: Array<string> = []
  const problem = (text: string) => {
    if (problems.length < MAX_PROBLEMS && !problems.includes(text)) problems.push(text)
  }
  const base = options.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf
  const serialization = Layer.effect(
    OtlpSerialization.OtlpSerialization,
    Effect.map(OtlpSerialization.OtlpSerialization, (inner) =>
      OtlpSerialization.OtlpSerialization.of({
        ...inner,
        traces: (data) => {
          const body = inner.traces(data)
          carried.set(body, spanCount(data))
          return body
        }
      }))
  ).pipe(Layer.provide(base))
  const client = Layer.effect(
    HttpClient.HttpClient,
    Effect.map(HttpClient.HttpClient, (inner) =>
      inner.pipe(
        HttpClient.tap((response) =>
          Effect.sync(() => {
            if (response.status >= 200 && response.status < 300) {
              delivered += carried.get(bodyOf(response.request)) ?? 0
              carried.delete(bodyOf(response.request))
            } else problem(`the collector answered ${response.status}`)
          })
        ),
        HttpClient.tapError((error) => Effect.sync(() => problem(error.message)))
      ))
  ).pipe(Layer.provide(FetchHttpClient.layer))

  const sessions: Array<SessionResult> = []
  let made = 0
  let timedOut = false
  yield* Effect.gen(function*() {
    const flusher = yield* OtlpExporter.Flusher
    const tracer = yield* OtlpTracer.make({
      url: options.url,
      headers: options.headers,
      resource: { serviceName: "session-journal" },
      // Flushed by us, awaited, every FLUSH_SPANS spans; never on a timer.
      exportInterval: Duration.days(1),
      maxBatchSize: FLUSH_SPANS * 4,
      shutdownTimeout: Duration.millis(1)
    })
    let sinceFlush = 0
    const flush = Effect.suspend(() => {
      sinceFlush = 0
      if (timedOut) return Effect.void
      return flusher.flush.pipe(
        Effect.timeoutOption(remaining()),
        Effect.map((done) => {
          if (Option.isNone(done)) {
            timedOut = true
            problem(`no answer within ${Duration.format(options.timeout)}`)
          }
        })
      )
    })
    for (const id of ids) {
      const report = yield* Verify.session(id, options.storage)
      const from = ReportModel.unverifiedFrom(report)
      const state = yield* journal.state(id).pipe(Effect.option)
      const meta = Option.isSome(state) ? state.value.meta : null
      const fold = Spans.fold(id, meta)
      // A span started after the export timed out is only counted (null): nothing more is sent.
      const open = new Map<string, Tracer.Span | null>()
      let spans = 0
      let entries = 0
      let unverified = 0
      const apply = (ops: ReadonlyArray<Spans.Op>) =>
        Effect.forEach(ops, (op) => {
          switch (op._tag) {
            case "Start": {
              const parent = op.parent === null
                ? undefined
                : open.has(op.parent)
                ? open.get(op.parent)
                : open.get(Spans.SESSION_KEY)
              if (timedOut || parent === null) return Effect.sync(() => open.set(op.key, null))
              return Effect.makeSpan(op.name, {
                ...(parent === undefined ? { root: true } : { parent }),
                attributes: op.attributes,
                kind: "internal"
              }).pipe(
                Effect.provideService(Clock.Clock, recordedClock(real, op.time)),
                Effect.map((span) => {
                  open.set(op.key, span)
                })
              )
            }
            case "Annotate":
              return Effect.sync(() => {
                const span = open.get(op.key)
                if (span !== undefined && span !== null) {
                  for (const k in op.attributes) span.attribute(k, op.attributes[k])
                }
              })
            case "Event":
              return Effect.sync(() => open.get(op.key)?.event(op.name, op.time, op.attributes))
            case "End":
              return Effect.suspend(() => {
                const span = open.get(op.key)
                if (span === undefined) return Effect.void
                open.delete(op.key)
                span?.end(op.time, op.error === null ? Exit.void : Exit.fail(new CallError(op.error)))
                spans++
                made++
                sinceFlush++
                return sinceFlush >= FLUSH_SPANS ? flush : Effect.void
              })
          }
        }, { discard: true }).pipe(Effect.withTracer(tracer))
      yield* journal.entries(id).pipe(
        // Damage the verification found ends the read; it is reported there.
        Stream.catchTag("CorruptJournal", () => Stream.empty),
        Stream.runForEachArray((chunk) =>
          Effect.forEach(chunk, (entry: Entry.Entry) => {
            if (from !== null && entry.sequence >= from) {
              unverified++
              return Effect.void
            }
            entries++
            return apply(fold.add(entry))
          }, { discard: true })
        )
      )
      yield* apply(fold.finish())
      sessions.push({ id, spans, entries, unverified, unverified_from: from })
    }
    yield* flush
  }).pipe(
    Effect.provide(OtlpExporter.layerFlusher),
    Effect.provide(Layer.mergeAll(serialization, client)),
    Effect.scoped
  )
  const lost = made - delivered
  if (lost > 0 && problems.length === 0) problem("the collector did not accept every span")
  const result: Result = { url: options.url, sessions, spans: made, delivered, lost, problems }
  return result
})

/**
 * The traces endpoint for a base URL as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it
 * (`http://host:4318` → `http://host:4318/v1/traces`); a URL whose path already
 * ends in `/v1/traces` is kept.
 *
 * @since 0.1.0
 */
export const tracesUrl = (base: string): string => {
  const url = new URL(base)
  if (url.pathname.endsWith("/v1/traces")) return url.toString()
  url.pathname += `${url.pathname.endsWith("/") ? "" : "/"}v1/traces`
  return url.toString()
}

/**
 * Headers as the `OTEL_EXPORTER_OTLP_HEADERS` variables give them:
 * `key=value,key2=value2`, values percent-decoded; an entry without `=` or with
 * an empty key is an error (its text).
 *
 * @since 0.1.0
 */
export const parseHeaders = (text: string): Record<string, string> | string => {
  const out: Record<string, string> = {}
  for (const part of text.split(",")) {
    if (part.trim() === "") continue
    const eq = part.indexOf("=")
    const key = eq < 0 ? "" : part.slice(0, eq).trim()
    if (key === "") return `a header entry is not key=value: ${JSON.stringify(part)}`
    try {
      out[key] = decodeURIComponent(part.slice(eq + 1).trim())
    } catch {
      return `a header value is not percent-encoded text: ${JSON.stringify(part)}`
    }
  }
  return out
}
