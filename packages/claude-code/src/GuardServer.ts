/**
 * The resident guard (`session-journal claude-code guard`): a local HTTP server
 * on 127.0.0.1 for Claude Code's hooks and the only writer of its journal. It
 * keeps the sessions open in one `SessionJournal` service, so a PreToolUse is
 * decided and recorded by `decide` in well under a millisecond of work, and the
 * hooks of parallel calls on one session are queued into the same group commit
 * (a guard holds across them: sixteen concurrent calls under `maxInvocations(5)`
 * allow exactly five).
 *
 * Three routes: `POST /hook` takes every event (its name is in the body),
 * `POST /hook/scan` what the forwarder read of an event too large to send whole
 * (`SCAN_PATH`), and `GET /policy` says which policy the guard decides with (`PolicyReport`:
 * `{"policy": <the policy's canonical JSON text> | null, "sha256": <its hex
 * SHA-256> | null, "name": <Policy.format> | null}`, null: record only), which
 * `install --guard --policy FILE` checks (`GuardInstaller.checkPolicy`). A request
 * is answered only when all of these hold, in this order, and gets a 4xx that
 * records nothing otherwise:
 *
 * - its `Host` is exactly `127.0.0.1`, `localhost` or `[::1]` with the bound port
 *   (`Options.hosts`, the command line's `HostCheck`: no DNS rebinding) — else 403;
 * - it proves it holds the guard's secret token, either way — else 401:
 *   - `X-Session-Journal-Auth: sj1 <time> <nonce> <mac>` (the forwarder's way,
 *     `guardAuth.ts`): an HMAC-SHA256 keyed with the token over the method, the
 *     path, the time, the nonce and the body's SHA-256, compared in constant
 *     time, the time within `GuardAuth.WINDOW_MS` of the guard's clock (Effect's
 *     `Clock`), the nonce never seen before (`GuardAuth.ReplayGuard`); the token
 *     itself is never sent, so whatever answers in the guard's place learns
 *     nothing. Every answer to a request whose proof verified carries
 *     `X-Session-Journal-Answer: sj1 <mac>`, an HMAC over the request's nonce,
 *     the status and the body's SHA-256, by which the forwarder knows it is the
 *     guard's (a refusal before that is not signed);
 *   - `Authorization: Bearer TOKEN` (Claude Code's own `http` hooks), compared in
 *     constant time (SHA-256 of both sides, `timingSafeEqual`);
 * - it is `POST /hook`, `POST /hook/scan` or `GET /policy` — else 405 / 404;
 * - for a `POST`: its `Content-Type` is `application/json` — else 415;
 * - its body is at most `MAX_BODY_BYTES` (by `Content-Length` before reading,
 *   and while reading a body without one) — else 413;
 * - its body is strict UTF-8 holding one JSON object with a `hook_event_name`,
 *   nested at most `Hook.MAX_INPUT_DEPTH` levels — else 400.
 *
 * The event is then decoded and handled by `Hook.handle` (the command hook's own
 * handler, the one place every door decides: the same entries, the same decisions), whose answer is the response
 * (200, the hook output as JSON). An event that cannot be journaled (fields its
 * event needs are missing, storage fails, the session is damaged) fails closed
 * in its event's form, `Refusal.refusal(…).httpOutput` with the input's
 * `stop_hook_active`: a PreToolUse is denied with the reason, a Stop already
 * kept going answered `{}`, any other event answered `{"decision":"block"}` —
 * never a 5xx, on which Claude Code would let the call run. Handling has a
 * deadline (`handleTimeout`, default `DEFAULT_HANDLE_TIMEOUT_MS`, under the
 * forwarder's): a session whose storage does not answer (a PostgreSQL row
 * locked by another connection, a lock another writer holds while the guard
 * waits for it) is refused in the same form, with a reason that says what timed
 * out, and its handling is interrupted behind the answer (it may still record
 * the event after the refusal: the journal then holds a decision that Claude
 * Code did not follow, never a call that ran unrecorded).
 *
 * SIGTERM (or SIGINT) stops it cleanly: no new connection is accepted, requests
 * in flight are answered and their entries stored, the sessions are closed, and
 * the process exits 0.
 *
 * @since 0.1.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { type Persistence, Policy, SessionJournal } from "@session-journal/core"
import { decodeStrict } from "@session-journal/core/Utf8"
import * as ByteSize from "effect/ByteSize"
import * as Cause from "effect/Cause"
import * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import { HttpIncomingMessage, HttpServer, HttpServerRequest, HttpServerResponse } from "effect/http"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as crypto from "node:crypto"
import * as http from "node:http"
import * as AgentDepth from "./AgentDepth.ts"
import * as GuardInstall from "./GuardInstaller.ts"
import * as Hook from "./Hook.ts"
import { Acknowledged } from "./internal/acknowledged.ts"
import * as Coalesce from "./internal/coalesce.ts"
import * as GuardAuth from "./internal/guardAuth.ts"
import * as Protect from "./internal/protect.ts"
import * as TranscriptScan from "./internal/transcriptScan.ts"
import * as Refusal from "./Refusal.ts"

/**
 * The path every hook event is posted to.
 *
 * @since 0.1.0
 */
