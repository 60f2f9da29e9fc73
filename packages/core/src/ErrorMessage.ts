/**
 * The text of a thrown value. A module of its own that imports nothing, so code
 * that must start without Effect (the CLI's hook forwarder) can use the same
 * definition as `Errors` and `StorageReason`.
 *
 * @since 0.1.0
 */

/**
 * The message of a thrown value: an `Error`'s `message`, anything else as `String`
 * makes it (`JSON.parse`, a callback, a driver may throw a value that is not an
 * `Error`).
 *
 * @since 0.1.0
 */
export const messageOf = (thrown: unknown): string => thrown instanceof Error ? thrown.message : String(thrown)
