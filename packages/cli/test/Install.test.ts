/**
 * The packages as a host application gets them: builds the workspace, packs every
 * package under packages/, installs only those tarballs (plus their registry
 * dependencies) into a fresh project outside the workspace with plain npm, and then
 * type-checks a host program and every README's ```ts snippets against the installed
 * declarations, runs the root README's library example on Node 22 and on Node 20 and
 * every other snippet that can run without a model, runs the installed
 * `session-journal` command, and counts the copies of `effect`.
 *
 * Nothing is reused between runs: the host project is new each time (npm's download cache
 * only saves fetching registry packages again; the workspace's own packages come from the
 * tarballs), packed from a copy of the workspace (so the test files that run the
 * workspace's own build at the same time are not disturbed).
 *
 * The normal suite packs the `dist/` that `pnpm build` made (the build script always
 * starts from empty `dist/` directories, so a removed module cannot live on), checks what
 * is published in the tarballs themselves, and checks the command's tarball for
 * dependencies rather than installing it globally. STRESS=1 adds the rest: a build from
 * scratch in the copy, npm's own `pack --dry-run` listing, and the command's tarball
 * installed alone with `npm install -g` running demo, verify and the installer's help.
 */
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import {
  EXAMPLE_INPUT,
  findCache as findMcpCache,
  FIXTURE_SERVER,
  fixtureEnv
} from "@session-journal/mcp/test/mcpCache"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as module from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, describe, it } from "vitest"

const ROOT = fileURLToPath(new URL("../../../", import.meta.url))
const STRESS = process.env["STRESS"] === "1"
const TSC = path.join(ROOT, "node_modules", ".bin", "tsc")
/** The workspace's Node 22 (the `node` devDependency), not the `.bin/node` wrapper. */
const NODE22 = process.execPath

interface Manifest {
  readonly name: string
  readonly version: string
  readonly private?: boolean
  readonly dependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
}

const readJson = <A>(file: string): A => JSON.parse(fs.readFileSync(file, "utf8")) as A

const work = fs.mkdtempSync(path.join(os.tmpdir(), "sj-install-"))

/**
 * A copy of the workspace to build and pack: the build empties `dist/` first, and
 * the other test files, running at the same time, start the workspace's own built
 * command and packages. The sources, scripts and configuration are copied; each
 * package's `node_modules` keeps its links as they are (relative, so the workspace's
 * own packages resolve inside the copy) and the root's `node_modules` is a link to
 * the workspace's.
 */
const WORKSPACE = path.join(work, "workspace")
const copyWorkspace = (withDist: boolean): void => {
  const skip = new Set([...(withDist ? [] : ["dist"]), ".tsbuild", "test", ".vite-temp", ".session-journal"])
  for (const name of ["package.json", "pnpm-workspace.yaml", "pnpm-lock.yaml", "tsconfig.base.json", "tsconfig.json"]) {
    fs.copyFileSync(path.join(ROOT, name), path.join(WORKSPACE, name))
  }
  fs.cpSync(path.join(ROOT, "scripts"), path.join(WORKSPACE, "scripts"), { recursive: true })
  fs.cpSync(path.join(ROOT, "packages"), path.join(WORKSPACE, "packages"), {
    recursive: true,
    verbatimSymlinks: true,
    filter: (source) => !skip.has(path.basename(source))
  })
  fs.symlinkSync(path.join(ROOT, "node_modules"), path.join(WORKSPACE, "node_modules"))
}
fs.mkdirSync(WORKSPACE)

/** Every publishable package of the workspace (in the copy): a directory under packages/ with a package.json. */
const packages = fs.readdirSync(path.join(ROOT, "packages"))
  .map((name) => path.join(WORKSPACE, "packages", name))
  .filter((dir) => fs.existsSync(path.join(ROOT, "packages", path.basename(dir), "package.json")))
  .map((dir) => ({
    dir,
    manifest: readJson<Manifest>(path.join(ROOT, "packages", path.basename(dir), "package.json"))
  }))
  .filter((p) => p.manifest.private !== true)

