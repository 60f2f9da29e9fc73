/**
 * Reading and replacing a settings file the way a careful editor does, as a public
 * module: edited through a symbolic link to its target, read without following an
 * unresolved link, written to an exclusive temporary file that is synced and
 * renamed over it, the previous content kept in a numbered backup. Claude Code's
 * installer and Codex's `config.toml` installer share it; the rules are stated
 * once, in `internal/settingsIo.ts`.
 *
 * @since 0.1.0
 */
export * from "./internal/settingsIo.ts"
