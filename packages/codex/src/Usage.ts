/**
 * The tokens a Codex session used, as Codex reports them in its rollouts
 * (docs/codex-PROTOCOL.md, "Tokens"): after each model response Codex 0.169.0
 * appends a `token_usage_record` line whose `payload` carries the response's
 * `response_id` and its `usage` (`input_tokens`, cached ones included,
 * `output_tokens`, reasoning included, and their sum `total_tokens`). A session
 * used the `total_tokens` of every response, main agent and sub-agents together
 * (each sub-agent has its own rollout, named by its thread id, the `agent_id`
 * its `spawn_agent` call returned). A response is counted once, by its id
 * (claude-code's `Usage.extendBy`); the cumulative `thread_token_usage` and the
 * `token_count` events are not used, so a resumed thread whose totals start
 * again cannot make the count go back.
 *
 * `extend` reads a rollout incrementally: only the bytes after the complete
 * lines already counted, and it also notes the sub-agents the rollout's
 * `spawn_agent` calls started, so their rollouts are counted too. Pure: the
 * caller brings the bytes.
 *
 * @since 0.1.0
 */
import * as ClaudeUsage from "@session-journal/claude-code/Usage"

/** Spawn calls remembered until their output comes (a call's output follows it closely). */
const PENDING = 64

/**
 * Sub-agents followed at most per rollout; past it, the tokens are unknown.
 *
 * @since 0.1.0
 */
export const MAX_AGENTS = 1024

/**
 * What was counted so far in one rollout: the usage scan (claude-code's
 * `Usage.Scan`: the offset of the complete lines read, the tokens, the latest
 * response ids), the `call_id`s of `spawn_agent` calls whose output has not come
 * yet, the sub-agents started (their thread ids), and whether more were started
 * than are followed.
 *
 * @since 0.1.0
 */
export interface Scan extends ClaudeUsage.Scan {
  readonly spawning: ReadonlyArray<string>
  readonly agents: ReadonlyArray<string>
  readonly overflow: boolean
}

/**
 * The scan of nothing.
 *
 * @since 0.1.0
 */
export const empty: Scan = { ...ClaudeUsage.empty, spawning: [], agents: [], overflow: false }

const isObject = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

const count = (n: unknown): bigint => typeof n === "number" && Number.isSafeInteger(n) && n > 0 ? BigInt(n) : 0n

const parsed = (line: string): { readonly [key: string]: unknown } | null => {
  try {
    const o: unknown = JSON.parse(line)
    return isObject(o) ? o : null
  } catch {
    return null
  }
}

/**
 * The response id and the tokens a rollout line reports (a `token_usage_record`:
 * its `usage.total_tokens`, else `input_tokens + output_tokens`), or null when it
 * reports none. Counts that are not non-negative safe integers count 0.
 *
 * @since 0.1.0
 */
export const usageOf = (line: string): { readonly id: string; readonly tokens: bigint } | null => {
  // Cheap test first: most lines are not usage records.
  if (!line.includes("\"token_usage_record\"")) return null
  const o = parsed(line)
  if (o === null || o["type"] !== "token_usage_record" || !isObject(o["payload"])) return null
  const payload = o["payload"]
  const usage = payload["usage"]
  if (!isObject(usage)) return null
  const total = count(usage["total_tokens"])
  return {
    id: typeof payload["response_id"] === "string" ? payload["response_id"] : "",
    tokens: total > 0n ? total : count(usage["input_tokens"]) + count(usage["output_tokens"])
  }
}

const extendUsage = ClaudeUsage.extendBy(usageOf)

const SPAWN = /(^|[^A-Za-z0-9_])spawn_agent$/
const AGENT_ID = /^[A-Za-z0-9-]{1,64}$/

// What a line says about sub-agents: a spawn call's id, or the agent a spawn call's output names.
const spawnOf = (
  line: string
): { readonly call: string } | { readonly output: string; readonly agent: string | null } | null => {
  if (!line.includes("\"response_item\"") || !line.includes("call_id")) return null
  const o = parsed(line)
  if (o === null || o["type"] !== "response_item" || !isObject(o["payload"])) return null
  const p = o["payload"]
  const call = p["call_id"]
  if (typeof call !== "string") return null
  if (p["type"] === "function_call" && typeof p["name"] === "string" && SPAWN.test(p["name"])) return { call }
  if (p["type"] !== "function_call_output") return null
  const output = typeof p["output"] === "string" ? parsed(p["output"]) : null
  const agent = output?.["agent_id"]
  return { output: call, agent: typeof agent === "string" && AGENT_ID.test(agent) ? agent : null }
}

/**
 * The scan extended by `bytes`, the rollout's bytes from `scan.offset` on: the
 * tokens of its complete lines counted, the sub-agents its `spawn_agent` calls
 * started noted (a spawn's output that names no agent id starts none); a last
 * line without its newline is left for later.
 *
 * @since 0.1.0
 */
export const extend = (scan: Scan, bytes: Uint8Array): Scan => {
  const usage = extendUsage(scan, bytes)
  if (usage.offset === scan.offset) return scan
  const spawning = [...scan.spawning]
  const agents = [...scan.agents]
  let overflow = scan.overflow
  const decoder = new TextDecoder()
  const end = usage.offset - scan.offset
  let start = 0
  while (start < end) {
    const nl = bytes.indexOf(0x0a, start)
    const seen = spawnOf(decoder.decode(bytes.subarray(start, nl)))
    if (seen !== null && "call" in seen) {
      spawning.push(seen.call)
      if (spawning.length > PENDING) spawning.shift()
    } else if (seen !== null) {
      const at = spawning.indexOf(seen.output)
      if (at >= 0) {
        spawning.splice(at, 1)
        if (seen.agent !== null && !agents.includes(seen.agent)) {
          if (agents.length < MAX_AGENTS) agents.push(seen.agent)
          else overflow = true
        }
      }
    }
    start = nl + 1
  }
  return { ...usage, spawning, agents, overflow }
}

/**
 * Whether `u` is a scan as `extend` makes them (a kept one is a claim, checked
 * before it is used).
 *
 * @since 0.1.0
 */
export const isScan = (u: unknown): u is Scan => {
  if (!ClaudeUsage.isScan(u)) return false
  const o = u as unknown as { readonly [key: string]: unknown }
  const spawning = o["spawning"]
  const agents = o["agents"]
  return Array.isArray(spawning) && spawning.length <= PENDING && spawning.every((s) => typeof s === "string") &&
    Array.isArray(agents) && agents.length <= MAX_AGENTS &&
    agents.every((s) => typeof s === "string" && AGENT_ID.test(s)) && typeof o["overflow"] === "boolean"
}

/**
 * The tokens of a scan.
 *
 * @since 0.1.0
 */
export const tokensOf = (scan: Scan): bigint => ClaudeUsage.tokensOf(scan)
