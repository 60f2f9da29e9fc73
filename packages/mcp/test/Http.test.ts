/**
 * The gateway's Streamable HTTP side against a node:http server that records
 * what it is sent: the session id and protocol version sent back, the caller's
 * headers on every request, JSON and event-stream answers, an answer over the
 * bound refused as an error, and the session ended with a DELETE.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import { connect, layer, tempDir, textOf } from "./harness.ts"

interface Seen {
  readonly method: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: string
}

// Answers initialize with a session id (JSON), tools/call with an event stream
// (a progress notification, then the result), "big" with a body over any small
// bound, and notifications with 202.
const fakeServer = () =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ readonly url: string; readonly seen: Array<Seen>; readonly server: http.Server }>((resolve) => {
        const seen: Array<Seen> = []
        const server = http.createServer((req, res) => {
          let body = ""
          req.on("data", (b: Buffer) => (body += b.toString()))
          req.on("end", () => {
            seen.push({ method: req.method ?? "", headers: req.headers, body })
            if (req.method === "DELETE") return res.writeHead(200).end()
            const message = JSON.parse(body) as { id?: number; method?: string; params?: { name?: string } }
            if (message.id === undefined) return res.writeHead(202).end()
            if (message.method === "initialize") {
              res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "session-123" })
              return res.end(
                JSON.stringify({ jsonrpc: "2.0", id: message.id, result: { protocolVersion: "2025-06-18" } })
              )
            }
            res.writeHead(200, { "content-type": "text/event-stream" })
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
        server.listen(0, "127.0.0.1", () =>
          resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen, server }))
      })
    ),
    ({ server }) =>
      Effect.promise(() =>
        new Promise<void>((resolve) => server.close(() => resolve()))
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
      const big = yield* c.call("big")
      assert.include(String((big["error"] as { message: string }).message), "over 8192 bytes")
      yield* c.end
      const summary = yield* c.summary
      assert.strictEqual(summary.calls, 2)
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
})
