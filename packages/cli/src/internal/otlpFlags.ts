/**
 * Where spans go, as `otel export` and the doors (`--otlp URL`) take it: a flag,
 * else the standard OpenTelemetry variables. The endpoint: the flag (a base URL,
 * `/v1/traces` appended unless given), else `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
 * (the traces URL in full), else `OTEL_EXPORTER_OTLP_ENDPOINT` (a base URL); the
 * headers: `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS`
 * (`key=value,…`, values percent-decoded) and `--header`; the protocol:
 * `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` / `OTEL_EXPORTER_OTLP_PROTOCOL`
 * (`http/protobuf`, the default, or `http/json`); the timeout:
 * `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` / `OTEL_EXPORTER_OTLP_TIMEOUT` (ms).
 */
import { Flag } from "effect/cli"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { InvalidInput } from "../Failure.ts"
import type * as Sender from "../otel/Sender.ts"
import { parseWait } from "./commandKit.ts"

/** The variables read, every one. */
export const VARS = [
  "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
  "OTEL_EXPORTER_OTLP_PROTOCOL",
  "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
  "OTEL_EXPORTER_OTLP_TIMEOUT"
] as const

/** The protocols spans can be sent in. */
export const PROTOCOLS = ["http/protobuf", "http/json"] as const

/** An endpoint as given: `base` when `/v1/traces` is to be appended. */
export interface Endpoint {
  readonly value: string
  readonly base: boolean
}

const firstOf = (names: ReadonlyArray<string>): Config.Config<string> =>
  names.slice(1).reduce(
    (config, name) => Config.orElse(config, () => Config.String(name)),
    Config.String(names[0]!)
  )

/** The endpoint's variables, the traces one first. */
export const endpointConfig: Config.Config<Endpoint> = Config.orElse(
  Config.map(Config.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), (value) => ({ value, base: false })),
  () => Config.map(Config.String("OTEL_EXPORTER_OTLP_ENDPOINT"), (value) => ({ value, base: true }))
)

/** The protocol's variables, the traces one first. */
export const protocolConfig: Config.Config<Sender.Protocol> = Config.Literals(
  PROTOCOLS,
  "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
).pipe(Config.orElse(() => Config.Literals(PROTOCOLS, "OTEL_EXPORTER_OTLP_PROTOCOL")))

const envHeaders = Config.option(firstOf(["OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"]))
const envTimeout = Config.option(
  Config.Int("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT").pipe(Config.orElse(() => Config.Int("OTEL_EXPORTER_OTLP_TIMEOUT")))
)

/**
 * `--otlp URL` of a door: its spans sent live to the collector (the variables
 * when the flag is not given).
 */
export const otlpFlag = Flag.String("otlp").pipe(
  Flag.map((value): Endpoint => ({ value, base: true })),
  Flag.withFallbackConfig(endpointConfig),
  Flag.optional,
  Flag.withMetavar("URL"),
  Flag.withDescription(
    "Send the spans of what this process journals, as it journals them, to an OpenTelemetry collector's " +
      "OTLP/HTTP base URL (http://localhost:4318; /v1/traces appended unless given), as `otel export` does; " +
      "a collector that is down or slow loses spans, never entries or decisions " +
      "(default $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as the traces URL, else $OTEL_EXPORTER_OTLP_ENDPOINT; " +
      "headers, protocol and timeout from $OTEL_EXPORTER_OTLP_HEADERS, _PROTOCOL, _TIMEOUT)"
  )
)

/**
 * The traces endpoint for a base URL as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it
 * (`http://host:4318` → `http://host:4318/v1/traces`); a URL whose path already
 * ends in `/v1/traces` is kept.
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

const invalid = (field: string, reason: string) => Effect.fail(new InvalidInput({ field, reason }))

/**
 * The sender's options from what was given (`field` names the endpoint's flag in
 * errors): the URL checked (http or https), the headers of the variables and
 * `headers`, the protocol (the variables' when not given), the timeout (`timeout`,
 * else the variables' milliseconds, else 10 s). None without an endpoint.
 */
export const resolve = (given: {
  readonly field: string
  readonly endpoint: Option.Option<Endpoint>
  readonly headers?: ReadonlyArray<string> | undefined
  readonly protocol?: Sender.Protocol | undefined
  readonly timeout?: Option.Option<string> | undefined
}): Effect.Effect<Option.Option<Sender.Options>, InvalidInput> =>
  Effect.gen(function*() {
    if (Option.isNone(given.endpoint)) return Option.none()
    const endpoint = given.endpoint.value
    let url: string
    try {
      url = endpoint.base ? tracesUrl(endpoint.value) : new URL(endpoint.value).toString()
    } catch {
      return yield* invalid(given.field, `not a URL: ${JSON.stringify(endpoint.value)}`)
    }
    if (!/^https?:$/.test(new URL(url).protocol)) return yield* invalid(given.field, "must be an http or https URL")
    const fromEnv = yield* envHeaders.pipe(Effect.orElseSucceed(() => Option.none<string>()))
    const headers: Record<string, string> = {}
    for (const text of [...Option.toArray(fromEnv), ...(given.headers ?? [])]) {
      const parsed = parseHeaders(text)
      if (typeof parsed === "string") return yield* invalid("--header", parsed)
      Object.assign(headers, parsed)
    }
    const protocol = given.protocol ??
      Option.getOrElse(
        yield* Config.option(protocolConfig).pipe(Effect.orElseSucceed(() => Option.none<Sender.Protocol>())),
        (): Sender.Protocol => "http/protobuf"
      )
    let requestTimeout = Duration.seconds(10)
    if (given.timeout !== undefined && Option.isSome(given.timeout)) {
      try {
        requestTimeout = parseWait(given.timeout.value)
      } catch (e) {
        return yield* invalid("--timeout", e instanceof Error ? e.message : String(e))
      }
    } else {
      const ms = yield* envTimeout.pipe(Effect.orElseSucceed(() => Option.none<number>()))
      if (Option.isSome(ms) && ms.value > 0) requestTimeout = Duration.millis(ms.value)
    }
    return Option.some({ url, headers, protocol, requestTimeout })
  })