export const PATH = "/hook"

/**
 * The path the forwarder posts an event to that it could not send whole (over
 * `MAX_BODY_BYTES`): its scan (`Hook.decodeScan`), which the guard salvages as
 * the command hook salvages such an input, so a PostToolUse or
 * PostToolUseFailure of any size is recorded as an outcome marker (its size, its
 * hash) whose bytes reach the counters.
 *
 * @since 0.1.0
 */
export const SCAN_PATH = "/hook/scan"

/**
 * The path that reports the guard's policy.
 *
 * @since 0.1.0
 */
export const POLICY_PATH = "/policy"

/**
 * How long the guard handles one event by default before it refuses it (5 s):
 * well under the forwarder's deadline (`Forward.DEFAULT_TIMEOUT_MS`, 10 s), so
 * the guard's refusal, which says what timed out, arrives before the forwarder
 * gives up on its own.
 *
 * @since 0.1.0
 */
export const DEFAULT_HANDLE_TIMEOUT_MS = 5_000

/**
 * Largest request body taken: the hook input bound (`Hook.MAX_INPUT_BYTES`, 4 MiB).
 *
 * @since 0.1.0
 */
export const MAX_BODY_BYTES = Hook.MAX_INPUT_BYTES

/**
 * The environment variable the guard's token comes from, and which the installed
 * hooks send it from.
 *
 * @since 0.1.0
 */
export const TOKEN_VAR = "SESSION_JOURNAL_GUARD_TOKEN"

/**
 * Shortest token accepted from the environment (16 characters).
 *
 * @since 0.1.0
 */
export const MIN_TOKEN_LENGTH = 16

/**
 * How long sessions with nothing to write stay open in the guard (10 minutes: a
 * model's turn between two tool calls can take minutes).
 *
 * @since 0.1.0
 */
export const IDLE_TIME_TO_LIVE = "10 minutes"

/**
 * A fresh token: 32 random bytes from the system's CSPRNG, base64url.
 *
 * @since 0.1.0
 */
export const makeToken = (): string => crypto.randomBytes(32).toString("base64url")

/**
 * Why a token cannot be used, or null: it must be at least `MIN_TOKEN_LENGTH`
 * visible ASCII characters (it travels in a header), with no spaces.
 *
 * @since 0.1.0
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
 * @since 0.1.0
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
 * Which requests the guard answers by their `Host` header, for the port it is
 * bound to (no DNS rebinding): the command line gives its `HostCheck`.
 *
 * @since 0.1.0
 */
export interface Hosts {
  /** The accepted `name:port` pairs, as a refusal names them. */
  readonly accepted: Iterable<string>
  /** Whether a request's `Host` header is one of them. */
  readonly allows: (host: string | undefined) => boolean
}

/**
 * Options of the guard: what the command line read from its flags and the
 * environment, as values.
 *
 * @since 0.1.0
 */
