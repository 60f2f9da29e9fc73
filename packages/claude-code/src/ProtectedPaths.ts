/**
 * What no call guarded by Claude Code's hooks may touch (`Hook.selfProtection`),
 * as every door computes it: the command hook (`HookRunner`), the resident guard
 * (`GuardServer`) and the driven session (`claude-code run` gives it to
 * `Session`): the journal directory, the policy file, the Claude Code settings
 * that hold our hooks, the project's transcripts, and where any of them leads
 * through a symbolic link.
 *
 * @since 0.1.0
 */

/**
 * `protectedPaths(cwd, env, journalDir, policyFile, transcriptPath?)`.
 *
 * @since 0.1.0
 */
export * from "./internal/protect.ts"
