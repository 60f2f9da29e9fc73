/**
 * Where the command keeps journals: the one place that chooses the `Persistence`
 * layer. The filesystem under `--dir` by default; PostgreSQL when `--postgres URL`
 * or `SESSION_JOURNAL_PG_URL` is given.
 *
 * @since 0.1.0
 */
import { Persistence, StorageError } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { NodePersistence } from "@session-journal/node"
import * as TablePrefix from "@session-journal/postgres/TablePrefix"
import * as Config from "effect/Config"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { InvalidInput, NotAvailable } from "./Failure.ts"

/**
 * The resolved storage choice of one invocation.
 *
 * @since 0.1.0
 */
export interface Options {
  /** Journal root directory (already resolved from `--dir`, the environment, or the default). */
  readonly dir: string
  /** PostgreSQL connection URL, when PostgreSQL is chosen. */
  readonly postgres: string | undefined
  /** Where the URL came from, named when it is invalid (`--postgres` when absent). */
  readonly postgresFrom?: "--postgres" | "SESSION_JOURNAL_PG_URL" | undefined
  /**
   * How long a writing command waits for a session's lock (`--wait`); none: it
   * fails at once with exit 4 while another writer holds it. Filesystem only
   * (PostgreSQL writers queue on the row lock by themselves).
   */
  readonly lockWait?: Duration.Duration | undefined
  /** PostgreSQL table prefix (`$SESSION_JOURNAL_PG_TABLE_PREFIX`); none: the adapter's default. */
  readonly tablePrefix?: string | undefined
  /** Remove segments a checkpoint covers (`SESSION_JOURNAL_RETENTION=1`). Filesystem only. */
  readonly removeCheckpointedSegments?: boolean | undefined
  /**
   * A reading command: a missing journal directory or missing tables are not
   * created (the journal then holds no session), and older tables are not migrated.
   */
  readonly readOnly?: boolean | undefined
  /**
   * How large a segment grows before a checkpoint completes it
   * (`NodePersistence.Options.segmentMinBytes`; the hook, which checkpoints every
   * few events, sets it). Filesystem only.
   *
   * @since 0.1.0
   */
  readonly segmentMinBytes?: number | undefined
  /**
   * Whether `node:crypto`'s SHA-256 is installed (`NodePersistence.Options.nodeSha256`,
   * default true; the hook, which writes once per process, takes it only for a long
   * session's tree: `"bulk"`).
   *
   * @since 0.1.0
   */
  readonly nodeSha256?: boolean | "bulk" | undefined
}

/**
 * The environment variable naming the journal directory when `--dir` is not given.
 *
 * @since 0.1.0
 */
export const DIR_VAR = "SESSION_JOURNAL_DIR"

/**
 * The environment variable naming the PostgreSQL URL when `--postgres` is not given.
 *
 * @since 0.1.0
 */
export const PG_URL_VAR = "SESSION_JOURNAL_PG_URL"

/**
 * The default journal root when neither `--dir` nor `SESSION_JOURNAL_DIR` is set.
 *
 * @since 0.1.0
 */
export const DEFAULT_DIR = "./.session-journal"

/**
 * The journal root of Claude Code's hooks when neither `--root`/`--dir` nor
 * `SESSION_JOURNAL_DIR` names one: a per-user state directory outside every
 * project, so the agent the hooks guard does not find its journal in the tree it
 * edits: `$XDG_STATE_HOME/session-journal` when `XDG_STATE_HOME` is an absolute
 * path, else `$HOME/.local/state/session-journal`; undefined without a usable
 * `HOME`.
 *
 * @since 0.1.0
 */
export const userStateDir = (env: Readonly<Record<string, string | undefined>>): string | undefined => {
  const xdg = env["XDG_STATE_HOME"]
  if (xdg !== undefined && xdg.startsWith("/")) return `${xdg.replace(/\/+$/, "")}/session-journal`
  const home = env["HOME"]
  return home !== undefined && home.startsWith("/")
    ? `${home.replace(/\/+$/, "")}/.local/state/session-journal`
    : undefined
}

/**
 * Resolves the journal root: the flag, else `env` (`$SESSION_JOURNAL_DIR`), else
 * `./.session-journal`; an empty value counts as none.
 *
 * @since 0.1.0
 */
