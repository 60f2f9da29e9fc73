/**
 * Compares builds of the command on one verify: each round runs `verify <id> --json`
 * with every given build (a copy of `packages/cli/dist/bin`, with a package.json of
 * `{"type":"module"}`) and the raw baseline of `cli.verify` (`lib/rawVerify.ts`),
 * rotating the order, and prints entries per CPU-second (user + system of the process
 * doing the work): on a shared machine wall time moves with everyone else's load.
 *
 *   node --conditions=@session-journal/source bench/verify-builds.ts ROOT ROUNDS BUILD_DIR...
 *
 * ROOT is a journal directory holding the session `bench-history` (as `lib/history.ts`
 * writes it).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { NodeSha256 } from "../packages/node/src/index.ts"
import { parseAndHashTwice } from "./lib/rawVerify.ts"
const root = process.argv[2]!
const id = "bench-history"
const rounds = Number(process.argv[3] ?? 3)
const bins = process.argv.slice(4)
const dir = `${root}/${id}`
const segments = fs.readdirSync(dir).filter((f) => f.endsWith(".jsonl")).sort().map((f) => `${dir}/${f}`)
// Rates on CPU time (user + system of the process doing the work): the machine is
// shared, and wall time moves with everyone else's load.
const sides: Array<{ name: string; run: () => { n: number; ms: number } }> = bins.map((b) => ({
  name: b,
  run: () => {
    const out = spawnSync(
      "/usr/bin/time",
      ["-f", "CPU %U %S", process.execPath, `${b}/session-journal.js`, "verify", id, "--json"],
      { encoding: "utf8", env: { ...process.env, SESSION_JOURNAL_DIR: root, NODE_OPTIONS: "" }, maxBuffer: 1 << 26 }
    )
    if (out.status !== 0) throw new Error(out.stderr)
    const m = /CPU ([0-9.]+) ([0-9.]+)/.exec(out.stderr)!
    return { n: JSON.parse(out.stdout).sessions[0].entries_checked, ms: (Number(m[1]) + Number(m[2])) * 1000 }
  }
}))
sides.push({
  name: "baseline",
  run: () => {
    const c0 = process.cpuUsage()
    const r = parseAndHashTwice(segments, NodeSha256.digest)
    const c = process.cpuUsage(c0)
    return { n: r.count, ms: (c.user + c.system) / 1000 }
  }
})
const rate: Record<string, number[]> = {}
for (const s of sides) rate[s.name] = []
for (let r = 0; r < rounds; r++) {
  for (let k = 0; k < sides.length; k++) {
    const s = sides[(r + k) % sides.length]!
    const x = s.run()
    rate[s.name]!.push(x.n / x.ms * 1000)
  }
  const ratio = (name: string) => (rate[name]![r]! / rate["baseline"]![r]!).toFixed(2)
  console.log(
    `round ${r + 1}: ` +
      sides.map((s) => `${s.name} ${Math.round(rate[s.name]![r]!)}/s (ratio ${ratio(s.name)})`).join(", ")
  )
}
const med = (xs: ReadonlyArray<number>): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 === 1 ? s[s.length >> 1]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2
}
for (const s of sides) {
  const ratios = rate[s.name]!.map((v, i) => v / rate["baseline"]![i]!)
  console.log(`${s.name}: median ${Math.round(med(rate[s.name]!))}/s, median ratio ${med(ratios).toFixed(2)}`)
}
