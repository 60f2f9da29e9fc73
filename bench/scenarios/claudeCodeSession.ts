/**
 * `claude_code.session.events`: lines through the session driver of
 * `Session` of `@session-journal/claude-code`, from a stand-in for the CLI (`cat` of
 * 20,000 stream-json lines of about 560 bytes, the shapes the CLI writes:
 * assistant text and tool_use, tool results, notifications; `--quick` 5,000):
 * each line journaled on the filesystem adapter (one durable append per stdout
 * chunk), decoded, folded into the state and published, in lines per second
 * until the last event, against spawning the same process and `JSON.parse`-ing
 * its stdout lines raw. Goal: ratio ≥ 0.5. The note gives the journal's cost per
 * line (the same run over the in-memory journal, the difference per line) and
 * its bytes per line, and the latency the driver adds from a line on the
 * stand-in's stdout to its event (100 lines 10 ms apart, each stamped with the
 * time it was written; the raw reader's latency subtracted).
 */
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import type { ChildProcessSpawner } from "effect/process/ChildProcessSpawner"
import * as Stream from "effect/Stream"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { Session } from "../../packages/claude-code/src/index.ts"
import { Persistence, SessionJournal } from "../../packages/core/src/index.ts"
import { type FsLayer, loadNode, repoRoot } from "../lib/adapters.ts"
import { removeDir, tempDir } from "../lib/env.ts"
import {
  type Figure,
  interleaveMany,
  median,
  notRun,
  type RunOptions,
  type Sample,
  type Scenario,
  throughputFigure
} from "../lib/harness.ts"

const NAME = "claude_code.session.events"
const BASELINE = "spawn the same process, split its stdout and JSON.parse each line"
const GOAL = { op: ">=", target: 0.5 } as const

const platformNode = async (): Promise<Layer.Layer<ChildProcessSpawner>> => {
  // The cli package declares @effect/platform-node; resolve it from there.
  const require = createRequire(path.join(repoRoot, "packages", "cli", "package.json"))
  const mod = await import(pathToFileURL(require.resolve("@effect/platform-node/NodeServices")).href) as {
    readonly layer: Layer.Layer<ChildProcessSpawner>
  }
  return mod.layer
}

const sid = "5b0c1f3e-8a2d-4c6b-9e71-0d4f2a8b6c13"
const filler = (i: number, n: number) => `line ${i}: ` + "the model explains what it found in the repository ".repeat(n)

/** The i-th line of a stand-in session: the shapes the CLI writes, about 560 bytes. */
const line = (i: number): string => {
  const uuid = `00000000-0000-4000-8000-${i.toString(16).padStart(12, "0")}`
  switch (i % 4) {
    case 0:
      return JSON.stringify({
        type: "assistant",
        message: {
          id: `msg_${i >> 2}`,
          type: "message",
          role: "assistant",
          model: "claude-opus-5-5",
          content: [{ type: "text", text: filler(i, 6) }],
          stop_reason: null,
          usage: { input_tokens: 10, output_tokens: 1 }
        },
        parent_tool_use_id: null,
        session_id: sid,
        uuid
      })
    case 1:
      return JSON.stringify({
        type: "assistant",
        message: {
          id: `msg_${i >> 2}`,
          type: "message",
          role: "assistant",
          model: "claude-opus-5-5",
          content: [{
            type: "tool_use",
            id: `toolu_${i}`,
            name: "Bash",
            input: { command: `grep -rn thing src/${i}`, description: "search" }
          }],
          stop_reason: null,
          usage: { input_tokens: 10, output_tokens: 1 }
        },
        parent_tool_use_id: null,
        session_id: sid,
        uuid
      })
    case 2:
      return JSON.stringify({
        type: "user",
        message: {
          role: "user",
          content: [{ tool_use_id: `toolu_${i - 1}`, type: "tool_result", content: filler(i, 4), is_error: false }]
        },
        parent_tool_use_id: null,
        session_id: sid,
        uuid,
        tool_use_result: { stdout: filler(i, 1), stderr: "", interrupted: false }
      })
    default:
      return JSON.stringify({
        type: "system",
        subtype: "notification",
        key: `k${i}`,
        text: filler(i, 8),
        session_id: sid,
        uuid
      })
  }
}