export interface Options<E = never, L = never> {
  /** The port on 127.0.0.1 (0 picks a free one). */
  readonly port: number
  /** The secret bearer token requests must carry. */
  readonly token: string
  /** The policy PreToolUse is decided by; null records only. */
  readonly policy: Policy.Policy | null
  /** How long one event may take before it is refused (default `DEFAULT_HANDLE_TIMEOUT_MS`). */
  readonly handleTimeoutMs?: number | undefined
  /** The journal's storage. */
  readonly storage: Layer.Layer<Persistence.Persistence, E>
  /** The journal's directory when it is one (protected from the calls the guard decides), else null. */
  readonly journalDir: string | null
  /** The requests accepted by their `Host`, for the port the guard is bound to. */
  readonly hosts: (port: number) => Hosts
  /** Run once the guard listens, with its port (the command line prints its address). */
  readonly onListening?: ((port: number) => Effect.Effect<void, L>) | undefined
  /** The policy file (absolute), protected from the calls the guard decides. */
  readonly policyFile?: string | undefined
  /** Whether calls may touch the journal, the policy file and the hooks' settings (default false). */
  readonly noSelfProtection?: boolean | undefined
  /** How long a session with nothing to write stays open (default `IDLE_TIME_TO_LIVE`). */
  readonly idleTimeToLive?: Duration.Input | undefined
  /** Whether `Authorization: Bearer TOKEN` is taken as proof, for Claude Code's `http` hooks (default false). */
  readonly acceptBearer?: boolean | undefined
  /** The token file, protected from the calls the guard decides. */
  readonly tokenFile?: string | undefined
}

/**
 * What `GET /policy` answers (`GuardInstall.GuardPolicy`): the policy's canonical
 * text (`JSON.stringify` of `Policy.encode`), its SHA-256 (hex, of that text's
 * UTF-8 bytes) and its name as denials cite it; all null when the guard records
 * only.
 *
 * @since 0.1.0
 */
export type PolicyReport = GuardInstall.GuardPolicy

// What a request is answered, before it is encoded (and signed, for a request
// that proved itself with the `sj1` scheme).
interface Reply {
  readonly status: number
  readonly body: unknown
  readonly headers?: Record<string, string> | undefined
}

const refuse = (status: number, error: string, headers: Record<string, string> = {}): Reply => ({
  status,
  body: { error },
  headers
})

const ok = (body: unknown): Reply => ({ status: 200, body })

const encoder = new TextEncoder()

const respond = (reply: Reply, sign: ((status: number, body: Uint8Array) => string) | null) => {
  const body = encoder.encode(JSON.stringify(reply.body))
  const headers: Record<string, string> = { "cache-control": "no-store", ...reply.headers }
  if (sign !== null) headers[GuardAuth.ANSWER_HEADER] = sign(reply.status, body)
  return HttpServerResponse.uint8Array(body, { status: reply.status, contentType: "application/json", headers })
}

// The `stop_hook_active` of a body that may not decode as an event.
const stopActiveOf = (body: Uint8Array): boolean => {
  try {
    return Refusal.stopHookActive(JSON.parse(decodeStrict(body)))
  } catch {
    return false
  }
}

/**
 * The handler of every request: the checks above, then the hook handler.
 *
 * @since 0.1.0
 */
