/**
 * Finished spans (`Spans.Finished`) sent to an OpenTelemetry collector over
 * OTLP/HTTP through Effect's own OTLP exporter and serialization
 * (`effect/observability`: `OtlpExporter`, `OtlpSerialization`, `OtlpResource`):
 * no encoding of ours. Each span is given as OTLP span data (`OtlpTracer.TraceData`)
 * with the times the journal recorded and the ids `Spans.traceIdOf` /
 * `Spans.spanIdOf` give it; its parent is named by id, so a child may be sent
 * before or after its parent. The one sender of `otel export` and of the doors'
 * live export. The spans are in the instrumentation scope `session-journal`,
 * whose schema URL names the semantic conventions' version (`Spans.SEMCONV_VERSION`).
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
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { FetchHttpClient, HttpClient } from "effect/http"
import * as Layer from "effect/Layer"
import { OtlpExporter, OtlpResource, OtlpSerialization, type OtlpTracer } from "effect/observability"
import type * as Scope from "effect/Scope"
import type * as SenderWorker from "./SenderWorker.ts"
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
  /** Completes once the sender can send (at once, but on a thread still starting). */
  readonly ready: Effect.Effect<void>
  /** Spans handed to `send`. */
  readonly sent: () => number
  /** Spans the collector accepted. */
  readonly delivered: () => number
  readonly problems: () => ReadonlyArray<string>
}

/**
 * One span as OTLP span data, the form Effect's OTLP serialization encodes.
 *
 * @since 0.1.0
 */
export type SpanData = OtlpTracer.ScopeSpan["spans"][number]

const MAX_PROBLEMS = 5

// OTLP's span kind INTERNAL and status codes OK and ERROR (trace.proto).
const KIND_INTERNAL = 1
const STATUS_OK = 1
const STATUS_ERROR = 2

const SCOPE = { name: "session-journal" }
const SCHEMA_URL = `https://opentelemetry.io/schemas/${Spans.SEMCONV_VERSION}`

// The largest time trace.proto's fixed64 nanoseconds hold.
const MAX_NANOS = 2n ** 64n - 1n

// A time as OTLP writes it, decimal nanoseconds, within fixed64 (an outcome's
// `duration_ms` may be any safe integer: the protobuf encoder would wrap it modulo
// 2^64, and in JSON it is a value trace.proto cannot hold, which a collector refuses).
const nanos = (t: bigint): string => String(t < 0n ? 0n : t > MAX_NANOS ? MAX_NANOS : t)

/**
 * A finished span of session `session` as OTLP span data: its ids derived from
 * the session and its key, its recorded times (an end before the start is the
 * start; a time past what OTLP's fixed64 holds is its largest), an error status
 * with the denial or the tool's error, OK otherwise.
 *
 * @since 0.1.0
 */
export const spanData = (session: string, traceId: string, f: Spans.Finished): SpanData => ({
  traceId,
  spanId: Spans.spanIdOf(session, f.key),
  parentSpanId: f.parent === null ? undefined : Spans.spanIdOf(session, f.parent),
  name: f.name,
  kind: KIND_INTERNAL,
  startTimeUnixNano: nanos(f.start),
  endTimeUnixNano: nanos(f.end < f.start ? f.start : f.end),
  attributes: OtlpResource.entriesToAttributes(Object.entries(f.attributes)),
  droppedAttributesCount: 0,
  events: f.events.map((e) => ({
    name: e.name,
    timeUnixNano: nanos(e.time),
    attributes: OtlpResource.entriesToAttributes(Object.entries(e.attributes)),
    droppedAttributesCount: 0
  })),
  droppedEventsCount: 0,
  status: f.error === null ? { code: STATUS_OK } : { code: STATUS_ERROR, message: f.error },
  links: [],
  droppedLinksCount: 0
})

/**
 * A sender to `options.url`, for as long as the scope lasts (closing it sends
 * nothing more: flush first).
 *
 * @since 0.1.0
 */
export const make = (options: Options): Effect.Effect<Sender, never, Scope.Scope> =>
  Effect.gen(function*() {
    let delivered = 0
    let sent = 0
    const problems: Array<string> = []
    const problem = (text: string) => {
      if (problems.length < MAX_PROBLEMS && !problems.includes(text)) problems.push(text)
    }
    const serialization = yield* OtlpSerialization.OtlpSerialization.pipe(
      Effect.provide(options.protocol === "http/json" ? OtlpSerialization.layerJson : OtlpSerialization.layerProtobuf)
    )
    const resource = yield* OtlpResource.fromConfig({ serviceName: "session-journal" })
    const timeout = options.requestTimeout
    const client = Layer.effect(
      HttpClient.HttpClient,
      Effect.map(HttpClient.HttpClient, (inner) =>
        inner.pipe(
          HttpClient.transform((response) =>
            // The answer in full, body too (read once; the exporter reads it again from
            // memory): a collector that sends its status and never the rest is no answer.
            Effect.timeoutOrElse(Effect.tap(response, (r) => Effect.ignore(r.arrayBuffer)), {
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
              if (response.status < 200 || response.status >= 300) problem(`the collector answered ${response.status}`)
            })
          ),
          HttpClient.tapError((error) => Effect.sync(() => problem(error.message)))
        ))
    ).pipe(Layer.provide(FetchHttpClient.layer))
    const services = yield* Layer.build(Layer.mergeAll(OtlpExporter.layerFlusher, client))
    const exporter = yield* OtlpExporter.make({
      label: "session-journal",
      url: options.url,
      headers: options.headers,
      // Flushed by the caller, awaited; never on a timer nor by size.
      exportInterval: Duration.days(1),
      maxBatchSize: "disabled",
      body: (spans: Array<SpanData>) => {
        const data: OtlpTracer.TraceData = {
          resourceSpans: [{ resource, scopeSpans: [{ scope: SCOPE, spans, schemaUrl: SCHEMA_URL }] }]
        }
        return [serialization.traces(data), Effect.sync(() => (delivered += spans.length))]
      },
      shutdownTimeout: Duration.millis(1)
    }).pipe(Effect.provideContext(services))
    const flusher = Context.get(services, OtlpExporter.Flusher)

    const send = (session: string, spans: ReadonlyArray<Spans.Finished>) => {
      const traceId = Spans.traceIdOf(session)
      for (const f of spans) {
        exporter.push(spanData(session, traceId, f))
        sent++
      }
    }
    const sender: Sender = {
      send,
      flush: flusher.flush,
      ready: Effect.void,
      sent: () => sent,
      delivered: () => delivered,
      problems: () => problems
    }
    return sender
  })

