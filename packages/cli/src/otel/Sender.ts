/**
 * Finished spans (`Spans.Finished`) sent to an OpenTelemetry collector over
 * OTLP/HTTP through Effect's own OTLP tracer and exporter (`effect/observability`:
 * `OtlpTracer`, `OtlpSerialization`, `OtlpExporter`): no encoding of ours. Each
 * span is made by the tracer with its recorded start time and ended with its
 * recorded end time, and carries the ids `Spans.traceIdOf` / `Spans.spanIdOf`
 * give it (its parent is named by id, so a child may be sent before or after its
 * parent). The one sender of `otel export` and of the doors' live export.
 *
 * Nothing is sent on a timer: spans wait in the exporter's buffer until `flush`,
 * which the caller awaits, so what is in flight is bounded by what the caller
 * sends between two flushes. Every request is bounded by `requestTimeout` (the
 * exporter tries a request that fails 3 more times, 1 s apart, then stops sending
 * for 60 s and drops what it holds). What the collector accepted is counted from
 * its answers (a 2xx answer to a request carrying n spans delivers n).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { FetchHttpClient, type HttpBody, HttpClient } from "effect/http"
import * as Layer from "effect/Layer"
import { OtlpExporter, OtlpSerialization, OtlpTracer } from "effect/observability"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import * as Spans from "./Spans.ts"

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
  /** The bound on each request (each try of it). */
  readonly requestTimeout: Duration.Duration
}

/**
 * A sender: `send` hands spans of a session to the exporter's buffer (at once,
 * never waiting on the collector); `flush` sends what is buffered and completes
 * when the collector answered or the exporter gave up; the counts say what was
 * sent and what the collector accepted, `problems` the first few failures.
 *
 * @since 0.1.0
 */
export interface Sender {
  readonly send: (session: string, spans: ReadonlyArray<Spans.Finished>) => void
  readonly flush: Effect.Effect<void>
  /** Spans handed to `send`. */
  readonly sent: () => number
  /** Spans the collector accepted. */
  readonly delivered: () => number
  readonly problems: () => ReadonlyArray<string>
}

const MAX_PROBLEMS = 5

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

// The ids a span is given: its own, shadowing the tracer's random ones.
const setIds = (span: Tracer.Span, traceId: string, spanId: string) => {
  Object.defineProperty(span, "traceId", { value: traceId, enumerable: true })
  Object.defineProperty(span, "spanId", { value: spanId, enumerable: true })
}

/**
 * A sender to `options.url`, for as long as the scope lasts (closing it sends
 * nothing more: flush first).
 *
 * @since 0.1.0
 */
export const make = (options: Options): Effect.Effect<Sender, never, Scope.Scope> =>
  Effect.gen(function*() {
    // Which request carried how many spans, and what the collector answered.
    const carried = new WeakMap<HttpBody.HttpBody, number>()
    let delivered = 0
    let sent = 0
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
    const timeout = options.requestTimeout
    const client = Layer.effect(
      HttpClient.HttpClient,
      Effect.map(HttpClient.HttpClient, (inner) =>
        inner.pipe(
          HttpClient.transform((response) =>
            Effect.timeoutOrElse(response, {
              duration: timeout,
              // A defect: the exporter does not try it again, it stops sending for 60 s.
              orElse: () =>
                Effect.andThen(
                  Effect.sync(() => problem(`no answer within ${Duration.format(timeout)}`)),
                  Effect.die(new Error(`no answer within ${Duration.format(timeout)}`))
                )
            })
          ),
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
    const services = yield* Layer.build(Layer.mergeAll(OtlpExporter.layerFlusher, serialization, client))
    const tracer = yield* OtlpTracer.make({
      url: options.url,
      headers: options.headers,
      resource: { serviceName: "session-journal" },
      // Flushed by the caller, awaited; never on a timer.
      exportInterval: Duration.days(1),
      maxBatchSize: Number.MAX_SAFE_INTEGER,
      shutdownTimeout: Duration.millis(1)
    }).pipe(Effect.provideContext(services))
    const flusher = Context.get(services, OtlpExporter.Flusher)

    const send = (session: string, spans: ReadonlyArray<Spans.Finished>) => {
      const traceId = Spans.traceIdOf(session)
      for (const f of spans) {
        const parent = f.parent === null
          ? Option.none<Tracer.AnySpan>()
          : Option.some(Tracer.externalSpan({ traceId, spanId: Spans.spanIdOf(session, f.parent) }))
        const span = tracer.span({
          name: f.name,
          parent,
          annotations: Context.empty(),
          links: [],
          startTime: f.start,
          kind: "internal",
          root: f.parent === null,
          sampled: true
        })
        setIds(span, traceId, Spans.spanIdOf(session, f.key))
        for (const k in f.attributes) span.attribute(k, f.attributes[k])
        for (const e of f.events) span.event(e.name, e.time, e.attributes)
        span.end(f.end < f.start ? f.start : f.end, f.error === null ? Exit.void : Exit.fail(new CallError(f.error)))
        sent++
      }
    }
    const sender: Sender = {
      send,
      flush: flusher.flush,
      sent: () => sent,
      delivered: () => delivered,
      problems: () => problems
    }
    return sender
  })
