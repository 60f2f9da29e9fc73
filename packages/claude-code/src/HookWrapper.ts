/**
 * The installed hook's fail-closed wrapper as a public module: the `/bin/sh`
 * command line an agent runs for a hook, which denies with a one-line reason when
 * our program cannot start. Claude Code's and Codex's installers share it; it is
 * written once, in `internal/hookWrapper.ts`.
 *
 * @since 0.1.0
 */
export * from "./internal/hookWrapper.ts"
