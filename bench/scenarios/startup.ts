/**
 * `cli.startup`: how long the built `session-journal` command takes, start of the
 * process to its exit, as agent hooks call it once per tool call. Three commands:
 * `record` into an existing short session on the filesystem (process start, the
 * lock, the checkpoint load, the append and its fdatasync, the release), the same
 * into a long session whose ring is full (5,000 entries, default caps: the
 * checkpoint holds 4,096 entries, which every load decodes and verifies), and
 * `--help` (process start and the command tree alone). Baseline: `node -e 0` on the
 * same Node, in the same rounds (each round runs the four, rotating which goes
 * first).
 */
import { spawnSync } from "node:child_process"
import { loadCli, nodeEnv } from "../lib/adapters.ts"
import { removeDir, tempDir } from "../lib/env.ts"
import {
  type Figure,
  type Goal,
  interleaveMany,
  median,
  meets,
  notRun,
  type RunOptions,
  type Sample,
  type Scenario
} from "../lib/harness.ts"

const FIGURES = ["cli.startup.record", "cli.startup.record_full", "cli.startup.help"]
const GOAL: Goal = { op: "<=", target: 150, on: "wall ms" }
const BASELINE = "node -e 0 (same Node)"

const FULL_ENTRIES = 5_000

const recordArgs = (id: string) => [
  "record",
  id,
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
  const options = (env["NODE_OPTIONS"] ?? "").split(/\s+/).filter((o) =>
    o !== "" && !o.includes("@session-journal/source")
  )
  if (options.length === 0) delete env["NODE_OPTIONS"]
  else env["NODE_OPTIONS"] = options.join(" ")
  return env
}

const timed = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, input?: string): Sample => {
  const t0 = performance.now()
  const out = spawnSync(command, args, { encoding: "utf8", env, input, maxBuffer: 64 * 2 ** 20 })
  const ms = performance.now() - t0
  if (out.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited ${out.status}: ${(out.stderr || out.stdout).slice(0, 400)}`)
  }
  return { ops: 1, ms }
}

const figure = (
  name: string,
  subject: ReadonlyArray<Sample>,
  baseline: ReadonlyArray<Sample>,
  note: string
): Figure => {
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
  if (!cli.ok) return FIGURES.map((n) => notRun(n, "ms", BASELINE, GOAL, cli.why))
  const dir = tempDir("startup")
  try {
    const env = builtEnv(dir)
    // The sessions exist before the first measured run, as they do for a hook; the
    // long one is written through the command's own `import`.
    timed(cli.value, recordArgs("short-session"), env)
    const lines = Array.from({ length: FULL_ENTRIES }, (_, i) =>
      JSON.stringify({
        tool_name: ["read_file", "write_file", "search"][i % 3],
        server_id: "srv-1",
        agent_id: "agent-1",
        bytes_read: (i * 7919) % 100000,
        bytes_written: (i * 104729) % 50000,
        delegation_depth: i % 4
      }))
    timed(cli.value, ["import", "long-session"], env, lines.join("\n") + "\n")
    const rounds = options.quick ? 5 : 21
    const s = await interleaveMany(rounds, [
      { name: "record", run: async () => timed(cli.value, recordArgs("short-session"), env) },
      { name: "record_full", run: async () => timed(cli.value, recordArgs("long-session"), env) },
      { name: "help", run: async () => timed(cli.value, ["--help"], env) },
      { name: "node", run: async () => timed(process.execPath, ["-e", "0"], env) }
    ], { log: options.log, label: "cli.startup", warmup: true })
    const where =
      `${rounds} rounds, one process per side per round (after one warm-up each), wall time of spawnSync; ` +
      `goal on the median wall time, ratio against node -e 0`
    return [
      figure(
        "cli.startup.record",
        s["record"]!,
        s["node"]!,
        `session-journal record into an existing short session on the filesystem (${where})`
      ),
      figure(
        "cli.startup.record_full",
        s["record_full"]!,
        s["node"]!,
        `session-journal record into a session of ${
          FULL_ENTRIES.toLocaleString("en-US")
        } entries, ring full (default caps)`
      ),
      figure("cli.startup.help", s["help"]!, s["node"]!, `session-journal --help`)
    ]
  } finally {
    removeDir(dir)
  }
}

/** `cli.startup.record`, `cli.startup.record_full` and `cli.startup.help`. */
export const cliStartup: Scenario = { name: "cli.startup", figures: FIGURES, run }
