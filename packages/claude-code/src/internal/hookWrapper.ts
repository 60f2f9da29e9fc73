/**
 * The fail-closed wrapper of the hooks `claude-code install` writes, and the
 * quoting of their command lines for the POSIX shell Claude Code runs command
 * hooks with (`/bin/sh -c`, observed with 2.1.328).
 *
 * An installed hook is `/bin/sh -c WRAPPER_SCRIPT session-journal-hook EVENT
 * SETTINGS COMMAND…`: the script runs the command with its stdout passed through
 * and keeps its stderr; exit 0 and 2 pass as they are (and 1 for Stop and
 * SubagentStop, our own "a stop already kept going"); any other exit (127 not
 * found, 126 not executable, a Node that crashes with 1, a signal) becomes exit 2
 * (1 for Stop and SubagentStop, where exit 2 would keep the turn going for ever)
 * with one line on stderr naming the event, the program, what happened with the
 * line of its stderr that says why, and how to fix it or remove the hooks.
 * Further words appended to such a line are further arguments of the command.
 */

/**
 * One argument quoted for the POSIX shell Claude Code runs a command hook with.
 *
 * @since 0.1.0
 */
export const shellQuote = (arg: string): string =>
  /^[A-Za-z0-9_/.:=@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`

/**
 * A path inside the project, written relative to `$CLAUDE_PROJECT_DIR` (which
 * Claude Code sets for every hook) so the hook finds it on every machine.
 *
 * @since 0.1.0
 */
export interface ProjectPath {
  readonly _tag: "ProjectPath"
  /** Relative to the project's root, `/`-separated; `""` is the root itself. */
  readonly relative: string
}

/**
 * An argument of an installed command: a literal, or a path inside the project.
 *
 * @since 0.1.0
 */
export type Word = string | ProjectPath

/**
 * A path inside the project, relative to its root.
 *
 * @since 0.1.0
 */
export const projectPath = (relative: string): ProjectPath => ({ _tag: "ProjectPath", relative })

/**
 * One word as the shell reads it: a literal quoted (`shellQuote`), a project path
 * as `"$CLAUDE_PROJECT_DIR"/'rel'`.
 *
 * @since 0.1.0
 */
export const shellWord = (word: Word): string =>
  typeof word === "string"
    ? shellQuote(word)
    : word.relative === ""
    ? `"$CLAUDE_PROJECT_DIR"`
    : `"$CLAUDE_PROJECT_DIR"/${shellQuote(word.relative)}`

/**
 * The wrapper's script (POSIX `sh`, no single quote in it), its message naming
 * `uninstall` as the command that removes the hooks: `$1` the event, `$2` the
 * settings file to name, the rest the command. It runs the command with its
 * stdout passed through and its stderr kept; exits 0 and 2 (and 1 for Stop and
 * SubagentStop) pass with that stderr; every other exit becomes exit 2 (1 for
 * Stop and SubagentStop) with one line on stderr: the event, the program, what
 * happened (not found, not executable, a signal, an exit code) with the line of
 * its stderr that says why, and how to fix it or remove the hooks.
 *
 * @since 0.1.0
 */
export const wrapperScript = (uninstall: string): string =>
  [
    `e=$1 f=$2`,
    `shift 2`,
    `{ m=$("$@" 2>&1 >&3 3>&-); c=$?; } 3>&1`,
    `case $c/$e in 0/*|2/*|1/Stop|1/SubagentStop) [ -z "$m" ] || printf "%s\\n" "$m" >&2; exit $c;; esac`,
    `case $e in Stop|SubagentStop) x=1 y="it is not journaled";; *) x=2 y="it is refused";; esac`,
    `case $c in 126) w="cannot be executed";; 127) w="was not found";; *) if [ $c -gt 128 ]; then w="was killed by signal $((c-128))"; else w="exited with $c"; fi;; esac`,
    `d= n=$(printf "\\n.")`,
    `IFS=\${n%.}`,
    `set -f`,
    `for l in $m; do case $l in session-journal:*|*rror*|*"not found"*|*ermission*) d=" ($l)"; break;; esac; done`,
    `printf "session-journal: the %s hook cannot run: %s %s%s, so %s. Reinstall session-journal, or remove its hooks from %s (${uninstall})\\n" "$e" "$1" "$w" "$d" "$y" "$f" >&2`,
    `exit $x`
  ].join("; ")

/**
 * How the hooks `claude-code install` writes are removed, as the wrapper's
 * message names it.
 *
 * @since 0.1.0
 */
export const CLAUDE_CODE_UNINSTALL = "session-journal claude-code install --uninstall"

/**
 * The wrapper's script of the hooks `claude-code install` writes
 * (`wrapperScript(CLAUDE_CODE_UNINSTALL)`).
 *
 * @since 0.1.0
 */
export const WRAPPER_SCRIPT = wrapperScript(CLAUDE_CODE_UNINSTALL)

/**
 * Where the wrapper's message says the hooks are, when the caller does not say.
 *
 * @since 0.1.0
 */
export const DEFAULT_SETTINGS_HINT = "Claude Code's settings"

/**
 * `command` (words) run through the fail-closed wrapper for `event`:
 * `/bin/sh -c WRAPPER_SCRIPT session-journal-hook EVENT SETTINGS COMMAND…`. More
 * words appended to the result are more arguments of the command.
 *
 * @since 0.1.0
 */
export const wrap = (
  command: ReadonlyArray<Word>,
  options: { readonly event: string; readonly settings?: string | undefined; readonly uninstall?: string | undefined }
): string =>
  [
    ...[
      "/bin/sh",
      "-c",
      options.uninstall === undefined ? WRAPPER_SCRIPT : wrapperScript(options.uninstall),
      "session-journal-hook",
      options.event,
      options.settings ?? DEFAULT_SETTINGS_HINT
    ].map(shellQuote),
    ...command.map(shellWord)
  ].join(" ")

/**
 * What the installed command is for: the event it is installed for (then it is
 * wrapped, `wrap`) and the settings file its failure message names. Without an
 * event the plain command line is given.
 *
 * @since 0.1.0
 */
export interface WrapOptions {
  readonly event?: string | undefined
  readonly settings?: string | undefined
  /** The command the failure message names to remove the hooks (default `CLAUDE_CODE_UNINSTALL`). */
  readonly uninstall?: string | undefined
}

/**
 * The words as one command line: plain without an event, else wrapped (`wrap`).
 *
 * @since 0.1.0
 */
export const commandLine = (words: ReadonlyArray<Word>, options: WrapOptions | undefined): string =>
  options?.event === undefined
    ? words.map(shellWord).join(" ")
    : wrap(words, { event: options.event, settings: options.settings, uninstall: options.uninstall })