/**
 * A sender whose encoding and requests run on a worker thread (`SenderWorker`),
 * for as long as the scope lasts: `send` posts the spans to it (never waits),
 * `flush` completes when the worker answered (the collector answered or the
 * exporter gave up), or at once when the worker stopped, which is then a problem
 * and counts what it had not sent as lost. A worker that cannot start (its module
 * missing beside the bundle, an option of the process Node gives no worker) is a
 * problem too, never a failure: the sender then sends nothing. Closing the scope
 * ends the worker.
 *
 * @since 0.1.0
 */
export const inWorker = (options: Options): Effect.Effect<Sender, never, Scope.Scope> =>
  Effect.gen(function*() {
    let sent = 0
    let delivered = 0
    let problems: ReadonlyArray<string> = []
    let stopped: string | null = null
    let asked = 0
    const waiting = new Map<number, Deferred.Deferred<void>>()
    const ready = Deferred.makeUnsafe<void>()
    const stop = (why: string) => {
      if (stopped !== null) return
      stopped = why
      if (why !== "closed" && !problems.includes(why)) problems = [...problems, why].slice(0, MAX_PROBLEMS)
      Deferred.doneUnsafe(ready, Exit.void)
      for (const d of waiting.values()) Deferred.doneUnsafe(d, Exit.void)
      waiting.clear()
    }
    // Heard from as soon as it is made (its events come on later turns of the event loop).
    const listen = (worker: ReturnType<typeof SenderWorker.spawn>) => {
      // Never what keeps the door's process alive.
      worker.unref()
      worker.on("message", (answer: SenderWorker.FromWorker) => {
        if (answer._tag === "Ready") {
          Deferred.doneUnsafe(ready, Exit.void)
          return
        }
        delivered = answer.delivered
        if (stopped === null) problems = answer.problems
        const d = waiting.get(answer.id)
        waiting.delete(answer.id)
        if (d !== undefined) Deferred.doneUnsafe(d, Exit.void)
      })
      worker.on("error", (e) => stop(`the sender's thread failed: ${e.message}`))
      worker.on("exit", (code) => stop(`the sender's thread stopped (exit code ${code})`))
      return worker
    }
    // The module loaded and the worker made, or why not (a missing file fails the import,
    // an option of the process Node gives no worker fails the constructor): a problem,
    // never a failure of the caller.
    const spawned = yield* Effect.acquireRelease(
      Effect.promise(() =>
        import("./SenderWorker.ts").then((threads) =>
          listen(threads.spawn({
            url: options.url,
            headers: options.headers,
            protocol: options.protocol,
            requestTimeoutMillis: Duration.toMillis(options.requestTimeout)
          }))
        ).then(
          (worker) => ({ worker, failed: null }),
          (e: unknown) => ({ worker: null, failed: e instanceof Error ? e.message : String(e) })
        )
      ),
      ({ worker }) =>
        Effect.suspend(() => {
          // Ended by us: not a problem.
          stop("closed")
          return worker === null ? Effect.void : Effect.promise(() => worker.terminate())
        })
    )
    const worker = spawned.worker
    if (worker === null) stop(`the sender's thread could not start: ${spawned.failed}`)
    const post = (message: SenderWorker.ToWorker) => {
      if (stopped !== null || worker === null) return
      try {
        // No transfer list: the spans are copied (structured clone).
        worker.postMessage(message, [])
      } catch (e) {
        stop(`the sender's thread could not be reached: ${e instanceof Error ? e.message : String(e)}`)
      }
    }
    const sender: Sender = {
      send: (session, spans) => {
        sent += spans.length
        post({ _tag: "Send", session, spans })
      },
      flush: Effect.suspend(() => {
        if (stopped !== null) return Effect.void
        const id = ++asked
        const d = Deferred.makeUnsafe<void>()
        waiting.set(id, d)
        post({ _tag: "Flush", id })
        return Deferred.await(d)
      }),
      ready: Deferred.await(ready),
      sent: () => sent,
      delivered: () => delivered,
      problems: () => problems
    }
    return sender
  })
