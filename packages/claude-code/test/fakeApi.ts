/**
 * A scripted fake of the Anthropic Messages API for running the real Claude Code
 * CLI offline (PROTOCOL.md (f)): a node:http server on 127.0.0.1 answering
 * `POST /v1/messages` (`?beta=true`) with the server-sent-event stream the CLI
 * accepts. Each answer is one turn of a script: text, or one or more `tool_use`
 * blocks (several are parallel calls), with the usage it reports, or a response
 * held open (`hold`: `message_start`, then nothing until released or the client
 * hangs up, for a CLI caught mid-request). The same port is the CLI's HTTP(S)
 * proxy and refuses every `CONNECT`, counting it, so nothing leaves the machine
 * unnoticed. Every request is recorded.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** One tool call of a turn; `id` defaults to a fresh `toolu_fake…` id. */
export interface ToolCall {
  readonly name: string
  readonly input: Record<string, unknown>
  readonly id?: string
}

/**
 * The token counts an answer reports: `input_tokens` in `message_start`,
 * `output_tokens` in `message_delta` (default 10 and 5).
 */
export interface Usage {
  readonly input_tokens: number
  readonly output_tokens: number
}

/**
 * A response held open: the fake sends the headers, `message_start` and `ping`,
 * then nothing until `release` (which finishes it as `turn`, default `"done"`) or
 * until the client closes the connection. For one request; a second request
 * answered with the same hold is answered `"done"` at once.
 */
export interface Hold {
  readonly hold: true
  /** Resolves with the request once its `message_start` has been sent. */
  readonly started: Promise<Request>
  /** Resolves when the response is over: `released`, or `closed` by the client before that. */
  readonly ended: Promise<"released" | "closed">
  /** Finishes the held response with the blocks of `turn`. */
  readonly release: (turn?: Turn) => void
}

/**
 * One answer of the model: text, or tool calls (with optional text before them),
 * optionally with the usage it reports; or a response held open (`hold`).
 */
export type Turn =
  | { readonly text: string; readonly usage?: Usage }
  | { readonly tools: ReadonlyArray<ToolCall>; readonly text?: string; readonly usage?: Usage }
  | Hold

/** A text turn. */
export const text = (t: string): Turn => ({ text: t })

/** The same answer reporting `usage` (a held response is returned unchanged). */
export const withUsage = (turn: Turn, usage: Usage): Turn => ("hold" in turn ? turn : { ...turn, usage })

interface HoldState {
  readonly control: {
    pending: Turn | undefined
    onRelease: (() => void) | undefined
    used: boolean
  }
  readonly started: (r: Request) => void
  readonly ended: (how: "released" | "closed") => void
}

// The server's side of each hold, keyed by its `started` promise (the object a script returns).
const holds = new WeakMap<Promise<Request>, HoldState>()

/** A response held open until released (see `Hold`). */
export const hold = (): Hold => {
  let started!: (r: Request) => void
  let ended!: (how: "released" | "closed") => void
  const control = {
    started: new Promise<Request>((resolve) => (started = resolve)),
    ended: new Promise<"released" | "closed">((resolve) => (ended = resolve)),
    release: (turn?: Turn) => {
      control.pending = turn ?? text("done")
      control.onRelease?.()
    },
    pending: undefined as Turn | undefined,
    onRelease: undefined as (() => void) | undefined,
    used: false
  }
  holds.set(control.started, { control, started: (r) => started(r), ended: (how) => ended(how) })
  return { hold: true, started: control.started, ended: control.ended, release: control.release }
}

/** A turn of tool calls, run in parallel by the CLI when it considers them safe to. */
export const tools = (...calls: ReadonlyArray<ToolCall>): Turn => ({ tools: calls })

/** A Bash call. */
export const bash = (command: string, description = "run a command"): ToolCall => ({
  name: "Bash",
  input: { command, description }
})

/** A message of the request's conversation, as the CLI sends it. */
export interface Message {
  readonly role: string
  readonly content: string | ReadonlyArray<Record<string, unknown>>
}

/** A request the fake received, with what a script keys on. */
export interface Request {
  /** Order of arrival, from 0, over the whole server. */
  readonly index: number
  readonly method: string
  readonly url: string
  readonly headers: http.IncomingHttpHeaders
  /** `X-Claude-Code-Session-Id`: the main session's id (sub-agents send the parent's). */
  readonly sessionId: string | null
  /** The parsed JSON body (null when it was not JSON). */
  readonly body: Record<string, unknown> | null
  readonly messages: ReadonlyArray<Message>
  /** Every text block of the first user message, joined by newlines (the prompt, after reminders). */
  readonly prompt: string
  /** How many assistant messages the conversation already has: the turn being asked for. */
  readonly turn: number
  /** The `tool_result` blocks of the last user message (answers to the previous turn). */
  readonly toolResults: ReadonlyArray<Record<string, unknown>>
}

