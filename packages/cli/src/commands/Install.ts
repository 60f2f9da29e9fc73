/**
 * `session-journal claude-code install [--project DIR | --user] [--policy FILE]
 * [--guard URL] [--uninstall]`: merges our hooks into a Claude Code settings
 * file, `DIR/.claude/settings.json` (default: the working directory's) or the
 * user's `~/.claude/settings.json` (`$CLAUDE_CONFIG_DIR/settings.json` when it
 * is set).
 *
 * The hooks run this installation's `session-journal` by absolute paths (the
 * Node that runs `install` and the package's bin file) with
 * `claude-code hook --root DIR` naming the journal directory (`--dir`, made
 * absolute) and the policy file (made absolute) when one is given, so they work
 * from any working directory. One matcher group matching every tool, per event
 * of `EVENTS`, appended after the file's own groups.
 *
 * Every other setting and hook is kept as it is. Before a file is changed its
 * previous content is kept next to it (`settings.json.session-journal.bak`, with
 * the file's mode); a run that changes nothing writes nothing. `--uninstall`
 * removes only our hooks (the command hook and the guard's forms), and matcher
 * groups and events left empty by that. The file is replaced atomically (a
 * temporary file renamed over it).
 *
 * @since 0.4.0
 */
import { StorageError } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { Command, Flag } from "effect/cli"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { InvalidInput } from "../Failure.ts"
import { withoutJournal } from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import { load } from "../PolicyFile.ts"

/**
 * The events our hooks are installed for (PROTOCOL.md (a)): every one whose record
 * goes on the chain.
 *
 * @since 0.4.0
 */
export const EVENTS = [
  "SessionStart",
  "UserPromptSubmit",
  "PreToolUse",
  "PostToolUse",
  "PostToolUseFailure",
  "SubagentStart",
  "SubagentStop",
  "Stop",
  "PreCompact",
  "PostCompact",
  "SessionEnd"
] as const

/**
 * The `timeout` of an installed hook, in seconds: longer than the hook's default
 * wait for its session's lock (30 s), so a hook answers before Claude Code would
 * cancel it (a cancelled hook fails open).
 *
 * @since 0.4.0
 */
export const HOOK_TIMEOUT_SECONDS = 60

/**
 * The suffix of the backup kept next to a settings file.
 *
 * @since 0.4.0
 */
export const BACKUP_SUFFIX = ".session-journal.bak"

/**
 * Largest settings file read (4 MiB).
 *
 * @since 0.4.0
 */
export const MAX_SETTINGS_BYTES = 4 * 1024 * 1024

type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
type JsonObject = { readonly [key: string]: Json }

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v)

/**
 * One argument quoted for the POSIX shell Claude Code runs a command hook with.
 *
 * @since 0.4.0
 */