export const resolveDir = (flag: string | undefined, env: string | undefined): string => {
  if (flag !== undefined && flag.length > 0) return flag
  return env !== undefined && env.length > 0 ? env : DEFAULT_DIR
}

/**
 * Resolves the PostgreSQL URL: the flag, else `env` (`$SESSION_JOURNAL_PG_URL`),
 * else none; with where it came from. An empty value counts as none.
 *
 * @since 0.1.0
 */
export const resolvePostgres = (
  flag: string | undefined,
  env: string | undefined
): Pick<Options, "postgres" | "postgresFrom"> => {
  if (flag !== undefined && flag.length > 0) return { postgres: flag, postgresFrom: "--postgres" }
  return env !== undefined && env.length > 0
    ? { postgres: env, postgresFrom: "SESSION_JOURNAL_PG_URL" }
    : { postgres: undefined }
}

/**
 * The environment variable that names the PostgreSQL table prefix.
 *
 * @since 0.1.0
 */
export const TABLE_PREFIX_VAR = "SESSION_JOURNAL_PG_TABLE_PREFIX"

// The adapter's rule for a prefix (it checks it again and reports a violation
// as a `configure` failure, mapped below); checked here first, from the module of
// the rule that loads nothing, so that a bad prefix is bad input even when the
// server cannot be reached.

/**
 * Checks the PostgreSQL settings of an invocation before anything connects: the
 * URL must be a `postgres://` or `postgresql://` URL and the table prefix (when
 * set) lowercase letters, digits and `_`, at most 40 characters. A failure
 * names the flag or environment variable.
 *
 * @since 0.1.0
 */
export const checkPostgres = (url: string, from: string, prefix: string | undefined): InvalidInput | undefined => {
  let parsed: URL | undefined
  try {
    parsed = new URL(url)
  } catch {
    parsed = undefined
  }
  if (parsed === undefined || (parsed.protocol !== "postgres:" && parsed.protocol !== "postgresql:")) {
    return new InvalidInput({ field: from, reason: "must be a URL of the form postgres://USER@HOST:PORT/DATABASE" })
  }
  if (prefix !== undefined && !TablePrefix.isTablePrefix(prefix)) {
    return new InvalidInput({
      field: TABLE_PREFIX_VAR,
      reason: `${JSON.stringify(prefix)} is not a table prefix: ${TablePrefix.TABLE_PREFIX_RULE}`
    })
  }
  return undefined
}

/**
 * The `Persistence` layer for an invocation. With PostgreSQL, the tables are named
 * with `$SESSION_JOURNAL_PG_TABLE_PREFIX` when it is set (default `session_journal_`).
 *
 * @since 0.1.0
 */
export const layer = (
  options: Options
): Layer.Layer<Persistence.Persistence, StorageError | NotAvailable | InvalidInput> => {
  if (options.postgres !== undefined) {
    const url = options.postgres
    // Several journals can share one database under different table prefixes.
    const prefix = options.tablePrefix !== undefined && options.tablePrefix.length > 0 ? options.tablePrefix : undefined
    const bad = checkPostgres(url, options.postgresFrom ?? "--postgres", prefix)
    if (bad !== undefined) return Layer.effect(Persistence.Persistence, Effect.fail(bad))
    // Loaded only when chosen: the driver is not needed for the filesystem.
    return Layer.unwrap(
      Effect.tryPromise({
        try: () => import("@session-journal/postgres"),
        catch: (cause) =>
          new NotAvailable({
            feature: "PostgreSQL storage",
            reason: `the PostgreSQL adapter could not be loaded (${messageOf(cause)})`
          })
      }).pipe(
        Effect.map((pg) =>
          pg.PgPersistence.layerFromUrl(url, { tablePrefix: prefix, createTables: options.readOnly !== true }).pipe(
            // The adapter's own check of the prefix (the one above mirrors it).
            Layer.catchTag("StorageError", (e) =>
              Layer.effect(
                Persistence.Persistence,
                Effect.fail(
                  e.reason._tag === "InvalidOption" && e.reason.option === "tablePrefix"
                    ? new InvalidInput({ field: TABLE_PREFIX_VAR, reason: e.reason.message })
                    : e
                )
              ))
          )
        )
      )
    )
  }
  return NodePersistence.layer(nodeOptions(options))
}

