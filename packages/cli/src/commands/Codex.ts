/**
 * `session-journal codex …`: Codex CLI in the loop.
 *
 * - `hook`: Codex's command hook (`CodexHook.ts`; `main.ts` runs it without the
 *   command tree, this entry gives its help and runs it when flags need parsing).
 * - `install [--project DIR | --user] [--policy FILE] [--root DIR] [--codex BIN]
 *   [--uninstall]`: our PreToolUse and PostToolUse hooks in Codex's
 *   `config.toml` (`--user`, the default: `$CODEX_HOME/config.toml`, else
 *   `~/.codex/config.toml`; `--project DIR`: `DIR/.codex/config.toml`), as a
 *   text edit of our block only (`Install` of `@session-journal/codex`), written
 *   through a symbolic link to its target, through an exclusive temporary file,
 *   with a numbered backup (claude-code's `internal/settingsIo.ts`). Each hook runs through the
 *   fail-closed wrapper of claude-code's `internal/hookWrapper.ts`: a program that cannot start
 *   becomes exit 2 with a reason, which Codex obeys as a deny. Then it asks Codex
 *   (`codex app-server`, `hooks/list`) for our hooks' hashes and records their
 *   trust in the user config, since Codex skips an untrusted hook without a word;
 *   when Codex cannot be asked it says what the user must do.
 * - `status`: whether Codex will run our hooks, as Codex itself says.
 * - `archive`, `follow`, `export`: custody of rollout files (`Rollout`).
 *
 * @since 0.1.0
 */
import { Archive } from "@session-journal/claude-code"
import { commandLine } from "@session-journal/claude-code/HookWrapper"
import * as Installer from "@session-journal/claude-code/Installer"
import { MAX_SETTINGS_BYTES, selfCommand } from "@session-journal/claude-code/Installer"
import * as SettingsIo from "@session-journal/claude-code/SettingsFile"
import { Install, Rollout } from "@session-journal/codex"
import { StorageError, StorageReason } from "@session-journal/core"
import { Argument, Command, Flag } from "effect/cli"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as os from "node:os"
import * as path from "node:path"
import { InvalidInput, NotGuarded } from "../Failure.ts"
import { Dir, onCommandLine, withoutJournal } from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import { load } from "../PolicyFile.ts"
import type { WithJournal } from "./ClaudeCode.ts"
import { hookSubcommand } from "./ClaudeCode.ts"
import * as CodexHook from "./CodexHook.ts"
import { refusal } from "./InstallCommand.ts"

/**
 * The environment variable naming Codex's home (default `~/.codex`).
 *
 * @since 0.1.0
 */
export const CODEX_HOME_VAR = "CODEX_HOME"

/**
 * The Codex configuration file of a scope: `DIR/.codex/config.toml` for a
 * project, else `$CODEX_HOME/config.toml` (`~/.codex/config.toml`).
 *
 * @since 0.1.0
 */
export const configFile = (project: string | undefined, codexHome: string | undefined): string =>
  project !== undefined
    ? path.join(path.resolve(project), ".codex", "config.toml")
    : path.join(
      codexHome !== undefined && codexHome !== "" ? codexHome : path.join(os.homedir(), ".codex"),
      "config.toml"
    )

/**
 * How our Codex hooks are removed, as the installed command's failure message
 * names it.
 *
 * @since 0.1.0
 */
export const UNINSTALL = "session-journal codex install --uninstall"

/**
 * The command line of our hook for `event`: this installation of
 * `session-journal` then `codex hook`, with `--root` and `--policy` when given,
 * wrapped so that a program that cannot start denies (`commandLine`).
 *
 * @since 0.1.0
 */
export const hookCommand = (
  self: ReadonlyArray<string>,
  options: { readonly root?: string | undefined; readonly policy?: string | undefined },
  event: string,
  file: string
): string =>
  commandLine([
    ...self,
    "codex",
    "hook",
    ...(options.root === undefined ? [] : ["--root", options.root]),
    ...(options.policy === undefined ? [] : ["--policy", options.policy])
  ], { event, settings: file, uninstall: UNINSTALL })

/**
 * What an edit did to one file.
 *
 * @since 0.1.0
 */
export interface Edited {
  readonly file: string
  readonly status: "changed" | "unchanged"
  readonly backup: string | null
  /** Where the file leads when it is a symbolic link; null otherwise. */
  readonly target: string | null
}

/**
 * Edits `file` with `edit` (its text, `""` when it does not exist; without
 * `createMissing` a missing file stays missing) as claude-code's
 * `Installer.editFile` edits every installer's file.
 *
 * @since 0.1.0
 */
