/**
 * `session-journal claude-code install [--project DIR | --user] [--shared]
 * [--policy FILE] [--root DIR] [--guard URL] [--uninstall]`: the flags, the
 * checks of what they name, and the reports printed; what is written where is
 * the installer's (`Installer` of `@session-journal/claude-code`).
 *
 * @since 0.1.0
 */
import type { SettingsRefused } from "@session-journal/claude-code/Errors"
import * as Installer from "@session-journal/claude-code/Installer"
import type * as McpInstaller from "@session-journal/claude-code/McpInstaller"
import type { ServerState as McpServerState } from "@session-journal/claude-code/McpInstaller"
import { StorageError } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { Argument, Command, Flag } from "effect/cli"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as path from "node:path"
import { InvalidInput, NotGuarded } from "../Failure.ts"
import { Dir, onCommandLine, withoutJournal } from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import { load } from "../PolicyFile.ts"

/**
 * An installer's refusal of `file` as the command line's failures: an I/O error
 * is a storage error of `operation`, anything else input it cannot use as `what`.
 *
 * @since 0.1.0
 */
export const refusal =
  (file: string, what: string, operation = "install") => (e: SettingsRefused): InvalidInput | StorageError =>
    e.io
      ? StorageError.io(operation, (e.cause as Error).cause ?? e.cause, file)
      : new InvalidInput({ field: file, reason: `cannot use it as ${what} (left unchanged): ${messageOf(e.cause)}` })

const apply = (
  file: string,
  hookFor: ((event: string) => Installer.JsonObject) | Installer.JsonObject | null
): Effect.Effect<Installer.Report, InvalidInput | StorageError> =>
  Effect.mapError(Installer.apply(file, hookFor), refusal(file, "Claude Code settings"))

// The journal directory (`--root`, else the global `--dir`) and the policy file
// (read and checked now), each as `place` names it in the installed file.
const rootAndPolicy = <W>(
  a: { readonly root: Option.Option<string>; readonly policy: Option.Option<string> },
  globalDir: string | undefined,
  place: (flag: string, given: string) => Effect.Effect<W, InvalidInput>
) =>
  Effect.gen(function*() {
    const rootFlag = Option.getOrUndefined(a.root)
    if (globalDir !== undefined && rootFlag !== undefined) {
      return yield* new InvalidInput({ field: "--root", reason: "give --root or the global --dir, not both" })
    }
    const rootGiven = rootFlag ?? globalDir
    const root = rootGiven === undefined || rootGiven === "" ? undefined : yield* place("--root", rootGiven)
    const policyFile = Option.getOrUndefined(a.policy)
    if (policyFile !== undefined) yield* load(path.resolve(policyFile))
    const policy = policyFile === undefined ? undefined : yield* place("--policy", policyFile)
    return { root, policy, policyFile }
  })

