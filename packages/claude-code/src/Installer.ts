/**
 * `session-journal claude-code install [--project DIR | --user] [--shared]
 * [--policy FILE] [--root DIR] [--guard URL] [--uninstall]`: adds our hooks to a
 * Claude Code settings file.
 *
 * This is the installer; the command line parses those flags and prints the
 * reports (`commands/InstallCommand.ts` of the cli). The hooks it writes run the
 * command hook or the forwarder, whose events are decided by `Hook.handle`, the
 * one place every door's decision is made.
 *
 * Where they go:
 * - by default, the project's personal file `DIR/.claude/settings.local.json`
 *   (DIR: the working directory), which Claude Code reads and which is not
 *   committed; the hooks run this installation's `session-journal` by absolute
 *   paths (the Node that runs `install` and the package's bin file) and name the
 *   policy file by its absolute path;
 * - with `--shared`, the project's committed `DIR/.claude/settings.json`, for
 *   every teammate: the hooks run `session-journal` from PATH and name the policy
 *   (which must lie inside the project) and an explicit journal directory
 *   relative to `$CLAUDE_PROJECT_DIR`, which Claude Code sets for every hook; no
 *   path of this machine is written;
 * - with `--user`, the user's `~/.claude/settings.json`
 *   (`$CLAUDE_CONFIG_DIR/settings.json` when that is set).
 *
 * The journal directory is passed (`--root`) only when `--root` or the global
 * `--dir` was given on the command line; otherwise the hook uses its own default.
 *
 * Every hook is one command per event, run through a small POSIX `sh` wrapper
 * (`wrap`, `internal/hookWrapper.ts`; Claude Code runs command hooks with
 * `/bin/sh -c`): when our program cannot start or dies (not installed any more:
 * exit 127; not executable: 126; Node crashing: 1; a signal), the wrapper turns
 * that into exit 2 with one line on stderr naming what failed and how to fix or
 * remove the hooks, which blocks the event instead of letting it pass
 * unjournaled. For Stop and SubagentStop it exits 1 instead (exit 2 there would
 * keep the turn going for ever), and our own exit 1 there (a Stop already kept
 * going) passes. The forwarder of `--guard URL` is wrapped the same way.
 *
 * The file is edited as text (`internal/settingsHooks.ts` on
 * `internal/jsonText.ts`): only our matcher groups are inserted or removed, and
 * every other byte (numbers as spelled, comments, key order, indentation) stays;
 * install then uninstall gives back the same bytes. It is written as
 * `internal/settingsIo.ts` says: through a symbolic link to its final target,
 * with a new backup per change that never overwrites an older one (the report
 * names it), through an exclusively created temporary file renamed over the
 * target. A run that changes nothing writes nothing. `--uninstall` removes only
 * our hooks (today's and the earlier unwrapped forms) from both project files
 * (or the user's), and matcher groups, events and `hooks` objects left empty by
 * that.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as os from "node:os"
import * as path from "node:path"
import { SettingsRefused } from "./Errors.ts"
import {
  commandLine,
  type ProjectPath,
  projectPath,
  shellQuote,
  type Word,
  type WrapOptions
} from "./internal/hookWrapper.ts"
import { EVENTS, installText, type JsonObject, removeText } from "./internal/settingsHooks.ts"
import * as SettingsIo from "./internal/settingsIo.ts"

export {
  DEFAULT_SETTINGS_HINT,
  type ProjectPath,
  projectPath,
  shellQuote,
  shellWord,
  type Word,
  wrap,
  type WrapOptions,
  WRAPPER_SCRIPT
} from "./internal/hookWrapper.ts"
export {
  EVENTS,
  installText,
  isOurs,
  type JsonObject,
  merge,
  readText,
  remove,
  removeText,
  SettingsTextError
} from "./internal/settingsHooks.ts"

/**
 * The `timeout` of an installed hook, in seconds: longer than the hook's default
 * wait for its session's lock (30 s), so a hook answers before Claude Code would
 * cancel it (a cancelled hook fails open).
 *
 * @since 0.1.0
 */
export const HOOK_TIMEOUT_SECONDS = 60

/**
 * The suffix of the first backup kept next to a settings file; later ones are
 * `FILE.session-journal.1.bak`, `.2.bak`, … (never overwritten).
 *
 * @since 0.1.0
 */
export const BACKUP_SUFFIX = SettingsIo.BACKUP_SUFFIX

/**
 * Largest settings file read (4 MiB).
 *
 * @since 0.1.0
 */
export const MAX_SETTINGS_BYTES = 4 * 1024 * 1024