/**
 * A clean environment for the host's processes: no export condition of the
 * workspace (the tests run the sources through NODE_OPTIONS), no npm or pnpm
 * settings inherited from the script that started the tests.
 */
const hostEnv = (extra?: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (k === "NODE_OPTIONS" || k.startsWith("npm_") || k.startsWith("NPM_") || k.startsWith("PNPM_")) continue
    if (k.startsWith("VITEST") || k === "NODE_ENV" || k.startsWith("SESSION_JOURNAL_")) continue
    env[k] = v
  }
  return { ...env, ...extra }
}

/** Runs a command to completion; fails the test with its output when it exits non-zero. */
const sh = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv; readonly input?: string }
): string => {
  const ran = spawnSync(command, [...args], {
    cwd: options.cwd,
    input: options.input,
    env: options.env ?? hostEnv(),
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  if (ran.error !== undefined) throw ran.error
  if (ran.status !== 0) {
    throw new Error(`${command} ${args.join(" ")} exited ${ran.status} in ${options.cwd}\n${ran.stdout}\n${ran.stderr}`)
  }
  return ran.stdout + ran.stderr
}

/** The machine's Node 20: the first `node` on PATH (outside the workspace) whose version is 20. */
const findNode20 = (): string | undefined => {
  for (const dir of (process.env["PATH"] ?? "").split(path.delimiter)) {
    if (dir === "" || dir.startsWith(ROOT)) continue
    const candidate = path.join(dir, "node")
    if (!fs.existsSync(candidate)) continue
    const version = spawnSync(candidate, ["--version"], { encoding: "utf8", env: hostEnv() }).stdout ?? ""
    if (version.startsWith("v20.")) return candidate
  }
  return ["/usr/bin/node", "/usr/local/bin/node"].find((c) =>
    fs.existsSync(c) && (spawnSync(c, ["--version"], { encoding: "utf8" }).stdout ?? "").startsWith("v20.")
  )
}

/** pnpm as the test was started with it (`pnpm test`), else the README's `npx -y pnpm@10`. */
const pnpm = (): { readonly command: string; readonly args: ReadonlyArray<string> } => {
  const execpath = process.env["npm_execpath"]
  return execpath !== undefined && /pnpm\.c?js$/.test(execpath)
    ? { command: NODE22, args: [execpath] }
    : { command: "npx", args: ["-y", "pnpm@10"] }
}

/** The READMEs a user reads: the root's and each published package's. */
const READMES = ["README.md", ...fs.readdirSync(path.join(ROOT, "packages")).map((p) => `packages/${p}/README.md`)]
  .filter((f) => fs.existsSync(path.join(ROOT, f)))

/** A ```ts block of a README, named `<README path>#<n>` (n from 1 in each file). */
interface Snippet {
  readonly id: string
  readonly code: string
}

/** Every ```ts block of every README. */
const snippets = (): Array<Snippet> =>
  READMES.flatMap((file) =>
    [...fs.readFileSync(path.join(ROOT, file), "utf8").matchAll(/```ts\n([\s\S]*?)```/g)].map((m, i) => ({
      id: `${file}#${i + 1}`,
      code: m[1]!
    }))
  )

/**
 * What the test does with each snippet beyond type-checking it: run it and look for
 * `expect` in its output, or say why it only type-checks. A README snippet added
 * without an entry here fails the test.
 */
const RUNS: Record<string, { readonly expect: string } | { readonly checkOnly: string }> = {
  "README.md#1": { expect: "deploy may not follow write_file" },
  "README.md#2": { checkOnly: "it runs Claude Code against a model" },
  "packages/ai/README.md#1": { expect: "ships tomorrow" },
  "packages/claude-code/README.md#1": { expect: "" },
  "packages/claude-code/README.md#2": { expect: "WebFetch is on the deny list" },
  "packages/claude-code/README.md#3": { checkOnly: "it runs Claude Code against a model" },
  "packages/claude-code/README.md#4": { checkOnly: "it runs Claude Code against a model" },
  "packages/core/README.md#1": { expect: "5 consistent true" },
  "packages/core/README.md#2": { expect: "calls: 1n" },
  "packages/mcp/README.md#1": { expect: "2 calls, 1 denied" },
  "packages/node/README.md#1": { expect: "" },
  "packages/postgres/README.md#1": { expect: "" }
}

/** The file name of a snippet in the host project. */
const fileOf = (id: string): string =>
  id.replace(/^packages\//, "").replace(/\/README\.md#|README\.md#/, "-").replace(/^-/, "root-")

/** A snippet that imports the Agent SDK, which the host installs from the Claude Code cache. */
const needsAgentSdk = (s: Snippet): boolean => s.code.includes(`from "@anthropic-ai/claude-agent-sdk"`)

/** Every installed copy of a package under `dir`/node_modules, at any depth. */
const copiesOf = (dir: string, name: string): Array<string> => {
  const found: Array<string> = []
  const visit = (nodeModules: string) => {
    if (!fs.existsSync(nodeModules)) return
    for (const entry of fs.readdirSync(nodeModules)) {
      if (entry.startsWith(".")) continue
      const names = entry.startsWith("@")
        ? fs.readdirSync(path.join(nodeModules, entry)).map((n) => `${entry}/${n}`)
        : [entry]
      for (const n of names) {
        const pkgDir = path.join(nodeModules, n)
        if (n === name) found.push(pkgDir)
        visit(path.join(pkgDir, "node_modules"))
      }
    }
  }
  visit(path.join(dir, "node_modules"))
  return found
}

/** Paths a published package must not hold: tests, fixtures, benchmarks, build state. */
const NOT_PUBLISHED =
  /(^|\/)(test|tests|__tests__|fixtures|bench|benchmarks?|examples|\.tsbuild)(\/|$)|\.(test|spec|bench)\.[cm]?[jt]s$|\.tsbuildinfo$/

/** Wall time of each step, printed at the end (the test's budget is about a minute). */
const steps: Array<string> = []
let last = Date.now()
const step = (name: string): void => {
  const now = Date.now()
  steps.push(`${name} ${((now - last) / 1000).toFixed(1)} s`)
  last = now
}

/** Bytes of every file under `dir` (links not followed). */
const bytesUnder = (dir: string): number =>
  fs.readdirSync(dir, { withFileTypes: true }).reduce((n, e) => {
    const p = path.join(dir, e.name)
    return n + (e.isDirectory() ? bytesUnder(p) : e.isFile() ? fs.statSync(p).size : 0)
  }, 0)

// Removing the installed tree (thousands of files) takes its time on a busy disk:
// no hook deadline.
afterAll(() => fs.rmSync(work, { recursive: true, force: true }), 600_000)

describe("the packages installed into a host application", () => {
  it(
    "build, pack, install with npm, type-check, run on Node 22 and 20, one copy of effect",
    { timeout: 300_000 },
    () => {
      const node20 = findNode20()
      assert.isDefined(node20, "no Node 20 on PATH: the library's oldest supported Node must be tested")

      // Versions move in step: every package has the same version, and the packages
      // depend on each other through the workspace (packed as that exact version).
      const version = packages[0]!.manifest.version
      for (const { manifest } of packages) {
        assert.strictEqual(manifest.version, version, `${manifest.name} is not at the workspace version ${version}`)
        assert.property(manifest.peerDependencies ?? {}, "effect", `${manifest.name}: effect must be a peer dependency`)
        assert.notProperty(manifest.dependencies ?? {}, "effect", `${manifest.name}: effect must not be a dependency`)
        for (const [dep, spec] of Object.entries(manifest.dependencies ?? {})) {
          if (dep.startsWith("@session-journal/")) assert.strictEqual(spec, "workspace:*", `${manifest.name} → ${dep}`)
        }
      }

      last = Date.now()
      // 1. A copy of the workspace: under STRESS=1 built from scratch there; in the normal
      //    suite with the dist/ of the workspace's own build (`pnpm build`, which always
      //    starts from empty dist/ directories).
      copyWorkspace(!STRESS)
      if (STRESS) {
        sh(NODE22, [path.join(WORKSPACE, "scripts", "build.ts")], { cwd: WORKSPACE })
      } else {
        for (const { dir, manifest } of packages) {
          assert.isTrue(fs.existsSync(path.join(dir, "dist", "index.js")), `${manifest.name} is built (pnpm build)`)
        }
      }

      step("build")

      // What a package publishes: no tests, fixtures or benchmark code; its entry and declarations.
      const assertPublishable = (name: string, files: ReadonlyArray<string>, what: string): void => {
        assert.deepStrictEqual(files.filter((f) => NOT_PUBLISHED.test(f)), [], `${name} would publish these (${what})`)
        assert.include(files, "dist/index.js", `${name}: dist/index.js is missing (is src/ its tsconfig's rootDir?)`)
        assert.include(files, "dist/index.d.ts", name)
      }

      // 2. What npm would publish (STRESS=1; the normal suite checks the tarballs pnpm packs, below).
      //    One npm process lists every package (npm takes several folders at once).
      if (STRESS) {
        const listed = JSON.parse(
          sh("npm", ["pack", "--dry-run", "--json", "--ignore-scripts", ...packages.map((p) => p.dir)], { cwd: work })
        ) as Array<{ readonly name: string; readonly files: ReadonlyArray<{ readonly path: string }> }>
        assert.strictEqual(listed.length, packages.length)
        for (const { manifest } of packages) {
          const files = listed.find((l) => l.name === manifest.name)!.files.map((f) => f.path)
          assertPublishable(manifest.name, files, "npm pack --dry-run")
        }
        step("npm pack --dry-run")
      }

      // 3. The tarballs, as pnpm publishes them (workspace:* becomes the version), and
      //    what each holds.
      const tarballs = path.join(work, "tarballs")
      const p = pnpm()
      sh(p.command, [...p.args, "-r", "--silent", "pack", "--pack-destination", tarballs], { cwd: WORKSPACE })
      const packed = fs.readdirSync(tarballs).filter((f) => f.endsWith(".tgz")).sort()
      assert.strictEqual(packed.length, packages.length, `packed ${packed.join(", ")}`)
      const tarballOf = (name: string): string =>
        packed.find((f) => f.startsWith(`${name.replace(/^@/, "").replace("/", "-")}-${version}.tgz`))!
      for (const { manifest } of packages) {
        const tarball = tarballOf(manifest.name)
        assert.isDefined(tarball, `${manifest.name} packed`)
        const files = sh("tar", ["-tzf", path.join(tarballs, tarball)], { cwd: work }).split("\n")
          .filter((f) => f !== "").map((f) => f.replace(/^package\//, ""))
        assertPublishable(manifest.name, files, "pnpm pack")
      }

      step("pnpm pack")

      // 4. A fresh host project outside the workspace, installed with plain npm.
      const host = path.join(work, "host")
      fs.mkdirSync(host)
      fs.writeFileSync(
        path.join(host, "package.json"),
        JSON.stringify({ name: "host-app", version: "1.0.0", private: true, type: "module" }, null, 2)
      )
      sh("npm", [
        "install",
        "--no-audit",
        "--no-fund",
        "--no-update-notifier",
        "--loglevel=error",
        ...packed.map((f) => path.join(tarballs, f)),
        "@types/node@22",
        // The Claude Code driver's and the MCP gateway's snippets run on Node's platform layer.
        "@effect/platform-node@4.1.0"
      ], { cwd: host })
      for (const { manifest } of packages) {
        assert.isTrue(
          fs.existsSync(path.join(host, "node_modules", manifest.name, "package.json")),
          `${manifest.name} installed`
        )
      }

      step("npm install")

      // 5. Exactly one copy of effect, the peer every package shares.
      const effects = copiesOf(host, "effect")
      assert.strictEqual(effects.length, 1, `copies of effect: ${effects.join(", ")}`)

      // 6. The host program type-checks against the installed declarations (strict,
      //    nodenext, the declarations themselves checked too), and with bundler resolution.
      //    Every README snippet is a file of the host project, checked the same way.
      const all = snippets()
      assert.deepStrictEqual(
        all.map((x) => x.id).sort(),
        Object.keys(RUNS).sort(),
        "every README snippet has an entry in RUNS"
      )
      fs.mkdirSync(path.join(host, "snippets"))
      for (const snippet of all) fs.writeFileSync(path.join(host, "snippets", `${fileOf(snippet.id)}.ts`), snippet.code)
      const example = all.find((x) => x.id === "README.md#1")!.code
      fs.writeFileSync(path.join(host, "example.ts"), example)
      fs.writeFileSync(
        path.join(host, "api.ts"),
        [
          `import { Guard, Persistence, SessionJournal, type StorageError } from "@session-journal/core"`,
          `import * as Recovery from "@session-journal/core/Recovery"`,
          `import { NodePersistence } from "@session-journal/node"`,
          `import { PgPersistence } from "@session-journal/postgres"`,
          `import { JournalChat } from "@session-journal/ai"`,
          `import { main } from "@session-journal/cli"`,
          `import { Effect, Layer } from "effect"`,
          ``,
          `export const memory: Layer.Layer<SessionJournal.SessionJournal, StorageError> = SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory()))`,
          `export const files = NodePersistence.layer({ root: "./journal" })`,
          `export const pg = PgPersistence.layerFromUrl`,
          `export const guard = Guard.maxStreak(3)`,
          `export const recovery = Recovery`,
          `export const chat = JournalChat`,
          `export const command: Effect.Effect<number, never, unknown> = main`,
          ``
        ].join("\n")
      )
      // The snippets that use the Agent SDK are checked against its declarations in the
      // Claude Code cache (scripts/claude-code.sh installs it beside the CLI), apart.
      const agentSdk = Claude.CLAUDE_BIN === null
        ? null
        : path.resolve(path.dirname(Claude.CLAUDE_BIN), "..", "@anthropic-ai", "claude-agent-sdk", "sdk.d.ts")
      const withSdk = all.filter(needsAgentSdk).map((x) => `snippets/${fileOf(x.id)}.ts`)
      const tsconfig = (
        module: string,
        moduleResolution: string,
        skipLibCheck: boolean,
        files: ReadonlyArray<string>,
        paths?: Record<string, ReadonlyArray<string>>
      ) => ({
        compilerOptions: {
          target: "ES2022",
          // effect's own declarations name Web Crypto and structured-clone types.
          lib: ["ES2022", "DOM"],
          module,
          moduleResolution,
          strict: true,
          noEmit: true,
          skipLibCheck,
          types: ["node"],
          ...(paths === undefined ? {} : { paths })
        },
        files
      })
      const ours = [
        "example.ts",
        "api.ts",
        ...all.filter((x) => !needsAgentSdk(x)).map((x) => `snippets/${fileOf(x.id)}.ts`)
      ]
      // nodenext checks every installed declaration; bundler resolution only has to find the same ones.
      fs.writeFileSync(
        path.join(host, "tsconfig.json"),
        JSON.stringify(tsconfig("nodenext", "nodenext", false, ours), null, 2)
      )
      fs.writeFileSync(
        path.join(host, "tsconfig.bundler.json"),
        JSON.stringify(tsconfig("preserve", "bundler", true, ours), null, 2)
      )
      sh(TSC, ["--noEmit", "-p", "tsconfig.json"], { cwd: host })
      sh(TSC, ["--noEmit", "-p", "tsconfig.bundler.json"], { cwd: host })
      if (agentSdk !== null && fs.existsSync(agentSdk)) {
        fs.writeFileSync(
          path.join(host, "tsconfig.sdk.json"),
          JSON.stringify(
            tsconfig("nodenext", "nodenext", true, withSdk, { "@anthropic-ai/claude-agent-sdk": [agentSdk] }),
            null,
            2
          )
        )
        sh(TSC, ["--noEmit", "-p", "tsconfig.sdk.json"], { cwd: host })
      } else {
        assert.notStrictEqual(process.env["CI"], "true", `CI: the Agent SDK is not installed: ${Claude.SKIP_REASON}`)
        process.stdout.write(`not type-checked (no Agent SDK): ${withSdk.join(", ")}\n`)
      }

      step("tsc")

      // 7. The README's example runs on Node 22 and on Node 20, each in its own directory.
      fs.writeFileSync(path.join(host, "example.js"), module.stripTypeScriptTypes(example))
      for (const [label, node] of [["22", NODE22], ["20", node20!]] as const) {
        const cwd = path.join(host, `run-node${label}`)
        fs.mkdirSync(cwd)
        const out = sh(node, [path.join(host, "example.js")], { cwd })
        assert.include(out, "deploy may not follow write_file", `Node ${label}`)
      }

      step("example on Node 22 and 20")

      // 7b. Every other snippet that can run here runs as written, each in its own
      //     directory, with a HOME of its own (Claude Code's transcripts are looked up there).
      const mcpCache = findMcpCache()
      for (const snippet of all) {
        const run = RUNS[snippet.id]!
        if ("checkOnly" in run || snippet.id === "README.md#1") continue
        const name = fileOf(snippet.id)
        const file = path.join(host, "snippets", `${name}.js`)
        fs.writeFileSync(file, module.stripTypeScriptTypes(snippet.code))
        const cwd = path.join(host, `run-${name}`)
        // A HOME where Claude Code has run, with no transcripts of this directory.
        fs.mkdirSync(path.join(cwd, "home", ".claude", "projects"), { recursive: true })
        const env = hostEnv({ HOME: path.join(cwd, "home") })
        if (snippet.id === "packages/mcp/README.md#1") {
          // The gateway in front of the SDK-built test server: one call allowed, one denied.
          if (mcpCache === null) {
            assert.notStrictEqual(process.env["CI"], "true", "CI: the MCP cache is not installed (scripts/mcp.sh)")
            continue
          }
          const out = sh(NODE22, [file, "./journal", "--", NODE22, FIXTURE_SERVER], {
            cwd,
            env: { ...env, ...fixtureEnv(mcpCache) },
            input: EXAMPLE_INPUT
          })
          assert.include(out, run.expect, snippet.id)
          continue
        }
        assert.include(sh(NODE22, [file], { cwd, env }), run.expect, snippet.id)
      }

      step("the READMEs' snippets")

      // 8. The installed command, through npm's bin link: `node` on PATH is Node 20.
      const bin = path.join(host, "node_modules", ".bin", "session-journal")
      const onNode20 = hostEnv({ PATH: `${path.dirname(node20!)}${path.delimiter}${process.env["PATH"] ?? ""}` })
      const versionLine = sh(bin, ["--version"], { cwd: host, env: onNode20 })
      assert.include(versionLine, `session-journal v${version} (node v20.`)
      const demoDir = path.join(host, "run-node20")
      assert.match(sh(bin, ["demo"], { cwd: demoDir, env: onNode20 }), /^ok +demo-/m)
      // …and on Node 22, started directly on the installed bin file.
      const installedBin = path.join(host, "node_modules", "@session-journal", "cli", "bin", "session-journal.js")
      for (const dir of ["run-node20", "run-node22"]) {
        const report = JSON.parse(sh(NODE22, [installedBin, "--json", "verify"], { cwd: path.join(host, dir) })) as {
          readonly sessions: ReadonlyArray<{ readonly id: string; readonly ok: boolean }>
        }
        assert.isAbove(report.sessions.length, 0, dir)
        for (const s of report.sessions) assert.isTrue(s.ok, `${dir}: session ${s.id} verifies`)
        assert.include(report.sessions.map((s) => s.id), "s-1", dir)
      }
      assert.match(sh(bin, ["verify"], { cwd: demoDir, env: onNode20 }), /^ok +s-1:/m)
      step("session-journal demo and verify")

      // 9. The command's tarball alone: it installs nothing besides itself (no dependency;
      //    its peers optional), and demo, verify and the Claude Code installer's help run
      //    from it with no node_modules anywhere above. Under STRESS=1 through
      //    `npm install -g`, in the normal suite from the unpacked tarball.
      const cliTarball = packed.find((f) => f.startsWith("session-journal-cli-"))!
      const cliManifest = JSON.parse(
        sh("tar", ["-xzOf", path.join(tarballs, cliTarball), "package/package.json"], { cwd: work })
      ) as Manifest & { readonly peerDependenciesMeta?: Record<string, { readonly optional?: boolean }> }
      assert.deepStrictEqual(cliManifest.dependencies ?? {}, {}, "the command has no dependency")
      for (const peer of Object.keys(cliManifest.peerDependencies ?? {})) {
        assert.isTrue(cliManifest.peerDependenciesMeta?.[peer]?.optional, `the command's peer ${peer} is optional`)
      }
      const alone = path.join(work, "alone")
      fs.mkdirSync(alone)
      let aloneBin: string
      let aloneDir: string
      if (STRESS) {
        const prefix = path.join(work, "global")
        sh("npm", [
          "install",
          "-g",
          "--prefix",
          prefix,
          "--no-audit",
          "--no-fund",
          "--no-update-notifier",
          "--loglevel=error",
          path.join(tarballs, cliTarball)
        ], { cwd: work })
        const globalModules = path.join(prefix, "lib", "node_modules")
        assert.deepStrictEqual(fs.readdirSync(globalModules), ["@session-journal"])
        assert.deepStrictEqual(fs.readdirSync(path.join(globalModules, "@session-journal")), ["cli"])
        assert.isFalse(
          fs.existsSync(path.join(globalModules, "@session-journal", "cli", "node_modules")),
          "the command installs no dependency"
        )
        aloneBin = path.join(prefix, "bin", "session-journal")
        aloneDir = path.join(globalModules, "@session-journal", "cli")
      } else {
        const unpacked = path.join(work, "unpacked")
        fs.mkdirSync(unpacked)
        sh("tar", ["-xzf", path.join(tarballs, cliTarball), "-C", unpacked], { cwd: work })
        aloneDir = path.join(unpacked, "package")
        aloneBin = path.join(aloneDir, "bin", "session-journal.js")
        fs.chmodSync(aloneBin, 0o755)
        for (let dir = aloneDir; dir !== path.dirname(dir); dir = path.dirname(dir)) {
          assert.isFalse(
            fs.existsSync(path.join(dir, "node_modules")),
            `no node_modules in or above the command: ${dir}`
          )
        }
      }
      assert.match(sh(aloneBin, ["demo"], { cwd: alone, env: onNode20 }), /^ok +demo-/m)
      assert.match(sh(aloneBin, ["verify"], { cwd: alone, env: onNode20 }), /^ok +demo-/m)
      assert.include(sh(aloneBin, ["claude-code", "install", "--help"], { cwd: alone, env: onNode20 }), "--policy")
      const installed = bytesUnder(aloneDir)
      process.stdout.write(`the command installed alone: ${(installed / 1024 / 1024).toFixed(1)} MiB\n`)
      step(STRESS ? "the command's tarball alone, global" : "the command's tarball alone, unpacked")
      process.stdout.write(`install test steps: ${steps.join(", ")}\n`)
    }
  )
})
