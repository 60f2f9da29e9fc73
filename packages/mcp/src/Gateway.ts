/**
 * The MCP gateway: stands between an MCP client (newline-delimited JSON-RPC on
 * `Client`) and one MCP server (a command over stdio, or a Streamable HTTP URL).
 * Every message passes through unchanged, byte for byte, except `tools/call`
 * requests: each is first decided by the guard and recorded with its decision
 * (`SessionJournal.decide`, tool name `mcp__<NAME>__<tool>`, one append); a
 * denied call never reaches the server and its client gets a tool result with
 * `isError: true` naming the guard and the reason. A call that cannot be
 * recorded is denied the same way (fail closed). The result of an allowed call
 * is journaled as a `tool.outcome` (its size in bytes as `bytes_read`, its
 * SHA-256) before it is handed on; under a compiled policy its bytes reach the
 * policy's scoped byte limits in the same append (`Journaling.recordOutcome`).
 *
 * One journal session per connection (`Journaling.sessionIdOf`), its metadata naming the
 * server and the client's `clientInfo`. Bounded: a client line over
 * `maxLineBytes` is refused (a request gets a JSON-RPC error, the connection
 * stays usable), a server line over it is handed on in parts as it arrives,
 * never held whole; at most `maxPending` requests wait for the server. JSON
 * arrays (batches, removed from MCP in 2025-06-18) from the client are refused,
 * each request in them answered with an error. The connection ends when either
 * side goes away: the client's end closes the server's stdin and, after
 * `killGrace`, ends its process group; the server's end answers every pending
 * request with an error naming how it ended, and when the server crashed (an exit
 * code other than 0, a signal) or left requests unanswered, the connection fails
 * with `ServerEnded` once that is done.
 *
 * @since 0.1.0
 */
import { Guard, type Policy, type SessionJournal } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as SessionJournalService from "@session-journal/core/SessionJournal"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import type { ChildProcessSpawner } from "effect/process/ChildProcessSpawner"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import { endedHow, ServerEnded, type UpstreamFailed } from "./Errors.ts"
import * as Lines from "./internal/lines.ts"
import * as Upstream from "./internal/upstream.ts"
import * as Journaling from "./Journaling.ts"
import * as JsonRpc from "./JsonRpc.ts"

/**
 * Where the server is: a command started over stdio, or a Streamable HTTP URL.
 *
 * @since 0.1.0
 */
export type Server =
  | {
    readonly _tag: "Command"
    readonly command: string
    readonly args: ReadonlyArray<string>
    readonly cwd?: string | undefined
    readonly env?: Readonly<Record<string, string>> | undefined
  }
  | { readonly _tag: "Http"; readonly url: string; readonly headers?: Readonly<Record<string, string>> | undefined }

/**
 * The client side of a connection: the bytes it sends, and how to write to it
 * (waiting while it does not read). A failed write means the client is gone.
 *
 * @since 0.1.0
 */
export interface Client {
  readonly input: Stream.Stream<Uint8Array, unknown>
  readonly write: (bytes: Uint8Array) => Effect.Effect<void, unknown>
}

/**
 * How a connection is run.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The server's name in tool names (`mcp__<name>__<tool>`), normalized by `Journaling.normalizeName`. */
  readonly name: string
  readonly server: Server
  /**
   * The guard of every `tools/call`; null records every call and allows it; an
   * effect is run before each call for the guard to decide it with (a policy
   * file read again when it changed). It cannot fail: a guard that cannot be
   * had is one that denies, saying why. A compiled policy (`Policy.compile`)
   * decides with its guard and also counts each outcome's bytes in its scoped
   * byte limits (`Journaling.recordOutcome`); a pending call then keeps its
   * arguments until its outcome, so that `of` patterns judge them (at most
   * `maxPending` requests of `maxLineBytes` each).
   */
  readonly guard: Guard.Guard | Policy.Compiled | null | Effect.Effect<Guard.Guard | Policy.Compiled>
  /** The policy's name in decision entries (a file name); null when `guard` is null. */
  readonly policyName?: string | null | undefined
  /** The journal session; default `Journaling.sessionIdOf(name, clientInfo, start)`. */
  readonly session?: string | undefined
  /** Longest line held (default `DEFAULT_MAX_LINE_BYTES`). */
  readonly maxLineBytes?: number | undefined
  /** Most requests waiting for the server (default `DEFAULT_MAX_PENDING`). */
  readonly maxPending?: number | undefined
  /** How long the server has to exit once the client is gone, and after SIGTERM (default 1 s). */
  readonly killGrace?: Duration.Input | undefined
  /** Where notes on refused or dropped messages go (default: nowhere). */
  readonly log?: ((line: string) => Effect.Effect<void>) | undefined
}

