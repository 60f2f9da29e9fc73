/**
 * @session-journal/postgres: the PostgreSQL adapter of the session journal's
 * `Persistence` port, for application instances on many machines sharing sessions.
 *
 * @since 0.1.0
 */

/**
 * The PostgreSQL adapter of the `Persistence` port: entries keyed by session and sequence, LISTEN/NOTIFY for changes.
 *
 * @since 0.1.0
 */
export * as PgPersistence from "./PgPersistence.ts"
/**
 * The rule for the prefix of the adapter's table names, loadable without the adapter.
 *
 * @since 0.1.0
 */
export * as TablePrefix from "./TablePrefix.ts"
