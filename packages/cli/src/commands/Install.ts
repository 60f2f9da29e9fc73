/**
 * `session-journal claude-code install [--project DIR | --user] [--shared]
 * [--policy FILE] [--root DIR] [--guard URL] [--uninstall]`: adds our hooks to a
 * Claude Code settings file.
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
 * @since 0.4.0
 */
import {
  commandLine,
  type ProjectPath,
  projectPath,
  shellQuote,
  type Word,
  type WrapOptions
} from "@session-journal/claude-code/internal/hookWrapper"
import { EVENTS, installText, type JsonObject, removeText } from "@session-journal/claude-code/internal/settingsHooks"
import * as SettingsIo from "@session-journal/claude-code/internal/settingsIo"
import { StorageError } from "@session-journal/core"
import { Command, Flag } from "effect/cli"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { InvalidInput } from "../Failure.ts"
import { Dir, onCommandLine, withoutJournal } from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import { load } from "../PolicyFile.ts"

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
} from "@session-journal/claude-code/internal/hookWrapper"
export {
  EVENTS,
  installText,
  isOurs,
  merge,
  readText,
  remove,
  removeText,
  SettingsTextError
} from "@session-journal/claude-code/internal/settingsHooks"

/**
 * The `timeout` of an installed hook, in seconds: longer than the hook's default
 * wait for its session's lock (30 s), so a hook answers before Claude Code would
 * cancel it (a cancelled hook fails open).
 *
 * @since 0.4.0
 */
export const HOOK_TIMEOUT_SECONDS = 60

/**
 * The suffix of the first backup kept next to a settings file; later ones are
 * `FILE.session-journal.1.bak`, `.2.bak`, … (never overwritten).
 *
 * @since 0.4.0
 */
export const BACKUP_SUFFIX = SettingsIo.BACKUP_SUFFIX

/**
 * Largest settings file read (4 MiB).
 *
 * @since 0.4.0
 */
export const MAX_SETTINGS_BYTES = 4 * 1024 * 1024

/**
 * The command line of our command hook: `command` (how to start
 * `session-journal`) then `claude-code hook`, with `--root DIR` and
 * `--policy FILE` when given; wrapped for `event` when one is given (`wrap`).
 *
 * @since 0.4.0
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
 * @since 0.4.0
 */
export const forwardCommand = (command: ReadonlyArray<string>, url: string, options?: WrapOptions): string =>
  commandLine([...command, "claude-code", "forward", "--url", url, "--timeout-ms", "10000"], options)

/**
 * What `install` did to a settings file.
 *
 * @since 0.4.0
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

const refusedAs = (file: string) => (e: unknown): InvalidInput | StorageError =>
  e instanceof SettingsIo.SettingsFileError && e.reason === "Io"
    ? StorageError.io("install", (e as Error).cause ?? e, file)
    : new InvalidInput({
      field: file,
      reason: `cannot use it as Claude Code settings (left unchanged): ${e instanceof Error ? e.message : String(e)}`
    })

/**
 * Installs our hooks in `file` (`hookFor` gives each event's hook; null
 * uninstalls): reads it through its links, edits its text (`installText`,
 * `removeText`), and only when the text changes keeps a new backup and replaces
 * the file (`internal/settingsIo.ts`).
 *
 * @since 0.4.0
 */
export const apply = (
  file: string,
  hookFor: ((event: string) => JsonObject) | JsonObject | null
): Effect.Effect<Report, InvalidInput | StorageError> =>
  Effect.gen(function*() {
    const loaded = yield* Effect.try({
      try: () => SettingsIo.load(file, MAX_SETTINGS_BYTES),
      catch: refusedAs(file)
    })
    const events = hookFor === null ? 0 : EVENTS.length
    const target = loaded.linked ? loaded.target : null
    if (hookFor === null && loaded.text === null) {
      return { file, status: "unchanged", backup: null, events, target }
    }
    const next = yield* Effect.try({
      try: () =>
        hookFor === null
          ? removeText(loaded.text!)
          : installText(loaded.text ?? "", typeof hookFor === "function" ? hookFor : () => hookFor),
      catch: refusedAs(file)
    })
    if (next === loaded.text) return { file, status: "unchanged", backup: null, events, target }
    const { backup } = yield* Effect.try({ try: () => SettingsIo.save(loaded, next), catch: refusedAs(file) })
    return { file, status: hookFor === null ? "uninstalled" : "installed", backup, events, target }
  })

/**
 * How an installed hook starts this installation of `session-journal`: the Node
 * running it and the real path of the bin file it was started with.
 *
 * @since 0.4.0
 */
export const selfCommand = (): ReadonlyArray<string> => {
  const script = process.argv[1]
  if (script === undefined) return ["session-journal"]
  try {
    return [process.execPath, fs.realpathSync(script)]
  } catch {
    return ["session-journal"]
  }
}

/**
 * The command a `--shared` install runs: `session-journal` from PATH, so it works
 * on every machine that has it installed.
 *
 * @since 0.7.0
 */