export const editFile = (
  file: string,
  edit: (text: string) => string,
  createMissing: boolean
): Effect.Effect<Edited, InvalidInput | StorageError> =>
  Effect.mapError(
    Effect.map(
      Installer.editFile(file, (text) => text === null && !createMissing ? null : edit(text ?? "")),
      ({ backup, changed, target }): Edited => ({ file, status: changed ? "changed" : "unchanged", backup, target })
    ),
    refusal(file, "Codex's config.toml", "codex install")
  )

const named = (e: Edited): string => e.target === null ? e.file : `${e.file} (a link to ${e.target})`

const codexEnvironment = Config.all({
  home: Config.String(CODEX_HOME_VAR).pipe(Config.option, Config.map(Option.getOrUndefined)),
  bin: Config.String("SESSION_JOURNAL_CODEX_BIN").pipe(Config.option, Config.map(Option.getOrUndefined))
})

const codexFlag = Flag.String("codex").pipe(
  Flag.optional,
  Flag.withMetavar("BIN"),
  Flag.withDescription(
    "The Codex binary to ask about its hooks (default $SESSION_JOURNAL_CODEX_BIN, else codex on PATH)"
  )
)

const projectFlag = Flag.String("project").pipe(
  Flag.optional,
  Flag.withMetavar("DIR"),
  Flag.withDescription("The project's DIR/.codex/config.toml (Codex reads it only in a trusted project)")
)

const userFlag = Flag.Boolean("user").pipe(
  Flag.withDefault(false),
  Flag.withDescription("The user's $CODEX_HOME/config.toml (~/.codex/config.toml); the default")
)

interface Where {
  readonly file: string
  readonly userFile: string
  readonly cwd: string
  readonly codex: string
  readonly env: Readonly<Record<string, string | undefined>>
  readonly project: string | undefined
}

const where = (a: {
  readonly project: Option.Option<string>
  readonly user: boolean
  readonly codex: Option.Option<string>
}): Effect.Effect<Where, InvalidInput> =>
  Effect.gen(function*() {
    const project = Option.getOrUndefined(a.project)
    if (a.user && project !== undefined) {
      return yield* new InvalidInput({ field: "--user", reason: "give --project DIR or --user, not both" })
    }
    const e = yield* Effect.orDie(codexEnvironment)
    const userFile = configFile(undefined, e.home)
    const codexHome = path.dirname(userFile)
    return {
      file: configFile(project, e.home),
      userFile,
      cwd: project === undefined ? process.cwd() : path.resolve(project),
      codex: Option.getOrUndefined(a.codex) ?? e.bin ?? "codex",
      env: { ...process.env, [CODEX_HOME_VAR]: codexHome },
      project: project === undefined ? undefined : path.resolve(project)
    }
  })

// The lines that say whether Codex will run our hooks, and whether all of them will.
const statusLines = (
  w: Where,
  listed: Install.Listed,
  commands: ReadonlyArray<string>
): { readonly lines: Array<string>; readonly ok: boolean; readonly json: unknown } => {
  const ours = Install.ours(listed, commands)
  const lines: Array<string> = []
  for (const h of ours) {
    lines.push(
      `${h.eventName.padEnd(12)} ${Install.willRun(h) ? "will run" : "will NOT run"} (${h.trustStatus}` +
        `${h.enabled ? "" : ", disabled"}) ${h.key}`
    )
  }
  const missing = Install.EVENTS.length - ours.length
  if (missing > 0) {
    lines.push(
      ours.length === 0
        ? `Codex lists none of our hooks for ${w.cwd}` +
          (w.project === undefined
            ? ` (install them: session-journal codex install)`
            : ` (a project's .codex/config.toml is read only in a trusted project: run \`codex exec --trust\` there once, ` +
              `or add [projects."${w.project}"] trust_level = "trusted" to ${w.userFile})`)
        : `Codex lists ${ours.length} of our ${Install.EVENTS.length} hooks`
    )
  }
  for (const p of listed.problems) lines.push(`Codex says: ${p}`)
  const ok = missing === 0 && ours.every(Install.willRun)
  return {
    lines,
    ok,
    json: { file: w.file, cwd: w.cwd, will_run: ok, hooks: ours, problems: listed.problems }
  }
}

// Our hooks' commands as installed in `w.file` (for matching Codex's listing).
const installedCommands = (w: Where, options: { root?: string | undefined; policy?: string | undefined }) =>
  Install.EVENTS.map((event) => hookCommand(selfCommand(), options, event, w.file))

// The commands of our block as it is in the file (whatever flags it was installed with).
const blockCommands = (w: Where): Effect.Effect<ReadonlyArray<string>> =>
  Effect.sync(() => {
    try {
      const text = SettingsIo.load(w.file, MAX_SETTINGS_BYTES).text ?? ""
      const at = text.indexOf(Install.BEGIN)
      if (at < 0) return []
      const end = text.indexOf(Install.END, at)
      const block = text.slice(at, end < 0 ? text.length : end)
      return [...block.matchAll(/^command = (".*")$/gm)].map((m) => JSON.parse(m[1]!) as string)
    } catch {
      return []
    }
  })

