/**
 * Runs the `session-journal` command against temporary directories, for the
 * command's tests: in the test's process by default (`src/InProcess.ts`), the
 * real binary in a child process where the process matters (signals, the bin).
 *
 * The binary a child process runs is the command as it ships, built from the
 * workspace's current sources when a test file loads this module: the package's
 * bin file beside the package's manifest, its `#main` the bundle of `src/main.ts`
 * (`scripts/bundle.ts`, as `pnpm build` makes it). The build is shared by the test
 * files and by later runs while the sources stay the same (its directory is named
 * by a hash of every package's sources and manifest, the bundler and the lockfile),
 * so a test never runs a stale build, and a child process does not load the
 * TypeScript sources module by module (seconds of CPU at each start, where the
 * bundle takes a fraction of one).
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const PACKAGE = fileURLToPath(new URL("../", import.meta.url))
const REPO = fileURLToPath(new URL("../../../", import.meta.url))
const BUNDLE_SCRIPT = fileURLToPath(new URL("../../../scripts/bundle.ts", import.meta.url))
/** The package's own bin file (a shell script and an ES module that imports `#main`). */
const PACKAGE_BIN = fileURLToPath(new URL("../bin/session-journal.js", import.meta.url))

/**
 * Bundles the command from its TypeScript sources into `output`, as it ships
 * (`scripts/bundle.ts`), for tests whose hooks must start like the shipped command.
 */
export const bundleFromSources = (output: string): string => {
  const options = JSON.stringify({
    dir: PACKAGE,
    input: path.join(PACKAGE, "src", "main.ts"),
    output,
    conditions: ["@session-journal/source"]
  })
  const env = { ...process.env }
  delete env["NODE_OPTIONS"]
  const ran = spawnSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `const m = await import(${JSON.stringify(pathToFileURL(BUNDLE_SCRIPT).href)}); await m.bundleCommand(${options})`
    ],
    { cwd: PACKAGE, env, encoding: "utf8" }
  )
  if (ran.status !== 0) throw new Error(`bundling failed (${ran.status}): ${ran.stderr}`)
  return output
}

/** A hash of what the command's build is made of: every package's sources and manifest, the bundler, the lockfile, the bin. */
const sourcesHash = (): string => {
  const hash = crypto.createHash("sha256")
  const add = (file: string) => {
    hash.update(path.relative(REPO, file))
    hash.update("\0")
    hash.update(fs.readFileSync(file))
    hash.update("\0")
  }
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name < b.name ? -1 : 1)) {
      const p = path.join(dir, entry.name)
      if (entry.isDirectory()) walk(p)
      else if (entry.isFile()) add(p)
    }
  }
  for (const name of fs.readdirSync(path.join(REPO, "packages")).sort()) {
    const dir = path.join(REPO, "packages", name)
    if (fs.existsSync(path.join(dir, "package.json"))) add(path.join(dir, "package.json"))
    if (fs.existsSync(path.join(dir, "src"))) walk(path.join(dir, "src"))
  }
  add(BUNDLE_SCRIPT)
  add(path.join(REPO, "pnpm-lock.yaml"))
  add(PACKAGE_BIN)
  return hash.digest("hex").slice(0, 24)
}

// Builds of other states of the sources left a day ago or more (a run of another
// checkout may still use a newer one); each is a few megabytes.
const STALE_MILLIS = 24 * 3_600_000
const removeStale = (kept: string): void => {
  const dir = path.dirname(kept)
  for (const name of fs.readdirSync(dir)) {
    const p = path.join(dir, name)
    if (!/^sj-command-[0-9a-f]{24}$/.test(name) || p === kept) continue
    try {
      if (Date.now() - fs.statSync(p).mtimeMs >= STALE_MILLIS) fs.rmSync(p, { recursive: true, force: true })
    } catch {
      // Gone already, or not ours to remove.
    }
  }
}

