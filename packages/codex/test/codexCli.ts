/**
 * Runs the real Codex CLI (the pinned native binary, `scripts/codex.sh`) offline
 * against the fake Responses API of `fakeResponses.ts`, as
 * docs/codex-PROTOCOL.md (f) describes: a temporary HOME, `CODEX_HOME` and
 * TMPDIR, a `config.toml` whose provider is the fake (updates, analytics and
 * plugins off), the fake as HTTP(S) proxy (it refuses `CONNECT`), `codex exec
 * --skip-git-repo-check -s workspace-write PROMPT` with stdin closed.
 */
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as Fake from "./fakeResponses.ts"
import type { FakeResponses } from "./fakeResponses.ts"

/** The version `scripts/codex.sh` installs and PROTOCOL.md describes. */
export const CODEX_VERSION = "0.169.0"

/** The variable `.ci/run` sets to the binary's path. */
export const BIN_VAR = "SESSION_JOURNAL_CODEX_BIN"

/**
 * Where the binary is: `$SESSION_JOURNAL_CODEX_BIN`, else the cache
 * `scripts/codex.sh` installs into (`$SESSION_JOURNAL_CODEX_CACHE`, else
 * `${XDG_CACHE_HOME:-~/.cache}/session-journal/codex-<version>`); null when
 * neither holds an executable.
 */
export const findBinary = (): string | null => {
  const given = process.env[BIN_VAR]
  const cache = process.env["SESSION_JOURNAL_CODEX_CACHE"] ??
    path.join(
      process.env["XDG_CACHE_HOME"] ?? path.join(os.homedir(), ".cache"),
      "session-journal",
      `codex-${CODEX_VERSION}`
    )
  const arch = os.arch() === "arm64" ? ["arm64", "aarch64"] : ["x64", "x86_64"]
  const candidate = given !== undefined && given !== ""
    ? given
    : path.join(
      cache,
      "node_modules",
      "@openai",
      `codex-linux-${arch[0]}`,
      "vendor",
      `${arch[1]}-unknown-linux-musl`,
      "bin",
      "codex"
    )
  try {
    fs.accessSync(candidate, fs.constants.X_OK)
    return candidate
  } catch {
    return null
  }
}

/** The binary, or null; tests skip with `SKIP_REASON` when it is null. */
export const CODEX_BIN: string | null = findBinary()

/** Why the real-CLI tests are skipped when they are. */
export const SKIP_REASON =
  `the Codex CLI ${CODEX_VERSION} is not installed: run scripts/codex.sh (or set ${BIN_VAR}); .ci/run does`

if (CODEX_BIN === null) process.stderr.write(`skipping the real Codex CLI tests: ${SKIP_REASON}\n`)

/** A temporary Codex home: HOME, CODEX_HOME (with the fake's provider), TMPDIR and a working directory. */
export interface Home {
  readonly dir: string
  readonly home: string
  readonly codexHome: string
  readonly config: string
  readonly work: string
  readonly tmp: string
  /** The environment Codex (and our commands about it) runs with. */
  readonly env: Record<string, string>
}

/** The `config.toml` of PROTOCOL.md (f) with the fake at `api.url` as provider. */
export const baseConfig = (api: FakeResponses): string =>
  [
    `model = "gpt-5.5"`,
    `model_provider = "fake"`,
    `check_for_update_on_startup = false`,
    ``,
    `[model_providers.fake]`,
    `name = "fake"`,
    `base_url = "${api.url}/v1"`,
    `wire_api = "responses"`,
    `env_key = "FAKE_API_KEY"`,
    ``,
    `[analytics]`,
    `enabled = false`,
    ``,
    `[features]`,
    `plugins = false`,
    ``
  ].join("\n")

/** Makes a fresh home for one run, its config pointing at `api`. */
export const makeHome = (api: FakeResponses, base: NodeJS.ProcessEnv): Home => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-codex-"))
  const home = path.join(dir, "home")
  const codexHome = path.join(home, ".codex")
  const work = path.join(dir, "work")
  const tmp = path.join(dir, "tmp")
  for (const d of [codexHome, work, tmp]) fs.mkdirSync(d, { recursive: true })
  const config = path.join(codexHome, "config.toml")
  fs.writeFileSync(config, baseConfig(api))
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(base)) if (v !== undefined) env[k] = v
  Object.assign(env, {
    HOME: home,
    CODEX_HOME: codexHome,
    TMPDIR: tmp,
    FAKE_API_KEY: "sk-test",
    HTTPS_PROXY: api.url,
    HTTP_PROXY: api.url,
    ALL_PROXY: api.url,
    NO_PROXY: "127.0.0.1,localhost"
  })
  return { dir, home, codexHome, config, work, tmp, env }
}

/** What a run gave. */
export interface Run {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly timedOut: boolean
  readonly stdout: string
  readonly stderr: string
}

/** Runs `codex exec` in `home.work` with `prompt`; killed (its process group) after `timeoutMs` (default 90 s). */
export const exec = (
  home: Home,
  prompt: string,
  options?: { readonly args?: ReadonlyArray<string>; readonly timeoutMs?: number }
): Promise<Run> => {
  if (CODEX_BIN === null) throw new Error(SKIP_REASON)
  const child = spawn(
    CODEX_BIN,
    ["exec", "--skip-git-repo-check", "-s", "workspace-write", ...(options?.args ?? []), prompt],
    { cwd: home.work, env: home.env, stdio: ["ignore", "pipe", "pipe"], detached: true }
  )
  let stdout = ""
  let stderr = ""
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString("utf8")))
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString("utf8")))
  let timedOut = false
  const timer = setTimeout(() => {
    timedOut = true
    try {
      process.kill(-child.pid!, "SIGKILL")
    } catch {
      // already gone
    }
  }, options?.timeoutMs ?? 90_000)
  return new Promise((resolve) => {
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, timedOut, stdout, stderr })
    })
  })
}

/** The rollout files under a home's `sessions/`. */
export const rollouts = (home: Home): Array<string> => {
  const out: Array<string> = []
  const walk = (d: string) => {
    if (!fs.existsSync(d)) return
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name)
      if (e.isDirectory()) walk(p)
      else if (e.name.startsWith("rollout-") && e.name.endsWith(".jsonl")) out.push(p)
    }
  }
  walk(path.join(home.codexHome, "sessions"))
  return out.sort()
}

/**
 * A test file's fakes and homes: `start` runs a fake of the Responses API with
 * `script` and makes a home pointing at it (with `base` as its environment); both
 * are closed and removed after the file's tests (a real Codex's homes take longer to
 * remove on a busy machine than a hook's default 10 s, hence the long bound).
 */
export const scratch = (base: NodeJS.ProcessEnv) => {
  const homes: Array<Home> = []
  const apis: Array<FakeResponses> = []
  afterAll(async () => {
    for (const api of apis.splice(0)) await api.close()
    for (const h of homes.splice(0)) fs.rmSync(h.dir, { recursive: true, force: true })
  }, 600_000)
  return {
    start: async (script: Fake.Script): Promise<{ readonly api: FakeResponses; readonly home: Home }> => {
      const api = await Fake.start(script)
      apis.push(api)
      const home = makeHome(api, base)
      homes.push(home)
      return { api, home }
    }
  }
}