/**
 * What a connection did.
 *
 * @since 0.1.0
 */
export interface Summary {
  /** The journal session, null when nothing was journaled. */
  readonly session: string | null
  readonly calls: number
  readonly denied: number
  /** Which side ended the connection. */
  readonly ended: "client" | "server"
  /** The server's exit code; null when killed, or not a process. */
  readonly serverExit: number | null
  /** The most bytes of an unfinished line held at once, per direction. */
  readonly peakHeldBytes: { readonly client: number; readonly server: number }
}

/**
 * Default longest line held: 4 MiB. A client message longer than this is
 * refused; a server message longer is handed on in parts.
 *
 * @since 0.1.0
 */
export const DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024

/**
 * Default most requests waiting for the server.
 *
 * @since 0.1.0
 */
export const DEFAULT_MAX_PENDING = 1024

const allowAll: Guard.Guard = () => Guard.allow

interface Pending {
  readonly id: JsonRpc.Id
  readonly method: string
  readonly call:
    | {
      readonly tool: string
      readonly sequence: number
      readonly startedAt: number
      readonly input: { readonly [key: string]: unknown }
      readonly compiled: Policy.Compiled | null
    }
    | null
}

const NEWLINE = new Uint8Array([10])

/**
 * Runs one connection until either side goes away; the server (a child
 * process) is owned by the scope, so it never outlives it.
 *
 * @since 0.1.0
 */
export const run = (
  options: Options,
  client: Client
): Effect.Effect<
  Summary,
  UpstreamFailed | ServerEnded,
  SessionJournal.SessionJournal | ChildProcessSpawner | Scope.Scope
> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournalService.SessionJournal
    const startedAt = yield* Clock.currentTimeMillis
    const maxLine = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES
    const maxPending = options.maxPending ?? DEFAULT_MAX_PENDING
    const killGrace = Duration.fromInputUnsafe(options.killGrace ?? Upstream.DEFAULT_KILL_GRACE)
    const log = options.log ?? (() => Effect.void)
    const server = Journaling.normalizeName(options.name)
    const given = options.guard
    const currentGuard: Effect.Effect<Guard.Guard | Policy.Compiled> = given === null
      ? Effect.succeed(allowAll)
      : Effect.isEffect(given)
      ? given
      : Effect.succeed(given)
    const policy = options.guard === null ? null : options.policyName ?? "policy"
    const upstream = options.server._tag === "Command"
      ? yield* Upstream.command({ ...options.server, killGrace })
      : yield* Upstream.http({ url: options.server.url, headers: options.server.headers, maxBodyBytes: maxLine, log })

    const serverLine = options.server._tag === "Command"
      ? [options.server.command, ...options.server.args].join(" ")
      : options.server.url
    const pending = new Map<string, Pending>()
    let session: string | null = options.session ?? null
    let journaled = false
    let clientInfo: unknown = null
    let calls = 0
    let denied = 0
    const sessionOf = () => (session ??= Journaling.sessionIdOf(server, clientInfo, startedAt))

    const ended = yield* Deferred.make<"client" | "server">()
    const out = yield* Semaphore.make(1)
    // A failed write means the client is gone: the connection ends.
    const writeRaw = (bytes: Uint8Array) =>
      client.write(bytes).pipe(Effect.catch(() => Deferred.succeed(ended, "client")), Effect.asVoid)
    const writeClient = (bytes: Uint8Array) => out.withPermits(1)(writeRaw(bytes))
    const refuse = (id: JsonRpc.Id | null, code: number, message: string) =>
      writeClient(JsonRpc.errorLine(id, code, `session-journal: ${message}`))

    const settle = (p: Pending, outcome: Journaling.Outcome) =>
      Effect.gen(function*() {
        if (p.call === null) return
        const now = yield* Clock.currentTimeMillis
        yield* Journaling.recordOutcome(journal, sessionOf(), { id: p.id, ...p.call }, outcome, now - p.call.startedAt)
          .pipe(
            Effect.catch((e) =>
              log(`session-journal mcp: the outcome of ${p.call?.tool} was not journaled: ${e.message}`)
            )
          )
      })

    const take = (id: JsonRpc.Id | null): Pending | undefined => {
      if (id === null) return undefined
      const k = JsonRpc.key(id)
      const p = pending.get(k)
      if (p !== undefined) pending.delete(k)
      return p
    }

    const noteInitialize = (params: unknown) =>
      Effect.gen(function*() {
        const init = JsonRpc.initializeOf(params)
        clientInfo = init.clientInfo
        const id = sessionOf()
        const data = Journaling.initializePayload(server, serverLine, init)
        yield* journal.append(id, Journaling.INITIALIZE_KIND, data)
        yield* journal.setMeta(id, { title: `MCP ${server}`, labels: ["mcp", server], data })
        journaled = true
      }).pipe(Effect.catch((e) => log(`session-journal mcp: the connection was not journaled: ${e.message}`)))

    const handleCall = (id: JsonRpc.Id, params: unknown, line: Uint8Array) =>
      Effect.gen(function*() {
        const parsed = JsonRpc.toolCall(params)
        if (parsed._tag === "Invalid") return yield* refuse(id, JsonRpc.ErrorCode.invalidParams, parsed.message)
        calls++
        const call: Journaling.Call = {
          id,
          tool_name: Journaling.toolName(server, parsed.name),
          mcp_tool: parsed.name,
          tool_input: parsed.arguments,
          server,
          agent: Journaling.agentOf(clientInfo),
          policy
        }
        const current = yield* currentGuard
        const compiled = typeof current === "function" ? null : current
        const guard = typeof current === "function" ? current : current.guard
        const decided = yield* Effect.result(Journaling.decideCall(journal, sessionOf(), call, guard))
        if (decided._tag === "Failure") {
          denied++
          return yield* writeClient(JsonRpc.deniedLine(
            id,
            `session-journal denied ${call.tool_name}: the call could not be journaled, so it was not made: ${
              messageOf(decided.failure)
            }`
          ))
        }
        journaled = true
        const verdict = decided.success.verdict
        if (verdict._tag === "Deny") {
          denied++
          return yield* writeClient(JsonRpc.deniedLine(id, Journaling.denialText(call.tool_name, verdict)))
        }
        pending.set(JsonRpc.key(id), {
          id,
          method: "tools/call",
          call: {
            tool: call.tool_name,
            sequence: decided.success.entry.sequence,
            startedAt: yield* Clock.currentTimeMillis,
            // Kept for the policy's scoped byte limits only.
            input: compiled === null ? {} : call.tool_input,
            compiled
          }
        })
        yield* upstream.send(line)
      })

    const withNewline = (line: Uint8Array) => {
      const bytes = new Uint8Array(line.length + 1)
      bytes.set(line)
      bytes[line.length] = 10
      return bytes
    }

    const onClientLine = (line: Uint8Array) =>
      Effect.gen(function*() {
        const { message } = JsonRpc.classify(line)
        switch (message._tag) {
          case "Invalid":
            return yield* refuse(message.id, message.code, message.message)
          case "Batch": {
            const why = "JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send each message alone"
            if (message.ids.length === 0) return yield* refuse(null, JsonRpc.ErrorCode.invalidRequest, why)
            for (const id of message.ids) yield* refuse(id, JsonRpc.ErrorCode.invalidRequest, why)
            return
          }
          case "Response":
            return yield* upstream.send(withNewline(line))
          case "Notification": {
            if (message.method === "notifications/cancelled") {
              const p = take(JsonRpc.cancelledId(message.params))
              if (p !== undefined) {
                yield* settle(p, { bytes: 0, sha256: null, isError: true, error: "cancelled by the client" })
              }
            }
            return yield* upstream.send(withNewline(line))
          }
          case "Request": {
            const k = JsonRpc.key(message.id)
            if (pending.has(k)) {
              return yield* refuse(
                message.id,
                JsonRpc.ErrorCode.invalidRequest,
                `request id ${JSON.stringify(message.id)} is already in use by a pending request`
              )
            }
            if (pending.size >= maxPending) {
              return yield* refuse(
                message.id,
                JsonRpc.ErrorCode.serverError,
                `too many pending requests (at most ${maxPending}); wait for an answer`
              )
            }
            if (message.method === "tools/call") return yield* handleCall(message.id, message.params, withNewline(line))
            if (message.method === "initialize") yield* noteInitialize(message.params)
            pending.set(k, { id: message.id, method: message.method, call: null })
            return yield* upstream.send(withNewline(line))
          }
        }
      })

    // A client line over the bound: read to its end without being kept, never
    // forwarded; a request among them is answered with an error.
    let clientScan: ReturnType<typeof Lines.scanner> | null = null
    const clientSplit = Lines.splitter(maxLine)
    const onClientPiece = (piece: Lines.Piece): Effect.Effect<void> => {
      switch (piece._tag) {
        case "Line":
          return onClientLine(piece.bytes)
        case "Part":
          return Effect.sync(() => (clientScan ??= Lines.scanner()).feed(piece.bytes))
        case "End":
          return Effect.suspend(() => {
            const scanned = (clientScan ??= Lines.scanner()).result()
            clientScan = null
            const why = `the message is ${piece.size} bytes, over the gateway's bound of ${maxLine}`
            return scanned.id !== null && scanned.method !== null
              ? refuse(scanned.id, JsonRpc.ErrorCode.invalidRequest, why)
              : log(`session-journal mcp: a client message was dropped: ${why}`)
          })
      }
    }

    const clientReader = client.input.pipe(
      Stream.runForEach((chunk) => Effect.forEach(clientSplit.push(chunk), onClientPiece, { discard: true })),
      Effect.andThen(Effect.suspend(() => Effect.forEach(clientSplit.end(), onClientPiece, { discard: true }))),
      Effect.catchCause(() => Effect.void),
      Effect.andThen(Deferred.succeed(ended, "client"))
    )

    // Server lines: a response to a pending request settles it (a call's
    // outcome journaled first), then the line is handed on as it came.
    const onServerValue = (value: unknown, bytes: number, sha256: string) =>
      Effect.suspend(() => {
        const settleOne = (v: unknown) => {
          if (typeof v !== "object" || v === null || Array.isArray(v) || "method" in v) return Effect.void
          const o = v as { readonly id?: unknown; readonly error?: unknown; readonly result?: unknown }
          if (!JsonRpc.isId(o.id)) return Effect.void
          const p = take(o.id)
          if (p === undefined) return Effect.void
          const error = typeof o.error === "object" && o.error !== null && "message" in o.error
            ? String((o.error as { readonly message: unknown }).message)
            : o.error === undefined
            ? null
            : "error"
          const isError = error !== null ||
            (typeof o.result === "object" && o.result !== null && "isError" in o.result &&
              (o.result as { readonly isError: unknown }).isError === true)
          return settle(p, { bytes, sha256, isError, error })
        }
        return Array.isArray(value) ? Effect.forEach(value, settleOne, { discard: true }) : settleOne(value)
      })

    const decoder = new TextDecoder()
    let serverScan: ReturnType<typeof Lines.scanner> | null = null
    const serverSplit = Lines.splitter(maxLine)
    const onServerPiece = (piece: Lines.Piece): Effect.Effect<void> => {
      switch (piece._tag) {
        case "Line":
          return Effect.gen(function*() {
            let value: unknown = undefined
            try {
              value = JSON.parse(decoder.decode(piece.bytes))
            } catch {
              // Not JSON: handed on as it came; the client judges it.
            }
            if (value !== undefined) yield* onServerValue(value, piece.bytes.length, Lines.sha256Hex(piece.bytes))
            // A last line the server ended without a newline gets one: what the
            // gateway writes after it (the errors of unanswered requests) starts a line.
            yield* writeClient(withNewline(piece.bytes))
          })
        case "Part":
          return Effect.gen(function*() {
            // The whole long line goes out under one hold of the client's
            // output, so nothing else is written into its middle.
            if (serverScan === null) {
              serverScan = Lines.scanner()
              yield* Semaphore.take(out, 1)
            }
            serverScan.feed(piece.bytes)
            yield* writeRaw(piece.bytes)
          })
        case "End":
          return Effect.gen(function*() {
            const scanned = (serverScan ??= Lines.scanner()).result()
            serverScan = null
            // Journaled before the newline that lets the client read the result. A
            // line the server ended in the middle of is no result: its request is
            // answered as unanswered when the connection ends.
            if (piece.terminated && scanned.response && scanned.method === null) {
              const p = take(scanned.id)
              if (p !== undefined) {
                yield* settle(p, { bytes: scanned.size, sha256: scanned.sha256, isError: false, error: null })
              }
            }
            yield* writeRaw(NEWLINE)
            yield* Semaphore.release(out, 1)
          })
      }
    }

    const serverReader = upstream.output.pipe(
      Stream.runForEach((chunk) => Effect.forEach(serverSplit.push(chunk), onServerPiece, { discard: true })),
      Effect.andThen(Effect.suspend(() => Effect.forEach(serverSplit.end(), onServerPiece, { discard: true }))),
      Effect.andThen(Deferred.succeed(ended, "server"))
    )

    const serverFiber = yield* Effect.forkScoped(serverReader)
    const clientFiber = yield* Effect.forkScoped(clientReader)
    const side = yield* Deferred.await(ended)
    if (side === "client") {
      // No more requests: the server's stdin is closed, and it has the grace to
      // answer what it holds and exit before its process group is ended.
      yield* upstream.close
      const done = yield* Effect.timeoutOption(Fiber.await(serverFiber), killGrace)
      if (done._tag === "None") {
        yield* upstream.kill
        yield* Fiber.interrupt(serverFiber)
      }
    } else {
      yield* Fiber.interrupt(clientFiber)
    }
    const exit = yield* Effect.timeoutOption(upstream.exit, killGrace)
    // What the server never answered: the client gets an error for each request,
    // and each call's outcome says the server ended first.
    const left = [...pending.values()]
    pending.clear()
    const code = exit._tag === "Some" ? exit.value.code : null
    const signal = exit._tag === "Some" ? exit.value.signal : null
    const how = endedHow(code, signal)
    const why = `the MCP server ended (${how}) before answering`
    for (const p of left) {
      yield* settle(p, { bytes: 0, sha256: null, isError: true, error: why })
      if (side === "server") yield* refuse(p.id, JsonRpc.ErrorCode.serverError, why)
    }
    const summary: Summary = {
      session: journaled ? session : null,
      calls,
      denied,
      ended: side,
      serverExit: code,
      peakHeldBytes: { client: clientSplit.peak(), server: serverSplit.peak() }
    }
    if (side === "server" && (code !== 0 || left.length > 0)) {
      return yield* new ServerEnded({
        server: serverLine,
        code,
        signal,
        unanswered: left.length,
        session: summary.session,
        calls,
        denied
      })
    }
    return summary
  })
