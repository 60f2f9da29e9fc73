/**
 * A connection through the gateway, in the test's process, to a real server
 * child (the SDK's own `Server`, `fixtures/server.mjs`): the test writes the
 * client's lines and reads what the gateway writes back, parsed.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Entry, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import type * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Gateway from "../src/Gateway.ts"
import { FIXTURE_SERVER, fixtureEnv, SCRIPTED_SERVER } from "./mcpCache.ts"

/** A fresh temporary directory. */
export const tempDir = (): string => fs.mkdtempSync(path.join(os.tmpdir(), "sj-mcp-"))

/** The journal under `root` and the platform's child processes. */
export const layer = (root: string) =>
  Layer.mergeAll(
    SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root }))),
    NodeServices.layer
  )

/** A message the gateway wrote to the client. */
export type Received = { readonly [key: string]: unknown }

/** The fixture server as the gateway's `Server`. */
export const fixtureServer = (cache: string, env?: Record<string, string>): Gateway.Server => ({
  _tag: "Command",
  command: process.execPath,
  args: [FIXTURE_SERVER],
  env: { ...(process.env as Record<string, string>), ...fixtureEnv(cache), ...env }
})

/** The scripted server (`fixtures/scripted.mjs`), writing its lines as `mode` says. */
export const scriptedServer = (mode: "chunk" | "split" | "lines"): Gateway.Server => ({
  _tag: "Command",
  command: process.execPath,
  args: [SCRIPTED_SERVER],
  env: { ...(process.env as Record<string, string>), MCP_SCRIPT_MODE: mode }
})

const encoder = new TextEncoder()

/** Starts a connection; the gateway runs in a fiber of the test's scope. */
export const connect = (options: Gateway.Options) =>
  Effect.gen(function*() {
    const input = yield* Queue.unbounded<Uint8Array, Cause.Done>()
    const received = yield* Queue.unbounded<Received | { readonly unparsed: string }>()
    // The unfinished line's text in pieces: joined only when a newline ends it, so
    // a long line costs its length once, not once per chunk.
    let partial: Array<string> = []
    let outBytes = 0
    const decoder = new TextDecoder()
    const client: Gateway.Client = {
      input: Stream.fromQueue(input),
      write: (bytes) =>
        Effect.suspend(() => {
          outBytes += bytes.length
          const text = decoder.decode(bytes, { stream: true })
          if (!text.includes("\n")) {
            partial.push(text)
            return Effect.void
          }
          const lines = [...partial, text].join("").split("\n")
          partial = [lines.pop()!]
          return Effect.forEach(lines, (line) => {
            try {
              return Queue.offer(received, JSON.parse(line) as Received)
            } catch {
              return Queue.offer(received, { unparsed: line })
            }
          }, { discard: true })
        })
    }
    const fiber = yield* Effect.forkScoped(Gateway.run(options, client))
    let nextId = 1000
    const sendBytes = (bytes: Uint8Array) => Queue.offer(input, bytes)
    const sendText = (text: string) => sendBytes(encoder.encode(text))
    const sendLine = (message: unknown) => sendText(JSON.stringify(message) + "\n")
    const next = Queue.take(received).pipe(Effect.map((m) => m as Received))
    const request = (method: string, params?: unknown) =>
      Effect.gen(function*() {
        const id = nextId++
        yield* sendLine({ jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) })
        return yield* next
      })
    const initialize = request("initialize", {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "harness", version: "1.0.0" }
    }).pipe(Effect.tap(() => sendLine({ jsonrpc: "2.0", method: "notifications/initialized" })))
    const call = (name: string, args: Record<string, unknown> = {}) => request("tools/call", { name, arguments: args })
    return {
      sendBytes,
      sendText,
      sendLine,
      next,
      request,
      initialize,
      call,
      end: Queue.end(input),
      summary: Fiber.join(fiber),
      outBytes: () => outBytes
    }
  })

/** Every entry of a journal session, from storage. */
export const entriesOf = (session: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    return yield* journal.entries(session).pipe(Stream.runCollect)
  })

/** The payload of a non-tool entry. */
export const payloadOf = (entry: Entry.Entry): { readonly [key: string]: unknown } =>
  Entry.isTool(entry) ? {} : entry.payload as { readonly [key: string]: unknown }

/** The text of a tool result's first content block. */
export const textOf = (message: Received): string => {
  const result = message["result"] as { readonly content?: ReadonlyArray<{ readonly text?: string }> } | undefined
  return result?.content?.[0]?.text ?? ""
}

export type Connection = Effect.Success<ReturnType<typeof connect>>
export type Needs = SessionJournal.SessionJournal | Scope.Scope
