/**
 * @session-journal/node: the filesystem adapter of the journal (segments,
 * checkpoints, crash safety, hardened file primitives) and the single-writer lock.
 *
 * @since 0.1.0
 */

/**
 * The filesystem adapter of the `Persistence` port, and its `inspect` and `repair` maintenance functions.
 *
 * @since 0.1.0
 */
export * as NodePersistence from "./NodePersistence.ts"
/**
 * The single-writer lock of a session directory, with safe takeover of a dead local holder's lock.
 *
 * @since 0.1.0
 */
export * as Lock from "./Lock.ts"
/**
 * The hardened file primitives (checked opens, exclusive 0600 creation, directory fsyncs) for tools working on journal directories.
 *
 * @since 0.1.0
 */
export * as Files from "./Files.ts"
/**
 * `node:crypto`'s SHA-256 installed for the chain (byte-identical to `@noble/hashes`, checked on install).
 *
 * @since 0.1.0
 */
export * as NodeSha256 from "./NodeSha256.ts"
