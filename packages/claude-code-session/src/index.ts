/**
 * @session-journal/claude-code-session: a Claude Code CLI session as an Effect
 * stream. Messages in and out of the CLI's stream-json protocol, every line
 * journaled before it is published, every tool call decided by the journal's
 * guards.
 *
 * @since 0.1.0
 */

/**
 * The message model of the stream-json protocol: total decoding, `Unknown` kept.
 *
 * @since 0.1.0
 */
export * as Message from "./Message.ts"
/**
 * The pure fold of a session's messages: ids, counters, usage, cost, alive or dead.
 *
 * @since 0.1.0
 */
export * as SessionState from "./SessionState.ts"
/**
 * Structured user input with its round-trip law.
 *
 * @since 0.1.0
 */
export * as UserInput from "./UserInput.ts"
/**
 * The typed failures of a session.
 *
 * @since 0.1.0
 */
export * from "./Errors.ts"
/**
 * A Claude Code CLI session: spawn, send, events, state, awaitResultAfter, interrupt, info.
 *
 * @since 0.1.0
 */
export * as Session from "./Session.ts"
