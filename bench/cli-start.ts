/**
 * How long the `session-journal` command takes to start: runs a command (by default
 * `node_modules/.bin/session-journal --help`, the shim a user runs) a number of times
 * after a few warm-up runs, and prints the median, the fastest and the 90th percentile
 * wall time of one run, start of the process to its exit.
 *
 *   node_modules/.bin/node bench/cli-start.ts [--runs N] [-- COMMAND ARGS...]
 */
import { spawnSync } from "node:child_process"
import * as os from "node:os"

const args = process.argv.slice(2)
const dash = args.indexOf("--")
const own = dash < 0 ? args : args.slice(0, dash)
const command = dash < 0 ? ["node_modules/.bin/session-journal", "--help"] : args.slice(dash + 1)
const runsAt = own.indexOf("--runs")
const runs = runsAt >= 0 ? Number(own[runsAt + 1]) : 30
const warmup = 3

const once = (): number => {
  const start = process.hrtime.bigint()
  const ran = spawnSync(command[0]!, command.slice(1), { stdio: ["ignore", "ignore", "pipe"] })
  const ms = Number(process.hrtime.bigint() - start) / 1e6
  if (ran.status !== 0) {
    process.stderr.write(`${command.join(" ")} exited with ${ran.status}: ${ran.stderr}\n`)
    process.exit(1)
  }
  return ms
}

for (let i = 0; i < warmup; i++) once()
const times = Array.from({ length: runs }, once).sort((a, b) => a - b)
const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!
const ms = (n: number) => `${n.toFixed(0)} ms`
process.stdout.write(
  `${command.join(" ")}: median ${ms(at(0.5))}, fastest ${ms(times[0]!)}, p90 ${ms(at(0.9))} ` +
    `(${runs} runs after ${warmup} warm-up; load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")})\n`
)
