/**
 * The rule for the prefix of the adapter's table names, in a module that imports
 * nothing, so a command line can check a prefix before it loads the adapter.
 *
 * @since 0.1.0
 */

const pattern = /^[a-z_][a-z0-9_]{0,39}$/

/**
 * Whether `prefix` can start table names: lowercase letters, digits and `_`, not
 * starting with a digit, at most 40 characters (so every derived name fits
 * PostgreSQL's 63-byte limit).
 *
 * @since 0.1.0
 */
export const isTablePrefix = (prefix: string): boolean => pattern.test(prefix)

/**
 * The rule `isTablePrefix` checks, as a message says it.
 *
 * @since 0.1.0
 */
export const TABLE_PREFIX_RULE = "use lowercase letters, digits and _, at most 40 characters, not starting with a digit"