const sleepSync = (ms: number): void => {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/**
 * The command as it ships, built from the current sources into a directory of its
 * own (see the module's documentation); returns its bin file. One test file builds
 * it while the others wait (a lock directory, taken over once it is older than the
 * longest build); the build is staged and renamed into place whole.
 */
const shippedCommand = (): string => {
  const built = path.join(os.tmpdir(), `sj-command-${sourcesHash()}`)
  const bin = path.join(built, "bin", "session-journal.js")
  const complete = path.join(built, "complete")
  const lock = `${built}.lock`
  for (;;) {
    if (fs.existsSync(complete)) return bin
    try {
      fs.mkdirSync(lock)
    } catch {
      let age = 0
      try {
        age = Date.now() - fs.statSync(lock).mtimeMs
      } catch {
        continue
      }
      if (age > 300_000) fs.rmSync(lock, { recursive: true, force: true })
      else sleepSync(100)
      continue
    }
    try {
      if (fs.existsSync(complete)) return bin
      const staging = fs.mkdtempSync(`${built}.staging-`)
      try {
        const manifest = JSON.parse(fs.readFileSync(path.join(PACKAGE, "package.json"), "utf8")) as Record<
          string,
          unknown
        >
        const main = "./dist/bin/session-journal.js"
        fs.writeFileSync(
          path.join(staging, "package.json"),
          JSON.stringify({ ...manifest, imports: { "#main": main } }, null, 2)
        )
        fs.mkdirSync(path.join(staging, "bin"))
        fs.copyFileSync(PACKAGE_BIN, path.join(staging, "bin", "session-journal.js"))
        fs.chmodSync(path.join(staging, "bin", "session-journal.js"), 0o755)
        bundleFromSources(path.join(staging, main))
        fs.writeFileSync(path.join(staging, "complete"), "")
        fs.renameSync(staging, built)
        removeStale(built)
      } catch (e) {
        fs.rmSync(staging, { recursive: true, force: true })
        if (!fs.existsSync(complete)) throw e
      }
      return bin
    } finally {
      fs.rmSync(lock, { recursive: true, force: true })
    }
  }
}

/**
 * The bin file of the command as it ships, built from the current sources, run with
 * the Node of the test (Node 22).
 */
export const BIN = shippedCommand()

/** The bundle that `BIN` imports as `#main` (the command's one entry file, as `pnpm build` makes it). */
export const BUNDLE = path.join(path.dirname(BIN), "..", "dist", "bin", "session-journal.js")

/** The workspace's shim, as `pnpm install` creates it. */
export const SHIM = fileURLToPath(new URL("../../../node_modules/.bin/session-journal", import.meta.url))

export interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const made: Array<string> = []

/** A fresh temporary directory, removed by `cleanup`. */
export const tempDir = (): string => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "sj-cli-"))
  made.push(dir)
  return dir
}

/** Removes every directory `tempDir` made. */
export const cleanup = (): void => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true })
}

/** The test's environment without the variables that choose a journal (directory, PostgreSQL). */
export const baseEnv = (): NodeJS.ProcessEnv => {
  const env = { ...process.env }
  delete env["SESSION_JOURNAL_DIR"]
  delete env["SESSION_JOURNAL_PG_URL"]
  return env
}

/** Starts the binary; the caller reads and ends it. */
export const start = (
  args: ReadonlyArray<string>,
  options?: { readonly cwd?: string; readonly env?: NodeJS.ProcessEnv }
): ChildProcess =>
  spawn(process.execPath, [BIN, ...args], {
    cwd: options?.cwd ?? os.tmpdir(),
    env: { ...baseEnv(), ...options?.env },
    stdio: ["pipe", "pipe", "pipe"]
  })

/** How `run` runs the command. */
export interface RunOptions {
  readonly cwd?: string
  readonly env?: NodeJS.ProcessEnv
  readonly input?: string
  /** Another program to run instead of the bin (a process). */
  readonly command?: string
  /** Run the bin in a child process even without `cwd` or `command`. */
  readonly process?: boolean
}

// `claude-code forward` (the guard's command hook) is the bin's only (`main.ts`).
const onlyAProcess = (args: ReadonlyArray<string>): boolean => args[0] === "claude-code" && args[1] === "forward"

/**
 * Runs the command to completion, feeding `input` on stdin: in this process
 * (`src/InProcess.ts`) unless `cwd`, `command` or `process` asks for a child
 * process (the bin), or the command is `claude-code forward`. The environment
 * is the test's, as a child process gets it.
 */
export const run = (args: ReadonlyArray<string>, options?: RunOptions): Promise<Ran> =>
  options?.command !== undefined || options?.cwd !== undefined || options?.process === true || onlyAProcess(args)
    ? runProcess(args, options)
    : runInProcess(args, options)

