/**
 * The server side of the gateway, whatever carries it: bytes to send, bytes
 * received (newline-delimited JSON-RPC), a way to say no more will be sent, and
 * the server's end. A command is a child process in the caller's scope, in its
 * own process group, ended (SIGTERM, then SIGKILL after the grace) when the scope
 * closes; a Streamable HTTP server is reached with one POST per message.
 */
import type * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ChildProcess from "effect/process/ChildProcess"
import type { ChildProcessSpawner } from "effect/process/ChildProcessSpawner"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { UpstreamFailed } from "../Errors.ts"

/**
 * How the server ended: its exit code (null when it was killed or is not a
 * process), and the signal that killed it (null when none did, or unknown).
 */
export interface Exit {
  readonly code: number | null
  readonly signal: string | null
}

// The platform reports a death by signal as a failure of the exit code whose
// message names the signal.
const signalOf = (error: unknown): string | null => {
  const m = /signal: '?([A-Z0-9]+)'?/.exec(error instanceof Error ? error.message : String(error))
  return m === null ? null : m[1]!
}

/** A connection to the server. */
export interface Upstream {
  /** Sends one message (its line, newline included); waits while the server is not reading. */
  readonly send: (line: Uint8Array) => Effect.Effect<void>
  /** No more messages will be sent (the server's stdin is closed). */
  readonly close: Effect.Effect<void>
  /** What the server sends, as bytes; ends when the server is gone. */
  readonly output: Stream.Stream<Uint8Array>
  /** Waits for the server's end. */
  readonly exit: Effect.Effect<Exit>
  /** Ends the server now. */
  readonly kill: Effect.Effect<void>
}

/**
 * A server started as a child process: stdin fed from a bounded queue, stdout
 * read as `output`, stderr passed through to ours.
 */
export const command = (options: {
  readonly command: string
  readonly args: ReadonlyArray<string>
  readonly cwd?: string | undefined
  readonly env?: Readonly<Record<string, string>> | undefined
  readonly killGrace: Duration.Duration
}): Effect.Effect<Upstream, UpstreamFailed, ChildProcessSpawner | Scope.Scope> =>
  Effect.gen(function*() {
    const stdin = yield* Queue.bounded<Uint8Array, Cause.Done>(64)
    const handle = yield* ChildProcess.make(options.command, [...options.args], {
      cwd: options.cwd,
      ...(options.env === undefined ? {} : { env: { ...options.env }, extendEnv: false }),
      stdin: { stream: Stream.fromQueue(stdin), endOnDone: true },
      stdout: "pipe",
      stderr: "inherit",
      killSignal: "SIGTERM",
      forceKillAfter: options.killGrace
    }).pipe(
      Effect.mapError((e) =>
        new UpstreamFailed({ server: options.command, reason: `could not start the server: ${e.message}` })
      )
    )
    return {
      send: (line) => Effect.asVoid(Queue.offer(stdin, line)),
      close: Queue.end(stdin),
      // A read error of the pipe ends the output like the server's exit does.
      output: handle.stdout.pipe(Stream.catch(() => Stream.empty)),
      exit: handle.exitCode.pipe(
        Effect.map((code): Exit => ({ code: Number(code), signal: null })),
        Effect.catch((e) => Effect.succeed<Exit>({ code: null, signal: signalOf(e) }))
      ),
      kill: Effect.ignore(handle.kill({ killSignal: "SIGTERM", forceKillAfter: options.killGrace }))
    }
  })

const encoder = new TextEncoder()

/**
 * The messages of a Streamable HTTP response body: a JSON body (one message or
 * an array of them) or a `text/event-stream` whose events' `data` are messages.
 */
const messagesOf = (contentType: string, body: string): Array<string> => {
  if (contentType.includes("text/event-stream")) {
    const out: Array<string> = []
    for (const event of body.split(/\r?\n\r?\n/)) {
      const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, ""))
      if (data.length > 0) out.push(data.join("\n"))
    }
    return out
  }
  const text = body.trim()
  return text.length === 0 ? [] : [text]
}

// A response body read to its end, refused (the read cancelled) past `max` bytes.
const readBounded = async (response: Response, max: number): Promise<string> => {
  if (response.body === null) return ""
  const reader = response.body.getReader()
  const parts: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.length
    if (size > max) {
      await reader.cancel()
      throw new Error(`the server's answer is over ${max} bytes`)
    }
    parts.push(value)
  }
  return new TextDecoder().decode(Buffer.concat(parts))
}

