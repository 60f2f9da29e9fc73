/**
 * Where the command keeps journals: the one place that chooses the `Persistence`
 * layer. The filesystem under `--dir` by default; PostgreSQL when `--postgres URL`
 * or `SESSION_JOURNAL_PG_URL` is given.
 *
 * @since 0.1.0
 */
import { Persistence, StorageError } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
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
}

/**
 * The default journal root when neither `--dir` nor `SESSION_JOURNAL_DIR` is set.
 *
 * @since 0.1.0
 */
export const DEFAULT_DIR = "./.session-journal"

/**
 * Resolves the journal root: the flag, else `$SESSION_JOURNAL_DIR`, else `./.session-journal`.
 *
 * @since 0.1.0
 */
export const resolveDir = (flag: string | undefined): string => {
  if (flag !== undefined && flag.length > 0) return flag
  const env = process.env["SESSION_JOURNAL_DIR"]
  return env !== undefined && env.length > 0 ? env : DEFAULT_DIR
}

/**
 * Resolves the PostgreSQL URL: the flag, else `$SESSION_JOURNAL_PG_URL`, else
 * none; with where it came from.
 *
 * @since 0.1.0
 */
export const resolvePostgres = (
  flag: string | undefined
): Pick<Options, "postgres" | "postgresFrom"> => {
  if (flag !== undefined && flag.length > 0) return { postgres: flag, postgresFrom: "--postgres" }
  const env = process.env["SESSION_JOURNAL_PG_URL"]
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

// Several journals can share one database under different table prefixes.
const tablePrefix = (): string | undefined => {
  const env = process.env[TABLE_PREFIX_VAR]
  return env !== undefined && env.length > 0 ? env : undefined
}

// The adapter's rule for a prefix (it checks it again and reports a violation
// as a `configure` failure, mapped below); checked here first so that a bad
// prefix is bad input even when the server cannot be reached.
const prefixPattern = /^[a-z_][a-z0-9_]{0,39}$/

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
  if (prefix !== undefined && !prefixPattern.test(prefix)) {
    return new InvalidInput({
      field: TABLE_PREFIX_VAR,
      reason: `${
        JSON.stringify(prefix)
      } is not a table prefix: use lowercase letters, digits and _, at most 40 characters, not starting with a digit`
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
    const prefix = tablePrefix()
    const bad = checkPostgres(url, options.postgresFrom ?? "--postgres", prefix)
    if (bad !== undefined) return Layer.effect(Persistence.Persistence, Effect.fail(bad))
    // Loaded only when chosen: the driver is not needed for the filesystem.
    return Layer.unwrap(
      Effect.tryPromise({
        try: () => import("@session-journal/postgres"),
        catch: (cause) =>
          new NotAvailable({
            feature: "PostgreSQL storage",
            reason: `the PostgreSQL adapter could not be loaded (${
              cause instanceof Error ? cause.message : String(cause)
            })`
          })
      }).pipe(Effect.map((pg) =>
        pg.PgPersistence.layerFromUrl(url, { tablePrefix: prefix }).pipe(
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
      ))
    )
  }
  return NodePersistence.layer(nodeOptions(options))
}

/**
 * The variable that says the journal's sessions are written with the retention
 * option (`removeCheckpointedSegments`): history may then start after sequence 0,
 * vouched for by the checkpoint. Without it, missing early segments are damage.
 *
 * @since 0.2.0
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
  removeCheckpointedSegments: process.env[RETENTION_VAR] === "1",
  lockWait: options.lockWait
})

/**
 * Whether the storage of this invocation is the local filesystem (mirror and
 * repair work on files and need it).
 *
 * @since 0.1.0
 */
export const isFilesystem = (options: Options): boolean => options.postgres === undefined