/** Runs an executable and JSON.parses its stdout lines; resolves with the count, or latencies of stamped lines. */
const rawRead = (exe: string, onLine?: (value: { t?: number }) => void): Promise<number> =>
  new Promise((resolve, reject) => {
    const child = spawn(exe, [], { stdio: ["ignore", "pipe", "inherit"] })
    let rest = ""
    let count = 0
    child.stdout.setEncoding("utf8")
    child.stdout.on("data", (chunk: string) => {
      const text = rest + chunk
      let start = 0
      for (let nl = text.indexOf("\n"); nl !== -1; start = nl + 1, nl = text.indexOf("\n", start)) {
        const value = JSON.parse(text.slice(start, nl)) as { t?: number }
        onLine?.(value)
        count++
      }
      rest = text.slice(start)
    })
    child.on("error", reject)
    child.on("close", () => resolve(count))
  })

const nowMs = () => performance.timeOrigin + performance.now()

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const node = await loadNode()
  if (!node.ok) return [notRun(NAME, "lines/s", BASELINE, GOAL, node.why)]
  const services = await platformNode()
  const dir = tempDir("ccs")
  const n = options.quick ? 5_000 : 20_000
  const rounds = options.quick ? 3 : 5
  const data = path.join(dir, "lines.jsonl")
  let bytes = 0
  {
    const out: Array<string> = []
    for (let i = 0; i < n; i++) out.push(line(i) + "\n")
    const text = out.join("")
    bytes = Buffer.byteLength(text)
    fs.writeFileSync(data, text)
  }
  const exe = path.join(dir, "fake-claude")
  // The driver passes the protocol's arguments; the stand-in ignores them.
  fs.writeFileSync(exe, `#!/bin/sh\nexec cat '${data}'\n`, { mode: 0o755 })
  const fsRoot = path.join(dir, "journal")
  const runtimeOf = (persistence: FsLayer | null) =>
    ManagedRuntime.make(Layer.mergeAll(
      SessionJournal.layer().pipe(
        Layer.provide(persistence === null ? Persistence.layerMemory() : persistence(fsRoot))
      ),
      services
    ))
  const onFs = runtimeOf(node.value)
  const inMemory = runtimeOf(null)
  let sessions = 0
  /** Drives one session over the stand-in `claude`; the number of lines seen when the events end. */
  const drive = (claude: string, onEvent?: (e: Session.Event) => void) =>
    Effect.gen(function*() {
      const session = yield* Session.make({ journalSession: `bench-${sessions++}`, claude, eventsCapacity: 4096 })
      const events = yield* session.subscribe
      let seen = 0
      yield* Stream.runForEach(events, (e) =>
        Effect.sync(() => {
          seen += e._tag === "Missed" ? e.count : 1
          onEvent?.(e)
        }))
      return seen
    }).pipe(Effect.scoped)
  const timed = (rt: typeof onFs) => async (): Promise<Sample> => {
    const t0 = performance.now()
    const seen = await rt.runPromise(drive(exe))
    const ms = performance.now() - t0
    if (seen !== n) throw new Error(`the driver saw ${seen} of ${n} lines`)
    return { ops: n, ms }
  }
  try {
    const s = await interleaveMany(rounds, [
      { name: "driver", run: timed(onFs) },
      { name: "memory", run: timed(inMemory) },
      {
        name: "raw",
        run: async () => {
          const t0 = performance.now()
          const count = await rawRead(exe)
          if (count !== n) throw new Error(`read ${count} of ${n} lines`)
          return { ops: n, ms: performance.now() - t0 }
        }
      }
    ], { log: options.log, label: NAME })
    const journalBytes = du(fsRoot)
    const fsRate = median(s["driver"]!.map((x) => x.ops / (x.ms / 1000)))
    const memRate = median(s["memory"]!.map((x) => x.ops / (x.ms / 1000)))
    const journalUs = (1e6 / fsRate) - (1e6 / memRate)

    // Latency: 100 lines written 10 ms apart, each stamped with its write time.
    const stamped = path.join(dir, "stamped.js")
    fs.writeFileSync(
      stamped,
      `let i = 0; const tick = () => { process.stdout.write(JSON.stringify({ type: "system", subtype: "notification", n: i, t: performance.timeOrigin + performance.now() }) + "\\n"); if (++i < 100) setTimeout(tick, 10) }; tick()\n`
    )
    const stampedExe = path.join(dir, "stamped-claude")
    fs.writeFileSync(stampedExe, `#!/bin/sh\nexec '${process.execPath}' '${stamped}'\n`, { mode: 0o755 })
    const driverLatency: Array<number> = []
    const memoryLatency: Array<number> = []
    const rawLatency: Array<number> = []
    const stampedInto = (into: Array<number>) => (e: Session.Event) => {
      if (e._tag !== "Message" || e.message._tag !== "System") return
      const t = (e.message as unknown as { t?: number }).t
      if (typeof t === "number") into.push(nowMs() - t)
    }
    await onFs.runPromise(drive(stampedExe, stampedInto(driverLatency)))
    await inMemory.runPromise(drive(stampedExe, stampedInto(memoryLatency)))
    await rawRead(stampedExe, (v) => {
      if (typeof v.t === "number") rawLatency.push(nowMs() - v.t)
    })
    const p = (xs: Array<number>, q: number) =>
      [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))]!
    const added = median(driverLatency) - median(rawLatency)
    options.log(
      `  ${NAME}: journal ${journalUs.toFixed(1)} µs and ${
        (journalBytes / (n * (rounds + 1))).toFixed(0)
      } bytes per line; ` +
        `latency driver median ${median(driverLatency).toFixed(2)} ms (p99 ${p(driverLatency, 0.99).toFixed(2)}), raw ${
          median(rawLatency).toFixed(2)
        } ms`
    )
    const note =
      `${n.toLocaleString("en-US")} lines, ${(bytes / 1e6).toFixed(1)} MB (${
        (bytes / n).toFixed(0)
      } bytes a line), ${rounds} rounds, ` +
      `spawn included on both sides; over the in-memory journal ${
        fmtRate(memRate)
      } lines/s, so the filesystem journal costs ` +
      `${journalUs.toFixed(1)} µs and ${(journalBytes / (n * (rounds + 1))).toFixed(0)} bytes per line; ` +
      `added latency line → event ${added.toFixed(2)} ms median (driver ${median(driverLatency).toFixed(2)} ms, p99 ${
        p(driverLatency, 0.99).toFixed(2)
      } ms; over the in-memory journal ${median(memoryLatency).toFixed(2)} ms; ` +
      `raw reader ${median(rawLatency).toFixed(2)} ms; ${driverLatency.length} lines 10 ms apart)`
    return [throughputFigure(NAME, "lines/s", BASELINE, { subject: s["driver"]!, baseline: s["raw"]! }, GOAL, note)]
  } finally {
    await onFs.dispose()
    await inMemory.dispose()
    removeDir(dir)
  }
}

const fmtRate = (r: number) => Math.round(r).toLocaleString("en-US")

/** Bytes of the files under a directory. */
const du = (dir: string): number => {
  let total = 0
  const visit = (d: string) => {
    for (const entry of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, entry.name)
      if (entry.isDirectory()) visit(p)
      else if (entry.isFile()) total += fs.statSync(p).size
    }
  }
  if (fs.existsSync(dir)) visit(dir)
  return total
}

/** `claude_code.session.events`. */
export const claudeCodeSessionEvents: Scenario = { name: NAME, figures: [NAME], run }
