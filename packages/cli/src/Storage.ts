/**
 * Where the command keeps journals: the one place that chooses the `Persistence`
 * layer. The filesystem under `--dir` by default; PostgreSQL when `--postgres URL`
 * or `SESSION_JOURNAL_PG_URL` is given.
 *
 * @since 0.1.0
 */
import { Persistence, StorageError } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { NotAvailable } from "./Failure.ts"

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
 * Resolves the PostgreSQL URL: the flag, else `$SESSION_JOURNAL_PG_URL`, else none.
 *
 * @since 0.1.0
 */
export const resolvePostgres = (flag: string | undefined): string | undefined => {
  if (flag !== undefined && flag.length > 0) return flag
  const env = process.env["SESSION_JOURNAL_PG_URL"]
  return env !== undefined && env.length > 0 ? env : undefined
}

// Several journals can share one database under different table prefixes.
const tablePrefix = (): string | undefined => {
  const env = process.env["SESSION_JOURNAL_PG_TABLE_PREFIX"]
  return env !== undefined && env.length > 0 ? env : undefined
}

/**
 * The `Persistence` layer for an invocation. With PostgreSQL, the tables are named
 * with `$SESSION_JOURNAL_PG_TABLE_PREFIX` when it is set (default `session_journal_`).
 *
 * @since 0.1.0
 */
export const layer = (options: Options): Layer.Layer<Persistence.Persistence, StorageError | NotAvailable> => {
  if (options.postgres !== undefined) {
    const url = options.postgres
    // Loaded only when chosen: the driver is not needed for the filesystem.
    return Layer.unwrap(
      Effect.tryPromise({
        try: () => import("@session-journal/postgres"),
        catch: (cause) =>
          new NotAvailable({
            feature: "PostgreSQL storage",
            reason: `the PostgreSQL adapter could not be loaded (${cause instanceof Error ? cause.message : String(cause)})`
          })
      }).pipe(Effect.map((pg) => pg.PgPersistence.layerFromUrl(url, { tablePrefix: tablePrefix() })))
    )
  }
  return NodePersistence.layer(nodeOptions(options))
}

/**
 * The filesystem adapter's options for an invocation (also used by `verify` and
 * `repair`, which inspect segment files directly).
 *
 * @since 0.1.0
 */
export const nodeOptions = (options: Options): NodePersistence.Options => ({ root: options.dir })

/**
 * Whether the storage of this invocation is the local filesystem (mirror and
 * repair work on files and need it).
 *
 * @since 0.1.0
 */
export const isFilesystem = (options: Options): boolean => options.postgres === undefined