const install = Command.make("install", {
  project: projectFlag,
  user: userFlag,
  policy: Flag.String("policy").pipe(
    Flag.optional,
    Flag.withMetavar("FILE"),
    Flag.withDescription("Policy file the hooks decide PreToolUse with (checked now, named by absolute path)")
  ),
  root: Flag.String("root").pipe(
    Flag.optional,
    Flag.withMetavar("DIR"),
    Flag.withDescription("Journal directory the hooks write (default: the hook's own; the global --dir works too)")
  ),
  codex: codexFlag,
  uninstall: Flag.Boolean("uninstall").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Remove our hooks and their trust only, keeping everything else")
  )
}, (a) =>
  Effect.flatMap(Dir, (dir) =>
    withoutJournal(({ json }) =>
      Effect.gen(function*() {
        const w = yield* where(a)
        if (a.uninstall) {
          const edited = [yield* editFile(w.file, Install.removeText, false)]
          if (w.userFile !== w.file) edited.push(yield* editFile(w.userFile, Install.removeText, false))
          if (json) return yield* Output.json({ uninstalled: edited })
          return yield* Output.lines(edited.map((e) =>
            e.status === "unchanged"
              ? `${e.file}: unchanged (nothing of ours in it)`
              : `${named(e)}: removed our hooks` + (e.backup === null ? "" : `; the previous content is in ${e.backup}`)
          ))
        }
        const globalDir = onCommandLine(dir)
        const rootFlag = Option.getOrUndefined(a.root)
        if (globalDir !== undefined && rootFlag !== undefined) {
          return yield* new InvalidInput({ field: "--root", reason: "give --root or the global --dir, not both" })
        }
        const rootGiven = rootFlag ?? globalDir
        const root = rootGiven === undefined || rootGiven === "" ? undefined : path.resolve(rootGiven)
        const policyGiven = Option.getOrUndefined(a.policy)
        const policy = policyGiven === undefined ? undefined : path.resolve(policyGiven)
        if (policy !== undefined) yield* load(policy)
        const commands = installedCommands(w, { root, policy })
        const hooks = yield* editFile(
          w.file,
          (text) => Install.installText(text, Install.hooksBlock((event) => commands[Install.EVENTS.indexOf(event)]!)),
          true
        )
        const out: Array<string> = [
          hooks.status === "unchanged"
            ? `${w.file}: unchanged (our hooks are already in it)`
            : `${named(hooks)}: installed hooks for ${Install.EVENTS.join(" and ")}` +
              (hooks.backup === null ? "" : `; the previous content is in ${hooks.backup}`)
        ]
        // Codex runs only hooks whose trust the user config records: ask it for their hashes.
        const listed = yield* Effect.result(Install.listHooks(w.codex, w.cwd, w.env))
        if (listed._tag === "Failure") {
          out.push(
            `Codex was not asked about the hooks (${listed.failure.message}), and it skips untrusted hooks without a word: ` +
              `run this command again where Codex runs (or give --codex BIN), then check with session-journal codex status`
          )
          if (json) yield* Output.json({ hooks, trusted: null, will_run: false, problem: listed.failure.message })
          else yield* Output.lines(out)
          return yield* new NotGuarded({ reason: "Codex was not asked to trust the hooks" })
        }
        const toTrust = Install.ours(listed.success, commands).filter((h) => !Install.willRun(h) && h.enabled)
        const trust = toTrust.length === 0 ? null : yield* editFile(
          w.userFile,
          (text) => Install.trustText(text, toTrust.map((h) => ({ key: h.key, hash: h.currentHash }))),
          true
        )
        if (trust !== null) {
          out.push(`${named(trust)}: recorded Codex's trust of ${Output.count(toTrust.length, "hook")}`)
        }
        const after = trust === null ? listed.success : yield* Effect.orElseSucceed(
          Install.listHooks(w.codex, w.cwd, w.env),
          (): Install.Listed => ({ hooks: [], problems: ["Codex could not be asked again"] })
        )
        const status = statusLines(w, after, commands)
        if (json) yield* Output.json({ hooks, trust, status: status.json })
        else yield* Output.lines([...out, ...status.lines])
        if (!status.ok) return yield* new NotGuarded({ reason: "Codex will not run all of our hooks" })
      })
    ))).pipe(Command.withDescription(
      "Add our hooks to Codex's config.toml (keeping every other byte, with a backup) and record their trust; " +
        "--uninstall removes only ours"
    ))

