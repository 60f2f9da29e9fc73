/**
 * `session-journal claude-code …`: custody of Claude Code transcripts.
 * `archive` brings `~/.claude/projects` (or `--source`) into journal sessions,
 * one per transcript file; `follow` keeps doing it until interrupted; `export`
 * writes a transcript back, byte for byte, from its journal. The group also
 * holds the doors (`hook`, `guard`, `forward`, `install`, `run`); each is wiring
 * for a module of `@session-journal/claude-code`, where every decision is
 * `Hook.handle`'s.
 *
 * @since 0.1.0
 */
import { Archive, type Sync } from "@session-journal/claude-code"
import type * as HookRunner from "@session-journal/claude-code/HookRunner"
import { type SessionJournal, StorageError, StorageReason } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { Argument, Command, Flag } from "effect/cli"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as path from "node:path"
import { Exit, type Failure, InvalidInput } from "../Failure.ts"
import * as Input from "../Input.ts"
import { Dir, onCommandLine, Postgres } from "../internal/commandKit.ts"
import { type HookArgs, parseWaitMillis } from "../internal/hookArgs.ts"
import * as OtlpFlags from "../internal/otlpFlags.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"
import * as ClaudeCodeRun from "./ClaudeCodeRun.ts"
import * as GuardCommands from "./GuardCommands.ts"
import * as HookProcess from "./HookProcess.ts"
import * as InstallCommand from "./InstallCommand.ts"

// The variables the command hook reads, through `Config` (the command tree's
// `ConfigProvider`); the hook itself takes them as a plain record.
const hookEnvironment = Config.all(
  Object.fromEntries(
    [
      HookProcess.POLICY_VAR,
      Storage.DIR_VAR,
      Storage.PG_URL_VAR,
      Storage.TABLE_PREFIX_VAR,
      Storage.RETENTION_VAR,
      ...OtlpFlags.VARS
    ].map((
      name
    ) => [name, Config.String(name).pipe(Config.option, Config.map(Option.getOrUndefined))])
  )
)

// The hook's stdin, stdout and stderr: the command's (`Input.Stdin`, the `Console`).
const hookIo = (env: Readonly<Record<string, string | undefined>>) =>
  Effect.gen(function*() {
    const stdin = yield* Input.Stdin
    const streams = yield* Output.streams
    const io: HookRunner.Io = {
      stdin: stdin(),
      stdout: (text) => new Promise((resolve) => text === "" ? resolve() : streams.stdout(text, () => resolve())),
      stderr: (text) => Promise.resolve(text === "" ? undefined : streams.stderr(text)),
      env
    }
    return io
  })

/**
 * What a handler gets besides its own flags (as `Commands.Context`).
 *
 * @since 0.1.0
 */
export interface Context {
  readonly json: boolean
}

/**
 * The wrapper that gives a handler its journal and reports its failure (the
 * command tree's own).
 *
 * @since 0.1.0
 */
export type WithJournal<EOut, ROut> = <E extends Failure>(
  body: (ctx: Context) => Effect.Effect<void, E, SessionJournal.SessionJournal | Scope.Scope>
) => Effect.Effect<void, EOut, ROut>

const source = Flag.String("source").pipe(
  Flag.optional,
  Flag.withMetavar("DIR"),
  Flag.withDescription("Transcripts directory (default $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects)")
)

const project = Flag.String("project").pipe(
  Flag.optional,
  Flag.withMetavar("PATH"),
  Flag.withDescription(
    "Only the project whose working directory is PATH (encoded as Claude Code does: every character outside [A-Za-z0-9] becomes -)"
  )
)

const options = (
  a: { readonly source: Option.Option<string>; readonly project: Option.Option<string> }
): Archive.Options => ({
  source: Option.getOrUndefined(a.source),
  project: Option.getOrUndefined(a.project)
})

const asInput = Effect.mapError((e: { readonly message: string }) =>
  new InvalidInput({ field: "--source", reason: e.message })
)

const fileJson = (f: Sync.FileReport) => ({
  path: f.path,
  session: f.session,
  status: f.status,
  lines: f.lines,
  tools: f.tools,
  ...(f.divergedAt === undefined ? {} : { diverged_at: f.divergedAt }),
  pending_bytes: f.pendingBytes,
  ...(f.oversized === undefined ? {} : { oversized_lines: f.oversized }),
  ...(f.incremental === true ? { incremental: true } : {}),
  ...(f.reason === undefined ? {} : { reason: f.reason })
})

