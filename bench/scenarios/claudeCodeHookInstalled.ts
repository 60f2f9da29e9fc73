/**
 * `claude_code.hook.installed.*`: the wall time our installed hooks add to each
 * tool call of a real Claude Code CLI session, as a user feels it.
 *
 * The real CLI (`$SESSION_JOURNAL_CLAUDE_BIN`, else the cache
 * `scripts/claude-code.sh` installs into) runs offline against the fake Messages
 * API of the claude-code package's tests, with a script of N turns of one `Read`
 * each, then a text turn. Three projects, each with its own HOME:
 *
 * - none: no hooks;
 * - command: `session-journal claude-code install --project DIR --policy FILE
 *   --root DIR` (the command hook, a process per event);
 * - forward: `session-journal claude-code install --project DIR --guard URL`
 *   against a running `claude-code guard` (the forwarder, a process per event
 *   posting to the guard).
 *
 * Each project runs a session of N calls and one of none, interleaved; what the
 * hooks add per tool call is `((hooked N − hooked 0) − (none N − none 0)) / N`,
 * so what every session pays once (SessionStart, UserPromptSubmit, Stop) is not
 * counted per call; it is given in the note. Reported, no goal. Not run without
 * the CLI binary or the built command.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Claude from "../../packages/claude-code/test/claudeCli.ts"
import * as Fake from "../../packages/claude-code/test/fakeApi.ts"
import { builtEnv, loadCli, repoRoot } from "../lib/adapters.ts"
import { removeDir, tempDir } from "../lib/env.ts"
import {
  type Figure,
  interleaveMany,
  median,
  notRun,
  type RunOptions,
  type Sample,
  type Scenario
} from "../lib/harness.ts"

const FIGURES = ["claude_code.hook.installed.command", "claude_code.hook.installed.forward"]
const BASELINE = "the same session without hooks (per tool call)"
const TOKEN = "bench-installed-token-0123456789abcdef"

const listening = (child: ChildProcess): Promise<string> =>
  new Promise((resolve, reject) => {
    let buffer = ""
    child.stdout!.on("data", (b: Buffer) => {
      buffer += b.toString("utf8")
      const m = /listening at (http:\/\/127\.0\.0\.1:[0-9]+\/hook)/.exec(buffer)
      if (m !== null) resolve(m[1]!)
    })
    child.on("exit", (code) => reject(new Error(`the guard exited ${code} before listening: ${buffer}`)))
  })

interface Project {
  readonly name: string
  readonly work: string
  readonly home: string
}

const run = async (options: RunOptions): Promise<ReadonlyArray<Figure>> => {
  const claude = Claude.findBinary()
  if (claude === null) return FIGURES.map((n) => notRun(n, "ms", BASELINE, null, Claude.SKIP_REASON))
  const cli = loadCli()
  if (!cli.ok) return FIGURES.map((n) => notRun(n, "ms", BASELINE, null, cli.why))
  const dir = tempDir("cc-installed")
  let guard: ChildProcess | undefined
  try {
    const bin = fs.realpathSync(path.join(repoRoot, "packages", "cli", "bin", "session-journal.js"))
    const env = builtEnv({ SESSION_JOURNAL_GUARD_TOKEN: TOKEN })
    const policy = path.join(dir, "policy.json")
    fs.writeFileSync(policy, JSON.stringify([{ maxStreak: 1_000_000_000 }, { denyList: ["rm"] }]))
    guard = spawn(process.execPath, [
      bin,
      "claude-code",
      "guard",
      "--port",
      "0",
      "--root",
      path.join(dir, "guard-journal"),
      "--policy",
      policy
    ], { env, stdio: ["ignore", "pipe", "inherit"] })
    const url = await listening(guard)

    const project = (name: string, install: ReadonlyArray<string> | null): Project => {
      const work = path.join(dir, name, "work")
      const home = path.join(dir, name, "home")
      fs.mkdirSync(work, { recursive: true })
      fs.mkdirSync(home, { recursive: true })
      fs.writeFileSync(path.join(work, "notes.txt"), "one line\n")
      if (install !== null) {
        // As a user installs them: this Node and the bin, from the project's parent.
        const out = spawnSync(process.execPath, [bin, "claude-code", "install", "--project", work, ...install], {
          cwd: path.dirname(work),
          encoding: "utf8",
          env: { ...env, HOME: home }
        })
        if (out.status !== 0) throw new Error(`install for ${name} exited ${out.status}: ${out.stderr}`)
      }
      return { name, work, home }
    }
    const none = project("none", null)
    const command = project("command", ["--policy", policy, "--root", path.join(dir, "command-journal")])
    const forward = project("forward", ["--guard", url])

    const calls = options.quick ? 4 : 8
    const session = (p: Project, n: number) => async (): Promise<Sample> => {
      const file = path.join(p.work, "notes.txt")
      const turns = [
        ...Array.from({ length: n }, () => Fake.tools({ name: "Read", input: { file_path: file } })),
        Fake.text("done")
      ]
      // By the conversation's turn, not the request's index: a request the CLI
      // retries gets the same answer.
      const api = await Fake.start(Fake.perConversation(() => turns))
      try {
        const t0 = performance.now()
        const r = await Claude.run({
          api,
          prompt: "Read the notes.",
          tools: ["Read"],
          work: p.work,
          home: p.home,
          env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN },
          timeoutMs: 120_000
        })
        const ms = performance.now() - t0
        if (r.timedOut || r.code !== 0 || r.result?.["is_error"] === true) {
          throw new Error(`claude in ${p.name} ended ${r.code}${r.timedOut ? " (timed out)" : ""}: ${r.stderr}`)
        }
        // Every call ran (no hook denied it) and the session ended with the script.
        // (The last request holds the whole conversation; the CLI may add a message
        // of its own after a tool result.)
        const results = (api.requests.at(-1)?.messages ?? []).flatMap((m) =>
          m.role === "user" && typeof m.content !== "string"
            ? m.content.filter((b) => b["type"] === "tool_result")
            : []
        )
        if (results.length !== n || results.some((b) => b["is_error"] === true)) {
          throw new Error(`claude in ${p.name}: ${results.length} tool results of ${n}: ${JSON.stringify(results)}`)
        }
        if (api.connects.length > 0) throw new Error(`claude tried to leave the machine: ${api.connects.join(", ")}`)
        return { ops: Math.max(n, 1), ms }
      } finally {
        await api.close()
      }
    }
    const rounds = options.quick ? 1 : 5
    const s = await interleaveMany(
      rounds,
      [none, command, forward].flatMap((p) => [
        { name: `${p.name}N`, run: session(p, calls) },
        { name: `${p.name}0`, run: session(p, 0) }
      ]),
      { log: options.log, label: "claude_code.hook.installed (sessions)", warmup: true }
    )
    // The hooks really ran: each journal holds the session's entries.
    const journaled = (d: string) => fs.existsSync(d) && fs.readdirSync(d, { recursive: true }).length > 0
    if (!journaled(path.join(dir, "command-journal"))) throw new Error("the command hooks journaled nothing")
    if (!journaled(path.join(dir, "guard-journal"))) throw new Error("the guard journaled nothing")

    const ms = (side: string, i: number) => s[side]![i]!.ms
    const perCall = (side: string, i: number) => (ms(`${side}N`, i) - ms(`${side}0`, i)) / calls
    const figure = (side: string, name: string, what: string): Figure => {
      const indices = s[`${side}N`]!.map((_, i) => i)
      const added = median(indices.map((i) => perCall(side, i) - perCall("none", i)))
      const once = median(indices.map((i) => ms(`${side}0`, i) - ms("none0", i)))
      return {
        name,
        value: added,
        unit: "ms",
        baseline: BASELINE,
        baseline_value: median(indices.map((i) => perCall("none", i))),
        ratio: median(indices.map((i) => perCall(side, i) / perCall("none", i))),
        goal: null,
        met: null,
        note: `wall time ${what} add to each tool call of a real Claude Code CLI session ` +
          `(${path.basename(claude)} ${Claude.CLAUDE_CODE_VERSION}, offline against the fake Messages API, ` +
          `${calls} turns of one Read each; value: ((hooked ${calls} calls − hooked 0) − (none ${calls} − none 0)) / ${calls}, ` +
          `baseline: a tool call's time without hooks, ratio: per-call time with hooks / without; ${rounds} rounds ` +
          `after a warm-up, medians); once per session (session start, prompt, stop) they add ${once.toFixed(0)} ms; ` +
          `a whole ${calls}-call session takes ${median(s[`${side}N`]!.map((x) => x.ms)).toFixed(0)} ms against ` +
          `${median(s["noneN"]!.map((x) => x.ms)).toFixed(0)} ms without hooks`
      }
    }
    return [
      figure(
        "command",
        "claude_code.hook.installed.command",
        "the command hooks (install --project DIR --policy FILE --root DIR)"
      ),
      figure("forward", "claude_code.hook.installed.forward", "the forwarder hooks and the guard (install --guard URL)")
    ]
  } finally {
    if (guard !== undefined && guard.exitCode === null && guard.signalCode === null) {
      guard.kill("SIGTERM")
      await new Promise((resolve) => guard!.once("exit", resolve))
    }
    Claude.cleanup()
    removeDir(dir)
  }
}

/** `claude_code.hook.installed.command` and `.forward`. */
export const claudeCodeHookInstalled: Scenario = { name: "claude_code.hook.installed", figures: FIGURES, run }
