/**
 * Spans from Claude Code's command hook: a hook is a short process, once per
 * event, and a span of a call needs the session's fold up to it, so the hook does
 * not send spans per event (that would read the session's history on every
 * call). The `SessionEnd` hook, after its answer is written, sends the whole
 * session as `otel export` would (`OtlpExport.run`: verified entries only, the
 * ids the journal gives, so nothing already sent arrives twice differently),
 * bounded by `DEFAULT_BOUND` (or `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` /
 * `OTEL_EXPORTER_OTLP_TIMEOUT`, ms). Its answer and exit code are already given
 * when it starts and never depend on it; what does not reach the collector is
 * said in one line on stderr. The cost: at most the bound, once per session, at
 * its end; a session longer than the bound allows is sent in part (`otel export`
 * sends the rest).
 *
 * @since 0.1.0
 */
import { SessionJournal } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as OtlpFlags from "../internal/otlpFlags.ts"
import * as Storage from "../Storage.ts"
import * as OtlpExport from "./OtlpExport.ts"

/**
 * How long the `SessionEnd` hook may spend sending the session, by default.
 *
 * @since 0.1.0
 */
export const DEFAULT_BOUND = Duration.millis(300)

/**
 * The event whose hook sends the session.
 *
 * @since 0.1.0
 */
export const EVENT = "SessionEnd"

const hasTimeout = (env: Readonly<Record<string, string | undefined>>): boolean =>
  (env["OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"] ?? "") !== "" || (env["OTEL_EXPORTER_OTLP_TIMEOUT"] ?? "") !== ""

/**
 * Sends session `id` of the journal `storage` to the collector the variables of
 * `env` name (`OtlpFlags.VARS`); resolves with the line to say on stderr (a loss, or why nothing was
 * sent), or null. Never rejects.
 *
 * @since 0.1.0
 */
export const send = (
  id: string,
  storage: Storage.Options,
  env: Readonly<Record<string, string | undefined>>
): Promise<string | null> =>
  Effect.runPromise(
    Effect.gen(function*() {
      const endpoint = yield* Config.option(OtlpFlags.endpointConfig)
      const sending = yield* OtlpFlags.resolve({ field: "OTEL_EXPORTER_OTLP_ENDPOINT", endpoint })
      if (Option.isNone(sending)) return null
      const bound = hasTimeout(env) ? sending.value.requestTimeout : DEFAULT_BOUND
      const result = yield* OtlpExport.run([id], {
        url: sending.value.url,
        headers: sending.value.headers,
        protocol: sending.value.protocol,
        timeout: bound,
        storage
      }).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provideMerge(Storage.layer(storage)))))
      return result.lost === 0
        ? null
        : `session-journal: ${result.lost} of ${result.spans} spans of session ${id} were not delivered to ${result.url}: ` +
          result.problems.join("; ")
    }).pipe(
      Effect.provideService(
        ConfigProvider.ConfigProvider,
        ConfigProvider.fromEnv({
          env: Object.fromEntries(OtlpFlags.VARS.flatMap((name) => {
            const value = env[name]
            return value === undefined ? [] : [[name, value]]
          }))
        })
      ),
      Effect.catchCause((cause) =>
        Effect.succeed(`session-journal: the session's spans were not sent: ${messageOf(cause)}`)
      )
    )
  )