/** Runs the command in this process, with the test's environment (as `run`). */
export const runInProcess = async (args: ReadonlyArray<string>, options?: RunOptions): Promise<Ran> => {
  const { run } = await import("../src/InProcess.ts")
  const outcome = await run(args, { env: { ...baseEnv(), ...options?.env }, stdin: options?.input })
  return { code: outcome.code, stdout: outcome.stdout, stderr: outcome.stderr }
}

/** Runs the binary (or `command`) to completion in a child process, feeding `input` on stdin. */
export const runProcess = (args: ReadonlyArray<string>, options?: RunOptions): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const child = options?.command === undefined
      ? start(args, options)
      : spawn(options.command, [...args], { cwd: options.cwd ?? os.tmpdir(), env: { ...baseEnv(), ...options.env } })
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout!.on("data", (b: Buffer) => out.push(b))
    child.stderr!.on("data", (b: Buffer) => err.push(b))
    child.on("error", reject)
    child.on(
      "close",
      (code) =>
        resolve({ code, stdout: Buffer.concat(out).toString("utf8"), stderr: Buffer.concat(err).toString("utf8") })
    )
    // A command may refuse its input unread past a bound and close its stdin (EPIPE here).
    child.stdin!.on("error", () => {})
    child.stdin!.end(options?.input ?? "")
  })

/** Resolves with the first stdout line of `child` that satisfies `predicate`. */
export const waitForLine = (child: ChildProcess, predicate: (line: string) => boolean): Promise<string> =>
  new Promise((resolve, reject) => {
    let buffer = ""
    const onData = (b: Buffer) => {
      buffer += b.toString("utf8")
      let nl: number
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl)
        buffer = buffer.slice(nl + 1)
        if (predicate(line)) {
          child.stdout!.off("data", onData)
          resolve(line)
          return
        }
      }
    }
    child.stdout!.on("data", onData)
    child.on("close", (code) => reject(new Error(`process ended (${code}) before the expected line`)))
  })

/** Waits for a child to exit and returns its code. */
export const exited = (child: ChildProcess): Promise<number | null> =>
  child.exitCode !== null
    ? Promise.resolve(child.exitCode)
    : new Promise((resolve) => child.on("close", (code) => resolve(code)))

/** Whether process `pid` is alive (signal 0 reaches it). */
export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Whether the filesystem adapter is available (the durable commands need it). */
export const hasNodeAdapter = async (): Promise<boolean> => {
  const mod: Record<string, unknown> = await import("@session-journal/node")
  return "NodePersistence" in mod
}

/** Every regular file under `dir`, relative, sorted. */
export const filesUnder = (dir: string): Array<string> => {
  const out: Array<string> = []
  const visit = (rel: string) => {
    for (const name of fs.readdirSync(path.join(dir, rel)).sort()) {
      const r = rel === "" ? name : `${rel}/${name}`
      const st = fs.lstatSync(path.join(dir, r))
      if (st.isDirectory()) visit(r)
      else if (st.isFile()) out.push(r)
    }
  }
  visit("")
  return out
}

/** Blocks until the process is gone or a zombie (a SIGKILLed child no longer answers once this returns). */
export const awaitDeath = (pid: number): void => {
  const pause = new Int32Array(new SharedArrayBuffer(4))
  for (let i = 0; i < 500; i++) {
    let status: string
    try {
      status = fs.readFileSync(`/proc/${pid}/status`, "utf8")
    } catch {
      return
    }
    if (/^State:\s+[ZX]/m.test(status)) return
    Atomics.wait(pause, 0, 0, 10)
  }
  throw new Error(`${pid} did not die`)
}

/** This machine's boot id, as a lock record names it (null without /proc). */
export const ownBoot: string | null = (() => {
  try {
    return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim()
  } catch {
    return null
  }
})()

/** This process's pid namespace, as a lock record names it (null without /proc). */
export const ownPidns: string | null = (() => {
  try {
    return fs.readlinkSync("/proc/self/ns/pid")
  } catch {
    return null
  }
})()

/** Ends, with SIGKILL, every one of `children` still running, and waits for each. */
export const killAll = async (children: ReadonlyArray<ChildProcess>): Promise<void> => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL")
      await exited(child)
    }
  }
}
