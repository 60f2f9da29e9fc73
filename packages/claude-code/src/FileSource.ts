/**
 * Every access to an agent's tree of append-only files (Claude Code's transcripts,
 * Codex's rollouts) as a public module: each directory held open and everything in
 * it reached through that handle, links refused, each step an Effect failing with a
 * `SourceError` that names its path. Claude Code's custody and Codex's rollout
 * custody share it; it is written once, in `internal/source.ts`.
 *
 * @since 0.1.0
 */
export * from "./internal/source.ts"
