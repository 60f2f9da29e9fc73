/**
 * @session-journal/node: the filesystem adapter of the journal (segments,
 * checkpoints, crash safety, hardened file primitives) and the single-writer lock.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as NodePersistence from "./NodePersistence.ts"
/** @since 0.1.0 */
export * as Lock from "./Lock.ts"
