/**
 * An OTLP/HTTP receiver that is not ours, for the tests of `otel export`: a
 * local HTTP server whose requests are decoded with the OpenTelemetry JS SDK's
 * own protobuf definitions (the decoder `@opentelemetry/otlp-transformer`
 * publishes, generated from opentelemetry-proto), and the semantic conventions'
 * own attribute names (`@opentelemetry/semantic-conventions`). Both are pinned
 * in `scripts/otlp-receiver.sh`, installed into a cache outside the workspace,
 * never a dependency.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import { createRequire } from "node:module"
import type { AddressInfo } from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { assert } from "vitest"

const SCRIPT = fileURLToPath(new URL("../../../scripts/otlp-receiver.sh", import.meta.url))

/** The cache directory of the pinned packages (installed by the script when missing). */
export const cacheDir = (): string => {
  const r = spawnSync("bash", [SCRIPT], { encoding: "utf8", env: process.env })
  if (r.status !== 0) throw new Error(`scripts/otlp-receiver.sh failed: ${r.stderr}`)
  return r.stdout.trim()
}

interface Reader {
  readonly opentelemetry: {
    readonly proto: {
      readonly collector: {
        readonly trace: {
          readonly v1: {
            readonly ExportTraceServiceRequest: {
              decode(bytes: Uint8Array): unknown
              toObject(message: unknown, options: Record<string, unknown>): DecodedRequest
            }
          }
        }
      }
    }
  }
}

interface AnyValue {
  readonly stringValue?: string
  readonly boolValue?: boolean
  readonly intValue?: string
  readonly doubleValue?: number
}

interface DecodedRequest {
  readonly resourceSpans?: ReadonlyArray<{
    readonly resource?: { readonly attributes?: ReadonlyArray<{ key: string; value: AnyValue }> }
    readonly scopeSpans?: ReadonlyArray<{ readonly spans?: ReadonlyArray<DecodedWire> }>
  }>
}

interface DecodedWire {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes?: ReadonlyArray<{ key: string; value: AnyValue }>
  readonly events?: ReadonlyArray<
    { name: string; timeUnixNano: string; attributes?: ReadonlyArray<{ key: string; value: AnyValue }> }
  >
  readonly status?: { readonly code?: number; readonly message?: string }
}

/** A span as the receiver decoded it: ids in hex, times as bigints, attributes as plain values. */
export interface Span {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | null
  readonly name: string
  readonly start: bigint
  readonly end: bigint
  readonly attributes: Record<string, string | number | boolean>
  readonly events: ReadonlyArray<
    { readonly name: string; readonly time: bigint; readonly attributes: Record<string, string | number | boolean> }
  >
  readonly status: { readonly code: number; readonly message: string }
}

const valueOf = (v: AnyValue): string | number | boolean =>
  v.stringValue ?? v.boolValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue ?? "")

const attrs = (list: ReadonlyArray<{ key: string; value: AnyValue }> | undefined) =>
  Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]))

/** The packages, loaded from the cache. */
export const load = () => {
  const dir = cacheDir()
  const require = createRequire(path.join(dir, "package.json"))
  const root = require("@opentelemetry/otlp-transformer/build/src/generated/root.js") as Reader
  const semconv = require("@opentelemetry/semantic-conventions/incubating") as Record<string, unknown>
  const semconvVersion = (JSON.parse(
    fs.readFileSync(path.join(dir, "node_modules/@opentelemetry/semantic-conventions/package.json"), "utf8")
  ) as { version: string }).version
  const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest
  const decode = (bytes: Uint8Array): ReadonlyArray<Span> => {
    const message = Request.toObject(Request.decode(bytes), { longs: String, bytes: String, defaults: false })
    const out: Array<Span> = []
    const hex = (b64: string | undefined) => (b64 === undefined ? "" : Buffer.from(b64, "base64").toString("hex"))
    for (const r of message.resourceSpans ?? []) {
      for (const s of r.scopeSpans ?? []) {
        for (const w of s.spans ?? []) {
          const parent = hex(w.parentSpanId)
          out.push({
            traceId: hex(w.traceId),
            spanId: hex(w.spanId),
            parentSpanId: parent === "" ? null : parent,
            name: w.name,
            start: BigInt(w.startTimeUnixNano),
            end: BigInt(w.endTimeUnixNano),
            attributes: attrs(w.attributes),
            events: (w.events ?? []).map((e) => ({
              name: e.name,
              time: BigInt(e.timeUnixNano),
              attributes: attrs(e.attributes)
            })),
            status: { code: w.status?.code ?? 0, message: w.status?.message ?? "" }
          })
        }
      }
    }
    return out
  }
  return { decode, semconv, semconvVersion }
}

/** How the receiver answers: accept, refuse with a status, or never answer. */
export type Mode = { readonly _tag: "accept" } | { readonly _tag: "refuse"; readonly status: number } | {
  readonly _tag: "hang"
}

/** A running receiver: its traces URL, what it got, and `close`. */
export interface Receiver {
  readonly url: string
  readonly requests: Array<{ readonly contentType: string; readonly body: Buffer; readonly path: string }>
  readonly close: () => Promise<void>
}

/** Starts a receiver on 127.0.0.1 at a free port. */
export const listen = (mode: Mode): Promise<Receiver> =>
  new Promise((resolve) => {
    const requests: Receiver["requests"] = []
    const hanging: Array<http.ServerResponse> = []
    const server = http.createServer((req, res) => {
      const chunks: Array<Buffer> = []
      req.on("data", (c: Buffer) => chunks.push(c))
      req.on("end", () => {
        requests.push({
          contentType: String(req.headers["content-type"]),
          body: Buffer.concat(chunks),
          path: req.url ?? ""
        })
        if (mode._tag === "hang") return void hanging.push(res)
        res.writeHead(mode._tag === "accept" ? 200 : mode.status, { "content-type": "application/x-protobuf" })
        res.end()
      })
    })
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as AddressInfo).port
      resolve({
        url: `http://127.0.0.1:${port}`,
        requests,
        close: () =>
          new Promise<void>((done) => {
            for (const res of hanging) res.destroy()
            server.closeAllConnections()
            server.close(() => done())
          })
      })
    })
  })

/**
 * The spans of the hooked session (`hookedSession.ts`) by role, once their tree
 * is checked: six spans, one per name; the session at the root, the Bash, Agent
 * and Write calls under it, the sub-agent under the Agent call, its Read under it.
 */
export const hookedTree = (spans: ReadonlyArray<Span>) => {
  const byName = (name: string): Span => {
    const found = spans.filter((s) => s.name === name)
    assert.strictEqual(found.length, 1, `${name} among ${spans.map((s) => s.name).join(", ")}`)
    return found[0]!
  }
  const tree = {
    root: byName("invoke_agent claude-code"),
    bash: byName("execute_tool Bash"),
    agent: byName("execute_tool Agent"),
    subagent: byName("invoke_agent general-purpose"),
    read: byName("execute_tool Read"),
    write: byName("execute_tool Write")
  }
  assert.strictEqual(spans.length, 6)
  assert.isNull(tree.root.parentSpanId)
  assert.strictEqual(tree.bash.parentSpanId, tree.root.spanId)
  assert.strictEqual(tree.agent.parentSpanId, tree.root.spanId)
  assert.strictEqual(tree.subagent.parentSpanId, tree.agent.spanId)
  assert.strictEqual(tree.read.parentSpanId, tree.subagent.spanId)
  assert.strictEqual(tree.write.parentSpanId, tree.root.spanId)
  return tree
}