export const handler = (options: {
  /** The requests accepted by their `Host`. */
  readonly hosts: Hosts
  readonly token: string
  readonly policy: Policy.Policy | null
  /** How long one event may take before it is refused (default `DEFAULT_HANDLE_TIMEOUT_MS`). */
  readonly handleTimeoutMs?: number | undefined
  /** The nonces seen (default: a fresh `GuardAuth.makeReplayGuard()`). */
  readonly replays?: GuardAuth.ReplayGuard | undefined
  /** Whether the guard is stopping: answers then close their connection. */
  readonly stopping?: (() => boolean) | undefined
  /**
   * What a PreToolUse may not touch (`Hook.selfProtection`), for the event's
   * working directory; none by default.
   */
  readonly protect?:
    | ((cwd: string, transcriptPath?: string | undefined) => Promise<ReadonlyArray<Hook.Protected>>)
    | undefined
  /** What the guard acknowledged per session (default: a fresh memory of 10,000 sessions). */
  readonly acknowledged?: Acknowledged | undefined
  /** Whether `Authorization: Bearer TOKEN` is taken as proof (default false: only the forwarder's MAC). */
  readonly acceptBearer?: boolean | undefined
  /** Where the transcript scans are kept between events (default: in memory, the latest 1,024 sessions). */
  readonly keeper?: TranscriptScan.Keeper | undefined
}) => {
  const acknowledged = options.acknowledged ?? new Acknowledged()
  const hosts = options.hosts
  // `Authorization: Bearer` sends the token itself, which only Claude Code's own
  // `http` hooks do (and they fail open); refused unless asked for.
  const bearer = authorizer(options.token)
  const authorized = options.acceptBearer === true ? bearer : () => false
  const replays = options.replays ?? GuardAuth.makeReplayGuard()
  const report = GuardInstall.guardPolicyOf(options.policy)
  const timeoutMs = options.handleTimeoutMs ?? DEFAULT_HANDLE_TIMEOUT_MS
  const handleOptions: Hook.HandleOptions = options.policy === null
    ? { policy: null }
    : { policy: Policy.compile(options.policy), policyName: Policy.format(options.policy) }
  const keeper = options.keeper ?? TranscriptScan.memoryKeeper()
  const stopping = options.stopping ?? (() => false)
  // The hooks of parallel calls read the same paths and the same transcript: read
  // once for the requests that ask together (each gets a read that began after it
  // asked), which then also reach the journal's writer together.
  const protectShared = Coalesce.coalescing<ReadonlyArray<Hook.Protected>>()
  const givenProtect = options.protect
  const protect = givenProtect === undefined ?
    undefined :
    (cwd: string, transcriptPath?: string | undefined) =>
      protectShared(JSON.stringify([cwd, transcriptPath ?? null]), () => givenProtect(cwd, transcriptPath))
  const totalsShared = Coalesce.coalescing<TranscriptScan.Totals | null>()
  const totals = (input: typeof Hook.Common.Type, session: string | undefined) =>
    totalsShared(
      JSON.stringify([input.transcript_path ?? null, session ?? Hook.sessionId(input)]),
      () => transcriptTotals(input, keeper, session)
    )
  return Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const proof = GuardAuth.parse(request.headers[GuardAuth.AUTH_HEADER])
    const sign = proof === null
      ? null
      : (status: number, body: Uint8Array) => GuardAuth.answerHeader(options.token, proof.nonce, status, body)
    const reply = yield* answerOf(request, {
      hosts,
      proof,
      authorized,
      replays,
      report,
      token: options.token,
      timeoutMs,
      handleOptions,
      protect,
      acknowledged,
      totals
    })
    // A refusal before the request proved itself is not signed: the sender may not
    // hold the token.
    const response = respond(reply.reply, reply.proved ? sign : null)
    return stopping() ? HttpServerResponse.setHeader(response, "connection", "close") : response
  })
}

// What the transcripts say before a PreToolUse is decided; null without one.
const transcriptTotals = (
  input: typeof Hook.Common.Type,
  keeper: TranscriptScan.Keeper,
  session: string | undefined
): Promise<TranscriptScan.Totals | null> =>
  input.transcript_path === undefined || input.transcript_path === ""
    ? Promise.resolve(null)
    : TranscriptScan.totals(input.transcript_path, keeper, session ?? Hook.sessionId(input))

const unauthorized = () =>
  refuse(
    401,
    `proof of the token is required: ${GuardAuth.AUTH_HEADER} (the forwarder's) or Authorization: Bearer $${TOKEN_VAR}`,
    { "www-authenticate": "Bearer" }
  )

