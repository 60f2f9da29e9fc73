/**
 * Runs the real Claude Code CLI (the pinned native binary, `scripts/claude-code.sh`)
 * offline against the fake Messages API of `fakeApi.ts`: a temporary HOME and
 * TMPDIR, the environment of PROTOCOL.md (f) (telemetry, updates and error reports
 * off, the proxy pointed at the fake, which refuses `CONNECT`), `-p` with
 * `--output-format stream-json --verbose`, and the project's
 * `$W/.claude/settings.json` holding the hooks under test. Returns the stream-json
 * lines, parsed.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import type { FakeApi } from "./fakeApi.ts"

/** The version `scripts/claude-code.sh` installs and PROTOCOL.md describes. */
export const CLAUDE_CODE_VERSION = "2.1.328"

/** The variable `.ci/run` sets to the binary's path. */
export const BIN_VAR = "SESSION_JOURNAL_CLAUDE_BIN"

/**
 * Where the binary is: `$SESSION_JOURNAL_CLAUDE_BIN`, else the cache
 * `scripts/claude-code.sh` installs into (`$SESSION_JOURNAL_CLAUDE_CACHE`, else
 * `${XDG_CACHE_HOME:-~/.cache}/session-journal/claude-code-<version>`); null when
 * neither holds an executable.
 */
export const findBinary = (): string | null => {
  const given = process.env[BIN_VAR]
  const cache = process.env["SESSION_JOURNAL_CLAUDE_CACHE"] ??
    path.join(
      process.env["XDG_CACHE_HOME"] ?? path.join(os.homedir(), ".cache"),
      "session-journal",
      `claude-code-${CLAUDE_CODE_VERSION}`
    )
  const candidate = given !== undefined && given !== "" ? given : path.join(cache, "node_modules", ".bin", "claude")
  try {
    fs.accessSync(candidate, fs.constants.X_OK)
    return candidate
  } catch {
    return null
  }
}

/** The binary, or null; tests skip with `SKIP_REASON` when it is null. */
export const CLAUDE_BIN: string | null = findBinary()

/** Why the real-CLI tests are skipped when they are. */
export const SKIP_REASON =
  `the Claude Code CLI ${CLAUDE_CODE_VERSION} is not installed: run scripts/claude-code.sh (or set ${BIN_VAR}); .ci/run does`

if (CLAUDE_BIN === null) process.stderr.write(`skipping the real Claude Code CLI tests: ${SKIP_REASON}\n`)

/** What to run. */
export interface Options {
  readonly api: FakeApi
  readonly prompt: string
  /** `--tools`: the tools offered to the model. */
  readonly tools: ReadonlyArray<string>
  /** `--allowedTools` (default: `tools`). */
  readonly allowedTools?: ReadonlyArray<string>
  /** Written to `$W/.claude/settings.json` (hooks go here). */
  readonly settings?: unknown
  /** The working directory `$W` (default: `work` in a fresh temporary directory). */
  readonly work?: string
  /** The temporary HOME (default: `home` next to `work`). */
  readonly home?: string
  /** Added to the environment (the hooks see it too). */
  readonly env?: Readonly<Record<string, string>>
  /** More arguments after the defaults. */
  readonly args?: ReadonlyArray<string>
  /** The whole run is killed (SIGKILL, its process group) after this (default 60 s). */
  readonly timeoutMs?: number
}

/** What a run gave. */
export interface Run {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly timedOut: boolean
  /** Every stdout line that parsed as JSON, in order. */
  readonly lines: ReadonlyArray<Record<string, unknown>>
  readonly stdout: string
  readonly stderr: string
  readonly home: string
  readonly work: string
  /** The last `result` line, if any. */
  readonly result: Record<string, unknown> | undefined
  /** `system/init`'s `session_id`, if it came. */
  readonly sessionId: string | undefined
}

const made: Array<string> = []

const lastResult = (lines: ReadonlyArray<Record<string, unknown>>): Record<string, unknown> | undefined => {
  for (let i = lines.length - 1; i >= 0; i--) if (lines[i]!["type"] === "result") return lines[i]
  return undefined
}

/** A fresh temporary directory (a real path: macOS and some CIs symlink /tmp), removed by `cleanup`. */
export const tempDir = (prefix = "sj-claude-"): string => {
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), prefix)))
  made.push(dir)
  return dir
}

/** Removes every directory `tempDir` made. */
export const cleanup = (): void => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
}

