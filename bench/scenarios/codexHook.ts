/**
 * `codex.hook.command`: the wall time of one Codex PreToolUse through our hook
 * as `codex install` writes it (the fail-closed `/bin/sh` wrapper around
 * `NODE BIN codex hook --root DIR --policy FILE`, run with `/bin/bash -c` as
 * Codex runs command hooks; a process per event: start, read stdin, lock,
 * decide, append with its fdatasync, answer), against `node -e 0` on the same
 * Node in the same rounds. Goal on the ratio: ≤ 1.5.
 *
 * The policy decides every call and denies none, so each event is one decision
 * and one entry pair on the chain.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { hookCommand } from "../../packages/cli/src/commands/Codex.ts"
import { builtEnv, loadCli, repoRoot } from "../lib/adapters.ts"
import { removeDir, tempDir } from "../lib/env.ts"
import { type Goal, interleaveMany, median, meets, notRun, type RunOptions, type Scenario } from "../lib/harness.ts"
import { timed } from "./claudeCodeHook.ts"

const NAME = "codex.hook.command"
const NODE = "node -e 0 (same Node)"
const GOAL: Goal = { op: "<=", target: 1.5 }
const SESSION = "01a248a4-0d7d-7593-af00-61f2370f3d89"

let calls = 0
const preToolUse = (cwd: string): string =>
  JSON.stringify({
    session_id: SESSION,
    turn_id: "01a248a4-0d92-7000-8000-000000000001",
    transcript_path: `${cwd}/.codex/sessions/2026/12/05/rollout-2026-12-05T23-57-20-${SESSION}.jsonl`,
    cwd,
    hook_event_name: "PreToolUse",
    model: "gpt-5.5",
    permission_mode: "bypassPermissions",
    tool_name: ["Bash", "apply_patch"][calls % 2],
    tool_input: { command: "ls -la" },
    tool_use_id: `call_bench${(calls++).toString(36)}`
  })

const run = async (options: RunOptions) => {
  const cli = loadCli()
  if (!cli.ok) return [notRun(NAME, "ms", NODE, null, cli.why)]
  const dir = tempDir("codex-hook")
  try {
    const cwd = path.join(dir, "work")
    fs.mkdirSync(cwd)
    const policy = path.join(dir, "policy.json")
    fs.writeFileSync(policy, JSON.stringify([{ maxStreak: 1_000_000_000 }, { denyList: ["rm"] }]))
    const env = builtEnv({})
    const bin = fs.realpathSync(path.join(repoRoot, "packages", "cli", "bin", "session-journal.js"))
    const line = hookCommand(
      [process.execPath, bin],
      { root: path.join(dir, "journal"), policy },
      "PreToolUse",
      path.join(dir, ".codex", "config.toml")
    )
    const rounds = options.quick ? 5 : 21
    const p = await interleaveMany(rounds, [
      { name: "hook", run: async () => timed("/bin/bash", ["-c", line], env, preToolUse(cwd)) },
      { name: "node", run: async () => timed(process.execPath, ["-e", "0"], env) }
    ], { log: options.log, label: NAME, warmup: true })
    const ratio = median(p["hook"]!.map((s, i) => s.ms / p["node"]![i]!.ms))
    return [{
      name: NAME,
      value: median(p["hook"]!.map((s) => s.ms)),
      unit: "ms",
      baseline: NODE,
      baseline_value: median(p["node"]!.map((s) => s.ms)),
      ratio,
      goal: GOAL,
      met: meets(GOAL, ratio),
      note: `one PreToolUse through session-journal codex hook as codex install writes it (built, a policy of two ` +
        `guards, durable append), run with /bin/bash -c as Codex runs hooks (${rounds} rounds, one process per side ` +
        `per round after a warm-up, wall time of spawnSync, ratio against node -e 0)`
    }]
  } finally {
    removeDir(dir)
  }
}

/** `codex.hook.command`. */
export const codexHook: Scenario = { name: "codex.hook", figures: [NAME], run }