const answerOf = (
  request: HttpServerRequest.HttpServerRequest,
  c: {
    readonly hosts: Hosts
    readonly proof: GuardAuth.Proof | null
    readonly authorized: (header: string | undefined) => boolean
    readonly replays: GuardAuth.ReplayGuard
    readonly report: PolicyReport
    readonly token: string
    readonly timeoutMs: number
    readonly handleOptions: Hook.HandleOptions
    readonly protect?:
      | ((cwd: string, transcriptPath?: string | undefined) => Promise<ReadonlyArray<Hook.Protected>>)
      | undefined
    readonly acknowledged?: Acknowledged | undefined
    /** What the transcripts say before a PreToolUse is decided (null without one), for the input's session. */
    readonly totals: (
      input: typeof Hook.Common.Type,
      session: string | undefined
    ) => Promise<TranscriptScan.Totals | null>
  }
): Effect.Effect<{ readonly reply: Reply; readonly proved: boolean }, never, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const unproved = (reply: Reply) => ({ reply, proved: false })
    if (!c.hosts.allows(request.headers["host"])) {
      return unproved(refuse(403, `the guard answers requests addressed to ${[...c.hosts.accepted].join(", ")} only`))
    }
    const header = request.headers[GuardAuth.AUTH_HEADER]
    // A malformed proof is no proof, whatever else the request carries.
    if (header !== undefined && c.proof === null) return unproved(unauthorized())
    if (c.proof === null && !c.authorized(request.headers["authorization"])) return unproved(unauthorized())
    const pathname = new URL(request.url, "http://127.0.0.1").pathname
    const route = pathname === PATH || pathname === SCAN_PATH ? "POST" : pathname === POLICY_PATH ? "GET" : null
    // Before the body is read, a request with a proof is only known to look like
    // one: routing answers are not signed until the MAC verified.
    if (route === null) return unproved(refuse(404, `hook events go to POST ${PATH}`))
    if (request.method !== route) {
      return unproved(refuse(405, `${pathname} takes ${route} only`, { allow: route }))
    }
    if (route === "POST") {
      const type = (request.headers["content-type"] ?? "").split(";")[0]!.trim().toLowerCase()
      if (type !== "application/json") return unproved(refuse(415, "the body must be application/json"))
    }
    const length = request.headers["content-length"]
    if (length !== undefined && !(/^[0-9]{1,16}$/.test(length) && Number(length) <= MAX_BODY_BYTES)) {
      return unproved(refuse(413, `the body must be at most ${MAX_BODY_BYTES} bytes`))
    }
    const read = yield* request.arrayBuffer.pipe(
      Effect.provideService(HttpIncomingMessage.MaxBodySize, ByteSize.bytes(MAX_BODY_BYTES)),
      Effect.result
    )
    if (read._tag === "Failure") {
      const reason = read.failure.reason
      return unproved(
        reason._tag === "RequestParseError" && reason.reason === "BodyTooLarge"
          ? refuse(413, `the body must be at most ${MAX_BODY_BYTES} bytes`)
          : refuse(400, `the body could not be read: ${read.failure.message}`)
      )
    }
    const body = new Uint8Array(read.success)
    if (c.proof !== null) {
      if (!GuardAuth.verifyRequest(c.token, c.proof, { method: request.method, path: pathname }, body)) {
        return unproved(unauthorized())
      }
      const now = yield* Clock.currentTimeMillis
      const stale = c.replays.check(c.proof, now)
      if (stale !== null) return unproved(refuse(401, `the request is refused: ${stale}`))
    }
    const proved = (reply: Reply) => ({ reply, proved: true })
    if (route === "GET") return proved(ok(c.report))
    const decoded = pathname === SCAN_PATH
      ? Hook.decodeScan(body, MAX_BODY_BYTES)
      : Hook.decode(body, { maxBytes: MAX_BODY_BYTES })
    if (Result.isFailure(decoded)) {
      const e = decoded.failure
      // Bytes that are no JSON object at all are a bad request; an event that is
      // JSON but cannot be journaled is refused in its event's form (a PreToolUse
      // denied), which an http hook, failing open on a 4xx, would not do.
      if (e.reason === "TooLarge") return proved(refuse(413, e.detail))
      if (e.event === null) return proved(refuse(400, e.detail))
      return proved(ok(Refusal.refusal(e.event, e.detail, { stopHookActive: stopActiveOf(body) }).httpOutput))
    }
    const event = decoded.success
    const name = Hook.eventName(event)
    const refusal = (reason: string) =>
      proved(ok(Refusal.refusal(name, reason, { stopHookActive: Refusal.stopHookActive(event.input) }).httpOutput))
    // The handling runs in its own fiber: on the deadline the answer goes out at
    // once, and the handling is interrupted behind it (an interruption can itself
    // wait, for a query the database is still running).
    const protect = c.protect
    const handleOptions: Hook.HandleOptions = event.name !== "PreToolUse" ? c.handleOptions : {
      ...c.handleOptions,
      ...(protect === undefined
        ? {}
        : { protect: yield* Effect.promise(() => protect(event.input.cwd, event.input.transcript_path)) }),
      home: process.env["HOME"],
      ...(event.input.agent_id === undefined ? {} : { depth: yield* AgentDepth.of(event.input) }),
      // The transcripts are read once the one holding this call holds it: the lines before it are then there too.
      ...(yield* Effect.promise(async () => {
        await TranscriptScan.awaitCallOf(event.input)
        return c.totals(event.input, c.handleOptions.session)
      }).pipe(
        Effect.map((totals) => ({
          ...(protect === undefined || totals === null ? {} : { allowedByTranscript: totals.allowed }),
          tokens: totals === null ? null : totals.tokens
        }))
      )),
      // Claude Code prompts the person for an ask.
      canAsk: true
    }
    const acknowledged = c.acknowledged
    const session = handleOptions.session ?? Hook.sessionId(event.input)
    // A session the guard acknowledged entries of must still hold them when it is
    // loaded again; then the event is handled and what it stored remembered.
    const handling = Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const held = (s: { readonly next_sequence: number }) => s.next_sequence
      if (acknowledged !== undefined && acknowledged.get(session) !== undefined) {
        const now = yield* journal.state(session).pipe(
          Effect.map(held),
          Effect.catchTag("SessionNotFound", () => Effect.succeed(0))
        )
        const problem = acknowledged.check(session, now)
        if (problem !== null) return yield* new Hook.HookError({ reason: "Journal", detail: problem, event: name })
      }
      const answer = yield* Hook.handle(event, handleOptions)
      if (acknowledged !== undefined) {
        const after = yield* Effect.option(journal.state(session))
        if (Option.isSome(after)) acknowledged.note(session, held(after.value))
      }
      return answer
    })
    const fiber = yield* Effect.forkDetach(Effect.exit(handling.pipe(Effect.mapError((e) =>
      e._tag === "HookError"
        ? e
        : new Hook.HookError({
          reason: "Journal",
          detail: `cannot record ${name}: ${e.message}`,
          event: name,
          cause: e
        })
    ))))
    const finished = yield* Effect.timeoutOption(Fiber.join(fiber), c.timeoutMs)
    if (Option.isNone(finished)) {
      yield* Effect.forkDetach(Fiber.interrupt(fiber))
      return refusal(
        `the guard could not record ${name} within ${c.timeoutMs} ms (its journal's storage did not answer: ` +
          `a session locked by another writer or connection, or a stalled disk or database)`
      )
    }
    const answered = finished.value
    if (Exit.isSuccess(answered)) return proved(ok(answered.value.output))
    const error = Cause.findErrorOption(answered.cause)
    return refusal(
      Cause.hasInterruptsOnly(answered.cause)
        ? "the guard is stopping"
        : error._tag === "Some"
        ? error.value.detail
        : `cannot record ${name}: ${String(Cause.squash(answered.cause))}`
    )
  })

