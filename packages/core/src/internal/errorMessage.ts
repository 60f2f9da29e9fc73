/**
 * The text of a thrown value, shared by `Errors` (which exports it) and
 * `StorageReason` (which `Errors` loads, so it cannot load `Errors` back).
 */

/**
 * The message of a thrown value: an `Error`'s `message`, anything else as `String`
 * makes it.
 */
export const messageOf = (thrown: unknown): string => thrown instanceof Error ? thrown.message : String(thrown)
