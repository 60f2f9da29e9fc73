/**
 * @session-journal/core: the hash chain, the pure journal state, guards, the
 * SessionJournal service, the Persistence port and its in-memory adapter.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Chain from "./Chain.ts"
/** @since 0.1.0 */
export * as Checkpoint from "./Checkpoint.ts"
/** @since 0.1.0 */
export * as Entry from "./Entry.ts"
/** @since 0.1.0 */
export * from "./Errors.ts"
/** @since 0.1.0 */
export * as JournalState from "./JournalState.ts"
/** @since 0.1.0 */
export * as SessionMeta from "./SessionMeta.ts"
/** @since 0.1.0 */
export * as Persistence from "./Persistence.ts"
/** @since 0.1.0 */
export * as Replay from "./Replay.ts"
/** @since 0.1.0 */
export * as Guard from "./Guard.ts"
/** @since 0.1.0 */
export * as SessionJournal from "./SessionJournal.ts"
/** @since 0.1.0 */
export * as Mirror from "./Mirror.ts"