export const shellQuote = (arg: string): string =>
  /^[A-Za-z0-9_/.:=@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`

/**
 * The command line of our command hook: `command` (how to start
 * `session-journal`, by absolute paths) then `claude-code hook --root DIR` and
 * `--policy FILE` when given.
 *
 * @since 0.4.0
 */
export const hookCommand = (
  command: ReadonlyArray<string>,
  options: { readonly root: string; readonly policy?: string | undefined }
): string =>
  [
    ...command,
    "claude-code",
    "hook",
    "--root",
    options.root,
    ...(options.policy === undefined ? [] : ["--policy", options.policy])
  ].map(shellQuote).join(" ")

/**
 * The command line of the resident guard's fail-closed form: the forwarder
 * (`claude-code forward --url URL`), which hands each event to the guard and
 * denies by itself when the guard does not answer.
 *
 * @since 0.4.0
 */
export const forwardCommand = (command: ReadonlyArray<string>, url: string): string =>
  [...command, "claude-code", "forward", "--url", url, "--timeout-ms", "10000"].map(shellQuote).join(" ")

const OUR_COMMAND = /(^|\s)'?claude-code'?\s+'?(hook|forward)'?(\s|$)/

/**
 * Whether a hook of a settings file is one of ours: a command hook running
 * `claude-code hook` or `claude-code forward`, or an `http` hook to a loopback
 * `/hook` with a bearer token from the environment (the guard's plain form).
 *
 * @since 0.4.0
 */
export const isOurs = (hook: unknown): boolean => {
  if (!isObject(hook)) return false
  if (hook["type"] === "command") {
    const command = hook["command"]
    return typeof command === "string" && command.includes("session-journal") && OUR_COMMAND.test(command)
  }
  if (hook["type"] === "http" && typeof hook["url"] === "string") {
    let url: URL
    try {
      url = new URL(hook["url"])
    } catch {
      return false
    }
    const headers = hook["headers"]
    const auth = isObject(headers) ? headers["Authorization"] : undefined
    return ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname) && url.pathname === "/hook" &&
      typeof auth === "string" && auth.startsWith("Bearer $")
  }
  return false
}

/**
 * The settings without our hooks: ours removed from every matcher group, groups
 * and events left empty by that removed, `hooks` removed when nothing is left in
 * it. Everything else is kept as it was, in its order.
 *
 * @since 0.4.0
 */
export const remove = (settings: JsonObject): JsonObject => {
  const hooks = settings["hooks"]
  if (!isObject(hooks)) return settings
  const kept: Record<string, Json> = {}
  for (const [event, groups] of Object.entries(hooks)) {
    if (!Array.isArray(groups)) {
      kept[event] = groups
      continue
    }
    const left: Array<Json> = []
    for (const group of groups as ReadonlyArray<Json>) {
      if (!isObject(group) || !Array.isArray(group["hooks"])) {
        left.push(group)
        continue
      }
      const inner = group["hooks"] as ReadonlyArray<Json>
      const others = inner.filter((h) => !isOurs(h))
      if (others.length === inner.length) left.push(group)
      else if (others.length > 0) left.push({ ...group, hooks: others })
    }
    if (left.length > 0 || groups.length === 0) kept[event] = left
  }
  const { hooks: _, ...rest } = settings
  return Object.keys(kept).length === 0 ? rest : { ...settings, hooks: kept }
}

/**
 * The settings with our hook (`hook`, one hook object) for every event of
 * `events`: our earlier hooks removed (`remove`), then one group
 * `{matcher: "", hooks: [hook]}` appended to each event's list.
 *
 * @since 0.4.0
 */
export const merge = (
  settings: JsonObject,
  hook: JsonObject,
  events: ReadonlyArray<string> = EVENTS
): JsonObject => {
  const without = remove(settings)
  const hooks: Record<string, Json> = isObject(without["hooks"]) ? { ...without["hooks"] } : {}
  for (const event of events) {
    const list = hooks[event]
    const group: Json = { matcher: "", hooks: [hook] }
    hooks[event] = Array.isArray(list) ? [...(list as ReadonlyArray<Json>), group] : [group]
  }
  return { ...without, hooks }
}

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
}

const readSettings = (
  file: string
): Effect.Effect<
  { readonly settings: JsonObject; readonly text: string | null; readonly mode: number },
  InvalidInput
> =>
  Effect.try({
    try: () => {
      let text: string
      let mode: number
      try {
        const st = fs.statSync(file)
        if (!st.isFile()) throw new Error("not a regular file")
        if (st.size > MAX_SETTINGS_BYTES) throw new Error(`larger than ${MAX_SETTINGS_BYTES} bytes`)
        text = new TextDecoder("utf-8", { fatal: true }).decode(fs.readFileSync(file))
        mode = st.mode & 0o777
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") return { settings: {}, text: null, mode: 0o644 }
        throw e
      }
      const parsed: unknown = text.trim() === "" ? {} : JSON.parse(text)
      if (!isObject(parsed)) throw new Error("it is not a JSON object")
      if (parsed["hooks"] !== undefined && !isObject(parsed["hooks"])) throw new Error("its hooks is not an object")
      return { settings: parsed, text, mode }
    },
    catch: (e) =>
      new InvalidInput({
        field: file,
        reason: `cannot use it as Claude Code settings (left unchanged): ${messageOf(e)}`
      })
  })

const writeAtomically = (file: string, text: string, mode: number): void => {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  const temp = `${file}.session-journal.tmp-${process.pid}`
  fs.writeFileSync(temp, text, { mode })
  try {
    fs.renameSync(temp, file)
  } catch (e) {
    fs.rmSync(temp, { force: true })
    throw e
  }
}

/**
 * Installs (or with `hook` null, uninstalls) our hooks in `file`; writes the
 * backup and the new content only when something changes.
 *
 * @since 0.4.0
 */
export const apply = (file: string, hook: JsonObject | null): Effect.Effect<Report, InvalidInput | StorageError> =>
  Effect.gen(function*() {
    const { settings, text, mode } = yield* readSettings(file)
    const next = hook === null ? remove(settings) : merge(settings, hook)
    const before = JSON.stringify(settings)
    const events = hook === null ? 0 : EVENTS.length
    if (JSON.stringify(next) === before && text !== null) return { file, status: "unchanged", backup: null, events }
    if (hook === null && text === null) return { file, status: "unchanged", backup: null, events }
    const backup = text === null ? null : file + BACKUP_SUFFIX
    yield* Effect.try({
      try: () => {
        if (backup !== null) writeAtomically(backup, text!, mode)
        writeAtomically(file, JSON.stringify(next, null, 2) + "\n", mode)
      },
      catch: (e) => StorageError.io("install", e, file)
    })
    return { file, status: hook === null ? "uninstalled" : "installed", backup, events }
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
 * The environment variable naming Claude Code's user configuration directory
 * (default `~/.claude`).
 *
 * @since 0.5.0
 */
export const CLAUDE_CONFIG_DIR_VAR = "CLAUDE_CONFIG_DIR"

/**
 * The settings file `install` changes: `--user`'s (in `configDir`, the value of
 * `$CLAUDE_CONFIG_DIR`, else `~/.claude`) or the project's.
 *
 * @since 0.4.0
 */
export const settingsFile = (
  options: { readonly user: boolean; readonly project: string | undefined; readonly configDir: string | undefined }
): string =>
  options.user
    ? path.join(
      options.configDir !== undefined && options.configDir !== ""
        ? options.configDir
        : path.join(os.homedir(), ".claude"),
      "settings.json"
    )
    : path.join(path.resolve(options.project ?? "."), ".claude", "settings.json")

/**
 * The `install` command.
 *
 * @since 0.4.0
 */
export const command = Command.make("install", {
  project: Flag.String("project").pipe(
    Flag.optional,
    Flag.withMetavar("DIR"),
    Flag.withDescription("Install into DIR/.claude/settings.json (default: the working directory's)")
  ),
  user: Flag.Boolean("user").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Install into the user's ~/.claude/settings.json ($CLAUDE_CONFIG_DIR/settings.json)")
  ),
  policy: Flag.String("policy").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription("Policy file the hooks decide PreToolUse with (checked now, named by absolute path)")
  ),
  guard: Flag.String("guard").pipe(
    Flag.optional,
    Flag.withMetavar("URL"),
    Flag.withDescription(
      "Hand events to the resident guard at URL (http://127.0.0.1:PORT/hook), denying when it is down"
    )
  ),
  uninstall: Flag.Boolean("uninstall").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Remove our hooks only, keeping every other setting and hook")
  )
}, (a) =>
  withoutJournal(({ json, storage }) =>
    Effect.gen(function*() {
      const project = Option.getOrUndefined(a.project)
      if (a.user && project !== undefined) {
        return yield* new InvalidInput({ field: "--user", reason: "give --project DIR or --user, not both" })
      }
      const configDir = Option.getOrUndefined(
        yield* Effect.orDie(Config.option(Config.String(CLAUDE_CONFIG_DIR_VAR)))
      )
      const file = settingsFile({ user: a.user, project, configDir })
      let hook: JsonObject | null = null
      let guardNote = ""
      if (!a.uninstall) {
        const root = path.resolve(storage.dir)
        const policyFile = Option.getOrUndefined(a.policy)
        const policy = policyFile === undefined ? undefined : path.resolve(policyFile)
        if (policy !== undefined) yield* load(policy)
        const guard = Option.getOrUndefined(a.guard)
        // The guard decides with its own policy: --policy must be the one it runs.
        if (guard !== undefined) guardNote = yield* checkGuardPolicy(yield* guardUrl(guard), policy)
        const self = selfCommand()
        hook = {
          type: "command",
          command: guard === undefined
            ? hookCommand(self, { root, policy })
            : forwardCommand(self, yield* guardUrl(guard)),
          timeout: HOOK_TIMEOUT_SECONDS
        }
      }
      const report = yield* apply(file, hook)
      if (json) return yield* Output.json(report)
      yield* Output.write(guardNote)
      yield* Output.write(
        report.status === "unchanged"
          ? `${file}: unchanged (${a.uninstall ? "no hooks of ours in it" : "our hooks are already installed"})\n`
          : `${file}: ${report.status} ${a.uninstall ? "our hooks" : `hooks for ${report.events} events`}` +
            (report.backup === null ? "" : `; the previous content is in ${report.backup}`) + "\n"
      )
    })
  )).pipe(Command.withDescription(
    "Merge our hooks into Claude Code's settings (keeping every other setting and hook, with a backup); --uninstall removes only ours"
  ))

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

const checkGuardPolicy = (url: string, policy: string | undefined) =>
  Effect.flatMap(
    Effect.all([
      Effect.promise(() => import("./GuardInstall.ts")),
      Effect.orDie(Config.option(Config.String("SESSION_JOURNAL_GUARD_TOKEN")))
    ]),
    ([m, token]) => m.checkPolicy(url, policy, Option.getOrUndefined(token))
  )
