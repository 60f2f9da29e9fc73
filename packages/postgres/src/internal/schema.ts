/**
 * Table names and migrations of the PostgreSQL adapter. Every name starts with a
 * configurable prefix, so several journals (or test runs) share one database
 * without touching each other. Migrations run through Effect's SQL migrator, which
 * records them in `<prefix>migrations` and serializes concurrent runs with a table
 * lock, so many instances may start at once.
 */
import { StorageError, StorageReason } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Migrator from "effect/sql/Migrator"
import * as SqlClient from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import * as TablePrefix from "../TablePrefix.ts"

/**
 * The names of everything the adapter creates for one prefix.
 */
export interface Names {
  readonly prefix: string
  readonly sessions: string
  readonly entries: string
  readonly checkpoints: string
  /** Checkpoint rows found broken and set aside when their session was rebuilt from its entries. */
  readonly checkpointsDamaged: string
  readonly migrations: string
  /** The LISTEN/NOTIFY channel that carries "session X now ends before sequence N". */
  readonly channel: string
}

/** Whether `prefix` can start table names (the rule of `TablePrefix`). */
export const isPrefix = (prefix: string): boolean => TablePrefix.isTablePrefix(prefix)

/** The rule `isPrefix` checks, as a message says it. */
export const PREFIX_RULE = TablePrefix.TABLE_PREFIX_RULE

/** The failure of `operation` for a table prefix `isPrefix` refuses. */
export const invalidPrefix = (operation: string, prefix: string): StorageError =>
  new StorageError({
    operation,
    reason: new StorageReason.InvalidOption({
      option: "tablePrefix",
      message: `invalid table prefix ${JSON.stringify(prefix)}: ${PREFIX_RULE}`
    })
  })

/**
 * The names for a prefix.
 */
export const names = (prefix: string): Names => ({
  prefix,
  sessions: `${prefix}sessions`,
  entries: `${prefix}entries`,
  checkpoints: `${prefix}checkpoints`,
  checkpointsDamaged: `${prefix}checkpoints_damaged`,
  migrations: `${prefix}migrations`,
  channel: `${prefix}changes`
})

const createTables = (n: Names) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // One row per session: the writers' lock target and the list's source.
    // `head` is the entry_hash of the newest stored entry (64 zeros when none).
    yield* sql`CREATE TABLE ${sql(n.sessions)} (
      session_id text PRIMARY KEY,
      next_sequence bigint NOT NULL DEFAULT 0 CHECK (next_sequence >= 0),
      head text NOT NULL,
      entry_cap integer NOT NULL,
      tool_counts_cap integer NOT NULL,
      entry_bytes bigint NOT NULL DEFAULT 0,
      meta text,
      meta_updated_at bigint,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`
    // The entry is kept as the exact JSON text that was hashed and written, not
    // jsonb, so numbers and key order come back as they went in.
    yield* sql`CREATE TABLE ${sql(n.entries)} (
      session_id text NOT NULL,
      sequence bigint NOT NULL CHECK (sequence >= 0),
      entry_hash text NOT NULL,
      entry text NOT NULL,
      PRIMARY KEY (session_id, sequence)
    )`
    yield* sql`CREATE TABLE ${sql(n.checkpoints)} (
      session_id text PRIMARY KEY,
      next_sequence bigint NOT NULL,
      doc text NOT NULL,
      written_at timestamptz NOT NULL DEFAULT now()
    )`
  })

// `exported_head` is the session's exported head (`JournalState.head`), which
// `head` stops being once the ring evicts. It is written with every append and
// checkpoint; NULL (rows written before this migration, or an append whose state
// did not match what it stored) means not known, and the list shows `head`.
const addExportedHead = (n: Names) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`ALTER TABLE ${sql(n.sessions)} ADD COLUMN exported_head text`
  })

// A checkpoint that does not decode, or that the stored entries do not continue,
// is replaced by a replay of the entries from sequence 0; its row is moved here,
// bytes unchanged, so an operator can still look at it. Rows stay when their
// session is deleted: they are evidence, not session data.
const addCheckpointsDamaged = (n: Names) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE ${sql(n.checkpointsDamaged)} (
      damaged_id bigserial PRIMARY KEY,
      session_id text NOT NULL,
      next_sequence bigint NOT NULL,
      doc text NOT NULL,
      written_at timestamptz NOT NULL,
      reason text NOT NULL,
      moved_at timestamptz NOT NULL DEFAULT now()
    )`
  })

/**
 * Brings the schema for `n` up to date.
 */
export const migrate = (n: Names): Effect.Effect<void, Migrator.MigrationError | SqlError, SqlClient.SqlClient> =>
  Effect.asVoid(
    Migrator.make({})({
      loader: Migrator.fromRecord({
        "1_create_tables": createTables(n),
        "2_exported_head": addExportedHead(n),
        "3_checkpoints_damaged": addCheckpointsDamaged(n)
      }),
      table: n.migrations
    })
  )

/**
 * The newest migration `migrate` knows.
 */
export const LATEST_MIGRATION = 3

/**
 * How far the schema for `n` is, read without changing anything: `absent` (no
 * migration record), `behind` (older than `LATEST_MIGRATION`), or `current`.
 */
export const schemaState = (n: Names): Effect.Effect<"absent" | "behind" | "current", SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [found] = yield* sql<
      { readonly present: boolean }
    >`SELECT to_regclass(${n.migrations}) IS NOT NULL AS present`
    if (found?.present !== true) return "absent"
    const [row] = yield* sql<{ readonly v: number | null }>`SELECT max(migration_id) AS v FROM ${sql(n.migrations)}`
    return row?.v !== null && row?.v !== undefined && Number(row.v) >= LATEST_MIGRATION ? "current" : "behind"
  })

/**
 * Drops every table of `n`.
 */
export const drop = (n: Names): Effect.Effect<void, SqlError, SqlClient.SqlClient> =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const table of [n.entries, n.checkpoints, n.checkpointsDamaged, n.sessions, n.migrations]) {
      yield* sql`DROP TABLE IF EXISTS ${sql(table)}`
    }
  })
