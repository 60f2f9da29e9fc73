/**
 * @session-journal/codex: Codex CLI in the loop. Its PreToolUse and PostToolUse
 * hooks journaled and decided by a policy, the hooks merged into Codex's
 * `config.toml` and trusted, its rollout files kept byte for byte in verified
 * session journals.
 *
 * @since 0.1.0
 */

/**
 * Codex's hooks journaled and guarded: input schemas, the session of a Codex session, `handle`.
 *
 * @since 0.1.0
 */
export * as Hook from "./Hook.ts"
/**
 * Our hooks in Codex's `config.toml` (a text edit of our block only) and their trust.
 *
 * @since 0.1.0
 */
export * as Install from "./Install.ts"
/**
 * Custody of Codex rollout files: archive, follow, the sessions that keep them.
 *
 * @since 0.1.0
 */
export * as Rollout from "./Rollout.ts"
/**
 * Codex's command hook as a library: its options as values, the deadline, the refusals.
 *
 * @since 0.1.0
 */
export * as HookRunner from "./HookRunner.ts"
/**
 * The tokens a Codex session used, from its rollouts' usage records, read incrementally.
 *
 * @since 0.1.0
 */
export * as Usage from "./Usage.ts"
