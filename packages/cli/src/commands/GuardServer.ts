/**
 * `session-journal claude-code guard`: the resident guard, a local HTTP server
 * on 127.0.0.1 for Claude Code's hooks and the only writer of its journal. It
 * keeps the sessions open in one `SessionJournal` service, so a PreToolUse is
 * decided and recorded by `decide` in well under a millisecond of work, and the
 * hooks of parallel calls on one session are queued into the same group commit
 * (a guard holds across them: sixteen concurrent calls under `maxInvocations(5)`
 * allow exactly five).
 *
 * One route, `POST /hook`, takes every event (its name is in the body). A request
 * is answered only when all of these hold, in this order, and gets a 4xx that
 * records nothing otherwise:
 *
 * - its `Host` is exactly `127.0.0.1`, `localhost` or `[::1]` with the bound port
 *   (`HostCheck`: no DNS rebinding) — else 403;
 * - it carries `Authorization: Bearer TOKEN` with the guard's secret token,
 *   compared in constant time (SHA-256 of both sides, `timingSafeEqual`) — else 401;
 * - it is `POST /hook` — else 405 / 404;
 * - its `Content-Type` is `application/json` — else 415;
 * - its body is at most `MAX_BODY_BYTES` (by `Content-Length` before reading,
 *   and while reading a body without one) — else 413;
 * - its body is strict UTF-8 holding one JSON object with a `hook_event_name`,
 *   nested at most `Hook.MAX_INPUT_DEPTH` levels — else 400.
 *
 * The event is then decoded and handled by `Hook.handle` (the command hook's own
 * handler: the same entries, the same decisions), whose answer is the response
 * (200, the hook output as JSON). An event that cannot be journaled (fields its
 * event needs are missing, storage fails, the session is damaged) fails closed
 * in its event's form, `Hook.refusal(…).httpOutput`: a PreToolUse is denied
 * with the reason, any other event answered `{"decision":"block"}` — never a
 * 5xx, on which Claude Code would let the call run.
 *
 * SIGTERM (or SIGINT) stops it cleanly: no new connection is accepted, requests
 * in flight are answered and their entries stored, the sessions are closed, and
 * the process exits 0.
 *
 * @since 0.4.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Hook } from "@session-journal/claude-code"
import { Policy, SessionJournal } from "@session-journal/core"
import * as ByteSize from "effect/ByteSize"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { HttpIncomingMessage, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as crypto from "node:crypto"
import * as http from "node:http"
import { InvalidInput, NotAvailable } from "../Failure.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"
import * as HostCheck from "../viewer/HostCheck.ts"

/**
 * The path every hook event is posted to.
 *
 * @since 0.4.0
 */
export const PATH = "/hook"

/**
 * Largest request body taken: the hook input bound (`Hook.MAX_INPUT_BYTES`, 4 MiB).
 *
 * @since 0.4.0
 */
export const MAX_BODY_BYTES = Hook.MAX_INPUT_BYTES

/**
 * The environment variable the guard's token comes from, and which the installed
 * hooks send it from.
 *
 * @since 0.4.0
 */
export const TOKEN_VAR = "SESSION_JOURNAL_GUARD_TOKEN"

/**
 * Shortest token accepted from the environment (16 characters).
 *
 * @since 0.4.0
 */
export const MIN_TOKEN_LENGTH = 16

/**
 * How long sessions with nothing to write stay open in the guard (10 minutes: a
 * model's turn between two tool calls can take minutes).
 *
 * @since 0.4.0
 */
export const IDLE_TIME_TO_LIVE = "10 minutes"

/**
 * A fresh token: 32 random bytes from the system's CSPRNG, base64url.
 *
 * @since 0.4.0
 */
export const makeToken = (): string => crypto.randomBytes(32).toString("base64url")

/**
 * Why a token cannot be used, or null: it must be at least `MIN_TOKEN_LENGTH`
 * visible ASCII characters (it travels in a header), with no spaces.
 *
 * @since 0.4.0
 */
