/**
 * Loading the packages under test. Some of them may not be usable in a given
 * checkout (not built yet, no PostgreSQL on the machine, a native addon built for
 * another Node ABI); each loader returns either the thing or the reason, so that a
 * scenario reports "not run: <why>" instead of failing the whole run or inventing
 * a figure.
 */
import type * as Layer from "effect/Layer"
import { execFileSync, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as os from "node:os"
import * as path from "node:path"
import type { Persistence } from "../../packages/core/src/index.ts"

/** The repository root. */
export const repoRoot = path.resolve(import.meta.dirname, "..", "..")

/** Either a loaded value or why it is unavailable. */
export type Loaded<A> = { readonly ok: true; readonly value: A } | { readonly ok: false; readonly why: string }

const fail = (why: string): Loaded<never> => ({ ok: false, why })

/** A persistence layer factory over a root directory. */
export type FsLayer = (root: string) => Layer.Layer<Persistence.Persistence, unknown>

/** `NodePersistence.layer({ root })` from `@session-journal/node`. */
export const loadNode = async (): Promise<Loaded<FsLayer>> => {
  try {
    const mod: Record<string, unknown> = await import("../../packages/node/src/index.ts")
    const ns = mod["NodePersistence"] as Record<string, unknown> | undefined
    const layer = ns?.["layer"]
    if (typeof layer !== "function") {
      return fail("@session-journal/node does not export NodePersistence.layer yet")
    }
    return {
      ok: true,
      value: (root) => (layer as (o: { root: string }) => Layer.Layer<Persistence.Persistence, unknown>)({ root })
    }
  } catch (error) {
    return fail(`@session-journal/node failed to load: ${firstLine(error)}`)
  }
}

/** The PostgreSQL URL of the benchmarks (`SESSION_JOURNAL_PG_URL` or the local default). */
export const pgUrl = process.env["SESSION_JOURNAL_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/test"

/** A persistence layer factory over a table prefix. */
export type PgLayer = (tablePrefix: string) => Layer.Layer<Persistence.Persistence, unknown>

/** `PgPersistence.layerFromUrl(url, { tablePrefix })` from `@session-journal/postgres`, if the server answers. */
export const loadPostgres = async (): Promise<Loaded<PgLayer>> => {
  const ready = spawnSync("pg_isready", ["-d", pgUrl, "-q"], { stdio: "ignore" })
  if (ready.error !== undefined) {
    return fail(`pg_isready is not installed: cannot tell whether PostgreSQL runs at ${pgUrl}`)
  }
  if (ready.status !== 0) return fail(`PostgreSQL does not answer at ${pgUrl}`)
  try {
    const mod: Record<string, unknown> = await import("../../packages/postgres/src/index.ts")
    const ns = mod["PgPersistence"] as Record<string, unknown> | undefined
    const layerFromUrl = ns?.["layerFromUrl"]
    if (typeof layerFromUrl !== "function") {
      return fail("@session-journal/postgres does not export PgPersistence.layerFromUrl yet")
    }
    return {
      ok: true,
      value: (tablePrefix) =>
        (layerFromUrl as (url: string, o: { tablePrefix: string }) => Layer.Layer<Persistence.Persistence, unknown>)(
          pgUrl,
          { tablePrefix }
        )
    }
  } catch (error) {
    return fail(`@session-journal/postgres failed to load: ${firstLine(error)}`)
  }
}

/** Drops every table whose name starts with `prefix` (bench prefixes are unique per run). */
export const dropPgTables = (prefix: string): void => {
  const sql =
    `DO $$ DECLARE t text; BEGIN FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ` +
    `AND starts_with(tablename, '${prefix}') LOOP EXECUTE format('DROP TABLE IF EXISTS %I CASCADE', t); END LOOP; END $$;`
  try {
    execFileSync("psql", [pgUrl, "-q", "-c", sql], { stdio: "ignore" })
  } catch {
    // Leftover tables of a unique prefix harm nothing; the run's figures stand.
  }
}

/** The `session-journal` binary, if installed. */
export const loadCli = (): Loaded<string> => {
  const bin = path.join(repoRoot, "node_modules", ".bin", "session-journal")
  if (!fs.existsSync(bin)) return fail("node_modules/.bin/session-journal is not installed")
  const help = spawnSync(bin, ["--help"], { encoding: "utf8", env: nodeEnv() })
  if (help.status !== 0 || !/verify/.test(help.stdout + help.stderr)) {
    return fail(`session-journal --help did not list a verify command (exit ${help.status})`)
  }
  return { ok: true, value: bin }
}

/**
 * The environment for child processes: the Node 22 that runs this harness first on
 * PATH, and without `SESSION_JOURNAL_PG_URL`, which tells the harness where PostgreSQL
 * is but would send a child CLI to PostgreSQL instead of its `SESSION_JOURNAL_DIR`
 * (a child that is to use it gets it in `extra`).
 */
export const nodeEnv = (extra?: Record<string, string>): NodeJS.ProcessEnv => {
  const { SESSION_JOURNAL_PG_URL: _pg, ...inherited } = process.env
  return {
    ...inherited,
    PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env["PATH"] ?? ""}`,
    ...extra
  }
}

/**
 * `nodeEnv` for the built command, whatever the harness itself was started with:
 * without the `@session-journal/source` condition, which would make the bin load
 * the TypeScript sources.
 */
export const builtEnv = (extra: Record<string, string>): NodeJS.ProcessEnv => {
  const env = nodeEnv(extra)
  const options = (env["NODE_OPTIONS"] ?? "").split(/\s+/).filter((o) =>
    o !== "" && !o.includes("@session-journal/source")
  )
  if (options.length === 0) delete env["NODE_OPTIONS"]
  else env["NODE_OPTIONS"] = options.join(" ")
  return env
}

/** The better-sqlite3 constructor. */
export type SqliteCtor = typeof import("better-sqlite3")

const require = createRequire(import.meta.url)

/**
 * better-sqlite3, built for the running Node. pnpm builds the addon with the Node that
 * runs pnpm itself (the system's, which may be older than the workspace's Node 22);
 * when the ABI does not match, it is rebuilt once against this Node's own headers.
 */
export const loadSqlite = (log: (line: string) => void): Loaded<SqliteCtor> => {
  const probe = () =>
    spawnSync(process.execPath, ["-e", "new (require('better-sqlite3'))(':memory:').close()"], {
      cwd: repoRoot,
      encoding: "utf8"
    })
  let result = probe()
  if (result.status !== 0 && /NODE_MODULE_VERSION/.test(result.stderr)) {
    log(`  better-sqlite3 was built for another Node ABI; rebuilding it for ${process.version} (once)`)
    const headers = nodeHeaders(log)
    if (!headers.ok) return fail(`better-sqlite3 needs a rebuild for ${process.version}, but ${headers.why}`)
    const rebuilt = spawnSync("npx", ["-y", "pnpm@10", "rebuild", "better-sqlite3"], {
      cwd: repoRoot,
      encoding: "utf8",
      env: nodeEnv({ npm_config_nodedir: headers.value })
    })
    if (headers.temp !== undefined) fs.rmSync(headers.temp, { recursive: true, force: true })
    if (rebuilt.status !== 0) {
      return fail(`rebuilding better-sqlite3 failed: ${(rebuilt.stderr || rebuilt.stdout).slice(-300)}`)
    }
    result = probe()
  }
  if (result.status !== 0) {
    return fail(
      `better-sqlite3 does not load: ${
        result.stderr.split("\n").find((l) => l.includes("Error")) ?? result.stderr.slice(0, 200)
      }`
    )
  }
  return { ok: true, value: require("better-sqlite3") as SqliteCtor }
}

/**
 * A directory with this Node's C headers (`include/node`), for building the addon
 * against it: next to the running binary, inside an installed `node-<os>-<arch>`
 * package, or else fetched once with `npm pack node-<os>-<arch>@<version>` (the
 * registry package the `node` devDependency itself installs from; the headers'
 * usual download site may not be reachable) into a temp dir that is removed after.
 */
const nodeHeaders = (log: (line: string) => void): Loaded<string> & { readonly temp?: string } => {
  const has = (dir: string) => fs.existsSync(path.join(dir, "include", "node", "node_api.h"))
  const besideBinary = path.resolve(path.dirname(fs.realpathSync(process.execPath)), "..")
  if (has(besideBinary)) return { ok: true, value: besideBinary }
  const pkg = `node-${process.platform}-${process.arch}`
  const pnpmDir = path.join(repoRoot, "node_modules", ".pnpm")
  for (const entry of fs.existsSync(pnpmDir) ? fs.readdirSync(pnpmDir) : []) {
    for (
      const candidate of [
        path.join(pnpmDir, entry, "node_modules", pkg),
        path.join(pnpmDir, entry, "node_modules", "node", "node_modules", pkg)
      ]
    ) {
      if (
        entry.startsWith(`${pkg}@${process.version.slice(1)}`) || entry.startsWith(`node@${process.version.slice(1)}`)
      ) {
        if (has(candidate)) return { ok: true, value: candidate }
      }
    }
  }
  const temp = fs.mkdtempSync(path.join(os.tmpdir(), "sj-bench-node-headers-"))
  log(`  fetching ${pkg}@${process.version.slice(1)} from the npm registry for its C headers`)
  const packed = spawnSync("npm", ["pack", `${pkg}@${process.version.slice(1)}`, "--silent"], {
    cwd: temp,
    encoding: "utf8"
  })
  const tarball = packed.stdout.trim().split("\n").pop()
  if (packed.status !== 0 || tarball === undefined || tarball === "") {
    fs.rmSync(temp, { recursive: true, force: true })
    return fail(
      `no C headers of Node ${process.version} were found and npm pack ${pkg} failed: ${packed.stderr.slice(-200)}`
    )
  }
  const unpacked = spawnSync("tar", ["-xzf", tarball, "package/include"], { cwd: temp, encoding: "utf8" })
  if (unpacked.status !== 0 || !has(path.join(temp, "package"))) {
    fs.rmSync(temp, { recursive: true, force: true })
    return fail(`the headers in ${tarball} could not be unpacked: ${unpacked.stderr.slice(-200)}`)
  }
  return { ok: true, value: path.join(temp, "package"), temp }
}

/** The first line of an error's message. */
export const firstLine = (error: unknown): string =>
  (error instanceof Error ? error.message : String(error)).split("\n")[0] ?? ""
