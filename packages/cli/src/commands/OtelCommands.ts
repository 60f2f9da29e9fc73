/**
 * `otel export ID… --endpoint URL`: finished sessions sent to an OpenTelemetry
 * collector as traces in the GenAI semantic conventions (`otel/OtlpExport`,
 * `otel/Spans`). The endpoint, headers, protocol and timeout fall back to the
 * standard variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the traces URL in
 * full), `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL, `/v1/traces` appended),
 * `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS`,
 * `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL` and
 * `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` / `OTEL_EXPORTER_OTLP_TIMEOUT`
 * (milliseconds). Spans that do not reach the collector end the command with
 * exit 7 (`SpansLost`) after it printed what was sent. An id may be Claude Code's
 * own session id: it stands for the hooked session of that session (`Stories`).
 *
 * @since 0.1.0
 */
import { SessionJournal } from "@session-journal/core"
import { Argument, Command, Flag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InvalidInput, SpansLost } from "../Failure.ts"
import { validId, withJournalToRead } from "../internal/commandKit.ts"
import * as OtlpFlags from "../internal/otlpFlags.ts"
import type * as OtlpExport from "../otel/OtlpExport.ts"
import * as Output from "../Output.ts"
import * as ReportModel from "../viewer/ReportModel.ts"
import * as Stories from "../viewer/Stories.ts"

const load = Effect.promise((): Promise<typeof OtlpExport> => import("../otel/OtlpExport.ts"))

const endpoint = Flag.String("endpoint").pipe(
  Flag.map((value): OtlpFlags.Endpoint => ({ value, base: true })),
  Flag.withFallbackConfig(OtlpFlags.endpointConfig),
  Flag.optional,
  Flag.withMetavar("URL"),
  Flag.withDescription(
    "The collector's OTLP/HTTP base URL (http://localhost:4318; /v1/traces is appended unless given) " +
      "(default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as the traces URL, else $OTEL_EXPORTER_OTLP_ENDPOINT)"
  )
)

const headers = Flag.String("header").pipe(
  Flag.atLeast(0),
  Flag.withMetavar("KEY=VALUE"),
  Flag.withDescription(
    "A header to send (repeatable), added to $OTEL_EXPORTER_OTLP_TRACES_HEADERS / $OTEL_EXPORTER_OTLP_HEADERS"
  )
)

const protocol = Flag.Literals("protocol", OtlpFlags.PROTOCOLS).pipe(
  Flag.withFallbackConfig(OtlpFlags.protocolConfig),
  Flag.withDefault("http/protobuf" as const),
  Flag.withDescription(
    "Encoding (default $OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else $OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)"
  )
)

const timeout = Flag.String("timeout").pipe(
  Flag.withMetavar("DURATION"),
  Flag.optional,
  Flag.withDescription(
    "Give up after DURATION (500ms, 30s, 2m) and count what was not accepted as lost " +
      "(default $OTEL_EXPORTER_OTLP_TRACES_TIMEOUT or $OTEL_EXPORTER_OTLP_TIMEOUT in ms, else 10s)"
  )
)

// An id that names no journal session but an agent's session (Claude Code's session
// id) stands for that session's story: its hooked session, which decided the calls,
// else the custody of its main transcript, else its store copy.
const resolve = (ids: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const out: Array<string> = []
    let stories: Map<string, Array<Stories.Member>> | undefined
    for (const id of ids) {
      if (yield* ReportModel.exists(id)) {
        out.push(id)
        continue
      }
      if (stories === undefined) {
        const journal = yield* SessionJournal.SessionJournal
        stories = (yield* Stories.collect((yield* journal.list).map((s) => s.id))).stories
      }
      const members = (stories.get(id) ?? []).filter((m) => m.subAgent === null)
      const chosen = (["hooked", "custody", "store"] as const).map((role) => members.find((m) => m.role === role))
        .find((m) => m !== undefined)
      out.push(chosen?.id ?? id)
    }
    return out
  })

const exportCmd = Command.make("export", {
  ids: Argument.String("id").pipe(
    Argument.variadic({ min: 1 }),
    Argument.withDescription("Sessions to send: journal session ids, or an agent's own session id (Claude Code's)")
  ),
  endpoint,
  headers,
  protocol,
  timeout
}, (a) =>
  withJournalToRead(({ json, storage }) =>
    Effect.gen(function*() {
      for (const id of a.ids) yield* validId(id)
      const module = yield* load
      const sending = yield* OtlpFlags.resolve({
        field: "--endpoint",
        endpoint: a.endpoint,
        headers: a.headers,
        protocol: a.protocol,
        timeout: a.timeout
      })
      if (Option.isNone(sending)) {
        return yield* new InvalidInput({
          field: "--endpoint",
          reason:
            "no collector given (--endpoint URL, or $OTEL_EXPORTER_OTLP_ENDPOINT / $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)"
        })
      }
      const { headers: sent, requestTimeout: bound, url } = sending.value
      const result = yield* module.run(yield* resolve(a.ids), {
        url,
        headers: sent,
        protocol: a.protocol,
        timeout: bound,
        storage
      })
      if (json) yield* Output.json(result)
      else {
        const lines = result.sessions.map((s) =>
          `${s.id}: ${s.spans} span${s.spans === 1 ? "" : "s"} from ${s.entries} entr${s.entries === 1 ? "y" : "ies"}` +
          (s.unverified === 0
            ? ""
            : `; ${s.unverified} entries from sequence ${s.unverified_from} left out: not verified`)
        )
        lines.push(`${result.delivered} of ${result.spans} spans delivered to ${result.url}`)
        yield* Output.lines(lines)
      }
      if (result.lost > 0) {
        return yield* new SpansLost({
          url: result.url,
          lost: result.lost,
          spans: result.spans,
          reason: result.problems.join("; ")
        })
      }
    })
  )).pipe(
    Command.withDescription(
      "Send finished sessions to an OpenTelemetry collector (OTLP/HTTP) as traces in the GenAI semantic conventions"
    )
  )

/**
 * `otel export`.
 *
 * @since 0.1.0
 */
export const otel = Command.make("otel").pipe(
  Command.withDescription("OpenTelemetry: send sessions to a trace viewer as spans"),
  Command.withSubcommands([exportCmd])
)
