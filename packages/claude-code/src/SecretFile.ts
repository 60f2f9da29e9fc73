/**
 * Reading a secret from a file (the guard's token, a checkpoint signer key): one
 * rule for every secret the command line reads. The file is opened once and
 * checked on that descriptor: a regular file, at most `maxBytes` long, neither
 * its group nor others with any permission on it (`chmod 600`); a file others
 * may read is refused, not used. `create` writes a new one so.
 *
 * @since 0.1.0
 */

/**
 * `exposure`, `read` (its result, `Read`) and `create`; Node built-ins only.
 *
 * @since 0.1.0
 */
export * from "./internal/secretFile.ts"