/**
 * A Streamable HTTP server (MCP 2025-06-18): each message is POSTed to `url`
 * (`Accept: application/json, text/event-stream`), the session id the server
 * gives (`Mcp-Session-Id`) and the protocol version are sent back on every later
 * request, and each answer's messages become lines of `output`. A response body
 * larger than `maxBodyBytes` or an HTTP failure answers the request with an
 * error. When closed, the session is ended with a DELETE. Server-initiated
 * messages outside a request's answer (the GET stream) are not read.
 */
export const http = (options: {
  readonly url: string
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly maxBodyBytes: number
}): Effect.Effect<Upstream, never, Scope.Scope> =>
  Effect.gen(function*() {
    const output = yield* Queue.bounded<Uint8Array, Cause.Done>(64)
    let sessionId: string | null = null
    let protocolVersion: string | null = null
    const headers = (): Record<string, string> => ({
      ...options.headers,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      ...(sessionId === null ? {} : { "mcp-session-id": sessionId }),
      ...(protocolVersion === null ? {} : { "mcp-protocol-version": protocolVersion })
    })
    const emit = (text: string) => Queue.offer(output, encoder.encode(text.replace(/\n/g, " ") + "\n"))
    const failRequest = (line: Uint8Array, reason: string) =>
      Effect.suspend(() => {
        let id: unknown = null
        try {
          const parsed = JSON.parse(new TextDecoder().decode(line)) as {
            readonly id?: unknown
            readonly method?: unknown
          }
          if (parsed.method === undefined) return Effect.void
          id = parsed.id ?? null
        } catch {
          return Effect.void
        }
        if (id === null) return Effect.void
        return emit(JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32000, message: reason } }))
      })
    const post = (line: Uint8Array) =>
      Effect.tryPromise({
        try: async (signal) => {
          const response = await fetch(options.url, { method: "POST", headers: headers(), body: line, signal })
          const given = response.headers.get("mcp-session-id")
          if (given !== null) sessionId = given
          const body = await readBounded(response, options.maxBodyBytes)
          if (!response.ok && response.status !== 202) {
            throw new Error(`HTTP ${response.status}: ${body.slice(0, 200)}`)
          }
          return messagesOf(response.headers.get("content-type") ?? "", body)
        },
        catch: (e) => e instanceof Error ? e.message : String(e)
      }).pipe(
        Effect.flatMap((messages) =>
          Effect.forEach(messages, (m) => {
            try {
              const parsed = JSON.parse(m) as { readonly result?: { readonly protocolVersion?: unknown } }
              const version = parsed.result?.protocolVersion
              if (typeof version === "string" && protocolVersion === null) protocolVersion = version
            } catch {
              // Not JSON: passed on as it came; the client judges it.
            }
            return emit(m)
          }, { discard: true })
        ),
        Effect.catch((reason) => failRequest(line, `the MCP server at ${options.url} failed: ${reason}`))
      )
    const scope = yield* Effect.scope
    // The session is ended once, when the last answer is in (or when the scope closes first).
    let ended = false
    const end = Effect.suspend(() => {
      if (ended || sessionId === null) return Effect.void
      ended = true
      const id = sessionId
      return Effect.ignore(Effect.tryPromise(() =>
        fetch(options.url, { method: "DELETE", headers: { ...options.headers, "mcp-session-id": id } })
      ))
    })
    let closed = false
    let inFlight = 0
    const settle = Effect.suspend(() =>
      closed && inFlight === 0 ? Effect.andThen(end, Queue.end(output)) : Effect.void
    )
    yield* Effect.addFinalizer(() => end)
    return {
      send: (line) =>
        Effect.gen(function*() {
          inFlight++
          // Each request in its own fiber: a long call does not hold the others.
          yield* Effect.forkIn(
            post(line).pipe(Effect.ensuring(Effect.suspend(() => {
              inFlight--
              return settle
            }))),
            scope
          )
        }),
      close: Effect.suspend(() => {
        closed = true
        return settle
      }),
      output: Stream.fromQueue(output),
      exit: Effect.succeed<Exit>({ code: null, signal: null }),
      kill: Effect.asVoid(Queue.end(output))
    }
  })

/**
 * The default time a server has to exit after its stdin closed, and after
 * SIGTERM: 1 s each, so the whole end fits in the 2 s the SDK's stdio client
 * gives the gateway before it sends SIGTERM itself (docs/mcp-PROTOCOL.md).
 */
export const DEFAULT_KILL_GRACE = Duration.seconds(1)