/**
 * The `install` command.
 *
 * @since 0.1.0
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
  ),
  mcp: Flag.Boolean("mcp").pipe(
    Flag.withDefault(false),
    Flag.withDescription(
      "Instead of hooks: put every MCP server of the project's .mcp.json through the gateway (mcp proxy --name NAME), " +
        "decided by --policy (inside the project); with --uninstall, take them out"
    )
  ),
  check: Flag.Boolean("check").pipe(
    Flag.withDefault(false),
    Flag.withDescription(
      "With --mcp: show which servers go through the gateway and change nothing (exit 1 if one does not)"
    )
  ),
  mcpServer: Flag.String("mcp-server").pipe(
    Flag.optional,
    Flag.withMetavar("NAME"),
    Flag.withDescription(
      "With --mcp: first add the server NAME to .mcp.json, started by the command after -- (or reached at --url), " +
        "then put every server through the gateway"
    )
  ),
  url: Flag.String("url").pipe(
    Flag.optional,
    Flag.withMetavar("URL"),
    Flag.withDescription("With --mcp-server: a Streamable HTTP server at URL instead of a command")
  ),
  command: Argument.String("command").pipe(
    Argument.variadic(),
    Argument.withDescription("With --mcp-server: the server's command and its arguments, after --")
  )
}, (a) =>
  Effect.flatMap(Dir, (dir) =>
    withoutJournal(({ json }) =>
      Effect.gen(function*() {
        const project = Option.getOrUndefined(a.project)
        if (a.mcp || Option.isSome(a.mcpServer)) return yield* installMcp(a, onCommandLine(dir), json)
        // A server's command or --url belongs to --mcp-server.
        yield* serverToAdd(a)
        if (a.check) return yield* new InvalidInput({ field: "--check", reason: "is for --mcp" })
        if (a.user && project !== undefined) {
          return yield* new InvalidInput({ field: "--user", reason: "give --project DIR or --user, not both" })
        }
        if (a.user && a.shared) {
          return yield* new InvalidInput({ field: "--shared", reason: "--shared is a project's file; not with --user" })
        }
        const configDir = Option.getOrUndefined(
          yield* Effect.orDie(Config.option(Config.String(Installer.CLAUDE_CONFIG_DIR_VAR)))
        )
        const fileOf = (shared: boolean) => Installer.settingsFile({ user: a.user, project, configDir, shared })

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
        const scope: Installer.Scope = a.user ? "user" : a.shared ? "shared" : "local"
        const place = (flag: string, given: string): Effect.Effect<Installer.Word, InvalidInput> => {
          if (scope !== "shared") return Effect.succeed(path.resolve(given))
          const inside = Installer.insideProject(projectDir, path.resolve(given))
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

        const { policy, policyFile, root } = yield* rootAndPolicy(a, onCommandLine(dir), place)
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
        const report = yield* apply(file, Installer.hookFor({ scope, file, root, policy, url, tokenFile }))
        // Hooks in both project files would journal every event twice.
        const other = scope === "user" ? undefined : fileOf(scope === "local")
        const twice = other !== undefined && (yield* Installer.holdsOurHooks(other))
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

// `--mcp`: the project's .mcp.json, its servers through the gateway (`McpInstaller`).
const installMcp = (
  a: {
    readonly project: Option.Option<string>
    readonly user: boolean
    readonly shared: boolean
    readonly policy: Option.Option<string>
    readonly root: Option.Option<string>
    readonly guard: Option.Option<string>
    readonly tokenFile: Option.Option<string>
    readonly uninstall: boolean
    readonly check: boolean
    readonly mcpServer: Option.Option<string>
    readonly url: Option.Option<string>
    readonly command: ReadonlyArray<string>
  },
  globalDir: string | undefined,
  json: boolean
) =>
  Effect.gen(function*() {
    const m = yield* Effect.promise(() => import("@session-journal/claude-code/McpInstaller"))
    for (
      const [given, flag] of [
        [a.user, "--user"],
        [a.shared, "--shared"],
        [Option.isSome(a.guard), "--guard"],
        [Option.isSome(a.tokenFile), "--token-file"]
      ] as const
    ) {
      if (given) {
        return yield* new InvalidInput({ field: flag, reason: "is for hooks; --mcp edits the project's .mcp.json" })
      }
    }
    if (a.check && a.uninstall) {
      return yield* new InvalidInput({ field: "--check", reason: "give --check or --uninstall, not both" })
    }
    const add = yield* serverToAdd(a)
    const projectDir = path.resolve(Option.getOrElse(a.project, () => "."))
    const file = m.mcpFile(projectDir)
    const refused = refusal(file, "an MCP configuration")
    const stateLine = (s: McpServerState): string =>
      `${s.name.padEnd(16)} ${
        s.state === "gateway"
          ? "through the gateway"
          : s.state === "direct"
          ? "direct (install --mcp puts it through the gateway)"
          : `direct: ${s.why}`
      }`
    if (a.check) {
      const servers = yield* Effect.mapError(m.status(file), refused)
      if (json) yield* Output.json({ file, servers })
      else {
        yield* Output.lines(
          servers.length === 0 ? [`${file}: no MCP servers`] : [`${file}:`, ...servers.map(stateLine)]
        )
      }
      const direct = servers.filter((s) => s.state !== "gateway").length
      if (direct > 0) {
        return yield* new NotGuarded({
          reason: `${direct} of the MCP servers in ${file} do not go through the gateway: their calls run unguarded`
        })
      }
      return
    }
    // .mcp.json is committed: what it names lies inside the project, relative to it.
    const inside = (flag: string, given: string): Effect.Effect<string, InvalidInput> => {
      const rel = Installer.insideProject(projectDir, path.resolve(given))
      return rel === undefined
        ? Effect.fail(
          new InvalidInput({
            field: flag,
            reason:
              `${given} is outside the project ${projectDir}: .mcp.json is shared, so what it names must lie inside the project (named relative to it)`
          })
        )
        : Effect.succeed(rel.relative === "" ? "." : rel.relative)
    }
    const { policy, root } = yield* rootAndPolicy(a, globalDir, inside)
    const report = yield* Effect.mapError(
      m.apply(file, a.uninstall ? null : m.gatewayHead({ root, policy }), add),
      refused
    )
    if (json) return yield* Output.json(report)
    const where = report.target === null ? file : `${file} (a link to ${report.target})`
    yield* Output.lines([
      report.status === "unchanged"
        ? `${file}: unchanged`
        : `${where}: ${
          report.status === "installed" ? "put its servers through the gateway" : "took its servers out of the gateway"
        }` +
          (report.backup === null ? "" : `; the previous content is in ${report.backup}`),
      ...report.servers.map(stateLine)
    ])
  })

// `--mcp-server NAME -- COMMAND…` or `--mcp-server NAME --url URL`: the server to add, if any.
const serverToAdd = (
  a: {
    readonly mcpServer: Option.Option<string>
    readonly url: Option.Option<string>
    readonly command: ReadonlyArray<string>
    readonly uninstall: boolean
    readonly check: boolean
  }
): Effect.Effect<McpInstaller.Add | undefined, InvalidInput> => {
  const url = Option.getOrUndefined(a.url)
  if (Option.isNone(a.mcpServer)) {
    return url === undefined && a.command.length === 0
      ? Effect.succeed(undefined)
      : Effect.fail(new InvalidInput({ field: "--url", reason: "a server's command or --url is for --mcp-server" }))
  }
  const name = a.mcpServer.value
  const refuse = (reason: string) => Effect.fail(new InvalidInput({ field: "--mcp-server", reason }))
  if (a.uninstall || a.check) return refuse("adds a server; not with --uninstall or --check")
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) return refuse(`${name}: a server's name is 1 to 64 of [A-Za-z0-9_-]`)
  if ((url === undefined) === (a.command.length === 0)) {
    return refuse("give the server's command after --, or --url, not both")
  }
  return Effect.succeed({
    name,
    server: url !== undefined ? { url } : { command: a.command[0]!, args: a.command.slice(1) }
  })
}

// The file as the output names it: with its target when it is a link.
const named = (report: Installer.Report): string =>
  report.target === null ? report.file : `${report.file} (a link to ${report.target})`

const guardUrl = (url: string): Effect.Effect<string, InvalidInput> => {
  const problem = Installer.guardUrlProblem(url)
  return problem === null ? Effect.succeed(url) : Effect.fail(new InvalidInput({ field: "--guard", reason: problem }))
}

const checkGuardPolicy = (url: string, policyFile: string | undefined, tokenFile: string | undefined) =>
  Effect.gen(function*() {
    const m = yield* Effect.promise(() => import("@session-journal/claude-code/GuardInstaller"))
    const token = yield* Effect.orDie(Config.option(Config.String("SESSION_JOURNAL_GUARD_TOKEN")))
    const t = tokenFile === undefined
      ? Option.getOrUndefined(token)
      : yield* Effect.mapError(
        m.readTokenFile(tokenFile),
        (reason) => new InvalidInput({ field: "--token-file", reason })
      )
    const given = policyFile === undefined ? undefined : { file: policyFile, policy: yield* load(policyFile) }
    return yield* Effect.mapError(
      m.checkPolicy(url, given, t),
      (reason) => new InvalidInput({ field: "--policy", reason })
    )
  })
