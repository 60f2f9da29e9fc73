/**
 * Measures `report` on a long session: the command's wall time (Node start-up
 * included) and the report's first paint and load in headless Chromium. Not part
 * of the test run; BENCHMARKS.md records its output.
 *
 *   node_modules/node/bin/node --experimental-strip-types packages/cli/test/ReportBench.ts [ENTRIES]
 *
 * With KEEP=1 the journal directory is kept (its path is printed).
 */
import { SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { launch } from "./Browser.ts"
import { BIN } from "./Run.ts"

const count = Number(process.argv[2] ?? "100000")
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-report-bench-"))
const out = path.join(dir, "big.html")

// Conversation-like traffic: a message every fourth entry (some of them long),
// tool calls over 12 tools with 1 in 40 denied.
const item = (i: number): SessionJournal.WriteItem =>
  i % 4 === 0
    ? {
      _tag: "Other",
      kind: "message",
      payload: {
        role: i % 8 === 0 ? "user" : "assistant",
        content: `turn ${i}: ${"lorem ipsum ".repeat(i % 97 === 0 ? 200 : 12)}`
      }
    }
    : {
      _tag: "Tool",
      params: {
        tool_name: `tool_${i % 12}`,
        server_id: "tools",
        agent_id: i % 5 === 0 ? "reviewer" : "coder",
        bytes_read: (i * 37) % 5000,
        bytes_written: (i * 11) % 700,
        delegation_depth: i % 5 === 0 ? 1 : 0,
        allowed: i % 40 !== 1
      }
    }

const seed = Effect.gen(function*() {
  const j = yield* SessionJournal.SessionJournal
  for (let i = 0; i < count; i += 1000) {
    yield* j.writeAll("big", Array.from({ length: Math.min(1000, count - i) }, (_, k) => item(i + k)))
  }
}).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: dir })))))

const median = (xs: Array<number>) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!

const main = async () => {
  let t = performance.now()
  await Effect.runPromise(seed)
  console.error(`seeded ${count} entries in ${Math.round(performance.now() - t)} ms`)

  // CPU seconds (user + system) of the command say more than wall time on a
  // shared machine; GNU time reports them when it is installed.
  const gnuTime = fs.existsSync("/usr/bin/time")
  const walls: Array<number> = []
  const cpus: Array<number> = []
  let inner = 0
  for (let round = 0; round < 3; round++) {
    t = performance.now()
    const args = [BIN, "--dir", dir, "--json", "report", "big", "--out", out]
    const r = gnuTime
      ? spawnSync("/usr/bin/time", ["-f", "cpu %U %S", process.execPath, ...args], { encoding: "utf8" })
      : spawnSync(process.execPath, args, { encoding: "utf8" })
    walls.push(performance.now() - t)
    if (r.status !== 0) throw new Error(r.stderr)
    inner = JSON.parse(r.stdout).millis
    const cpu = /cpu ([\d.]+) ([\d.]+)/.exec(r.stderr)
    if (cpu !== null) cpus.push((Number(cpu[1]) + Number(cpu[2])) * 1000)
  }
  const size = fs.statSync(out).size

  const chrome = await launch()
  const paints: Array<number> = []
  const loads: Array<number> = []
  try {
    for (let round = 0; round < 3; round++) {
      const page = await chrome.context.newPage()
      await page.goto(pathToFileURL(out).href, { waitUntil: "load", timeout: 120_000 })
      const timing = await page.evaluate(`(() => {
        const paint = performance.getEntriesByName("first-contentful-paint")[0]
        const nav = performance.getEntriesByType("navigation")[0]
        return { paint: paint ? paint.startTime : -1, load: nav ? nav.loadEventEnd : -1, rows: document.querySelectorAll("tr[data-seq]").length }
      })()`) as { paint: number; load: number; rows: number }
      if (timing.rows !== count) throw new Error(`the page holds ${timing.rows} rows, not ${count}`)
      paints.push(timing.paint)
      loads.push(timing.load)
      await page.close()
    }
  } finally {
    await chrome.close()
  }
  console.log(JSON.stringify({
    entries: count,
    report_wall_ms: Math.round(median(walls)),
    report_inner_ms: inner,
    report_cpu_ms: cpus.length === 0 ? null : Math.round(median(cpus)),
    load_average: os.loadavg().map((x) => Math.round(x * 10) / 10),
    file_bytes: size,
    first_contentful_paint_ms: Math.round(median(paints)),
    load_ms: Math.round(median(loads)),
    rounds: 3
  }))
  if (process.env["KEEP"] === undefined) fs.rmSync(dir, { recursive: true, force: true })
  else console.error(`kept ${dir}`)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
