/**
 * `policy.decide`: one decision of a 100-rule policy in process (docs/DESIGN.md §16):
 * deny and ask patterns over commands, paths and hosts, scoped and windowed limits,
 * flow rules, a token budget and a few old keys, compiled once; the calls a Claude
 * Code session makes (compound Bash commands, file paths, URLs), each decided against
 * the state the previous decisions left (`guard_state` folded as `decide` stores it).
 * Every decision is timed alone: the median and the 99th percentile, in µs. The
 * baseline is a policy of the old keys of the same size on the same calls.
 */
import { Entry, Guard, JournalState, Policy } from "../../packages/core/src/index.ts"
import { type Figure, median, type RunOptions, type Scenario } from "../lib/harness.ts"

const rules = (): Array<unknown> => {
  const out: Array<unknown> = []
  const words = ["rm -rf", "git push --force", "curl", "wget", "npm publish", "docker run", "kubectl delete", "ssh"]
  for (let i = 0; i < 30; i++) out.push({ deny: `Bash(${words[i % words.length]} ${i} *)` })
  for (let i = 0; i < 10; i++) out.push({ deny: [`Read(~/.secret${i}/**)`, `Edit(//etc/app${i}/**)`] })
  for (let i = 0; i < 15; i++) out.push({ ask: `Bash(git push origin b${i} *)` })
  out.push({ ask: ["WebFetch(domain:*.internal.example)", "mcp__github__delete_*"] })
  for (let i = 0; i < 20; i++) out.push({ maxInvocations: 1000 + i, of: `Bash(npm test ${i}*)`, per: "1m" })
  for (let i = 0; i < 8; i++) out.push({ maxBytesRead: 50_000_000 + i, of: `Read(/src${i}/**)`, per: "1h" })
  out.push({ maxStreak: 50, of: ["Bash"] }, { maxInvocations: 100_000, per: "1h" })
  out.push({ ask: "Edit(/migrations/**)" }, { maxBytesWritten: 10_000_000, of: "Edit", per: "1d" })
  out.push({ maxStreak: 30, per: "30s" })
  for (let i = 0; i < 5; i++) out.push({ after: `Read(**/.env${i}*)`, deny: ["WebFetch", `Bash(curl ${i} *)`] })
  out.push({ maxTokens: 2_000_000_000 })
  out.push({ maxStreak: 1000 }, { maxDelegationDepth: 8 }, { denyList: ["mcp__evil__x"] })
  out.push({ forbiddenTransitions: [["Write", "WebFetch"]] }, { requirePredecessors: { Edit: ["Read"] } })
  return out
}

const oldRules = (): Array<unknown> =>
  Array.from({ length: 100 }, (_, i) =>
    i % 4 === 0
      ? { maxStreak: 1000 + i }
      : i % 4 === 1
      ? { denyList: [`tool${i}`] }
      : i % 4 === 2
      ? { maxInvocations: 1_000_000 + i }
      : { forbiddenTransitions: [[`a${i}`, `b${i}`]] })

const calls: ReadonlyArray<{ readonly tool_name: string; readonly tool_input: Record<string, unknown> }> = [
  { tool_name: "Bash", tool_input: { command: "npm test 3 -- --run && git status" } },
  { tool_name: "Read", tool_input: { file_path: "/home/u/repo/src3/index.ts" } },
  { tool_name: "Bash", tool_input: { command: "ls -la | grep foo; echo $(date)" } },
  { tool_name: "Edit", tool_input: { file_path: "src/a.ts", old_string: "a", new_string: "b" } },
  { tool_name: "Grep", tool_input: { pattern: "TODO", path: "/home/u/repo" } },
  { tool_name: "WebFetch", tool_input: { url: "https://docs.example.com/page", prompt: "x" } },
  { tool_name: "Bash", tool_input: { command: "git commit -m 'x' && git push origin main" } },
  { tool_name: "Read", tool_input: { file_path: "../repo/README.md" } }
]

const where = { cwd: "/home/u/repo", projectDir: "/home/u/repo", home: "/home/u" }

const params = (tool_name: string): Entry.ValidToolParams => ({
  tool_name,
  server_id: "claude-code",
  agent_id: "main",
  bytes_read: 100,
  bytes_written: 0,
  delegation_depth: 0,
  allowed: true
})

// Decides `n` calls in turn, folding each decision's state; the time of each, in µs.
const measure = (compiled: Policy.Compiled, n: number): Array<number> => {
  let state = JournalState.empty("bench-policy")
  const times = new Array<number>(n)
  let t = 1_764_400_000_000
  for (let i = 0; i < n; i++) {
    const call = calls[i % calls.length]!
    const p = params(call.tool_name)
    const snapshot = JournalState.snapshot(state)
    const context = { call, where, nowMillis: t, tokens: 1000n, canAsk: true, state: state.guard_state }
    const start = process.hrtime.bigint()
    const v = compiled.guard(snapshot, p, context)
    times[i] = Number(process.hrtime.bigint() - start) / 1000
    state = JournalState.fold(state, JournalState.nextTool(state, 1, { ...p, allowed: v._tag !== "Deny" }))
    if (v.state !== undefined) {
      state = JournalState.fold(state, JournalState.nextOther(state, 1, Guard.STATE_KIND, v.state))
    }
    t += 250
  }
  return times
}

const percentile = (xs: ReadonlyArray<number>, q: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!
}

const compileText = (json: unknown): Policy.Compiled => {
  const r = Policy.decode(json)
  if (r._tag === "Failure") throw new Error(r.failure.message)
  return Policy.compile(r.success)
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const n = options.quick ? 5_000 : 50_000
  const policy = compileText(rules())
  const old = compileText(oldRules())
  if (Policy.size(policy.policy) !== 100) throw new Error(`the policy has ${Policy.size(policy.policy)} rules`)
  // Warm-up (JIT), then alternating rounds.
  measure(policy, 2_000)
  measure(old, 2_000)
  const subject: Array<number> = []
  const baseline: Array<number> = []
  for (let r = 0; r < 5; r++) {
    if (r % 2 === 0) baseline.push(...measure(old, n / 5))
    subject.push(...measure(policy, n / 5))
    if (r % 2 === 1) baseline.push(...measure(old, n / 5))
    options.log(`  policy.decide round ${r + 1}/5`)
  }
  const med = median(subject)
  const p99 = percentile(subject, 0.99)
  const baseMed = median(baseline)
  const basePlain = percentile(baseline, 0.99)
  const note = `${n.toLocaleString("en-US")} decisions of a 100-rule policy (57 deny/ask rules, 32 scoped or ` +
    `windowed limits, 5 flow rules, a token budget, 5 old keys) on 8 kinds of call, the state folded after each; ` +
    `baseline: 100 old-key rules on the same calls (median ${baseMed.toFixed(2)} µs, p99 ${basePlain.toFixed(2)} µs)`
  const figure = (name: string, value: number, base: number, target: number): Figure => ({
    name,
    value,
    unit: "µs",
    baseline: "100 old-key rules",
    baseline_value: base,
    ratio: value / base,
    goal: { op: "<=", target, on: "µs" },
    goal_value: value,
    met: value <= target,
    note
  })
  return [figure("policy.decide", med, baseMed, 10), figure("policy.decide.p99", p99, basePlain, 50)]
}

/** The scenario. */
export const policyDecide: Scenario = { name: "policy.decide", figures: ["policy.decide", "policy.decide.p99"], run }
