/**
 * `cli.startup`: how long the built `session-journal` command takes, start of the
 * process to its exit, as agent hooks call it once per tool call. Two commands:
 * `record` into an existing session on the filesystem (process start, the lock, the
 * checkpoint load, the append and its fdatasync, the release) and `--help` (process
 * start and the command tree alone). Baseline: `node -e 0` on the same Node, in the
 * same rounds (each round runs the three, rotating which goes first).
 */
import { spawnSync } from "node:child_process"
import { loadCli, nodeEnv } from "../lib/adapters.ts"
import { removeDir, tempDir } from "../lib/env.ts"
import { type Figure, type Goal, interleaveMany, median, meets, notRun, type RunOptions, type Sample, type Scenario } from "../lib/harness.ts"

const GOAL: Goal = { op: "<=", target: 150, on: "wall ms" }
const BASELINE = "node -e 0 (same Node)"

const RECORD_ARGS = [
  "record",
  "hook-session",
  "--tool",
  "read_file",
  "--server",
  "srv-1",
  "--agent",
  "agent-1",
  "--read",
  "512",
  "--written",
  "0",
  "--depth",
  "0"
]

// The built command, whatever the harness itself was started with: the workspace's
// source condition would make the bin load the TypeScript sources instead.
const builtEnv = (dir: string): NodeJS.ProcessEnv => {
  const env = nodeEnv({ SESSION_JOURNAL_DIR: dir })
  const options = (env["NODE_OPTIONS"] ?? "").split(/\s+/).filter((o) => o !== "" && !o.includes("@session-journal/source"))
  if (options.length === 0) delete env["NODE_OPTIONS"]
  else env["NODE_OPTIONS"] = options.join(" ")
  return env
}

const timed = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv): Sample => {
  const t0 = performance.now()
  const out = spawnSync(command, args, { encoding: "utf8", env, stdio: ["ignore", "pipe", "pipe"] })
  const ms = performance.now() - t0
  if (out.status !== 0) throw new Error(`${command} ${args.join(" ")} exited ${out.status}: ${(out.stderr || out.stdout).slice(0, 400)}`)
  return { ops: 1, ms }
}

const figure = (name: string, subject: ReadonlyArray<Sample>, baseline: ReadonlyArray<Sample>, note: string): Figure => {
  const value = median(subject.map((s) => s.ms))
  return {
    name,
    value,
    unit: "ms",
    baseline: BASELINE,
    baseline_value: median(baseline.map((s) => s.ms)),
    ratio: median(subject.map((s, i) => s.ms / baseline[i]!.ms)),
    goal: GOAL,
    goal_value: value,
    met: meets(GOAL, value),
    note
  }
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const cli = loadCli()
  if (!cli.ok) return ["cli.startup.record", "cli.startup.help"].map((n) => notRun(n, "ms", BASELINE, GOAL, cli.why))
  const dir = tempDir("startup")
  try {
    const env = builtEnv(dir)
    // The session exists before the first measured run, as it does for a hook.
    timed(cli.value, RECORD_ARGS, env)
    const rounds = options.quick ? 5 : 21
    const s = await interleaveMany(rounds, [
      { name: "record", run: async () => timed(cli.value, RECORD_ARGS, env) },
      { name: "help", run: async () => timed(cli.value, ["--help"], env) },
      { name: "node", run: async () => timed(process.execPath, ["-e", "0"], env) }
    ], { log: options.log, label: "cli.startup", warmup: true })
    const where = `${rounds} rounds, one process per side per round (after one warm-up each), wall time of spawnSync; ` +
      `goal on the median wall time, ratio against node -e 0`
    return [
      figure("cli.startup.record", s["record"]!, s["node"]!, `session-journal ${RECORD_ARGS.slice(0, 2).join(" ")} … into an existing session on the filesystem (${where})`),
      figure("cli.startup.help", s["help"]!, s["node"]!, `session-journal --help (${where})`)
    ]
  } finally {
    removeDir(dir)
  }
}

/** `cli.startup.record` and `cli.startup.help`. */
export const cliStartup: Scenario = { name: "cli.startup", figures: ["cli.startup.record", "cli.startup.help"], run }