/**
 * The command line of our command hook: `command` (how to start
 * `session-journal`) then `claude-code hook`, with `--root DIR` and
 * `--policy FILE` when given; wrapped for `event` when one is given (`wrap`).
 *
 * @since 0.1.0
 */
export const hookCommand = (
  command: ReadonlyArray<string>,
  options: {
    readonly root?: Word | undefined
    readonly policy?: Word | undefined
  } & WrapOptions
): string =>
  commandLine([
    ...command,
    "claude-code",
    "hook",
    ...(options.root === undefined ? [] : ["--root", options.root]),
    ...(options.policy === undefined ? [] : ["--policy", options.policy])
  ], options)

/**
 * The command line of the resident guard's fail-closed form: the forwarder
 * (`claude-code forward --url URL`), which hands each event to the guard and
 * denies by itself when the guard does not answer; wrapped for `options.event`
 * when one is given (`wrap`), so a forwarder that cannot start refuses too.
 *
 * @since 0.1.0
 */
export const forwardCommand = (command: ReadonlyArray<string>, url: string, options?: WrapOptions): string =>
  commandLine([...command, "claude-code", "forward", "--url", url, "--timeout-ms", "10000"], options)

/**
 * What `install` did to a settings file.
 *
 * @since 0.1.0
 */
export interface Report {
  readonly file: string
  readonly status: "installed" | "uninstalled" | "unchanged"
  /** The backup of the previous content, when the file existed and changed. */
  readonly backup: string | null
  readonly events: number
  /** Where the file leads when it is a symbolic link (the file changed there); null otherwise. */
  readonly target: string | null
}

const refusedAs = (file: string) => (e: unknown): SettingsRefused =>
  new SettingsRefused({ file, io: e instanceof SettingsIo.SettingsFileError && e.reason === "Io", cause: e })

/**
 * What `editFile` did to a file: whether it changed, the backup of its previous
 * content, where it leads when it is a symbolic link.
 *
 * @since 0.1.0
 */
export interface Edited {
  readonly changed: boolean
  readonly backup: string | null
  readonly target: string | null
}

/**
 * Edits the text of a settings-like file the careful way every installer here
 * does (`internal/settingsIo.ts`): reads it through its links (a missing file
 * reads as null), and only when `change` gives another text (null: nothing to
 * do) keeps a new backup and replaces the file. `change` may throw; the file is
 * then left unchanged and the error is the refusal's cause.
 *
 * @since 0.1.0
 */
export const editFile = (
  file: string,
  change: (text: string | null) => string | null
): Effect.Effect<Edited, SettingsRefused> =>
  Effect.gen(function*() {
    const loaded = yield* Effect.try({
      try: () => SettingsIo.load(file, MAX_SETTINGS_BYTES),
      catch: refusedAs(file)
    })
    const target = loaded.linked ? loaded.target : null
    const next = yield* Effect.try({ try: () => change(loaded.text), catch: refusedAs(file) })
    if (next === null || next === loaded.text) return { changed: false, backup: null, target }
    const { backup } = yield* Effect.try({ try: () => SettingsIo.save(loaded, next), catch: refusedAs(file) })
    return { changed: true, backup, target }
  })

/**
 * Installs our hooks in `file` (`hookFor` gives each event's hook; null
 * uninstalls): edits its text (`installText`, `removeText`) through `editFile`.
 *
 * @since 0.1.0
 */
export const apply = (
  file: string,
  hookFor: ((event: string) => JsonObject) | JsonObject | null
): Effect.Effect<Report, SettingsRefused> =>
  Effect.map(
    editFile(file, (text) =>
      hookFor === null
        ? text === null ? null : removeText(text)
        : installText(text ?? "", typeof hookFor === "function" ? hookFor : () => hookFor)),
    ({ backup, changed, target }): Report => ({
      file,
      status: !changed ? "unchanged" : hookFor === null ? "uninstalled" : "installed",
      backup,
      events: hookFor === null ? 0 : EVENTS.length,
      target
    })
  )

/**
 * How an installed hook starts this installation of `session-journal`: the Node
 * running it and the real path of the bin file it was started with.
 *
 * @since 0.1.0
 */
export const selfCommand = (): ReadonlyArray<string> => {
  const script = process.argv[1]
  if (script === undefined) return ["session-journal"]
  const real = SettingsIo.realPath(script)
  return real === undefined ? ["session-journal"] : [process.execPath, real]
}

/**
 * The command a `--shared` install runs: `session-journal` from PATH, so it works
 * on every machine that has it installed.
 *
 * @since 0.1.0
 */