const fileText = (root: string) => (f: Sync.FileReport): string => {
  const where = path.relative(root, f.path)
  const what = f.status === "failed"
    ? f.reason ?? "failed"
    : f.status === "diverged"
    ? `diverged at line ${f.divergedAt}, ${Output.count(f.lines, "line")} and ${
      Output.count(f.tools, "tool call")
    } journaled after it`
    : f.status === "missing"
    ? "transcript disappeared, recorded"
    : `${Output.count(f.lines, "line")}, ${Output.count(f.tools, "tool call")}` +
      (f.oversized === undefined ? "" : `, ${f.oversized} above the line bound journaled as size and SHA-256 only`) +
      (f.pendingBytes > 0 ? ` (${f.pendingBytes} bytes wait for their newline)` : "")
  return `${f.status.padEnd(10)} ${f.session}  ${where}: ${what}`
}

const reportText = (report: Archive.Report, summary: boolean): Array<string> => {
  const out = report.files.map(fileText(report.source))
  for (const r of report.refused) {
    out.push(`${"refused".padEnd(10)} ${path.relative(report.source, r.path)}: ${r.reason}`)
  }
  if (summary) {
    const count = (s: string) => report.files.filter((f) => f.status === s).length
    const parts = ["created", "extended", "unchanged", "diverged", "reappeared", "missing", "failed"]
      .filter((s) => count(s) > 0)
      .map((s) => `${count(s)} ${s}`)
    const lines = report.files.reduce((n, f) => n + f.lines, 0)
    const tools = report.files.reduce((n, f) => n + f.tools, 0)
    out.push(
      `${Output.count(report.files.length, "transcript")} in ${report.source}` +
        (parts.length > 0 ? ` (${parts.join(", ")})` : "") +
        `: ${Output.count(lines, "line")} and ${Output.count(tools, "tool call")} journaled` +
        (report.refused.length > 0 ? `, ${report.refused.length} refused` : "")
    )
  }
  return out
}

const problems = (report: Archive.Report) =>
  report.files.filter((f) => f.status === "failed").length + report.refused.length

/**
 * The `claude-code` command and its subcommands, run through `withJournal`.
 *
 * @since 0.1.0
 */
export const make = <EOut, ROut>(withJournal: WithJournal<EOut, ROut>) => {
  const archive = Command.make("archive", { source, project }, (a) =>
    withJournal(({ json }) =>
      Effect.gen(function*() {
        const report = yield* asInput(Archive.archive(options(a)))
        if (json) {
          yield* Output.json({ source: report.source, files: report.files.map(fileJson), refused: report.refused })
        } else yield* Output.lines(reportText(report, true))
        const n = problems(report)
        if (n > 0) {
          return yield* new StorageError({
            operation: "archive",
            reason: new StorageReason.Incomplete({
              failed: n,
              message: `${n} path${
                n === 1 ? "" : "s"
              } under ${report.source} could not be archived (listed above); everything else was`
            })
          })
        }
      })
    )).pipe(Command.withDescription(
      "Journal every Claude Code transcript (main and sub-agent) into its own session: new lines extend it after a byte-prefix check, " +
        "a rewritten transcript is recorded as a divergence, a vanished one as missing; symbolic links are refused"
    ))

  const follow = Command.make(
    "follow",
    { source, project },
    (a) =>
      withJournal(({ json }) =>
        asInput(Archive.follow(options(a), (report) =>
          json
            ? Output.lines([
              ...report.files.map((f) => JSON.stringify(fileJson(f))),
              ...report.refused.map((r) => JSON.stringify({ ...r, status: "refused" }))
            ])
            : Output.lines(reportText(report, false))))
      )
  ).pipe(
    Command.withDescription("Archive, then journal new lines as they are written (within a second) until interrupted")
  )

  const exportCmd = Command.make("export", {
    id: Argument.String("id").pipe(Argument.withDescription("Session id of a transcript (as archive prints it)"))
  }, (a) =>
    withJournal(() =>
      Effect.gen(function*() {
        const bytes = yield* Archive.restore(a.id)
        yield* Output.bytes(bytes)
      })
    )).pipe(Command.withDescription("Write the journaled transcript to stdout, byte for byte as Claude Code wrote it"))

  const hook = hookSubcommand(
    HookProcess.run,
    "Claude Code",
    "Claude Code's command hook for every event: read one event from stdin, journal it, answer; " +
      "a PreToolUse is decided with the policy. Fails closed: what cannot be recorded is denied (exit 2 for other events)"
  )

  return Command.make("claude-code").pipe(
    Command.withDescription(
      "Claude Code: custody of its transcripts, hooks that journal and guard it as it runs, a session run through the driver"
    ),
    Command.withSubcommands([
      archive,
      follow,
      exportCmd,
      hook,
      InstallCommand.command,
      GuardCommands.guard,
      GuardCommands.forward,
      ClaudeCodeRun.run
    ])
  )
}

