/**
 * `claude_code.archive`: a first `archive` of one 3 MB, 1,900-line Claude Code
 * transcript (the test fixtures' realistic turns: thinking, text, tool_use and
 * tool_result lines) into a fresh journal on the filesystem adapter, in lines
 * per second, against `JSON.parse` + SHA-256 of the same lines. The goal is on
 * the wall time of one archive: under 2 s.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Archive } from "../../packages/claude-code/src/index.ts"
import { longTranscript } from "../../packages/claude-code/test/Fixtures.ts"
import { loadNode } from "../lib/adapters.ts"
import { journalRuntime } from "../lib/env.ts"
import { type Figure, interleaveMany, median, notRun, type RunOptions, type Scenario, throughputFigure } from "../lib/harness.ts"

const NAME = "claude_code.archive"
const BASELINE = "JSON.parse + SHA-256 of the same lines"
const GOAL = { op: "<=", target: 2000, on: "ms per archive" } as const

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const node = await loadNode()
  if (!node.ok) return [notRun(NAME, "lines/s", BASELINE, GOAL, node.why)]
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-bench-cc-"))
  try {
    const source = path.join(dir, "projects")
    const project = path.join(source, "-home-dev-shop")
    fs.mkdirSync(project, { recursive: true })
    const bytes = longTranscript(1900, 3_000_000)
    fs.writeFileSync(path.join(project, "7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b.jsonl"), bytes)
    const text = bytes.toString("utf8")
    const lines = text.split("\n").slice(0, -1)
    const encoder = new TextEncoder()
    let sink = 0
    let round = 0
    const rounds = options.quick ? 3 : 7
    const s = await interleaveMany(rounds, [
      {
        name: "archive",
        run: async () => {
          const root = path.join(dir, `journal-${round++}`)
          const t0 = performance.now()
          const rt = journalRuntime(node.value(root))
          try {
            const report = await rt.runPromise(Archive.archive({ source }))
            const file = report.files[0]
            if (file === undefined || file.status !== "created" || file.lines !== lines.length) {
              throw new Error(`archive reported ${JSON.stringify(report.files)}`)
            }
          } finally {
            await rt.dispose()
          }
          const ms = performance.now() - t0
          fs.rmSync(root, { recursive: true, force: true })
          return { ops: lines.length, ms }
        }
      },
      {
        name: "parse",
        run: async () => {
          const t0 = performance.now()
          const content = fs.readFileSync(path.join(project, "7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b.jsonl"), "utf8")
          let count = 0
          let start = 0
          for (let end = content.indexOf("\n"); end !== -1; start = end + 1, end = content.indexOf("\n", start)) {
            const line = content.slice(start, end)
            sink ^= (JSON.parse(line) as { type: string }).type.length
            sink ^= sha256(encoder.encode(line))[0]!
            count++
          }
          return { ops: count, ms: performance.now() - t0 }
        }
      }
    ], { log: options.log, label: NAME })
    if (sink === -1) options.log("unreachable")
    const ms = median(s["archive"]!.map((x) => x.ms))
    const where = `${lines.length.toLocaleString("en-US")} lines, ${(bytes.length / 1e6).toFixed(1)} MB, ` +
      `${s["archive"]!.length} rounds; one archive ${ms.toFixed(0)} ms (service start and stop included)`
    const figure = throughputFigure(NAME, "lines/s", BASELINE, { subject: s["archive"]!, baseline: s["parse"]! }, null, where)
    return [{ ...figure, goal: GOAL, goal_value: ms, met: ms <= GOAL.target }]
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** `claude_code.archive`. */
export const claudeCodeArchive: Scenario = { name: "claude_code", figures: [NAME], run }