/**
 * The environment of an offline run (PROTOCOL.md (f)), built from nothing but
 * PATH, so no variable of the caller's (a real `ANTHROPIC_API_KEY`, a
 * `CLAUDE_CONFIG_DIR`) reaches the CLI.
 */
export const offlineEnv = (api: FakeApi, home: string): Record<string, string> => ({
  PATH: process.env["PATH"] ?? "/usr/bin:/bin",
  HOME: home,
  TMPDIR: path.join(home, "tmp"),
  LANG: "C.UTF-8",
  ANTHROPIC_BASE_URL: api.url,
  ANTHROPIC_API_KEY: "sk-test",
  DISABLE_TELEMETRY: "1",
  CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
  DISABLE_AUTOUPDATER: "1",
  DISABLE_ERROR_REPORTING: "1",
  HTTPS_PROXY: api.url,
  HTTP_PROXY: api.url,
  https_proxy: api.url,
  http_proxy: api.url,
  NO_PROXY: "127.0.0.1,localhost",
  no_proxy: "127.0.0.1,localhost"
})

/**
 * The part of the test's environment a hook needs to run our packages from their
 * TypeScript sources (`NODE_OPTIONS` with the `@session-journal/source` condition,
 * which Vitest sets): pass it as `env`. Hooks inherit the CLI's environment (plus
 * `CLAUDE_PROJECT_DIR`, `CLAUDE_CODE_SESSION_ID` and a few more of its own), and the
 * native binary itself ignores `NODE_OPTIONS`.
 */
export const sourcesEnv = (): Record<string, string> => {
  const options = process.env["NODE_OPTIONS"]
  return options === undefined || options === "" ? {} : { NODE_OPTIONS: options }
}

/** Runs `claude -p PROMPT` to its end (or the timeout) and parses its stream-json output. */
export const run = (options: Options): Promise<Run> => {
  const bin = CLAUDE_BIN
  if (bin === null) return Promise.reject(new Error(SKIP_REASON))
  const root = options.work === undefined || options.home === undefined ? tempDir() : undefined
  const work = options.work ?? path.join(root!, "work")
  const home = options.home ?? path.join(root!, "home")
  fs.mkdirSync(path.join(home, "tmp"), { recursive: true })
  fs.mkdirSync(work, { recursive: true })
  if (options.settings !== undefined) {
    fs.mkdirSync(path.join(work, ".claude"), { recursive: true })
    fs.writeFileSync(path.join(work, ".claude", "settings.json"), JSON.stringify(options.settings, null, 2))
  }
  const args = [
    "-p",
    options.prompt,
    "--output-format",
    "stream-json",
    "--verbose",
    "--tools",
    options.tools.join(","),
    "--allowedTools",
    (options.allowedTools ?? options.tools).join(","),
    ...(options.args ?? [])
  ]
  return new Promise((resolve, reject) => {
    // Its own process group, so a timeout also kills the hooks and shells it started.
    const child = spawn(bin, args, {
      cwd: work,
      env: { ...offlineEnv(options.api, home), ...options.env },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true
    })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      try {
        process.kill(-child.pid!, "SIGKILL")
      } catch {
        child.kill("SIGKILL")
      }
    }, options.timeoutMs ?? 60_000)
    child.stdout.on("data", (b: Buffer) => out.push(b))
    child.stderr.on("data", (b: Buffer) => err.push(b))
    child.on("error", (e) => {
      clearTimeout(timer)
      reject(e)
    })
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      const stdout = Buffer.concat(out).toString("utf8")
      const lines: Array<Record<string, unknown>> = []
      for (const line of stdout.split("\n")) {
        if (line.trim() === "") continue
        try {
          lines.push(JSON.parse(line) as Record<string, unknown>)
        } catch {
          // Not a stream-json line (the CLI writes nothing else to stdout in these runs).
        }
      }
      const init = lines.find((l) => l["type"] === "system" && l["subtype"] === "init")
      resolve({
        code,
        signal,
        timedOut,
        lines,
        stdout,
        stderr: Buffer.concat(err).toString("utf8"),
        home,
        work,
        result: lastResult(lines),
        sessionId: typeof init?.["session_id"] === "string" ? init["session_id"] : undefined
      })
    })
  })
}

/**
 * A `command` hook entry for settings.json that runs `script` (a JavaScript file)
 * with the Node of the test, passing `args`. `timeout` is in seconds (default 30:
 * a hook that times out fails open, which would pass a deny test's call on a
 * loaded machine).
 */
export const nodeHook = (script: string, args: ReadonlyArray<string> = [], timeout = 30) => ({
  type: "command",
  command: [process.execPath, script, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(" "),
  timeout
})