export const SHARED_COMMAND: ReadonlyArray<string> = ["session-journal"]

/**
 * The environment variable naming Claude Code's user configuration directory
 * (default `~/.claude`).
 *
 * @since 0.5.0
 */
export const CLAUDE_CONFIG_DIR_VAR = "CLAUDE_CONFIG_DIR"

/**
 * Which settings file: the user's, the project's shared (committed) one, or the
 * project's personal one (the default).
 *
 * @since 0.7.0
 */
export type Scope = "user" | "shared" | "local"

/**
 * The settings file of a scope: `--user`'s (in `configDir`, the value of
 * `$CLAUDE_CONFIG_DIR`, else `~/.claude`), the project's `.claude/settings.json`
 * (`shared`) or its `.claude/settings.local.json` (`local`, the default).
 *
 * @since 0.4.0
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

const realOrResolved = (p: string): string => {
  try {
    return fs.realpathSync(p)
  } catch {
    return path.resolve(p)
  }
}

/**
 * `file` as a path inside `project` (`projectPath`), or undefined when it lies
 * outside (symbolic links resolved where they exist).
 *
 * @since 0.7.0
 */
export const insideProject = (project: string, file: string): ProjectPath | undefined => {
  const root = realOrResolved(project)
  const target = realOrResolved(file)
  const rel = path.relative(root, target)
  if (rel.startsWith("..") || path.isAbsolute(rel)) return undefined
  return projectPath(rel.split(path.sep).join("/"))
}

/**
 * The `install` command.
 *
 * @since 0.4.0
 */
export const command = Command.make("install", {
  project: Flag.String("project").pipe(
    Flag.optional,
    Flag.withMetavar("DIR"),
    Flag.withDescription(
      "Install into DIR/.claude/settings.local.json, the personal file (default: the working directory's)"
    )
  ),
  user: Flag.Boolean("user").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Install into the user's ~/.claude/settings.json ($CLAUDE_CONFIG_DIR/settings.json)")
  ),
  shared: Flag.Boolean("shared").pipe(
    Flag.withDefault(false),
    Flag.withDescription(
      "Install into the project's committed .claude/settings.json for every teammate: session-journal from PATH, paths relative to $CLAUDE_PROJECT_DIR"
    )
  ),
  policy: Flag.String("policy").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription(
      "Policy file the hooks decide PreToolUse with (checked now; by absolute path, or inside the project with --shared)"
    )
  ),
  root: Flag.String("root").pipe(
    Flag.optional,
    Flag.withMetavar("DIR"),
    Flag.withDescription("Journal directory the hooks write (default: the hook's own; the global --dir works too)")
  ),
  guard: Flag.String("guard").pipe(
    Flag.optional,
    Flag.withMetavar("URL"),
    Flag.withDescription(
      "Hand events to the resident guard at URL (http://127.0.0.1:PORT/hook), denying when it is down"
    )
  ),
  tokenFile: Flag.String("token-file").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription(
      "With --guard: the forwarder reads the guard's token from FILE (mode 0600, as the guard's --token-file), " +
        "not from $SESSION_JOURNAL_GUARD_TOKEN, which every command the agent runs can read"
    )
  ),
  uninstall: Flag.Boolean("uninstall").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Remove our hooks only (from both project files, or the user's), keeping everything else")
  )
}, (a) =>
  Effect.flatMap(Dir, (dir) =>
    withoutJournal(({ json }) =>
      Effect.gen(function*() {
        const project = Option.getOrUndefined(a.project)
        if (a.user && project !== undefined) {
          return yield* new InvalidInput({ field: "--user", reason: "give --project DIR or --user, not both" })
        }
        if (a.user && a.shared) {
          return yield* new InvalidInput({ field: "--shared", reason: "--shared is a project's file; not with --user" })
        }
        const configDir = Option.getOrUndefined(
          yield* Effect.orDie(Config.option(Config.String(CLAUDE_CONFIG_DIR_VAR)))
        )
        const fileOf = (shared: boolean) => settingsFile({ user: a.user, project, configDir, shared })

        if (a.uninstall) {
          const files = a.user ? [fileOf(false)] : [fileOf(false), fileOf(true)]
          for (const file of files) {
            const report = yield* apply(file, null)
            if (json) yield* Output.json(report)
            else {
              yield* Output.write(
                report.status === "unchanged"
                  ? `${file}: unchanged (no hooks of ours in it)\n`
                  : `${named(report)}: uninstalled our hooks` +
                    (report.backup === null ? "" : `; the previous content is in ${report.backup}`) + "\n"
              )
            }
          }
          return
        }

        const file = fileOf(a.shared)
        const projectDir = path.resolve(project ?? ".")
        const scope: Scope = a.user ? "user" : a.shared ? "shared" : "local"
        const hint = scope === "user"
          ? file
          : scope === "shared"
          ? path.join(".claude", "settings.json")
          : path.join(".claude", "settings.local.json")
        const place = (flag: string, given: string): Effect.Effect<Word, InvalidInput> => {
          if (scope !== "shared") return Effect.succeed(path.resolve(given))
          const inside = insideProject(projectDir, path.resolve(given))
          return inside === undefined
            ? Effect.fail(
              new InvalidInput({
                field: flag,
                reason:
                  `${given} is outside the project ${projectDir}: a --shared install names files relative to $CLAUDE_PROJECT_DIR, so they must lie inside it (or install without --shared)`
              })
            )
            : Effect.succeed(inside)
        }

        const globalDir = onCommandLine(dir)
        const rootFlag = Option.getOrUndefined(a.root)
        if (globalDir !== undefined && rootFlag !== undefined) {
          return yield* new InvalidInput({ field: "--root", reason: "give --root or the global --dir, not both" })
        }
        const rootGiven = rootFlag ?? globalDir
        const root = rootGiven === undefined || rootGiven === "" ? undefined : yield* place("--root", rootGiven)
        const policyFile = Option.getOrUndefined(a.policy)
        if (policyFile !== undefined) yield* load(path.resolve(policyFile))
        const policy = policyFile === undefined ? undefined : yield* place("--policy", policyFile)
        const guard = Option.getOrUndefined(a.guard)
        const url = guard === undefined ? undefined : yield* guardUrl(guard)
        const tokenFileGiven = Option.getOrUndefined(a.tokenFile)
        if (tokenFileGiven !== undefined && url === undefined) {
          return yield* new InvalidInput({ field: "--token-file", reason: "is for --guard URL" })
        }
        const tokenFile = tokenFileGiven === undefined ? undefined : path.resolve(tokenFileGiven)
        // The guard decides with its own policy: --policy must be the one it runs.
        const guardNote = url === undefined
          ? ""
          : yield* checkGuardPolicy(url, policyFile === undefined ? undefined : path.resolve(policyFile), tokenFile)
        const self = scope === "shared" ? SHARED_COMMAND : selfCommand()
        const hookFor = (event: string): JsonObject => ({
          type: "command",
          command: url === undefined
            ? hookCommand(self, { root, policy, event, settings: hint })
            : forwardCommand(self, url, { event, settings: hint }) +
              (tokenFile === undefined ? "" : ` --token-file ${shellQuote(tokenFile)}`),
          timeout: HOOK_TIMEOUT_SECONDS
        })
        const report = yield* apply(file, hookFor)
        // Hooks in both project files would journal every event twice.
        const other = scope === "user" ? undefined : fileOf(scope === "local")
        const twice = other !== undefined && (yield* alsoOurs(other))
        if (json) return yield* Output.json(report)
        yield* Output.write(guardNote)
        yield* Output.write(
          (report.status === "unchanged"
            ? `${file}: unchanged (our hooks are already installed)\n`
            : `${named(report)}: ${report.status} hooks for ${report.events} events` +
              (report.backup === null ? "" : `; the previous content is in ${report.backup}`) + "\n") +
            (twice
              ? `note: ${other} has our hooks too, so every event would be journaled twice; remove them there (edit it, or --uninstall and install again)\n`
              : "")
        )
      })
    ))).pipe(Command.withDescription(
      "Add our hooks to Claude Code's settings (keeping every other byte, with a backup); --uninstall removes only ours"
    ))