/** Decides each answer. Returning `undefined` answers `"done"`. */
export type Script = (request: Request) => Turn | undefined

/** Answers the n-th request of the server with `turns[n]`, then `"done"`. */
export const inOrder = (turns: ReadonlyArray<Turn>): Script => (r) => turns[r.index]

/**
 * Answers each conversation with its own list, by the number of assistant messages
 * it already has: stateless, so a retried request gets the same answer. `pick`
 * chooses the list from the request (its prompt, session id); a sub-agent's
 * conversation starts with the sub-agent's prompt.
 */
export const perConversation = (pick: (r: Request) => ReadonlyArray<Turn> | undefined): Script => (r) =>
  pick(r)?.[r.turn]

/** The answer to one request: its index and the blocks sent. */
export interface Answer {
  readonly request: number
  readonly blocks: ReadonlyArray<Block>
}

/** A running fake. */
export interface FakeApi {
  /** `http://127.0.0.1:PORT`: for `ANTHROPIC_BASE_URL` and the proxy variables. */
  readonly url: string
  readonly port: number
  /** Every request to a path, in order of arrival. */
  readonly requests: ReadonlyArray<Request>
  /** What each `/v1/messages` request was answered, tool calls with their ids. */
  readonly answers: ReadonlyArray<Answer>
  /** `CONNECT` targets that were refused (should stay empty). */
  readonly connects: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

const textOf = (m: Message | undefined): string =>
  m === undefined
    ? ""
    : typeof m.content === "string"
    ? m.content
    : m.content.filter((b) => b["type"] === "text").map((b) => String(b["text"])).join("\n")

const toRequest = (index: number, req: http.IncomingMessage, raw: string): Request => {
  let body: Record<string, unknown> | null = null
  try {
    const parsed: unknown = JSON.parse(raw)
    if (typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)) {
      body = parsed as Record<string, unknown>
    }
  } catch {
    body = null
  }
  const messages = Array.isArray(body?.["messages"]) ? (body["messages"] as ReadonlyArray<Message>) : []
  const last = messages.at(-1)
  const sid = req.headers["x-claude-code-session-id"]
  return {
    index,
    method: req.method ?? "",
    url: req.url ?? "",
    headers: req.headers,
    sessionId: typeof sid === "string" ? sid : null,
    body,
    messages,
    prompt: textOf(messages.find((m) => m.role === "user")),
    turn: messages.filter((m) => m.role === "assistant").length,
    toolResults: last !== undefined && last.role === "user" && typeof last.content !== "string"
      ? last.content.filter((b) => b["type"] === "tool_result")
      : []
  }
}

