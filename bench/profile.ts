/**
 * Summarizes V8 CPU profiles (`node --cpu-prof`): the functions with the most self
 * time, and the share of time per package (effect, @noble/hashes, the journal's own
 * packages, node internals, GC). Usage:
 *
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof bench/run.ts --quick --only memory.record
 *   node bench/profile.ts /tmp/prof/*.cpuprofile [--top 25] [--inclusive 'encode|fold']
 *
 * `--inclusive RE` also lists the total (self + callees) time of the journal's own
 * functions whose name matches RE, counted once per stack.
 */
import * as fs from "node:fs"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly hitCount?: number
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly startTime: number
  readonly endTime: number
  readonly samples?: ReadonlyArray<number>
  readonly timeDeltas?: ReadonlyArray<number>
}

const args = process.argv.slice(2)
const topIndex = args.indexOf("--top")
const top = topIndex === -1 ? 25 : Number(args[topIndex + 1])
const incIndex = args.indexOf("--inclusive")
const inclusive = incIndex === -1 ? null : new RegExp(args[incIndex + 1]!)
const files = args.filter((a, i) =>
  !a.startsWith("--") && (topIndex === -1 || i !== topIndex + 1) && (incIndex === -1 || i !== incIndex + 1)
)

const area = (url: string, name: string): string => {
  if (name === "(garbage collector)") return "GC"
  if (name === "(idle)" || name === "(program)") return name
  if (url.includes("/effect/")) return "effect"
  if (url.includes("@noble")) return "@noble/hashes"
  if (/packages\/core\//.test(url)) return "journal core"
  if (/packages\/node\//.test(url)) return "journal node adapter"
  if (/packages\/(cli|ai|postgres)\//.test(url)) return `journal ${url.match(/packages\/(\w+)\//)![1]}`
  if (url.includes("/bench/")) return "bench harness"
  if (url.startsWith("node:") || url === "") return "node internals / native"
  return "other"
}

const short = (url: string): string =>
  url.replace(/^file:\/\//, "").replace(/.*\/node_modules\/\.pnpm\/[^/]+\/node_modules\//, "").replace(
    /.*\/packages\//,
    "packages/"
  )

for (const file of files) {
  const profile = JSON.parse(fs.readFileSync(file, "utf8")) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<number, number>()
  const samples = profile.samples ?? []
  const deltas = profile.timeDeltas ?? []
  for (let i = 0; i < samples.length; i++) self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + (deltas[i] ?? 0))
  const fns = new Map<string, number>()
  const areas = new Map<string, number>()
  let total = 0
  let idle = 0
  for (const [id, us] of self) {
    const n = byId.get(id)!
    const name = n.callFrame.functionName || "(anonymous)"
    const a = area(n.callFrame.url, name)
    if (a === "(idle)") {
      idle += us
      continue
    }
    total += us
    const key = `${name}  ${short(n.callFrame.url)}:${n.callFrame.lineNumber + 1}`
    fns.set(key, (fns.get(key) ?? 0) + us)
    areas.set(a, (areas.get(a) ?? 0) + us)
  }
  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)} %`
  process.stdout.write(
    `\n${file}: ${(total / 1000).toFixed(0)} ms busy, ${(idle / 1000).toFixed(0)} ms idle ` +
      `(main thread waiting, e.g. for I/O in libuv's pool: ${
        ((100 * idle) / (idle + total)).toFixed(0)
      } % of the wall time)\n\nby area (share of busy time):\n`
  )
  for (const [a, us] of [...areas].sort((x, y) => y[1] - x[1])) process.stdout.write(`  ${pct(us)}  ${a}\n`)
  process.stdout.write(`\ntop ${top} functions by self time:\n`)
  for (const [k, us] of [...fns].sort((x, y) => y[1] - x[1]).slice(0, top)) process.stdout.write(`  ${pct(us)}  ${k}\n`)
  if (inclusive !== null) {
    // Inclusive time: walk from the root, counting a matching frame only when no
    // matching frame with the same key is already on the stack (recursion).
    const inc = new Map<string, number>()
    const walk = (id: number, open: Set<string>): number => {
      const n = byId.get(id)!
      let t = self.get(id) ?? 0
      const key = `${n.callFrame.functionName || "(anonymous)"}  ${short(n.callFrame.url)}:${
        n.callFrame.lineNumber + 1
      }`
      const counts = inclusive.test(n.callFrame.functionName) && /packages\//.test(n.callFrame.url) && !open.has(key)
      if (counts) open.add(key)
      for (const c of n.children ?? []) t += walk(c, open)
      if (counts) {
        open.delete(key)
        inc.set(key, (inc.get(key) ?? 0) + t)
      }
      return t
    }
    walk(profile.nodes[0]!.id, new Set())
    process.stdout.write(`\ninclusive time of journal functions matching ${inclusive}:\n`)
    for (const [k, us] of [...inc].sort((x, y) => y[1] - x[1]).slice(0, top)) {
      process.stdout.write(`  ${pct(us)}  ${k}\n`)
    }
  }
}