export const SHARED_COMMAND: ReadonlyArray<string> = ["session-journal"]

/**
 * The environment variable naming Claude Code's user configuration directory
 * (default `~/.claude`).
 *
 * @since 0.1.0
 */
export const CLAUDE_CONFIG_DIR_VAR = "CLAUDE_CONFIG_DIR"

/**
 * Which settings file: the user's, the project's shared (committed) one, or the
 * project's personal one (the default).
 *
 * @since 0.1.0
 */
export type Scope = "user" | "shared" | "local"

/**
 * The settings file of a scope: `--user`'s (in `configDir`, the value of
 * `$CLAUDE_CONFIG_DIR`, else `~/.claude`), the project's `.claude/settings.json`
 * (`shared`) or its `.claude/settings.local.json` (`local`, the default).
 *
 * @since 0.1.0
 */
export const settingsFile = (
  options: {
    readonly user: boolean
    readonly project: string | undefined
    readonly configDir: string | undefined
    readonly shared?: boolean | undefined
  }
): string =>
  options.user
    ? path.join(
      options.configDir !== undefined && options.configDir !== ""
        ? options.configDir
        : path.join(os.homedir(), ".claude"),
      "settings.json"
    )
    : path.join(
      path.resolve(options.project ?? "."),
      ".claude",
      options.shared === true ? "settings.json" : "settings.local.json"
    )

const realOrResolved = (p: string): string => SettingsIo.realPath(p) ?? path.resolve(p)

/**
 * The hook of each event for a scope's settings `file`: the command hook (with
 * `root` and `policy`, as `--root DIR` and `--policy FILE`) or, with `url`, the
 * forwarder to the resident guard (its token from `tokenFile`, else the
 * variable); run by this installation's `session-journal` (`selfCommand`), or
 * the one on PATH for a `shared` install (`SHARED_COMMAND`); the wrapper names
 * the file to fix by its place (`WrapOptions.settings`).
 *
 * @since 0.1.0
 */
export const hookFor = (options: {
  readonly scope: Scope
  readonly file: string
  readonly root?: Word | undefined
  readonly policy?: Word | undefined
  readonly url?: string | undefined
  readonly tokenFile?: string | undefined
}) => {
  const { file, policy, root, scope, tokenFile, url } = options
  const hint = scope === "user"
    ? file
    : scope === "shared"
    ? path.join(".claude", "settings.json")
    : path.join(".claude", "settings.local.json")
  const self = scope === "shared" ? SHARED_COMMAND : selfCommand()
  return (event: string): JsonObject => ({
    type: "command",
    command: url === undefined
      ? hookCommand(self, { root, policy, event, settings: hint })
      : forwardCommand(self, url, { event, settings: hint }) +
        (tokenFile === undefined ? "" : ` --token-file ${shellQuote(tokenFile)}`),
    timeout: HOOK_TIMEOUT_SECONDS
  })
}

/**
 * `file` as a path inside `project` (`projectPath`), or undefined when it lies
 * outside (symbolic links resolved where they exist).
 *
 * @since 0.1.0
 */
export const insideProject = (project: string, file: string): ProjectPath | undefined => {
  const root = realOrResolved(project)
  const target = realOrResolved(file)
  const rel = path.relative(root, target)
  if (rel.startsWith("..") || path.isAbsolute(rel)) return undefined
  return projectPath(rel.split(path.sep).join("/"))
}

/**
 * Whether `file` holds hooks of ours (false when it cannot be read): hooks in
 * both of a project's settings files would journal every event twice.
 *
 * @since 0.1.0
 */
export const holdsOurHooks = (file: string): Effect.Effect<boolean> =>
  Effect.sync(() => {
    try {
      const loaded = SettingsIo.load(file, MAX_SETTINGS_BYTES)
      return loaded.text !== null && removeText(loaded.text) !== loaded.text
    } catch {
      return false
    }
  })

/**
 * Whether `url` is a resident guard's hook URL (`http://127.0.0.1:PORT/hook`,
 * `localhost` or `[::1]` too): why not, or null.
 *
 * @since 0.1.0
 */
export const guardUrlProblem = (url: string): string | null => {
  let parsed: URL | undefined
  try {
    parsed = new URL(url)
  } catch {
    parsed = undefined
  }
  return parsed !== undefined && parsed.protocol === "http:" &&
      ["127.0.0.1", "localhost", "[::1]"].includes(parsed.hostname) && parsed.pathname === "/hook"
    ? null
    : `${url}: expected http://127.0.0.1:PORT/hook`
}
