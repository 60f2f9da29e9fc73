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
import * as Fiber from "effect/Fiber"
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

// The platform reports a death by signal as a failure of the exit code, the
// signal named in the message of the error it wraps (its reason's cause).
const signalOf = (error: unknown): string | null => {
  let at: unknown = error
  for (let depth = 0; depth < 4 && typeof at === "object" && at !== null; depth++) {
    const m = /signal: '?(SIG[A-Z0-9]+)'?/.exec(String((at as { readonly message?: unknown }).message ?? ""))
    if (m !== null) return m[1]!
    const { reason, cause } = at as { readonly reason?: unknown; readonly cause?: unknown }
    at = cause ?? reason
  }
  return null
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

/** What the event-stream reader hands on: an event's `data`, or the size of one dropped past the bound. */
export type SseEvent =
  | { readonly _tag: "Data"; readonly data: string; readonly id: string | null }
  | { readonly _tag: "TooLarge"; readonly bytes: number }

/**
 * A reader of `text/event-stream` bytes fed in chunks: each event's `data`
 * lines joined by newlines, as the event ends (a blank line). It holds at most
 * `maxEventBytes` of an event (its data and its current line); an event past that
 * is read to its end without being kept and reported by its size (its lines from
 * the first data line to the blank one that ends it). Each event
 * carries the last `id` the stream gave (null before any); `event` and `retry`
 * fields and comments are read past. Lines end with LF or CRLF.
 */
export const sseReader = (maxEventBytes: number) => {
  const decoder = new TextDecoder()
  // The current line: its parts (while the event is within the bound), its size, its first byte.
  let line: Array<Uint8Array> = []
  let lineBytes = 0
  let firstByte = -1
  // The event's data lines and their size.
  let data: Array<string> = []
  let held = 0
  let lastId: string | null = null
  // The size so far of an event past the bound; null while within it.
  let over: number | null = null

  const blank = () => lineBytes === 0 || (lineBytes === 1 && firstByte === 13)

  const endLine = (out: Array<SseEvent>) => {
    if (over !== null) {
      if (blank()) {
        // Its size: its lines up to the blank one that ends it, not that one.
        out.push({ _tag: "TooLarge", bytes: over - lineBytes - 1 })
        over = null
      }
    } else if (blank()) {
      if (data.length > 0) out.push({ _tag: "Data", data: data.join("\n"), id: lastId })
      data = []
      held = 0
    } else {
      const text = decoder.decode(Buffer.concat(line, lineBytes)).replace(/\r$/, "")
      if (text.startsWith("data:")) {
        const value = text.slice(5).replace(/^ /, "")
        data.push(value)
        held += lineBytes + 1
      } else if (text.startsWith("id:")) {
        const value = text.slice(3).replace(/^ /, "")
        // An id with a NUL is ignored, as the event-stream format says.
        if (!value.includes("\0")) lastId = value
      }
    }
    line = []
    lineBytes = 0
    firstByte = -1
  }

  return {
    feed: (chunk: Uint8Array): Array<SseEvent> => {
      const out: Array<SseEvent> = []
      let start = 0
      for (;;) {
        const nl = chunk.indexOf(10, start)
        const part = chunk.subarray(start, nl === -1 ? chunk.length : nl)
        if (lineBytes === 0 && part.length > 0) firstByte = part[0]!
        if (over === null && held + lineBytes + part.length > maxEventBytes) {
          over = held + lineBytes
          line = []
          data = []
          held = 0
        }
        if (over !== null) over += part.length + (nl === -1 ? 0 : 1)
        // Copied when kept past this chunk: the stream may reuse the chunk's buffer.
        else if (part.length > 0) line.push(nl === -1 ? part.slice() : part)
        lineBytes += part.length
        if (nl === -1) break
        endLine(out)
        start = nl + 1
      }
      return out
    }
  }
}

// A JSON body read to its end, refused (the read cancelled) past `max` bytes.
const readBounded = async (body: ReadableStream<Uint8Array>, max: number): Promise<string> => {
  const reader = body.getReader()
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
  return new TextDecoder().decode(Buffer.concat(parts)).trim()
}

/**
 * A Streamable HTTP server (MCP 2025-06-18): each message is POSTed to `url`
 * (`Accept: application/json, text/event-stream`), the session id the server
 * gives (`Mcp-Session-Id`) and the protocol version are sent back on every later
 * request, and each answer's messages become lines of `output`: a JSON body
 * whole (at most `maxBodyBytes`), an event stream event by event as it arrives
 * (each event at most `maxBodyBytes`). A larger answer or an HTTP failure answers
 * the request with an error. Once `notifications/initialized` is accepted, the
 * server's own stream is opened with a GET (`Accept: text/event-stream`): its
 * events (server requests and notifications outside any answer) become lines of
 * `output` as well, read only as fast as `output` is taken, each at most
 * `maxBodyBytes` (a larger one is dropped and noted); a server that offers none
 * (405) is not asked again, and a stream that ends or fails is opened again,
 * with `Last-Event-ID` when its events had ids, at most `MAX_STREAM_OPENS` times.
 * When closed, the stream is dropped and the session ended with a DELETE.
 */
export const http = (options: {
  readonly url: string
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly maxBodyBytes: number
  readonly log?: ((line: string) => Effect.Effect<void>) | undefined
}): Effect.Effect<Upstream, never, Scope.Scope> =>
  Effect.gen(function*() {
    const output = yield* Queue.bounded<Uint8Array, Cause.Done>(64)
    const log = options.log ?? (() => Effect.void)
    let sessionId: string | null = null
    let protocolVersion: string | null = null
    const headers = (accept: string): Record<string, string> => ({
      ...options.headers,
      accept,
      ...(sessionId === null ? {} : { "mcp-session-id": sessionId }),
      ...(protocolVersion === null ? {} : { "mcp-protocol-version": protocolVersion })
    })
    const emit = (text: string) =>
      Effect.suspend(() => {
        if (protocolVersion === null) {
          try {
            const parsed = JSON.parse(text) as { readonly result?: { readonly protocolVersion?: unknown } }
            const version = parsed.result?.protocolVersion
            if (typeof version === "string") protocolVersion = version
          } catch {
            // Not JSON: passed on as it came; the client judges it.
          }
        }
        return Queue.offer(output, encoder.encode(text.replace(/\n/g, " ") + "\n"))
      })
    // The events of a stream, each handed on before the next chunk is read.
    const readEvents = (
      body: ReadableStream<Uint8Array>,
      onTooLarge: (bytes: number) => Effect.Effect<void, string>,
      onEvent: (data: string, id: string | null) => void
    ) =>
      Effect.gen(function*() {
        const reader = body.getReader()
        const events = sseReader(options.maxBodyBytes)
        yield* Effect.addFinalizer(() => Effect.promise(() => reader.cancel().catch(() => undefined)))
        for (;;) {
          const next = yield* Effect.tryPromise({
            try: () => reader.read(),
            catch: (e) => e instanceof Error ? e.message : String(e)
          })
          if (next.done) return
          for (const event of events.feed(next.value)) {
            if (event._tag === "TooLarge") yield* onTooLarge(event.bytes)
            else {
              yield* emit(event.data)
              onEvent(event.data, event.id)
            }
          }
        }
      }).pipe(Effect.scoped)
    // The request a line is (its id and method), read once per message sent.
    const messageOf = (line: Uint8Array): { readonly id: unknown; readonly method: unknown } | null => {
      try {
        const parsed = JSON.parse(new TextDecoder().decode(line)) as {
          readonly id?: unknown
          readonly method?: unknown
        }
        return typeof parsed === "object" && parsed !== null ? { id: parsed.id, method: parsed.method } : null
      } catch {
        return null
      }
    }
    // Whether an event's message is the response to the request `id`.
    const answers = (data: string, id: unknown) => {
      if (!data.includes("\"result\"") && !data.includes("\"error\"")) return false
      try {
        const parsed = JSON.parse(data) as { readonly id?: unknown; readonly method?: unknown }
        return parsed.method === undefined && parsed.id === id
      } catch {
        return false
      }
    }
    const post = (line: Uint8Array) =>
      Effect.suspend(() => {
        const message = messageOf(line)
        const request = message !== null && typeof message.method === "string" &&
            (typeof message.id === "string" || typeof message.id === "number")
          ? message.id
          : null
        // A request whose answer already went to the client gets no error after it.
        let answered = false
        return Effect.gen(function*() {
          const response = yield* Effect.tryPromise({
            try: (signal) =>
              fetch(options.url, {
                method: "POST",
                headers: { ...headers("application/json, text/event-stream"), "content-type": "application/json" },
                body: line,
                signal
              }),
            catch: (e) => e instanceof Error ? e.message : String(e)
          })
          const given = response.headers.get("mcp-session-id")
          if (given !== null) sessionId = given
          const type = response.headers.get("content-type") ?? ""
          if (response.ok && response.body !== null && type.includes("text/event-stream")) {
            return yield* readEvents(
              response.body,
              (bytes) =>
                Effect.fail(`the server's answer is over ${options.maxBodyBytes} bytes (an event of ${bytes})`),
              (data) => {
                if (request !== null && !answered) answered = answers(data, request)
              }
            )
          }
          const body = response.body === null
            ? ""
            : yield* Effect.tryPromise({
              try: () => readBounded(response.body!, options.maxBodyBytes),
              catch: (e) => e instanceof Error ? e.message : String(e)
            })
          if (!response.ok && response.status !== 202) {
            return yield* Effect.fail(`HTTP ${response.status}: ${body.slice(0, 200)}`)
          }
          if (body.length > 0) yield* emit(body)
          if (message?.method === "notifications/initialized" && message.id === undefined) yield* openStream
        }).pipe(
          Effect.catch((reason) =>
            request === null || answered
              ? log(`session-journal mcp: the MCP server at ${options.url} failed: ${reason}`)
              : emit(JSON.stringify({
                jsonrpc: "2.0",
                id: request,
                error: { code: -32000, message: `the MCP server at ${options.url} failed: ${reason}` }
              }))
          )
        )
      })

    const scope = yield* Effect.scope
    // The server's own stream: opened once the session is initialized, again when it ends.
    let stream: Fiber.Fiber<void> | null = null
    let lastEventId: string | null = null
    const listen = Effect.gen(function*() {
      for (let opened = 0; opened < MAX_STREAM_OPENS; opened++) {
        if (opened > 0) yield* Effect.sleep(STREAM_REOPEN_DELAY)
        const response = yield* Effect.tryPromise({
          try: (signal) =>
            fetch(options.url, {
              method: "GET",
              headers: {
                ...headers("text/event-stream"),
                ...(lastEventId === null ? {} : { "last-event-id": lastEventId })
              },
              signal
            }),
          catch: (e) => e instanceof Error ? e.message : String(e)
        })
        if (!response.ok || response.body === null) {
          yield* Effect.promise(() => response.body?.cancel().catch(() => undefined) ?? Promise.resolve())
          // 405: the server offers no stream of its own; anything else: it will not give one.
          if (response.status !== 405) {
            yield* log(
              `session-journal mcp: the server's stream at ${options.url} was refused: HTTP ${response.status}`
            )
          }
          return
        }
        yield* readEvents(
          response.body,
          (bytes) =>
            log(
              `session-journal mcp: a server message of ${bytes} bytes was dropped, over the bound of ${options.maxBodyBytes}`
            ),
          (_, id) => {
            if (id !== null) lastEventId = id
          }
        ).pipe(
          Effect.catch((reason) => log(`session-journal mcp: the server's stream at ${options.url} failed: ${reason}`))
        )
      }
    }).pipe(
      Effect.catch((reason) => log(`session-journal mcp: the server's stream at ${options.url} failed: ${reason}`))
    )
    const openStream = Effect.suspend(() => {
      if (stream !== null || closed) return Effect.void
      return Effect.forkIn(listen, scope).pipe(Effect.map((fiber) => {
        stream = fiber
      }))
    })

    // The session is ended once, when the last answer is in (or when the scope closes first).
    let ended = false
    const end = Effect.suspend(() => {
      const listening = stream === null ? Effect.void : Fiber.interrupt(stream)
      if (ended || sessionId === null) return listening
      ended = true
      const id = sessionId
      return Effect.andThen(
        listening,
        Effect.ignore(
          Effect.tryPromise(() =>
            fetch(options.url, { method: "DELETE", headers: { ...options.headers, "mcp-session-id": id } })
          )
        )
      )
    })
    let closed = false
    let inFlight = 0
    const settle = Effect.suspend(() => closed && inFlight === 0 ? Effect.andThen(end, Queue.end(output)) : Effect.void)
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
 * How many times the server's own stream (the GET) is opened in one connection:
 * the first time and after each end, so a server that keeps closing it is not
 * asked without end.
 */
export const MAX_STREAM_OPENS = 16

/** The pause before the server's stream is opened again after it ended. */
export const STREAM_REOPEN_DELAY = Duration.millis(250)

/**
 * The default time a server has to exit after its stdin closed, and after
 * SIGTERM: 1 s each, so the whole end fits in the 2 s the SDK's stdio client
 * gives the gateway before it sends SIGTERM itself (docs/mcp-PROTOCOL.md).
 */
export const DEFAULT_KILL_GRACE = Duration.seconds(1)
