/**
 * The gateway's Streamable HTTP side against a node:http server that records
 * what it is sent: the session id and protocol version sent back, the caller's
 * headers on every request, JSON and event-stream answers, an answer over the
 * bound refused as an error, the session ended with a DELETE, and the server's
 * own stream (the GET): its messages handed on, one over the bound dropped, the
 * stream opened again after it ends, with the last event id, until the server
 * says it offers none.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Queue from "effect/Queue"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { connect, layer, tempDir, textOf } from "./harness.ts"

interface Seen {
  readonly method: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

// Answers initialize with a session id (JSON), tools/call with an event stream
// (a progress notification, then the result; "cut": the result, then the
// connection closed mid-stream), "big" with a body over any small
// bound, notifications and responses with 202, and a GET with an event stream
// held open for the test.
const fakeServer = () =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<
        {
          readonly url: string
          readonly seen: Array<Seen>
          readonly server: http.Server
          readonly streams: Queue.Queue<http.ServerResponse>
        }
      >((resolve) => {
        const seen: Array<Seen> = []
        // Each GET's response, held open for the test to write the server's own messages to.
        const streams = Effect.runSync(Queue.unbounded<http.ServerResponse>())
        const server = http.createServer((req, res) => {
          let body = ""
          req.on("data", (b: Buffer) => (body += b.toString()))
          req.on("end", () => {
            seen.push({ method: req.method ?? "", headers: req.headers, body })
            if (req.method === "DELETE") return res.writeHead(200).end()
            if (req.method === "GET") {
              res.writeHead(200, { "content-type": "text/event-stream" })
              res.flushHeaders()
              Queue.offerUnsafe(streams, res)
              return
            }
            const message = JSON.parse(body) as { id?: number; method?: string; params?: { name?: string } }
            // Notifications, and the client's answers to the server's requests: accepted.
            if (message.id === undefined || message.method === undefined) return res.writeHead(202).end()
            if (message.method === "initialize") {
              res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "session-123" })
              return res.end(
                JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { protocolVersion: "2025-06-18" } })
              )
            }
            res.writeHead(200, { "content-type": "text/event-stream" })
            if (message.params?.name === "cut") {
              // The answer, then the connection closed in the middle of the stream.
              const answer = { jsonrpc: "2.0", id: message.id, result: { content: [{ type: "text", text: "cut" }] } }
              return res.write(`event: message\ndata: ${JSON.stringify(answer)}\n\n`, () => res.socket!.end())
            }
            if (message.params?.name === "big") {
              return res.end(
                `event: message\ndata: ${
                  JSON.stringify({
                    jsonrpc: "2.0",
                    id: message.id,
                    result: { content: [{ type: "text", text: "x".repeat(20_000) }] }
                  })
                }\n\n`
              )
            }
            res.write(
              `event: message\ndata: ${
                JSON.stringify({
                  jsonrpc: "2.0",
                  method: "notifications/progress",
                  params: { progressToken: 1, progress: 1 }
                })
              }\n\n`
            )
            res.end(
              `event: message\ndata: ${
                JSON.stringify({
                  jsonrpc: "2.0",
                  id: message.id,
                  result: { content: [{ type: "text", text: "from http" }] }
                })
              }\n\n`
            )
          })
        })
        server.listen(
          0,
          "127.0.0.1",
          () =>
            resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen, server, streams })
        )
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => {
          server.closeAllConnections()
          server.close(() => resolve())
        })
      )
  )

describe("Gateway over Streamable HTTP", () => {
  it.live("sends back the session id and protocol version, passes the answers on, ends the session", () => {
    const dir = tempDir()
    return Effect.gen(function*() {
      const fake = yield* fakeServer()
      const c = yield* connect({
        name: "remote",
        server: { _tag: "Http", url: fake.url, headers: { authorization: "Bearer t0k3n" } },
        guard: null,
        maxLineBytes: 8192
      })
      yield* c.initialize
      const progress = yield* c.call("echo", { text: "x" })
      assert.strictEqual(progress["method"], "notifications/progress")
      assert.strictEqual(textOf(yield* c.next), "from http")
      // A stream that fails after its answer: the answer stands, no error follows it.
      assert.strictEqual(textOf(yield* c.call("cut")), "cut")
      const big = yield* c.call("big")
      assert.include(String((big["error"] as { message: string }).message), "over 8192 bytes")
      yield* c.end
      const summary = yield* c.summary
      assert.strictEqual(summary.calls, 3)
      const posts = fake.seen.filter((s) => s.method === "POST")
      assert.isUndefined(posts[0]!.headers["mcp-session-id"])
      for (const p of posts.slice(1)) {
        assert.strictEqual(p.headers["mcp-session-id"], "session-123")
        assert.strictEqual(p.headers["mcp-protocol-version"], "2025-06-18")
      }
      for (const p of posts) {
        assert.strictEqual(p.headers["authorization"], "Bearer t0k3n")
        assert.include(String(p.headers["accept"]), "text/event-stream")
      }
      const last = fake.seen.at(-1)!
      assert.strictEqual(last.method, "DELETE")
      assert.strictEqual(last.headers["mcp-session-id"], "session-123")
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  it.live("reads the server's own stream: its messages handed on, bounded, the stream opened again after it ends", () => {
    const dir = tempDir()
    const event = (id: string, message: unknown) => `id: ${id}\nevent: message\ndata: ${JSON.stringify(message)}\n\n`
    return Effect.gen(function*() {
      const fake = yield* fakeServer()
      const notes: Array<string> = []
      const c = yield* connect({
        name: "remote",
        server: { _tag: "Http", url: fake.url },
        guard: null,
        maxLineBytes: 8192,
        log: (line) => Effect.sync(() => notes.push(line))
      })
      // The stream is opened once the session is initialized.
      yield* c.initialize
      const first = yield* Queue.take(fake.streams)
      const get = fake.seen.find((s) => s.method === "GET")!
      assert.strictEqual(get.headers["accept"], "text/event-stream")
      assert.strictEqual(get.headers["mcp-session-id"], "session-123")
      assert.strictEqual(get.headers["mcp-protocol-version"], "2025-06-18")
      assert.isUndefined(get.headers["last-event-id"])
      const log = { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "hello" } }
      const ping = { jsonrpc: "2.0", id: "srv-1", method: "ping" }
      const huge = { jsonrpc: "2.0", method: "notifications/message", params: { data: "x".repeat(20_000) } }
      const after = { jsonrpc: "2.0", method: "notifications/tools/list_changed" }
      // One event cut across writes, one over the bound, CRLF line ends.
      const pingEvent = event("e2", ping)
      first.write(event("e1", log) + pingEvent.slice(0, 20))
      first.write(pingEvent.slice(20))
      first.write(event("e3", huge).replace(/\n/g, "\r\n"))
      first.end(event("e4", after))
      assert.deepStrictEqual(yield* c.next, log)
      assert.deepStrictEqual(yield* c.next, ping)
      assert.deepStrictEqual(yield* c.next, after)
      assert.isTrue(notes.some((n) => n.includes("was dropped, over the bound of 8192")))
      // The client's answer to the server's request goes back in a POST.
      yield* c.sendLine({ jsonrpc: "2.0", id: "srv-1", result: {} })
      // The stream ended: it is opened again, from the last event the gateway read.
      const second = yield* Queue.take(fake.streams)
      const again = fake.seen.filter((s) => s.method === "GET")
      assert.strictEqual(again.length, 2)
      assert.strictEqual(again[1]!.headers["last-event-id"], "e4")
      second.end(event("e5", log))
      assert.deepStrictEqual(yield* c.next, log)
      yield* c.end
      yield* c.summary
      const answer = fake.seen.find((s) => s.method === "POST" && s.body.includes("srv-1"))
      assert.deepStrictEqual(JSON.parse(answer!.body), { jsonrpc: "2.0", id: "srv-1", result: {} })
      assert.strictEqual(fake.seen.at(-1)!.method, "DELETE")
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })
})
