/**
 * The forwarder's own HTTP/1.1 exchange with the guard (`Forward.exchange`, over
 * `node:net`): the head parser takes exactly one declared length or chunks, with
 * at most one proof, nothing else (properties over generated heads); against real
 * `node:http` servers in this process, an answer with a `Content-Length` and one
 * in chunks (the form a server uses when it writes before it ends) arrive whole
 * and byte for byte, whatever the pieces they are sent in; an answer longer or
 * shorter than it declares, one cut off, one larger than the bound and one that is
 * not HTTP all fail; the request carries the proof and the body as sent.
 */
import * as fc from "fast-check"
import * as http from "node:http"
import type { AddressInfo } from "node:net"
import * as net from "node:net"
import { afterEach, describe, expect, it } from "vitest"
import * as Forward from "../src/Forwarder.ts"
import * as GuardAuth from "../src/internal/guardAuth.ts"

const TOKEN = "forward-exchange-test-token-0123456789"

const closers: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

const listen = async (server: net.Server): Promise<URL> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  closers.push(() =>
    new Promise<void>((resolve) => {
      ;(server as http.Server).closeAllConnections?.()
      server.close(() => resolve())
    })
  )
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`)
}

// A node:http server answering each request with `answer`.
const httpServer = (answer: (req: http.IncomingMessage, body: Buffer, res: http.ServerResponse) => void) =>
  listen(http.createServer((req, res) => {
    const parts: Array<Buffer> = []
    req.on("data", (b: Buffer) => parts.push(b))
    req.on("end", () => answer(req, Buffer.concat(parts), res))
  }))

// A raw TCP server writing `bytes` (then closing) whatever it is sent.
const rawServer = (bytes: Buffer, options?: { readonly close?: boolean }) =>
  listen(net.createServer((socket) => {
    socket.on("error", () => undefined)
    socket.once("data", () => {
      if (options?.close === false) socket.write(bytes)
      else socket.end(bytes)
    })
  }))

const post = (url: URL, body: string, ms = 10_000) => {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), ms)
  return Forward.exchange(url, TOKEN, {
    method: "POST",
    body: new TextEncoder().encode(body),
    signal: controller.signal,
    time: Date.now()
  }).finally(() => clearTimeout(timer))
}

const headOf = (status: string, headers: ReadonlyArray<readonly [string, string]>) =>
  [status, ...headers.map(([n, v]) => `${n}: ${v}`)].join("\r\n")

const tokenChars = fc.constantFrom(..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_".split(""))
const headerName = fc.string({ unit: tokenChars, minLength: 1, maxLength: 20 }).filter((n) =>
  !["content-length", "transfer-encoding", GuardAuth.ANSWER_HEADER].includes(n.toLowerCase())
)
const headerValue = fc.string({ unit: fc.constantFrom(..."abc xyz/;=,.0123456789".split("")), maxLength: 30 })
  .map((v) => v.trim())

describe("parseAnswerHead", () => {
  it("takes one Content-Length, or chunks, and the one proof, among any other headers", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(headerName, headerValue), { maxLength: 8 }),
        fc.oneof(fc.nat({ max: Forward.MAX_ANSWER_BYTES }), fc.constant("chunked" as const)),
        fc.option(fc.string({ unit: tokenChars, minLength: 1, maxLength: 60 }), { nil: undefined }),
        fc.integer({ min: 100, max: 599 }),
        fc.nat({ max: 9 }),
        (others, length, proof, status, at) => {
          const own: Array<readonly [string, string]> = [
            length === "chunked" ? ["Transfer-Encoding", "chunked"] : ["Content-Length", String(length)],
            ...(proof === undefined ? [] : [[GuardAuth.ANSWER_HEADER, proof] as const])
          ]
          const headers: Array<readonly [string, string]> = [...others]
          headers.splice(Math.min(at, headers.length), 0, ...own)
          expect(Forward.parseAnswerHead(headOf(`HTTP/1.1 ${status} Whatever`, headers))).toEqual({
            status,
            length,
            proof
          })
        }
      )
    )
  })

  it("refuses two lengths, a length and chunks, another encoding, a length over the bound, none, a bad status line or header", () => {
    const ok = ["Content-Length", "2"] as const
    const refused: ReadonlyArray<string> = [
      headOf("HTTP/1.1 200 OK", [ok, ["content-length", "2"]]),
      headOf("HTTP/1.1 200 OK", [ok, ["Transfer-Encoding", "chunked"]]),
      headOf("HTTP/1.1 200 OK", [["Transfer-Encoding", "gzip, chunked"]]),
      headOf("HTTP/1.1 200 OK", [["Transfer-Encoding", "chunked"], ["Transfer-Encoding", "chunked"]]),
      headOf("HTTP/1.1 200 OK", [["Content-Length", String(Forward.MAX_ANSWER_BYTES + 1)]]),
      headOf("HTTP/1.1 200 OK", [["Content-Length", "-1"]]),
      headOf("HTTP/1.1 200 OK", [["Content-Length", "0x10"]]),
      headOf("HTTP/1.1 200 OK", [["Content-Type", "application/json"]]),
      headOf("HTTP/2 200", [ok]),
      headOf("HTTP/1.1 20 OK", [ok]),
      headOf("ICY 200 OK", [ok]),
      headOf("HTTP/1.1 200 OK", [ok, ["bad name", "x"]]),
      headOf("HTTP/1.1 200 OK", [ok, [" folded", "x"]]),
      "HTTP/1.1 200 OK\r\nContent-Length 2"
    ]
    for (const head of refused) expect(typeof Forward.parseAnswerHead(head), head).toBe("string")
  })

  it("a proof given twice is none", () => {
    const parsed = Forward.parseAnswerHead(
      headOf("HTTP/1.1 200 OK", [["Content-Length", "2"], [GuardAuth.ANSWER_HEADER, "a"], [
        GuardAuth.ANSWER_HEADER,
        "a"
      ]])
    )
    expect(parsed).toEqual({ status: 200, length: 2, proof: undefined })
  })
})

describe("exchange", () => {
  it(
    "sends the proof and the body; an answer with a length or in chunks, in any pieces, arrives byte for byte",
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.string({ maxLength: 3000 }),
          fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 6 }),
          fc.boolean(),
          async (text, pieces, chunked) => {
            const answer = Buffer.from(JSON.stringify({ reason: text }), "utf8")
            let seen: { auth: string | undefined; body: string } | undefined
            const url = await httpServer((req, body, res) => {
              seen = { auth: req.headers[GuardAuth.AUTH_HEADER] as string | undefined, body: body.toString("utf8") }
              res.setHeader(GuardAuth.ANSWER_HEADER, "proof-of-it")
              if (!chunked) res.setHeader("content-length", answer.length)
              // Written in pieces: without a length node:http sends each as a chunk.
              let at = 0
              for (const n of pieces) {
                if (at >= answer.length) break
                res.write(answer.subarray(at, at + n))
                at += n
              }
              res.end(answer.subarray(at))
            })
            const sent = JSON.stringify({ hook_event_name: "PreToolUse", text })
            const { answer: got, nonce } = await post(url, sent)
            expect(got.status).toBe(200)
            expect(got.proof).toBe("proof-of-it")
            expect(Buffer.compare(got.body, answer)).toBe(0)
            expect(seen?.body).toBe(sent)
            const proof = GuardAuth.parse(seen?.auth)
            expect(proof?.nonce).toBe(nonce)
            const verified = GuardAuth.verifyRequest(
              TOKEN,
              proof!,
              { method: "POST", path: "/hook" },
              Buffer.from(sent)
            )
            expect(verified).toBe(true)
            await closers.pop()!()
          }
        ),
        { numRuns: 25 }
      )
    },
    60_000
  )

  it("an answer longer or shorter than it declares, cut off, over the bound, malformed or not HTTP fails", async () => {
    const head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
    const cases: ReadonlyArray<readonly [string, Buffer]> = [
      ["longer than its declared length", Buffer.from(head + "{}{}")],
      ["closed before the whole answer", Buffer.from(head + "{")],
      ["closed before an answer", Buffer.from("HTTP/1.1 200 OK\r\nContent-Len")],
      ["not HTTP/1.1", Buffer.from("SSH-2.0-OpenSSH_9.6\r\n\r\n")],
      [
        "chunks are malformed",
        Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n")
      ],
      ["chunks are malformed", Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}xx0\r\n\r\n")],
      [
        "closed before the whole answer",
        Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n")
      ],
      [
        `larger than ${Forward.MAX_ANSWER_BYTES} bytes`,
        Buffer.from(
          `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${(Forward.MAX_ANSWER_BYTES + 1).toString(16)}\r\n`
        )
      ],
      ["head is too large", Buffer.from(`HTTP/1.1 200 OK\r\nX: ${"a".repeat(Forward.MAX_ANSWER_HEAD_BYTES)}\r\n\r\n`)]
    ]
    for (const [why, bytes] of cases) {
      const url = await rawServer(bytes)
      await expect(post(url, "{}"), why).rejects.toThrow(why)
    }
  }, 60_000)

  it("an answer in chunks past the bound fails while it is read", async () => {
    const url = await httpServer((_req, _body, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      const piece = "x".repeat(64 * 1024)
      for (let i = 0; i < 20; i++) res.write(piece)
      res.end()
    })
    await expect(post(url, "{}")).rejects.toThrow(`larger than ${Forward.MAX_ANSWER_BYTES} bytes`)
  })

  it("the signal aborts an answer that does not end", async () => {
    const url = await rawServer(Buffer.from("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{"), { close: false })
    await expect(post(url, "{}", 300)).rejects.toThrow("aborted")
  })
})
