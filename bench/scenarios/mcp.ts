/**
 * `mcp.proxy.call`: the round trip of one `tools/call` through the MCP gateway
 * (`session-journal mcp proxy`, the built command, with a policy that decides
 * every call and denies none: a decision, its durable append and the outcome's
 * durable append per call) against the same call made directly to the same
 * server, with the same client: the MCP TypeScript SDK's own `Client` over its
 * stdio transport, and the SDK-built test server of the gateway's tests, whose
 * `echo` answers in well under a millisecond. Interleaved rounds of sequential
 * calls; the value is the median of the rounds' medians, the ratio the median
 * of the per-round ratios, and the note gives the p99 of every call of each
 * side. Goal on the ratio: ≤ 1.5.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { findCache, FIXTURE_SERVER, fixtureEnv, loadSdk, type SdkClient } from "../../packages/mcp/test/mcpCache.ts"
import { builtEnv, loadCli } from "../lib/adapters.ts"
import { removeDir, tempDir } from "../lib/env.ts"
import {
  type Figure,
  type Goal,
  interleave,
  median,
  meets,
  notRun,
  type RunOptions,
  type Scenario
} from "../lib/harness.ts"

const NAME = "mcp.proxy.call"
const BASELINE = "the same call straight to the same server (same SDK client)"
const GOAL: Goal = { op: "<=", target: 1.5 }

const percentile = (xs: ReadonlyArray<number>, p: number): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const cli = loadCli()
  if (!cli.ok) return [notRun(NAME, "ms", BASELINE, GOAL, cli.why)]
  const cache = findCache()
  if (cache === null) return [notRun(NAME, "ms", BASELINE, GOAL, "the MCP SDK is not installed (scripts/mcp.sh)")]
  const sdk = await loadSdk(cache)
  const dir = tempDir("mcp")
  const clients: Array<SdkClient> = []
  try {
    const policy = path.join(dir, "policy.json")
    fs.writeFileSync(policy, JSON.stringify({ denyList: ["mcp__bench__never"] }))
    const env = builtEnv(fixtureEnv(cache)) as Record<string, string>
    const open = async (command: string, args: Array<string>) => {
      const client = new sdk.Client({ name: "bench", version: "1.0.0" })
      await client.connect(new sdk.StdioClientTransport({ command, args, env, stderr: "inherit" }))
      clients.push(client)
      return client
    }
    const gateway = await open(cli.value, [
      "--dir",
      path.join(dir, "journal"),
      "mcp",
      "proxy",
      "--policy",
      policy,
      "--name",
      "bench",
      "--",
      process.execPath,
      FIXTURE_SERVER
    ])
    const direct = await open(process.execPath, [FIXTURE_SERVER])
    const perRound = options.quick ? 50 : 200
    const rounds = options.quick ? 4 : 10
    const all = { gateway: [] as Array<number>, direct: [] as Array<number> }
    const side = (client: SdkClient, into: Array<number>) => async (round: number) => {
      const times: Array<number> = []
      for (let i = 0; i < perRound; i++) {
        const t0 = performance.now()
        const result = await client.callTool({ name: "echo", arguments: { text: `call ${i}` } })
        times.push(performance.now() - t0)
        if (result.isError === true) throw new Error(`the call failed: ${JSON.stringify(result)}`)
      }
      // The warm-up round (-1) counts in neither p99.
      if (round >= 0) into.push(...times)
      // One sample per round: its median call, as `ms` of one operation.
      return { ops: 1, ms: median(times) }
    }
    const samples = await interleave(rounds, side(gateway, all.gateway), side(direct, all.direct), {
      log: options.log,
      label: NAME
    })
    const ratio = median(samples.subject.map((s, i) => s.ms / samples.baseline[i]!.ms))
    return [{
      name: NAME,
      value: median(samples.subject.map((s) => s.ms)),
      unit: "ms",
      baseline: BASELINE,
      baseline_value: median(samples.baseline.map((s) => s.ms)),
      ratio,
      goal: GOAL,
      met: meets(GOAL, ratio),
      note: `median round trip of one tools/call through mcp proxy (policy decision, two durable appends) vs direct; ` +
        `p99 ${percentile(all.gateway, 0.99).toFixed(3)} ms through the gateway, ` +
        `${percentile(all.direct, 0.99).toFixed(3)} ms direct (${rounds} rounds of ${perRound} sequential calls ` +
        `after a warm-up round)`
    }]
  } finally {
    for (const c of clients) await c.close().catch(() => undefined)
    removeDir(dir)
  }
}

/** `mcp.proxy.call`. */
export const mcpProxyCall: Scenario = { name: NAME, figures: [NAME], run }