/**
 * The variable that says the journal's sessions are written with the retention
 * option (`removeCheckpointedSegments`): history may then start after sequence 0,
 * vouched for by the checkpoint. Without it, missing early segments are damage.
 *
 * @since 0.1.0
 */
export const RETENTION_VAR = "SESSION_JOURNAL_RETENTION"

/**
 * The filesystem adapter's options for an invocation (also used by `verify` and
 * `repair`, which inspect segment files directly).
 *
 * @since 0.1.0
 */
export const nodeOptions = (options: Options): NodePersistence.Options => ({
  root: options.dir,
  removeCheckpointedSegments: options.removeCheckpointedSegments === true,
  lockWait: options.lockWait,
  createRoot: options.readOnly !== true,
  segmentMinBytes: options.segmentMinBytes,
  nodeSha256: options.nodeSha256
})

/**
 * Where the journal of an invocation is, for messages: `the journal directory DIR`,
 * or `PostgreSQL (tables PREFIX…)` without the URL, which may hold a password.
 *
 * @since 0.1.0
 */
export const describe = (options: Options): string =>
  options.postgres === undefined
    ? `the journal directory ${options.dir}`
    : `PostgreSQL (tables ${
      options.tablePrefix !== undefined && options.tablePrefix.length > 0 ? options.tablePrefix : "session_journal_"
    }…)`

/**
 * Whether the storage of this invocation is the local filesystem (mirror and
 * repair work on files and need it).
 *
 * @since 0.1.0
 */
export const isFilesystem = (options: Options): boolean => options.postgres === undefined

/**
 * What the storage choice reads from the environment: the directory and URL used
 * when their flags are not given, the table prefix and the retention switch.
 *
 * @since 0.1.0
 */
export interface Environment {
  /** `$SESSION_JOURNAL_DIR`. */
  readonly dir: string | undefined
  /** `$SESSION_JOURNAL_PG_URL`. */
  readonly postgres: string | undefined
  /** `$SESSION_JOURNAL_PG_TABLE_PREFIX`. */
  readonly tablePrefix: string | undefined
  /** `SESSION_JOURNAL_RETENTION=1`. */
  readonly removeCheckpointedSegments: boolean
}

// The variables the storage choice reads, and the one rule that turns them into an
// `Environment` (an empty value is none; retention is on only for "1"), whichever
// reader supplies the values.
const VARIABLES = [DIR_VAR, PG_URL_VAR, TABLE_PREFIX_VAR, RETENTION_VAR] as const

const fromVariables = (get: (name: string) => string | undefined): Environment => {
  const value = (name: string) => {
    const v = get(name)
    return v !== undefined && v.length > 0 ? v : undefined
  }
  return {
    dir: value(DIR_VAR),
    postgres: value(PG_URL_VAR),
    tablePrefix: value(TABLE_PREFIX_VAR),
    removeCheckpointedSegments: value(RETENTION_VAR) === "1"
  }
}

/**
 * The storage environment, read through `Config` (the command's `ConfigProvider`).
 *
 * @since 0.1.0
 */
export const environment: Config.Config<Environment> = Config.map(
  Config.all(VARIABLES.map((name) => Config.option(Config.String(name)))),
  (values) => {
    const byName = new Map(VARIABLES.map((name, i) => [name as string, Option.getOrUndefined(values[i]!)]))
    return fromVariables((name) => byName.get(name))
  }
)

/**
 * The storage environment of a plain variable record (the command hook, which
 * starts without the command tree, reads it without a `ConfigProvider`).
 *
 * @since 0.1.0
 */
export const environmentOf = (env: Readonly<Record<string, string | undefined>>): Environment =>
  fromVariables((name) => env[name])

/**
 * The storage of an invocation from its `--dir` and `--postgres` flags and its
 * environment.
 *
 * @since 0.1.0
 */
export const resolve = (
  flags: { readonly dir: string | undefined; readonly postgres: string | undefined },
  env: Environment
): Options => ({
  dir: resolveDir(flags.dir, env.dir),
  ...resolvePostgres(flags.postgres, env.postgres),
  tablePrefix: env.tablePrefix,
  removeCheckpointedSegments: env.removeCheckpointedSegments
})
