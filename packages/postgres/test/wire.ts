/**
 * What a client sends PostgreSQL: a TCP proxy in front of the server that parses
 * the frontend protocol (after the startup message, every message is a type byte
 * and a length) and tallies the messages by type (`S` Sync and `Q` Query each end
 * one round trip) and the statements they carry. For the round-trip tests and the
 * benchmarks' profile of the adapter.
 */
import * as Effect from "effect/Effect"
import { Buffer } from "node:buffer"
import * as net from "node:net"

/** Tallies of one proxy. */
export interface Tally {
  /** Messages by type byte. */
  readonly messages: Map<string, number>
  /** Statements by their text (`Parse` and simple `Query`), whitespace collapsed. */
  readonly statements: Map<string, number>
  /** Bytes sent, by message type. */
  readonly bytes: Map<string, number>
  /**
   * Messages by the statement they serve (its whole text, whitespace collapsed)
   * and then by type: a `Parse` or `Query` serves its own text, a
   * `Bind` or a statement's `Describe` the statement it names, and every other
   * message the statement its connection bound last.
   */
  readonly byStatement: Map<string, Map<string, number>>
}

/** Messages of `type` that served statements whose text does not contain `except`. */
export const countExcept = (tally: Tally, type: string, except: string): number => {
  let n = tally.messages.get(type) ?? 0
  for (const [statement, counts] of tally.byStatement) {
    if (statement.includes(except)) n -= counts.get(type) ?? 0
  }
  return n
}

const bump = (m: Map<string, number>, k: string, n = 1) => m.set(k, (m.get(k) ?? 0) + n)

/** Starts the proxy on a free port; returns its port, the tallies and a close. */
export const startProxy = async (target: { host: string; port: number }) => {
  const tally: Tally = { messages: new Map(), statements: new Map(), bytes: new Map(), byStatement: new Map() }
  const sockets = new Set<net.Socket>()
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host)
    sockets.add(client).add(upstream)
    let buf = Buffer.alloc(0)
    let started = false
    // This connection's prepared statements by name, and the one it serves now.
    const prepared = new Map<string, string>()
    let current = ""
    client.on("data", (chunk: Buffer) => {
      upstream.write(chunk)
      buf = Buffer.concat([buf, chunk])
      for (;;) {
        if (!started) {
          if (buf.length < 8) return
          const len = buf.readInt32BE(0)
          if (buf.length < len) return
          const code = buf.readInt32BE(4)
          // SSLRequest / GSSENCRequest come before the real startup message.
          if (code !== 80877103 && code !== 80877104) started = true
          buf = buf.subarray(len)
          continue
        }
        if (buf.length < 5) return
        const len = buf.readInt32BE(1)
        if (buf.length < 1 + len) return
        const type = String.fromCharCode(buf[0]!)
        bump(tally.messages, type)
        bump(tally.bytes, type, 1 + len)
        const body = buf.subarray(5, 1 + len)
        if (type === "Q") {
          current = text(body, 0, Infinity)
          bump(tally.statements, `Q ${text(body, 0)}`)
        }
        if (type === "P") {
          current = text(body, body.indexOf(0) + 1, Infinity)
          prepared.set(body.subarray(0, body.indexOf(0)).toString("utf8"), current)
          bump(tally.statements, `P ${text(body, body.indexOf(0) + 1)}`)
        }
        if (type === "B") {
          const from = body.indexOf(0) + 1
          current = prepared.get(body.subarray(from, body.indexOf(0, from)).toString("utf8")) ?? current
        }
        if (type === "D" && body[0] === 0x53) {
          current = prepared.get(body.subarray(1, body.indexOf(0, 1)).toString("utf8")) ?? current
        }
        let counts = tally.byStatement.get(current)
        if (counts === undefined) tally.byStatement.set(current, counts = new Map())
        bump(counts, type)
        buf = buf.subarray(1 + len)
      }
    })
    upstream.on("data", (chunk: Buffer) => client.write(chunk))
    const end = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on("close", end).on("error", end)
    upstream.on("close", end).on("error", end)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as net.AddressInfo).port
  const close = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    })
  return { port, tally, close }
}

const text = (body: Buffer, from: number, max = 140) => {
  const end = body.indexOf(0, from)
  return body.subarray(from, end).toString("utf8").replace(/\s+/g, " ").slice(0, max)
}

/** A proxy in front of the server at `url` for the scope; its URL and tallies. */
export const proxied = (url: string) =>
  Effect.gen(function*() {
    const target = new URL(url)
    const proxy = yield* Effect.acquireRelease(
      Effect.promise(() => startProxy({ host: target.hostname, port: Number(target.port || 5432) })),
      (p) => Effect.promise(() => p.close())
    )
    target.host = `127.0.0.1:${proxy.port}`
    return { url: target.toString(), proxy }
  })
