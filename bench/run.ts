/**
 * `pnpm bench`: runs every scenario, prints the table (and with `--json` one JSON
 * line per figure). Options: `--quick` (smaller sizes, under a minute), `--json`,
 * `--only <name>` (a scenario or figure name, or a prefix of names ending before a
 * dot: `claude_code.hook` runs every `claude_code.hook.*`; repeatable).
 */
import * as fs from "node:fs"
import * as os from "node:os"
import type { Figure, Scenario } from "./lib/harness.ts"
import { jsonLine, notRun, table } from "./lib/harness.ts"
import { requireOneCore } from "./lib/oneCore.ts"
import { chatScenario } from "./scenarios/chat.ts"
import { claudeCodeArchive, claudeCodeFollow } from "./scenarios/claudeCode.ts"
import { claudeCodeHook } from "./scenarios/claudeCodeHook.ts"
import { claudeCodeHookInstalled } from "./scenarios/claudeCodeHookInstalled.ts"
import { claudeCodeSessionEvents } from "./scenarios/claudeCodeSession.ts"
import { codexHook } from "./scenarios/codexHook.ts"
import { fsManySessions, fsRecord } from "./scenarios/fs.ts"
import { cliVerify, fsHistory } from "./scenarios/history.ts"
import { mcpProxyCall } from "./scenarios/mcp.ts"
import { memoryRecord } from "./scenarios/memory.ts"
import { memoryOpenSessions } from "./scenarios/openSessions.ts"
import { otelLive } from "./scenarios/otel.ts"
import { pgManySessions, pgRecord } from "./scenarios/pg.ts"
import { policyDecide } from "./scenarios/policy.ts"
import { memoryRss } from "./scenarios/rss.ts"
import { fsSessionsTouched } from "./scenarios/sessions.ts"
import { claudeCodeSessionStore } from "./scenarios/sessionStore.ts"
import { cliStartup } from "./scenarios/startup.ts"
import { tilesVerify } from "./scenarios/tiles.ts"
import { treeAppend } from "./scenarios/tree.ts"

requireOneCore("bench/run.ts")

const scenarios: ReadonlyArray<Scenario> = [
  memoryRecord,
  treeAppend,
  tilesVerify,
  policyDecide,
  fsRecord,
  fsManySessions,
  fsHistory,
  chatScenario,
  memoryRss,
  memoryOpenSessions,
  cliVerify,
  cliStartup,
  claudeCodeArchive,
  claudeCodeFollow,
  claudeCodeSessionEvents,
  claudeCodeSessionStore,
  claudeCodeHook,
  claudeCodeHookInstalled,
  codexHook,
  pgRecord,
  pgManySessions,
  fsSessionsTouched,
  mcpProxyCall,
  otelLive
]

const args = process.argv.slice(2)
const quick = args.includes("--quick")
const json = args.includes("--json")
const only: Array<string> = []
for (let i = 0; i < args.length; i++) {
  if (args[i] === "--only" && args[i + 1] !== undefined) only.push(args[++i]!)
  else if (args[i]!.startsWith("--only=")) only.push(args[i]!.slice("--only=".length))
}
const known = new Set(scenarios.flatMap((s) => [s.name, ...s.figures]))
// `--only a.b` also names every scenario called `a.b.…`.
const named = (o: string, name: string) => o === name || name.startsWith(o + ".")
for (const o of only) {
  if (!known.has(o) && !scenarios.some((s) => named(o, s.name))) {
    process.stderr.write(`unknown scenario ${o}; known: ${[...known].join(", ")}\n`)
    process.exit(2)
  }
}
const selected = only.length === 0
  ? scenarios
  : scenarios.filter((s) => only.some((o) => named(o, s.name)) || s.figures.some((f) => only.includes(f)))

// Progress goes to stderr so that `--json` output on stdout stays one figure per line.
const log = (line: string) => process.stderr.write(line + "\n")

const started = performance.now()
const loadBefore = os.loadavg()
const figures: Array<Figure> = []
for (const scenario of selected) {
  const t0 = performance.now()
  log(`▶ ${scenario.name}${quick ? " (quick)" : ""}`)
  try {
    const produced = await scenario.run({ quick, log })
    const wanted = only.length === 0 || only.some((o) => named(o, scenario.name))
      ? produced
      : produced.filter((f) => only.includes(f.name))
    figures.push(...wanted)
    if (json) { for (const f of wanted) process.stdout.write(jsonLine(f) + "\n") }
  } catch (error) {
    const why = `failed: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}`
    log(`  ${scenario.name} ${why}`)
    if (error instanceof Error && error.stack !== undefined) log(error.stack)
    const failed = scenario.figures.map((name) => notRun(name, "", "", null, why))
    figures.push(...failed)
    if (json) { for (const f of failed) process.stdout.write(jsonLine(f) + "\n") }
  }
  log(`  done in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
}
const cpuModel = (): string => {
  try {
    return fs.readFileSync("/proc/cpuinfo", "utf8").match(/^model name\s*:\s*(.*)$/m)?.[1] ?? os.cpus()[0]?.model ?? "?"
  } catch {
    return os.cpus()[0]?.model ?? "?"
  }
}
const machine = `${os.availableParallelism()} CPUs (${cpuModel()}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ` +
  `${os.type()} ${os.release()}, Node ${process.version}, temp dir ${os.tmpdir()}, load average before/after ` +
  `${loadBefore.map((l) => l.toFixed(1)).join(" ")} / ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`
const summary =
  `\n${table(figures)}\n\n${quick ? "quick run" : "full run"} in ${
    ((performance.now() - started) / 1000).toFixed(1)
  } s; ` +
  `ratios are medians of interleaved per-round ratios.` +
  (quick ?
    ` Quick sizes are smaller than the goals assume (e.g. 20,000 instead of 1,000,000 entries): ` +
    `the goal column is checked, but only a full run says whether a goal is met.` :
    "") +
  `\n${machine}\n`
if (json) log(summary)
else process.stdout.write(summary)
