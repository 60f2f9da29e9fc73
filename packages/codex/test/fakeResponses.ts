/**
 * A scripted fake of the OpenAI Responses API for running the real Codex CLI
 * offline (docs/codex-PROTOCOL.md (m)): a node:http server on 127.0.0.1
 * answering `POST /v1/responses` with the server-sent-event stream Codex
 * accepts. Each answer is one turn of a script, chosen by how many requests the
 * same Codex thread (`session-id` header) made before: a text, or one or more
 * `exec_command` calls (several are parallel calls). The same port is Codex's
 * HTTP(S) proxy and refuses every `CONNECT`, counting it, so nothing leaves the
 * machine unnoticed. Every request is recorded.
 */
import * as http from "node:http"
import type { AddressInfo } from "node:net"

/** One function call of a turn. */
export interface Call {
  readonly name: string
  readonly arguments: Record<string, unknown>
  /** The tool's namespace, for a tool offered in one (`multi_agent_v1`'s `spawn_agent`, `wait_agent`). */
  readonly namespace?: string
}

/**
 * One answer of the model: a text, or calls (run in parallel when several); with
 * `tokens`, the total its usage reports (default 110: 100 in, 10 out).
 */
export type Turn = ({ readonly text: string } | { readonly calls: ReadonlyArray<Call> }) & {
  readonly tokens?: number
}

/** A shell command through `exec_command`. */
export const shell = (cmd: string): Call => ({ name: "exec_command", arguments: { cmd } })

/** A request as the fake received it. */
export interface Request {
  /** The Codex thread (`session-id` header). */
  readonly thread: string
  /** How many requests this thread made before this one. */
  readonly index: number
  readonly body: { readonly input?: ReadonlyArray<unknown>; readonly [key: string]: unknown }
}

/** Which turn answers a request; undefined: a closing text. */
export type Script = (request: Request) => Turn | undefined

/** The turns in order, per thread. */
export const inOrder = (turns: ReadonlyArray<Turn>): Script => (r) => turns[r.index]

/** A running fake. */
export interface FakeResponses {
  /** `http://127.0.0.1:PORT`: the provider's base is `${url}/v1`, the proxy is `url`. */
  readonly url: string
  readonly requests: Array<Request>
  /** `CONNECT` targets refused (should stay empty). */
  readonly connects: Array<string>
  readonly close: () => Promise<void>
}

let ids = 0

const event = (type: string, data: Record<string, unknown>): string =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`

/** The SSE body of one turn. */
export const stream = (turn: Turn): string => {
  const id = `resp_fake${++ids}`
  const items = "text" in turn
    ? [{
      type: "message",
      id: `msg_fake${ids}`,
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: turn.text, annotations: [] }]
    }]
    : turn.calls.map((c, i) => ({
      type: "function_call",
      id: `fc_fake${ids}_${i}`,
      call_id: `call_fake${ids}_${i}`,
      name: c.name,
      ...(c.namespace === undefined ? {} : { namespace: c.namespace }),
      arguments: JSON.stringify(c.arguments),
      status: "completed"
    }))
  return [
    event("response.created", { response: { id } }),
    ...items.flatMap((item, i) => [
      event("response.output_item.added", { output_index: i, item }),
      event("response.output_item.done", { output_index: i, item })
    ]),
    event("response.completed", {
      response: {
        id,
        usage: {
          input_tokens: (turn.tokens ?? 110) - 10,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens: 10,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: turn.tokens ?? 110
        }
      }
    })
  ].join("")
}

/** Starts the fake on a free port of 127.0.0.1. */
export const start = (script: Script): Promise<FakeResponses> => {
  const requests: Array<Request> = []
  const connects: Array<string> = []
  const counts = new Map<string, number>()
  const server = http.createServer((req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (c: Buffer) => chunks.push(c))
    req.on("end", () => {
      if (req.method !== "POST" || !(req.url ?? "").endsWith("/responses")) {
        res.writeHead(404).end()
        return
      }
      let body: Request["body"] = {}
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as Request["body"]
      } catch {
        res.writeHead(400).end()
        return
      }
      const header = req.headers["session-id"]
      const thread = typeof header === "string" ? header : ""
      const index = counts.get(thread) ?? 0
      counts.set(thread, index + 1)
      const request = { thread, index, body }
      requests.push(request)
      const text = stream(script(request) ?? { text: "done" })
      res.writeHead(200, { "content-type": "text/event-stream", "content-length": Buffer.byteLength(text) })
      res.end(text)
    })
  })
  server.on("connect", (req, socket) => {
    connects.push(req.url ?? "")
    socket.end("HTTP/1.1 403 Forbidden\r\n\r\n")
  })
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      resolve({
        url: `http://127.0.0.1:${port}`,
        requests,
        connects,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })
}