export const tokenProblem = (token: string): string | null =>
  token.length < MIN_TOKEN_LENGTH
    ? `it is ${token.length} characters long, at least ${MIN_TOKEN_LENGTH} are needed`
    : /^[\x21-\x7e]+$/.test(token)
    ? null
    : "it may hold only visible ASCII characters (no spaces or control characters)"

const digest = (text: string): Buffer => crypto.createHash("sha256").update(text, "utf8").digest()

/**
 * Whether an `Authorization` header carries `token` as a bearer token. The
 * comparison takes the same time whatever the header holds: both sides are
 * hashed first, so neither their lengths nor their common prefix show.
 *
 * @since 0.4.0
 */
export const authorizer = (token: string): (header: string | undefined) => boolean => {
  const expected = digest(token)
  return (header) => {
    const match = header === undefined ? null : /^Bearer +(\S+) *$/i.exec(header)
    // Hashed even when there is no token, so a missing one takes the same time.
    const given = digest(match?.[1] ?? "")
    return crypto.timingSafeEqual(given, expected) && match !== null
  }
}

/**
 * Options of the guard.
 *
 * @since 0.4.0
 */
export interface Options {
  /** The port on 127.0.0.1 (0 picks a free one). */
  readonly port: number
  /** The secret bearer token requests must carry. */
  readonly token: string
  /** The policy PreToolUse is decided by; null records only. */
  readonly policy: Policy.Policy | null
  /** How the policy is named in the start line (its file). */
  readonly policyName?: string | undefined
  readonly storage: Storage.Options
}

const refuse = (status: number, error: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.jsonUnsafe({ error }, { status, headers: { "cache-control": "no-store", ...headers } })

/**
 * The handler of every request: the checks above, then the hook handler.
 *
 * @since 0.4.0
 */
export const handler = (options: {
  readonly port: number
  readonly token: string
  readonly policy: Policy.Policy | null
  /** Whether the guard is stopping: answers then close their connection. */
  readonly stopping?: (() => boolean) | undefined
}) => {
  const answer = answerOf(options)
  const stopping = options.stopping ?? (() => false)
  return Effect.map(
    answer,
    (response) => stopping() ? HttpServerResponse.setHeader(response, "connection", "close") : response
  )
}

const answerOf = (options: {
  readonly port: number
  readonly token: string
  readonly policy: Policy.Policy | null
}) => {
  const hosts = HostCheck.policy(options.port)
  const authorized = authorizer(options.token)
  const handleOptions: Hook.HandleOptions = options.policy === null
    ? { policy: null }
    : { policy: Policy.toGuard(options.policy), policyName: Policy.format(options.policy) }
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    if (!HostCheck.allows(hosts, request.headers["host"])) {
      return refuse(403, `the guard answers requests addressed to ${[...hosts.accepted].join(", ")} only`)
    }
    if (!authorized(request.headers["authorization"])) {
      return refuse(401, `a bearer token is required: Authorization: Bearer $${TOKEN_VAR}`, {
        "www-authenticate": "Bearer"
      })
    }
    if (new URL(request.url, "http://127.0.0.1").pathname !== PATH) return refuse(404, `hook events go to POST ${PATH}`)
    if (request.method !== "POST") return refuse(405, `hook events go to POST ${PATH}`, { allow: "POST" })
    const type = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
    if (type !== "application/json") return refuse(415, "the body must be application/json")
    const length = request.headers["content-length"]
    if (length !== undefined && !(/^[0-9]{1,16}$/.test(length) && Number(length) <= MAX_BODY_BYTES)) {
      return refuse(413, `the body must be at most ${MAX_BODY_BYTES} bytes`)
    }
    const body = yield* request.arrayBuffer.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(MAX_BODY_BYTES)),
      Effect.result
    )
    if (body._tag === "Failure") {
      const reason = body.failure.reason
      return reason._tag === "RequestParseError" && reason.reason === "BodyTooLarge"
        ? refuse(413, `the body must be at most ${MAX_BODY_BYTES} bytes`)
        : refuse(400, `the body could not be read: ${body.failure.message}`)
    }
    const decoded = Hook.decode(new Uint8Array(body.success), { maxBytes: MAX_BODY_BYTES })
    if (Result.isFailure(decoded)) {
      const e = decoded.failure
      // Bytes that are no JSON object at all are a bad request; an event that is
      // JSON but cannot be journaled is refused in its event's form (a PreToolUse
      // denied), which an http hook, failing open on a 4xx, would not do.
      if (e.reason === "TooLarge") return refuse(413, e.detail)
      if (e.event === null) return refuse(400, e.detail)
      return HttpServerResponse.jsonUnsafe(Hook.refusal(e.event, e.detail).httpOutput)
    }
    const event = decoded.success
    const answered = yield* Effect.exit(Hook.handle(event, handleOptions))
    if (Exit.isSuccess(answered)) return HttpServerResponse.jsonUnsafe(answered.value.output)
    const name = event.name === "Unknown" ? event.input.hook_event_name : event.name
    const error = Cause.findErrorOption(answered.cause)
    const reason = Cause.hasInterruptsOnly(answered.cause)
      ? "the guard is stopping"
      : error._tag === "Some"
      ? error.value.detail
      : `cannot record ${name}: ${String(Cause.squash(answered.cause))}`
    return HttpServerResponse.jsonUnsafe(Hook.refusal(name, reason).httpOutput)
  })
}

