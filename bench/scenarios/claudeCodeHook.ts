/**
 * `claude_code.hook.*`: what a Claude Code hook of ours costs per event, with the
 * built command (as installed), against baselines on the same Node in the same
 * rounds.
 *
 * - `claude_code.hook.command`: the wall time of one PreToolUse through the
 *   command hook as installed (`install`'s command line: the fail-closed `/bin/sh`
 *   wrapper around `NODE BIN claude-code hook --root DIR --policy FILE`, run with
 *   `/bin/sh -c` as Claude Code runs it; a process per event: start, read stdin,
 *   lock, decide, append with its fdatasync, answer), against `node -e 0`. Goal on
 *   the ratio: ≤ 1.5.
 * - `claude_code.hook.command.long_session`: the same on a session that already
 *   holds `LONG_CALLS` tool calls (the hook reads the session's state at every
 *   event: what that costs as a session grows). Reported.
 * - `claude_code.hook.forward`: the same PreToolUse through the guard's installed
 *   form, the wrapped forwarder (`claude-code forward --url …`, a process per
 *   event that posts to the resident guard, which is running), against
 *   `node -e 0`. Goal on the ratio: ≤ 1.2.
 *
 *   The wrapper's own cost (`node -e 0` through it, less `node -e 0`) is given in
 *   the notes.
 * - `claude_code.hook.http`: the round trip of one PreToolUse posted to the
 *   resident guard over a kept-alive loopback connection (what Claude Code's
 *   `http` hook and the forwarder's request cost, decision and durable append
 *   included), against a bare `node:http` server answering `{}` in another
 *   process. Goal on the median: ≤ 2 ms.
 * - `claude_code.hook.http_concurrent`: sixteen hooks in flight at once on one
 *   session (sixteen kept-alive connections, each posting its next PreToolUse as
 *   soon as the last is answered): decisions per second, against the bare server.
 *   Goal: ≥ 5,000 decisions/s.
 *
 * The policy decides every call and denies none (`maxStreak` far away, a
 * `denyList` of a tool never called), so each event is one decision and one
 * entry pair on the chain.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { forwardCommand, hookCommand, wrap } from "../../packages/claude-code/src/Installer.ts"
import { builtEnv, loadCli, repoRoot } from "../lib/adapters.ts"
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

const FIGURES = [
  "claude_code.hook.command",
  "claude_code.hook.command.long_session",
  "claude_code.hook.forward",
  "claude_code.hook.http",
  "claude_code.hook.http_concurrent"
]
const NODE = "node -e 0 (same Node)"
const BARE = "bare node:http server answering {} (another process, same client)"
const COMMAND_GOAL: Goal = { op: "<=", target: 1.5 }
const FORWARD_GOAL: Goal = { op: "<=", target: 1.2 }
const HTTP_GOAL: Goal = { op: "<=", target: 2, on: "median ms" }
const CONCURRENT_GOAL: Goal = { op: ">=", target: 5000, on: "decisions/s" }
const TOKEN = "bench-guard-token-0123456789abcdef"
const CONCURRENCY = 16
// Tool calls already in the session of `claude_code.hook.command.long_session`.
const LONG_CALLS = 250

let calls = 0
const preToolUse = (cwd: string): string =>
  JSON.stringify({
    session_id: "0b7e1c52-3a4d-4e5f-8a9b-0c1d2e3f4a5b",
    transcript_path: `${cwd}/.claude/projects/x/0b7e1c52-3a4d-4e5f-8a9b-0c1d2e3f4a5b.jsonl`,
    cwd,
    prompt_id: "c0ffee00-0000-4000-8000-000000000000",
    permission_mode: "default",
    effort: { level: "medium" },
    hook_event_name: "PreToolUse",
    tool_name: ["Read", "Grep", "Bash"][calls % 3],
    tool_input: { command: "ls -la", description: "list" },
    tool_use_id: `toolu_bench${(calls++).toString(36)}`
  })

/** One process run to its end: its wall time as one operation; it must exit 0 and, given input, not deny. */
export const timed = (command: string, args: ReadonlyArray<string>, env: NodeJS.ProcessEnv, input?: string): Sample => {
  // stdin is always a pipe: Claude Code writes the event and closes it.
  const t0 = performance.now()
  const out = spawnSync(command, args, { encoding: "utf8", env, input: input ?? "" })
  const ms = performance.now() - t0
  if (out.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited ${out.status}: ${(out.stderr || out.stdout).slice(0, 400)}`)
  }
  if (input !== undefined && out.stdout.includes("\"deny\"")) {
    throw new Error(`the hook denied: ${out.stdout.slice(0, 400)}`)
  }
  return { ops: 1, ms }
}

// A child process printing its port on its first stdout line.
const listening = (child: ChildProcess, pattern: RegExp): Promise<number> =>
  new Promise((resolve, reject) => {
    let buffer = ""
    child.stdout!.on("data", (b: Buffer) => {
      buffer += b.toString("utf8")
      const m = pattern.exec(buffer)
      if (m !== null) resolve(Number(m[1]))
    })
    child.on("exit", (code) => reject(new Error(`exited ${code} before listening: ${buffer}`)))
  })

const BARE_SERVER =
  "require('http').createServer((q, s) => { q.resume(); q.on('end', () => { s.setHeader('content-type', 'application/json'); s.end('{}') }) })" +
  ".listen(0, '127.0.0.1', function () { console.log('port ' + this.address().port) })"

const post = (agent: http.Agent, port: number, body: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const r = http.request({
      host: "127.0.0.1",
      port,
      method: "POST",
      path: "/hook",
      agent,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body)
      }
    }, (res) => {
      const parts: Array<Buffer> = []
      res.on("data", (b: Buffer) => parts.push(b))
      res.on("end", () => {
        const text = Buffer.concat(parts).toString("utf8")
        if (res.statusCode !== 200 || text.includes("\"deny\"")) {
          reject(new Error(`${res.statusCode} ${text.slice(0, 300)}`))
        } else resolve(text)
      })
    })
    r.on("error", reject)
    r.end(body)
  })

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const cli = loadCli()
  if (!cli.ok) return FIGURES.map((n) => notRun(n, "ms", NODE, null, cli.why))
  const dir = tempDir("cc-hook")
  const children: Array<ChildProcess> = []
  try {
    const cwd = path.join(dir, "work")
    fs.mkdirSync(cwd)
    const policy = path.join(dir, "policy.json")
    fs.writeFileSync(policy, JSON.stringify([{ maxStreak: 1_000_000_000 }, { denyList: ["rm"] }]))
    const env = builtEnv({ SESSION_JOURNAL_GUARD_TOKEN: TOKEN })

    const startGuard = async (root: string) => {
      const child = spawn(cli.value, [
        "claude-code",
        "guard",
        "--port",
        "0",
        "--root",
        root,
        "--policy",
        policy,
        "--accept-bearer"
      ], {
        env,
        stdio: ["ignore", "pipe", "inherit"]
      })
      children.push(child)
      return { child, port: await listening(child, /listening at http:\/\/127\.0\.0\.1:([0-9]+)\//) }
    }
    // A long session for the command hook: `LONG_CALLS` PreToolUse events journaled
    // through a guard of its own on another root, which is then stopped (it holds
    // the session's lock while it runs).
    const longRoot = path.join(dir, "long-journal")
    const longCalls = options.quick ? 50 : LONG_CALLS
    {
      const grower = await startGuard(longRoot)
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      for (let i = 0; i < longCalls; i++) await post(agent, grower.port, preToolUse(cwd))
      agent.destroy()
      grower.child.kill("SIGTERM")
      await new Promise((resolve) => grower.child.once("exit", resolve))
    }
    const { port } = await startGuard(path.join(dir, "guard-journal"))
    const bare = spawn(process.execPath, ["-e", BARE_SERVER], { env, stdio: ["ignore", "pipe", "inherit"] })
    children.push(bare)
    const barePort = await listening(bare, /port ([0-9]+)/)
    const url = `http://127.0.0.1:${port}/hook`

    // A process per event, started as `install` writes it and as Claude Code runs
    // it: the installed command line (this Node and the bin's real path, through
    // the fail-closed wrapper) given to `/bin/sh -c`. Beside them node -e 0, the
    // baseline, and node -e 0 through the same wrapper (what the wrapper costs).
    const bin = fs.realpathSync(path.join(repoRoot, "packages", "cli", "bin", "session-journal.js"))
    const self = [process.execPath, bin]
    const settings = path.join(cwd, ".claude", "settings.local.json")
    const hookLine = hookCommand(self, {
      root: path.join(dir, "hook-journal"),
      policy,
      event: "PreToolUse",
      settings
    })
    const longLine = hookCommand(self, { root: longRoot, policy, event: "PreToolUse", settings })
    const forwardLine = forwardCommand(self, url, { event: "PreToolUse", settings })
    const nodeLine = wrap([process.execPath, "-e", "0"], { event: "PreToolUse", settings })
    const rounds = options.quick ? 5 : 21
    const p = await interleaveMany(rounds, [
      { name: "command", run: async () => timed("/bin/sh", ["-c", hookLine], env, preToolUse(cwd)) },
      { name: "long", run: async () => timed("/bin/sh", ["-c", longLine], env, preToolUse(cwd)) },
      { name: "forward", run: async () => timed("/bin/sh", ["-c", forwardLine], env, preToolUse(cwd)) },
      { name: "node", run: async () => timed(process.execPath, ["-e", "0"], env) },
      { name: "wrapped", run: async () => timed("/bin/sh", ["-c", nodeLine], env, preToolUse(cwd)) }
    ], { log: options.log, label: "claude_code.hook (processes)", warmup: true })

    // One request at a time on a kept-alive connection.
    const perRound = options.quick ? 100 : 400
    const sequential = (target: number) => async (): Promise<Sample> => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 })
      await post(agent, target, preToolUse(cwd))
      const times: Array<number> = []
      for (let i = 0; i < perRound; i++) {
        const t0 = performance.now()
        await post(agent, target, preToolUse(cwd))
        times.push(performance.now() - t0)
      }
      agent.destroy()
      // The round's median round trip, as one sample of one operation.
      return { ops: 1, ms: median(times) }
    }
    const concurrent = (target: number) => async (): Promise<Sample> => {
      const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY })
      await Promise.all(Array.from({ length: CONCURRENCY }, () => post(agent, target, preToolUse(cwd))))
      const each = Math.ceil(perRound * 2 / CONCURRENCY)
      const t0 = performance.now()
      await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
        for (let i = 0; i < each; i++) await post(agent, target, preToolUse(cwd))
      }))
      const ms = performance.now() - t0
      agent.destroy()
      return { ops: each * CONCURRENCY, ms }
    }
    const httpRounds = options.quick ? 3 : 9
    const h = await interleaveMany(httpRounds, [
      { name: "guard", run: sequential(port) },
      { name: "bare", run: sequential(barePort) },
      { name: "guard16", run: concurrent(port) },
      { name: "bare16", run: concurrent(barePort) }
    ], { log: options.log, label: "claude_code.hook (http)", warmup: true })

    const processFigure = (name: string, side: string, goal: Goal | null, note: string): Figure => {
      const subject = p[side]!
      const ratio = median(subject.map((s, i) => s.ms / p["node"]![i]!.ms))
      return {
        name,
        value: median(subject.map((s) => s.ms)),
        unit: "ms",
        baseline: NODE,
        baseline_value: median(p["node"]!.map((s) => s.ms)),
        ratio,
        goal,
        met: meets(goal, ratio),
        note
      }
    }
    const wrapper = median(p["wrapped"]!.map((s, i) => s.ms - p["node"]![i]!.ms))
    const where = `${rounds} rounds, one process per side per round after a warm-up, the command line install ` +
      `writes (node and the bin's real path through the fail-closed /bin/sh wrapper) run with /bin/sh -c as ` +
      `Claude Code runs it, wall time of spawnSync, ratio against node -e 0; the wrapper alone (node -e 0 ` +
      `through it) adds ${wrapper.toFixed(1)} ms`
    const rtt = median(h["guard"]!.map((s) => s.ms))
    const rate = (s: Sample) => s.ops / (s.ms / 1000)
    const guard16 = median(h["guard16"]!.map(rate))
    return [
      processFigure(
        "claude_code.hook.command",
        "command",
        COMMAND_GOAL,
        `one PreToolUse through session-journal claude-code hook (built, a policy of two guards, durable append) (${where})`
      ),
      processFigure(
        "claude_code.hook.command.long_session",
        "long",
        null,
        `the same through the command hook on a session that already holds ${longCalls} tool calls ` +
          `(journaled through a guard of its own before the rounds; each round adds one) (${where})`
      ),
      processFigure(
        "claude_code.hook.forward",
        "forward",
        FORWARD_GOAL,
        `one PreToolUse through claude-code forward to the resident guard (the guard's installed form) (${where})`
      ),
      {
        name: "claude_code.hook.http",
        value: rtt,
        unit: "ms",
        baseline: BARE,
        baseline_value: median(h["bare"]!.map((s) => s.ms)),
        ratio: median(h["guard"]!.map((s, i) => s.ms / h["bare"]![i]!.ms)),
        goal: HTTP_GOAL,
        goal_value: rtt,
        met: meets(HTTP_GOAL, rtt),
        note: `median round trip of one PreToolUse posted to the resident guard on a kept-alive loopback connection, ` +
          `decision and durable append included (${httpRounds} rounds of ${perRound} sequential requests; each round's median, then their median)`
      },
      {
        name: "claude_code.hook.http_concurrent",
        value: guard16,
        unit: "decisions/s",
        baseline: BARE,
        baseline_value: median(h["bare16"]!.map(rate)),
        ratio: median(h["guard16"]!.map((s, i) => rate(s) / rate(h["bare16"]![i]!))),
        goal: CONCURRENT_GOAL,
        goal_value: guard16,
        met: meets(CONCURRENT_GOAL, guard16),
        note:
          `${CONCURRENCY} hooks in flight on one session (${CONCURRENCY} kept-alive connections), ${httpRounds} rounds`
      }
    ]
  } finally {
    for (const child of children) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM")
        await new Promise((resolve) => child.once("exit", resolve))
      }
    }
    removeDir(dir)
  }
}

/** `claude_code.hook.command`, `.forward`, `.http` and `.http_concurrent`. */
export const claudeCodeHook: Scenario = { name: "claude_code.hook", figures: FIGURES, run }