/**
 * A command hook's subcommand (`hook`) with its flags (`--policy`, `--root`,
 * `--fail-open`, `--max-input-bytes`, `--wait`, `--deadline`), running `run` on
 * the command's stdin, stdout and stderr: Claude Code's (`HookProcess.run`) and
 * Codex's (`CodexHook.run`). `agent` names the program in the flags' help.
 *
 * @since 0.1.0
 */
export const hookSubcommand = (
  run: (args: HookArgs, io: HookRunner.Io) => Promise<{ readonly exitCode: number }>,
  agent: string,
  description: string
) =>
  Command.make("hook", {
    policy: Flag.String("policy").pipe(
      Flag.withFallbackConfig(Config.String(HookProcess.POLICY_VAR)),
      Flag.optional,
      Flag.withMetavar("FILE"),
      Flag.withDescription(
        `Decide every PreToolUse with this policy file (default $${HookProcess.POLICY_VAR}; none: record only)`
      )
    ),
    root: Flag.String("root").pipe(
      Flag.optional,
      Flag.withMetavar("DIR"),
      Flag.withDescription("Journal directory (as --dir; install writes its absolute path here)")
    ),
    failOpen: Flag.Boolean("fail-open").pipe(
      Flag.withDefault(false),
      Flag.withDescription(
        `When the event cannot be recorded, exit 1 (${agent} goes on) instead of denying the call`
      )
    ),
    maxInputBytes: Flag.Int("max-input-bytes").pipe(
      Flag.filter((n) => n > 0, (n) => `must be a positive integer, got ${n}`),
      Flag.optional,
      Flag.withMetavar("N"),
      Flag.withDescription("Largest hook input read from stdin (default 4 MiB); a larger one is refused unread")
    ),
    wait: Flag.String("wait").pipe(
      Flag.mapTryCatch(parseWaitMillis, (e) => `invalid --wait: ${messageOf(e)}`),
      Flag.optional,
      Flag.withMetavar("DURATION"),
      Flag.withDescription("How long to wait for the session's lock while parallel hooks hold it (default 30s)")
    ),
    deadline: Flag.String("deadline").pipe(
      Flag.mapTryCatch(parseWaitMillis, (e) => `invalid --deadline: ${messageOf(e)}`),
      Flag.filter((n) => n > 0, () => "must be longer than 0"),
      Flag.optional,
      Flag.withMetavar("DURATION"),
      Flag.withDescription(
        "Answer within this time whatever storage, locks or the policy file do; past it the event is refused " +
          "(default 50s, below the 60 s hook timeout install sets)"
      )
    )
  }, (a) =>
    Effect.gen(function*() {
      const dir = onCommandLine(yield* Dir)
      const root = Option.getOrUndefined(a.root)
      if (dir !== undefined && root !== undefined) {
        return yield* new InvalidInput({ field: "--root", reason: "give --root or --dir, not both" })
      }
      const postgres = onCommandLine(yield* Postgres)
      const io = yield* hookIo(yield* Effect.orDie(hookEnvironment))
      const outcome = yield* Effect.promise(() =>
        run({
          root: root ?? dir,
          postgres,
          policy: Option.getOrUndefined(a.policy),
          failOpen: a.failOpen,
          maxInputBytes: Option.getOrUndefined(a.maxInputBytes),
          waitMillis: Option.getOrUndefined(a.wait),
          deadlineMillis: Option.getOrUndefined(a.deadline)
        }, io)
      )
      if (outcome.exitCode !== 0) return yield* new Exit({ code: outcome.exitCode })
    }).pipe(
      Effect.catchTag(
        "InvalidInput",
        (e) => Effect.andThen(Output.errorLine(`session-journal: ${e.message}`), Effect.fail(new Exit({ code: 2 })))
      )
    )).pipe(
      Command.withDescription(description)
    )