/**
 * Runs the guard until SIGTERM or SIGINT, printing its address first
 * (`session-journal guard: listening at http://127.0.0.1:PORT/hook …`). After a
 * signal it drains (requests in flight are answered and stored), closes the
 * journal and marks the process's exit code 0: a stop on a signal is its normal end.
 *
 * @since 0.4.0
 */
export const run = (options: Options) =>
  Effect.gen(function*() {
    const problem = tokenProblem(options.token)
    if (problem !== null) return yield* new InvalidInput({ field: TOKEN_VAR, reason: problem })
    let signalled = false
    const onSignal = () => {
      signalled = true
    }
    process.once("SIGTERM", onSignal)
    process.once("SIGINT", onSignal)
    const live = SessionJournal.layer({ idleTimeToLive: IDLE_TIME_TO_LIVE }).pipe(
      Layer.provideMerge(Storage.layer(options.storage))
    )
    const serve = Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const port = "port" in server.address ? server.address.port : 0
      yield* HttpServer.serveEffect(
        handler({ port, token: options.token, policy: options.policy, stopping: () => signalled })
      )
      const where = Storage.isFilesystem(options.storage) ? options.storage.dir : "PostgreSQL"
      yield* Output.write(
        `session-journal guard: listening at http://127.0.0.1:${port}${PATH}, journal ${where}, ` +
          (options.policy === null ? "no policy (record only)" : `policy ${options.policyName ?? "given"}`) + "\n"
      )
      return yield* Effect.never
    })
    return yield* Effect.scoped(serve).pipe(
      Effect.provide(NodeHttpServer.layer(() => http.createServer({ requestTimeout: 30_000 }), {
        port: options.port,
        host: "127.0.0.1",
        gracefulShutdownTimeout: "20 seconds"
      })),
      Effect.catchTag("ServeError", (e) =>
        Effect.fail(
          new NotAvailable({ feature: "guard", reason: `cannot listen on 127.0.0.1:${options.port} (${e.message})` })
        )),
      Effect.provide(live),
      Effect.onExit((exit) =>
        Effect.sync(() => {
          process.off("SIGTERM", onSignal)
          process.off("SIGINT", onSignal)
          if (signalled && Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause)) {
            process.exitCode = 0
          }
        })
      )
    )
  })