/**
 * Runs the guard until SIGTERM or SIGINT, calling `onListening` first (the
 * command line prints `session-journal guard: listening at
 * http://127.0.0.1:PORT/hook …`). After a signal it drains (requests in flight
 * are answered and stored), closes the journal and marks the process's exit
 * code 0: a stop on a signal is its normal end. It fails with the server's
 * `ServeError` when it cannot listen. The token must pass `tokenProblem`
 * (checked by the caller, which says why; a token that does not is a defect).
 *
 * @since 0.1.0
 */
export const run = <E, L>(options: Options<E, L>) =>
  Effect.gen(function*() {
    const problem = tokenProblem(options.token)
    if (problem !== null) return yield* Effect.die(new Error(`${TOKEN_VAR}: ${problem}`))
    let signalled = false
    const onSignal = () => {
      signalled = true
    }
    process.once("SIGTERM", onSignal)
    process.once("SIGINT", onSignal)
    const live = SessionJournal.layer({ idleTimeToLive: options.idleTimeToLive ?? IDLE_TIME_TO_LIVE }).pipe(
      Layer.provideMerge(options.storage)
    )
    const serve = Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const port = "port" in server.address ? server.address.port : 0
      yield* HttpServer.serveEffect(
        handler({
          hosts: options.hosts(port),
          token: options.token,
          policy: options.policy,
          handleTimeoutMs: options.handleTimeoutMs,
          stopping: () => signalled,
          acceptBearer: options.acceptBearer,
          ...(options.noSelfProtection === true ? {} : {
            protect: (cwd: string, transcriptPath?: string | undefined) =>
              Protect.protectedPaths(
                cwd,
                process.env,
                options.journalDir,
                options.policyFile,
                transcriptPath
              ).then((paths) => [
                ...paths,
                ...(options.tokenFile === undefined
                  ? []
                  : [{ path: options.tokenFile, what: "the guard's token file", directory: false }]),
                // Not a path: a call that names the variable reads the token (when it is set).
                { path: TOKEN_VAR, what: "the guard's token variable", directory: false }
              ])
          })
        })
      )
      if (options.onListening !== undefined) yield* options.onListening(port)
      return yield* Effect.never
    })
    return yield* Effect.scoped(serve).pipe(
      Effect.provide(NodeHttpServer.layer(() => http.createServer({ requestTimeout: 30_000 }), {
        port: options.port,
        host: "127.0.0.1",
        gracefulShutdownTimeout: "20 seconds"
      })),
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
