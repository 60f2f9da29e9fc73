/**
 * Measures the viewer's live header on a long session: how long the first one
 * takes (a pass over the history with its verification), and how long after a
 * write by another process (this one; the server is a process of its own) the
 * redrawn header with the new count arrives on a page's event stream, and the
 * server's peak resident memory. Not part of the test run; the bench log
 * records its output.
 *
 *   node_modules/node/bin/node --experimental-strip-types --conditions=@session-journal/source \
 *     packages/cli/test/ServeLiveBench.ts [ENTRIES] [WRITES]
 */
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { BIN } from "./Run.ts"

const count = Number(process.argv[2] ?? "300000")
const writes = Number(process.argv[3] ?? "20")
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-live-bench-"))

const item = (i: number): SessionJournal.WriteItem =>
  i % 4 === 0
    ? { _tag: "Other", kind: "message", payload: { role: "user", content: `turn ${i}: ${"lorem ipsum ".repeat(12)}` } }
    : {
      _tag: "Tool",
      params: {
        tool_name: `tool_${i % 12}`,
        server_id: "tools",
        agent_id: "coder",
        bytes_read: i % 5000,
        bytes_written: i % 700,
        delegation_depth: 0,
        allowed: i % 40 !== 1
      }
    }

const layer = SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: dir })))

const write = (from: number, n: number) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      for (let i = from; i < from + n; i += 1000) {
        yield* j.writeAll("big", Array.from({ length: Math.min(1000, from + n - i) }, (_, k) => item(i + k)))
      }
    }).pipe(Effect.provide(layer))
  )

const peakKiB = (pid: number): number =>
  Number(/VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))![1])

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const main = async () => {
  await write(0, count)
  const server = spawn(process.execPath, [BIN, "--dir", dir, "serve", "--port", "0"], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  const base = await new Promise<string>((resolve) => {
    let out = ""
    server.stdout!.on("data", (b: Buffer) => {
      out += b.toString("utf8")
      const m = /http:\/\/[0-9.:]+/.exec(out)
      if (m !== null) resolve(m[0])
    })
  })
  // The newest entry count an overview event carried, and who waits for which.
  let entries = -1
  const waiting: Array<[number, () => void]> = []
  let buffer = ""
  const opened = performance.now()
  let first = -1
  const req = http.get(`${base}/sessions/big/events?from=${count}`, (res) => {
    res.on("data", (b: Buffer) => {
      buffer += b.toString("utf8")
      let at: number
      while ((at = buffer.indexOf("\n\n")) >= 0) {
        const event = buffer.slice(0, at)
        buffer = buffer.slice(at + 2)
        if (!event.startsWith("event: overview")) continue
        const n = Number(/"entries":(\d+)/.exec(event)?.[1] ?? "-1")
        if (first < 0) first = performance.now() - opened
        entries = Math.max(entries, n)
        for (const [want, done] of waiting.splice(0)) {
          if (entries >= want) done()
          else waiting.push([want, done])
        }
      }
    })
  })
  const until = (want: number) => new Promise<void>((done) => (entries >= want ? done() : waiting.push([want, done])))
  await until(count)
  const latencies: Array<number> = []
  for (let i = 0; i < writes; i++) {
    await write(count + i, 1)
    const t = performance.now()
    await until(count + i + 1)
    latencies.push(performance.now() - t)
  }
  const peak = peakKiB(server.pid!)
  req.destroy()
  server.kill("SIGTERM")
  console.log(JSON.stringify({
    entries: count,
    first_live_header_ms: Math.round(first),
    write_to_header_ms: {
      median: Math.round(median(latencies)),
      min: Math.round(Math.min(...latencies)),
      max: Math.round(Math.max(...latencies))
    },
    writes,
    server_peak_rss_kib: peak,
    load_average: os.loadavg().map((x) => Math.round(x * 10) / 10)
  }))
  fs.rmSync(dir, { recursive: true, force: true })
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