const sse = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`

let ids = 0
const freshId = (): string => `toolu_fake${process.pid}x${(ids++).toString(36)}`

/** A content block as sent: text, or a tool call with its id. */
export type Block =
  | { readonly type: "text"; readonly text: string }
  | Required<ToolCall> & { readonly type: "tool_use" }

/** The content blocks of a turn, tool calls with their ids (none for a held response). */
export const blocksOf = (turn: Turn): Array<Block> => {
  const blocks: Array<Block> = []
  if ("hold" in turn) return blocks
  if (turn.text !== undefined && turn.text.length > 0) blocks.push({ type: "text", text: turn.text })
  if ("tools" in turn) {
    for (const c of turn.tools) blocks.push({ type: "tool_use", name: c.name, input: c.input, id: c.id ?? freshId() })
  }
  return blocks
}

const stopReason = (turn: Turn): string => "tools" in turn && turn.tools.length > 0 ? "tool_use" : "end_turn"

const usageOf = (turn: Turn): Usage =>
  ("hold" in turn ? undefined : turn.usage) ?? { input_tokens: 10, output_tokens: 5 }

/** The SSE body answering one request with the blocks of a turn (PROTOCOL.md (f)). */
export const stream = (turn: Turn, blocks: ReadonlyArray<Block>, model: string, messageId: string): string =>
  streamStart(turn, model, messageId) + streamRest(turn, blocks)

const streamStart = (turn: Turn, model: string, messageId: string): string => {
  const usage = {
    input_tokens: usageOf(turn).input_tokens,
    output_tokens: 1,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: 0
  }
  let out = sse("message_start", {
    type: "message_start",
    message: {
      id: messageId,
      type: "message",
      role: "assistant",
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage
    }
  })
  out += sse("ping", { type: "ping" })
  return out
}

const streamRest = (turn: Turn, blocks: ReadonlyArray<Block>): string => {
  let out = ""
  blocks.forEach((b, index) => {
    if (b.type === "text") {
      out += sse("content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "text", text: "" }
      })
      out += sse("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "text_delta", text: b.text }
      })
    } else {
      out += sse("content_block_start", {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: b.id, name: b.name, input: {} }
      })
      out += sse("content_block_delta", {
        type: "content_block_delta",
        index,
        delta: { type: "input_json_delta", partial_json: JSON.stringify(b.input) }
      })
    }
    out += sse("content_block_stop", { type: "content_block_stop", index })
  })
  out += sse("message_delta", {
    type: "message_delta",
    delta: { stop_reason: stopReason(turn), stop_sequence: null },
    usage: { output_tokens: usageOf(turn).output_tokens }
  })
  out += sse("message_stop", { type: "message_stop" })
  return out
}

/**
 * Starts the fake on 127.0.0.1 with a free port. Requests other than
 * `POST /v1/messages` get a 404 (and are recorded); a script that throws answers 500.
 */
export const start = (script: Script): Promise<FakeApi> => {
  const requests: Array<Request> = []
  const answers: Array<Answer> = []
  const connects: Array<string> = []
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (b: Buffer) => chunks.push(b))
    req.on("end", () => {
      const r = toRequest(requests.length, req, Buffer.concat(chunks).toString("utf8"))
      requests.push(r)
      const pathname = (req.url ?? "").split("?")[0]
      if (req.method !== "POST" || pathname !== "/v1/messages" || r.body === null) {
        res.writeHead(404, { "content-type": "application/json" })
        res.end(JSON.stringify({ type: "error", error: { type: "not_found_error", message: "fake: not here" } }))
        return
      }
      let turn: Turn
      try {
        turn = script(r) ?? text("done")
      } catch (e) {
        res.writeHead(500, { "content-type": "application/json" })
        res.end(
          JSON.stringify({ type: "error", error: { type: "api_error", message: `fake script failed: ${String(e)}` } })
        )
        return
      }
      const model = typeof r.body["model"] === "string" ? r.body["model"] : "claude-fake"
      const id = `msg_fake${r.index}`
      const held = "hold" in turn ? holds.get(turn.started) : undefined
      if (held !== undefined && !held.control.used && r.body["stream"] === true) {
        held.control.used = true
        res.writeHead(200, {
          "content-type": "text/event-stream",
          "cache-control": "no-cache",
          "request-id": `req_fake${r.index}`
        })
        // The first events go out now; the rest when released.
        res.write(streamStart(held.control.pending ?? text("done"), model, id))
        let over = false
        res.on("close", () => {
          if (!over) {
            over = true
            held.ended("closed")
          }
        })
        held.control.onRelease = () => {
          if (over) return
          over = true
          const final = held.control.pending ?? text("done")
          const finalTurn = "hold" in final ? text("done") : final
          const blocks = blocksOf(finalTurn)
          answers.push({ request: r.index, blocks })
          res.end(streamRest(finalTurn, blocks))
          held.ended("released")
        }
        held.started(r)
        if (held.control.pending !== undefined) held.control.onRelease()
        return
      }
      if ("hold" in turn) turn = text("done")
      const blocks = blocksOf(turn)
      answers.push({ request: r.index, blocks })
      if (r.body["stream"] !== true) {
        // Not seen from the CLI in -p runs; answered as the API would, for completeness.
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify({
          id,
          type: "message",
          role: "assistant",
          model,
          content: blocks,
          stop_reason: stopReason(turn),
          stop_sequence: null,
          usage: usageOf(turn)
        }))
        return
      }
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        "request-id": `req_fake${r.index}`
      })
      res.end(stream(turn, blocks, model, id))
    })
  })
  server.on("connect", (req, socket) => {
    connects.push(req.url ?? "")
    socket.on("error", () => {})
    socket.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n")
  })
  return new Promise((resolve, reject) => {
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      resolve({
        url: `http://127.0.0.1:${port}`,
        port,
        requests,
        answers,
        connects,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}
