/**
 * The real Codex CLI with our hooks and a sub-agent (`multi_agent_v1`'s
 * `spawn_agent` and `wait_agent`, offered for the model `gpt-4.1`), run offline
 * against the scripted fake of the Responses API: `maxTokens` counts the tokens
 * of the main agent and of the sub-agent it spawned together, reading the
 * sub-agent's own rollout, so the sub-agent's spending denies the main agent's
 * next call. The sub-agent's own call is decided in its own name (its
 * `agent_id`) and, under the budget, runs.
 *
 * Skipped only when the binary is not installed and no cache holds it.
 */
import { CODEX_BIN, exec, type Home, scratch, SKIP_REASON } from "@session-journal/codex/test/codexCli"
import * as Fake from "@session-journal/codex/test/fakeResponses"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { baseEnv, BIN } from "./Run.ts"

const MULTI_AGENT = "multi_agent_v1"
const SUBTASK = "SUBTASK: write sub.txt"

const codex = scratch(baseEnv())

type Item = { readonly type?: unknown; readonly role?: unknown; readonly content?: unknown; readonly output?: unknown }

const itemsOf = (r: Fake.Request): ReadonlyArray<Item> => (r.body.input ?? []) as ReadonlyArray<Item>

// The sub-agent's requests carry the spawn message as a user message (the main agent's only
// inside its spawn call's arguments); both send the parent's session id.
const isSubAgent = (r: Fake.Request): boolean =>
  itemsOf(r).some((i) => i.type === "message" && i.role === "user" && JSON.stringify(i.content).includes(SUBTASK))

// The agent id the spawn call's output named, in a later request of the main agent.
const spawnedId = (r: Fake.Request): string | null => {
  for (const i of itemsOf(r)) {
    if (i.type !== "function_call_output" || typeof i.output !== "string") continue
    try {
      const out = JSON.parse(i.output) as { readonly agent_id?: unknown }
      if (typeof out.agent_id === "string") return out.agent_id
    } catch {
      // Another call's output.
    }
  }
  return null
}

// The main agent: spawn, wait for the sub-agent, then a call the budget must deny. The
// sub-agent: one call under the budget, then an answer whose usage crosses it.
const script = (): Fake.Script => {
  let main = 0
  let sub = 0
  return (r) => {
    if (isSubAgent(r)) {
      const turns: ReadonlyArray<Fake.Turn> = [
        { calls: [Fake.shell("echo sub > sub.txt")], tokens: 10 },
        { text: "sub done", tokens: 1000 }
      ]
      return turns[sub++]
    }
    const n = main++
    if (n === 0) {
      return { calls: [{ name: "spawn_agent", namespace: MULTI_AGENT, arguments: { message: SUBTASK } }], tokens: 10 }
    }
    if (n === 1) {
      const id = spawnedId(r)
      return id === null
        ? { text: "no agent was spawned" }
        : { calls: [{ name: "wait_agent", namespace: MULTI_AGENT, arguments: { targets: [id], timeout_ms: 120_000 } }] }
    }
    if (n === 2) return { calls: [Fake.shell("echo main > main.txt")], tokens: 10 }
    return undefined
  }
}

const sj = (home: Home, args: ReadonlyArray<string>) =>
  spawnSync(process.execPath, [BIN, ...args], {
    cwd: home.work,
    env: { ...home.env, SESSION_JOURNAL_CODEX_BIN: CODEX_BIN ?? "" },
    encoding: "utf8"
  })

const decisions = (home: Home, journal: string): Array<Record<string, unknown>> => {
  const listed = JSON.parse(sj(home, ["--dir", journal, "--json", "list"]).stdout) as {
    sessions: Array<{ id: string }>
  }
  const hooked = listed.sessions.filter((s) => s.id.startsWith("codex-") && !s.id.startsWith("codex-rollout-"))
  expect(hooked).toHaveLength(1)
  return sj(home, ["--dir", journal, "--json", "show", hooked[0]!.id]).stdout.trim().split("\n")
    .map((l) => JSON.parse(l) as { kind: string; payload?: Record<string, unknown> })
    .filter((e) => e.kind === "codex.decision")
    .map((e) => e.payload!)
}

describe.skipIf(CODEX_BIN === null)(
  `the real Codex CLI with a sub-agent${CODEX_BIN === null ? ` (${SKIP_REASON})` : ""}`,
  { timeout: 600_000 },
  () => {
    it("maxTokens counts the sub-agent's tokens from its own rollout: its spending denies the main agent's next call", async () => {
      const { api, home } = await codex.start(script())
      // A model whose tools include the multi-agent namespace.
      fs.writeFileSync(
        home.config,
        fs.readFileSync(home.config, "utf8").replace(`model = "gpt-5.5"`, `model = "gpt-4.1"`)
      )
      const journal = path.join(home.dir, "journal")
      const policy = path.join(home.dir, "policy.json")
      fs.writeFileSync(policy, JSON.stringify({ maxTokens: 500 }))
      const installed = sj(home, ["codex", "install", "--policy", policy, "--root", journal])
      expect(installed.status, installed.stderr).toBe(0)

      const run = await exec(home, "delegate the work", { timeoutMs: 300_000 })
      expect(run.timedOut).toBe(false)
      expect(run.code, run.stderr).toBe(0)
      expect(api.connects).toEqual([])

      const all = decisions(home, journal)
      const summary = JSON.stringify(all, null, 1)
      const byTool = (tool: string, agent: "main" | "sub") =>
        all.filter((d) => d["tool_name"] === tool && (agent === "main") === (d["agent_id"] === "main"))
      // The sub-agent's call, in its own name, under the budget: it ran.
      const subBash = byTool("Bash", "sub")
      expect(subBash, summary).toHaveLength(1)
      expect(subBash[0]!["verdict"], summary).toBe("allow")
      expect(fs.existsSync(path.join(home.work, "sub.txt"))).toBe(true)
      // The main agent's call after the sub-agent answered: its 1,000 tokens count.
      const mainBash = byTool("Bash", "main")
      expect(mainBash, summary).toHaveLength(1)
      expect(mainBash[0], summary).toMatchObject({ verdict: "deny", guard: "maxTokens(500)" })
      expect(mainBash[0]!["tokens"] as number, summary).toBeGreaterThanOrEqual(1030)
      expect(fs.existsSync(path.join(home.work, "main.txt"))).toBe(false)
    })
  }
)
