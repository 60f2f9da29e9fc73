/**
 * Finished sessions sent to an OpenTelemetry collector over OTLP/HTTP, as the
 * spans `Spans.fold` says, through `Sender` (Effect's own OTLP tracer and
 * exporter), with the ids `Spans` derives from the journal: a session sent again,
 * or sent live by a door before, arrives as the same spans.
 *
 * Only what verified is sent: a session is verified first and entries from the
 * first one that does not verify on are left out (as reports leave them out).
 * Reading never writes: exporting cannot block or fail a journal write. Spans
 * are flushed every `FLUSH_SPANS` spans and awaited, so memory stays bounded
 * whatever the session's length; the whole export is bounded by `timeout`.
 * What the collector accepted is counted from its answers, so a collector that
 * is down, refuses or does not answer in time loses spans, never entries, and
 * `Result` says how many and why.
 *
 * @since 0.1.0
 */
import { Entry, SessionJournal } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Stream from "effect/Stream"
import type * as Storage from "../Storage.ts"
import * as Verify from "../Verify.ts"
import * as ReportModel from "../viewer/ReportModel.ts"
import * as Sender from "./Sender.ts"
import * as Spans from "./Spans.ts"

/**
 * Spans ended between two awaited flushes.
 *
 * @since 0.1.0
 */
export const FLUSH_SPANS = 512

/**
 * How the spans are encoded (`Sender.Protocol`).
 *
 * @since 0.1.0
 */
export type Protocol = Sender.Protocol

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

  const sessions: Array<SessionResult> = []
  let made = 0
  let timedOut = false
  const timeoutProblem = `no answer within ${Duration.format(options.timeout)}`
  const outcome = yield* Effect.gen(function*() {
    const sender = yield* Sender.make({
      url: options.url,
      headers: options.headers,
      protocol: options.protocol,
      requestTimeout: options.timeout
    })
    let sinceFlush = 0
    const flush = Effect.suspend(() => {
      sinceFlush = 0
      if (timedOut) return Effect.void
      return sender.flush.pipe(
        Effect.timeoutOption(remaining()),
        Effect.map((done) => {
          if (Option.isNone(done)) timedOut = true
        })
      )
    })
    for (const id of ids) {
      const report = yield* Verify.session(id, options.storage)
      const from = ReportModel.unverifiedFrom(report)
      const state = yield* journal.state(id).pipe(Effect.option)
      const meta = Option.isSome(state) ? state.value.meta : null
      const fold = Spans.fold(id, meta)
      const assembler = Spans.assembler()
      let spans = 0
      let entries = 0
      let unverified = 0
      // Spans ended after the export timed out are only counted: nothing more is sent.
      const apply = (ops: ReadonlyArray<Spans.Op>) =>
        Effect.suspend(() => {
          const finished = assembler.apply(ops)
          if (finished.length === 0) return Effect.void
          spans += finished.length
          made += finished.length
          if (timedOut) return Effect.void
          sender.send(id, finished)
          sinceFlush += finished.length
          return sinceFlush >= FLUSH_SPANS ? flush : Effect.void
        })
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
    return { delivered: sender.delivered(), problems: sender.problems() }
  }).pipe(Effect.scoped)
  const problems = [...outcome.problems]
  if (timedOut && !problems.includes(timeoutProblem)) problems.push(timeoutProblem)
  const lost = made - outcome.delivered
  if (lost > 0 && problems.length === 0) problems.push("the collector did not accept every span")
  const result: Result = { url: options.url, sessions, spans: made, delivered: outcome.delivered, lost, problems }
  return result
})