// The file as the output names it: with its target when it is a link.
const named = (report: Report): string =>
  report.target === null ? report.file : `${report.file} (a link to ${report.target})`

// Whether `file` holds hooks of ours (false when it cannot be read).
const alsoOurs = (file: string): Effect.Effect<boolean> =>
  Effect.sync(() => {
    try {
      const loaded = SettingsIo.load(file, MAX_SETTINGS_BYTES)
      return loaded.text !== null && removeText(loaded.text) !== loaded.text
    } catch {
      return false
    }
  })

const guardUrl = (url: string): Effect.Effect<string, InvalidInput> => {
  let parsed: URL | undefined
  try {
    parsed = new URL(url)
  } catch {
    parsed = undefined
  }
  return parsed !== undefined && parsed.protocol === "http:" &&
      ["127.0.0.1", "localhost", "[::1]"].includes(parsed.hostname) && parsed.pathname === "/hook"
    ? Effect.succeed(url)
    : Effect.fail(new InvalidInput({ field: "--guard", reason: `${url}: expected http://127.0.0.1:PORT/hook` }))
}

const checkGuardPolicy = (url: string, policy: string | undefined, tokenFile: string | undefined) =>
  Effect.flatMap(
    Effect.all([
      Effect.promise(() => import("./GuardInstall.ts")),
      Effect.orDie(Config.option(Config.String("SESSION_JOURNAL_GUARD_TOKEN")))
    ]),
    ([m, token]) =>
      Effect.flatMap(
        tokenFile === undefined ? Effect.succeed(Option.getOrUndefined(token)) : m.readTokenFile(tokenFile),
        (t) => m.checkPolicy(url, policy, t)
      )
  )
