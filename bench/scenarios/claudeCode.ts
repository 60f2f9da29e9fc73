/**
 * `claude_code.archive`: a first `archive` of one 3 MB, 1,900-line Claude Code
 * transcript (the test fixtures' realistic turns: thinking, text, tool_use and
 * tool_result lines) into a fresh journal on the filesystem adapter, in lines
 * per second, against `JSON.parse` + SHA-256 of the same lines. The goal is on
 * the wall time of one archive: under 2 s.
 */
import { sha256 } from "@noble/hashes/sha2.js"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Archive } from "../../packages/claude-code/src/index.ts"
import { longTranscript, mainTurn } from "../../packages/claude-code/test/Fixtures.ts"
import { loadNode } from "../lib/adapters.ts"
import { journalRuntime } from "../lib/env.ts"
import {
  type Figure,
  interleaveMany,
  median,
  notRun,
  type RunOptions,
  type Scenario,
  throughputFigure
} from "../lib/harness.ts"

const NAME = "claude_code.archive"
const BASELINE = "JSON.parse + SHA-256 of the same lines"
const GOAL = { op: "<=", target: 2000, on: "ms per archive" } as const

/**
 * Writes the archived transcript (1,900 lines, 3 MB) under `dir/projects`, as a
 * Claude Code projects directory: `source` is what `Archive.archive` reads.
 */
export const writeArchiveSource = (dir: string): { readonly source: string; readonly bytes: Buffer } => {
  const source = path.join(dir, "projects")
  const project = path.join(source, "-home-dev-shop")
  fs.mkdirSync(project, { recursive: true })
  const bytes = longTranscript(1900, 3_000_000)
  fs.writeFileSync(path.join(project, "7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b.jsonl"), bytes)
  return { source, bytes }
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const node = await loadNode()
  if (!node.ok) return [notRun(NAME, "lines/s", BASELINE, GOAL, node.why)]
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-bench-cc-"))
  try {
    const { bytes, source } = writeArchiveSource(dir)
    const project = path.join(source, "-home-dev-shop")
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
    const figure = throughputFigure(
      NAME,
      "lines/s",
      BASELINE,
      { subject: s["archive"]!, baseline: s["parse"]! },
      null,
      where
    )
    return [{ ...figure, goal: GOAL, goal_value: ms, met: ms <= GOAL.target }]
  } finally {
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** `claude_code.archive`. */
export const claudeCodeArchive: Scenario = { name: "claude_code", figures: [NAME], run }

const FOLLOW = "claude_code.follow"
const FOLLOW_BASELINE = "the appended line's own bytes"
const FOLLOW_GOAL = { op: "<=", target: 4 } as const

// Bytes this process has read through read calls of any kind so far (Linux).
const rchar = (): number => {
  const m = /^rchar:\s*(\d+)$/m.exec(fs.readFileSync("/proc/self/io", "utf8"))
  if (m === null) throw new Error("no rchar in /proc/self/io")
  return Number(m[1])
}

/**
 * `claude_code.follow`: `Archive.follow` on one long transcript (20,000 lines,
 * 9.7 MB; `--quick` 4,000 lines, 2 MB) while lines of about 450 bytes are
 * appended one at a time, each waited for: bytes read (`rchar` of
 * `/proc/self/io`, so every read of the process counts) per appended line
 * against the line's own size, goal ≤ 4×; CPU time per appended line in the note.
 */
const runFollow = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const node = await loadNode()
  if (!node.ok) return [notRun(FOLLOW, "bytes/line", FOLLOW_BASELINE, FOLLOW_GOAL, node.why)]
  if (!fs.existsSync("/proc/self/io")) {
    return [notRun(FOLLOW, "bytes/line", FOLLOW_BASELINE, FOLLOW_GOAL, "no /proc/self/io here")]
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-bench-ccf-"))
  const rt = journalRuntime(node.value(path.join(dir, "journal")))
  try {
    const source = path.join(dir, "projects")
    const project = path.join(source, "-home-dev-shop")
    fs.mkdirSync(project, { recursive: true })
    const file = path.join(project, "7f3c2a10-5b6e-4d8f-9a01-2c3d4e5f6a7b.jsonl")
    const [lines, bytes, appends] = options.quick ? [4_000, 2_000_000, 20] : [20_000, 9_700_000, 100]
    fs.writeFileSync(file, longTranscript(lines, bytes))
    let journaled = 0
    const fiber = rt.runFork(Archive.follow({ source }, (report) =>
      Effect.sync(() => {
        for (const f of report.files) journaled += f.lines
      })))
    const until = async (n: number) => {
      const t0 = performance.now()
      while (journaled < n) {
        if (performance.now() - t0 > 120_000) throw new Error(`follow journaled ${journaled} of ${n} lines`)
        await new Promise((r) => setTimeout(r, 5))
      }
    }
    await until(lines)
    const turn = mainTurn(9_000, 20)
    const read0 = rchar()
    const cpu0 = process.cpuUsage()
    let appended = 0
    for (let i = 0; i < appends; i++) {
      const line = turn[i % turn.length]! + "\n"
      fs.appendFileSync(file, line)
      appended += Buffer.byteLength(line)
      await until(lines + i + 1)
    }
    const cpu = process.cpuUsage(cpu0)
    const read = rchar() - read0
    await rt.runPromise(Fiber.interrupt(fiber))
    const perLine = read / appends
    const lineBytes = appended / appends
    const cpuMs = (cpu.user + cpu.system) / 1000 / appends
    const ratio = perLine / lineBytes
    options.log(
      `  ${FOLLOW}: ${perLine.toFixed(0)} bytes read per line of ${lineBytes.toFixed(0)} bytes, ${
        cpuMs.toFixed(2)
      } ms CPU per line`
    )
    return [{
      name: FOLLOW,
      value: perLine,
      unit: "bytes read/line",
      baseline: FOLLOW_BASELINE,
      baseline_value: lineBytes,
      ratio,
      goal: FOLLOW_GOAL,
      met: ratio <= FOLLOW_GOAL.target,
      note:
        `${lines.toLocaleString("en-US")}-line, ${
          (bytes / 1e6).toFixed(1)
        } MB transcript, ${appends} lines appended one at a time; ` +
        `${cpuMs.toFixed(2)} ms CPU per appended line (journal append included)`
    }]
  } finally {
    await rt.dispose()
    fs.rmSync(dir, { recursive: true, force: true })
  }
}

/** `claude_code.follow`. */
export const claudeCodeFollow: Scenario = { name: "claude_code.follow", figures: [FOLLOW], run: runFollow }