const status = Command.make(
  "status",
  { project: projectFlag, user: userFlag, codex: codexFlag },
  (a) =>
    withoutJournal(({ json }) =>
      Effect.gen(function*() {
        const w = yield* where(a)
        const commands = yield* blockCommands(w)
        const listed = yield* Effect.result(Install.listHooks(w.codex, w.cwd, w.env))
        if (listed._tag === "Failure") {
          if (json) yield* Output.json({ file: w.file, will_run: false, problem: listed.failure.message })
          else yield* Output.lines([`Codex cannot be asked about its hooks: ${listed.failure.message}`])
          return yield* new NotGuarded({ reason: "Codex cannot be asked about its hooks" })
        }
        const s = statusLines(w, listed.success, commands)
        if (json) yield* Output.json(s.json)
        else {
          yield* Output.lines([
            ...(commands.length === 0 ? [`${w.file}: none of our hooks in it`] : []),
            ...s.lines,
            s.ok ? "Codex will run our hooks" : "Codex will NOT run our hooks: every call runs unguarded"
          ])
        }
        if (!s.ok) return yield* new NotGuarded({ reason: "Codex will not run all of our hooks" })
      })
    )
).pipe(Command.withDescription("Whether Codex will run our hooks (as Codex's own hooks/list says)"))

const source = Flag.String("source").pipe(
  Flag.optional,
  Flag.withMetavar("DIR"),
  Flag.withDescription("Rollouts directory (default $CODEX_HOME/sessions, else ~/.codex/sessions)")
)

const asInput = Effect.mapError((e: { readonly message: string }) =>
  new InvalidInput({ field: "--source", reason: e.message })
)

const reportLines = (report: Rollout.Report): Array<string> => [
  ...report.files.map((f) =>
    `${f.status.padEnd(10)} ${f.session}  ${path.relative(report.source, f.path)}: ` +
    (f.status === "failed" ? f.reason ?? "failed" : Output.count(f.lines, "line")) +
    (f.pendingBytes > 0 ? ` (${f.pendingBytes} bytes wait for their newline)` : "")
  ),
  ...report.refused.map((r) => `${"refused".padEnd(10)} ${path.relative(report.source, r.path)}: ${r.reason}`)
]

/**
 * The `codex` command and its subcommands, run through `withJournal`.
 *
 * @since 0.1.0
 */
export const make = <EOut, ROut>(withJournal: WithJournal<EOut, ROut>) => {
  const archive = Command.make("archive", { source }, (a) =>
    withJournal(({ json }) =>
      Effect.gen(function*() {
        const report = yield* asInput(Rollout.archive({ source: Option.getOrUndefined(a.source) }))
        if (json) yield* Output.json(report)
        else {
          yield* Output.lines([
            ...reportLines(report),
            `${Output.count(report.files.length, "rollout")} in ${report.source}: ` +
            `${Output.count(report.files.reduce((n, f) => n + f.lines, 0), "line")} journaled`
          ])
        }
        const n = report.files.filter((f) => f.status === "failed").length + report.refused.length
        if (n > 0) {
          return yield* new StorageError({
            operation: "codex archive",
            reason: new StorageReason.Incomplete({
              failed: n,
              message: `${n} path${n === 1 ? "" : "s"} under ${report.source} could not be archived (listed above)`
            })
          })
        }
      })
    )).pipe(Command.withDescription(
      "Journal every Codex rollout file into its own session, byte for byte; a rewritten one is recorded as a divergence"
    ))

  const follow = Command.make("follow", { source }, (a) =>
    withJournal(({ json }) =>
      asInput(Rollout.follow(
        { source: Option.getOrUndefined(a.source) },
        (report) => json ? Output.lines(report.files.map((f) => JSON.stringify(f))) : Output.lines(reportLines(report))
      ))
    )).pipe(Command.withDescription("Archive, then journal new rollout lines as they are written until interrupted"))

  const exportCmd = Command.make("export", {
    id: Argument.String("id").pipe(Argument.withDescription("Session id of a rollout (as archive prints it)"))
  }, (a) => withJournal(() => Effect.flatMap(Archive.restore(a.id), (bytes) => Output.bytes(bytes)))).pipe(
    Command.withDescription("Write the journaled rollout to stdout, byte for byte as Codex wrote it")
  )

  const hook = hookSubcommand(
    CodexHook.run,
    "Codex",
    "Codex's command hook: read one event from stdin, journal it, answer; a PreToolUse is decided with the " +
      "policy. Fails closed: what cannot be recorded or decided is denied"
  )

  return Command.make("codex").pipe(
    Command.withDescription(
      "Codex CLI: hooks that journal and guard it, their install and trust, custody of its rollouts"
    ),
    Command.withSubcommands([hook, install, status, archive, follow, exportCmd])
  )
}
