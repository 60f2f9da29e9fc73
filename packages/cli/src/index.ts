/**
 * @session-journal/cli: the `session-journal` command as a value, so it can be
 * embedded or run with other arguments; `bin/session-journal.js` runs it on Node.
 *
 * @since 0.1.0
 */
import { CliConfig, CliOutput, Command, GlobalFlag } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import { root } from "./commands/Commands.ts"
import { describe, ExitCode } from "./Failure.ts"
import * as Outcome from "./internal/outcome.ts"
import * as Output from "./Output.ts"

/**
 * The command tree of `session-journal`: global flags and one subcommand per operation.
 *
 * @since 0.1.0
 */
export * as Commands from "./commands/Commands.ts"
/**
 * The failures of the command line and the exit code each maps to.
 *
 * @since 0.1.0
 */
export * as Failure from "./Failure.ts"
/**
 * Where the command keeps journals: a directory (the default) or PostgreSQL.
 *
 * @since 0.1.0
 */
export * as Storage from "./Storage.ts"

/**
 * The version printed by `--version`, with the Node version it runs on (the
 * project brings its own Node 22; this shows which one a shell picked up).
 *
 * @since 0.1.0
 */
export const VERSION = `0.1.0 (node ${process.version})`

// Help goes to stdout as usual; a usage error is one sentence on stderr, with no
// help text mixed into a script's output.
const presenter = CliOutput.layerPresenter({
  present: (event) =>
    event._tag === "InvalidInvocation"
      ? Output.errorLine(
        `session-journal: ${describe(event.errors[0]?.message ?? "invalid usage")} ` +
          `Run \`${event.commandPath.join(" ")} --help\` for usage.`
      )
      : CliOutput.defaultPresenter.present(event)
})

const runRoot = Command.runWith(root, { version: VERSION })

const outcome = <R>(
  run: Effect.Effect<void, Effect.Error<ReturnType<typeof runRoot>>, R>
) =>
  run.pipe(
    Effect.as(ExitCode.ok as number),
    Effect.catch((error): Effect.Effect<number> => {
      if (error._tag === "CliExit") return Effect.succeed(error.code)
      if (error._tag === "ShowHelp") return Effect.succeed(error.errors.length > 0 ? ExitCode.usage : ExitCode.ok)
      return Effect.as(Output.errorLine(`session-journal: ${describe(error)}`), ExitCode.usage)
    }),
    Effect.catchCause(Outcome.codeOfCause),
    Effect.provide(Layer.mergeAll(
      presenter,
      // No wizard or log level: the command logs nothing and prompts for nothing.
      CliConfig.layer({ builtIns: [GlobalFlag.Help, GlobalFlag.Version, GlobalFlag.Completions] })
    )),
    // Output goes through Effect's `Console`: the process's, unless the caller
    // provided one made by `Output.makeConsole` (an in-process run's capture).
    Output.withCommandConsole
  )

/**
 * Runs the command with the process arguments and yields the exit code: 0 ok,
 * 1 verification failed, 2 bad usage or input, 3 storage error, 4 session locked,
 * 5 `policy test` would deny, 6 output failed (what was written is durable), 70 a defect (a bug), 130 interrupted.
 *
 * @since 0.1.0
 */
export const main = outcome(Command.run(root, { version: VERSION }))

/**
 * Runs the command with `args` (the words after `session-journal`) and yields the
 * exit code, as `main` does; the environment is the `ConfigProvider`'s, stdin
 * `Input.Stdin`'s and stdout and stderr the `Console`'s.
 *
 * @since 0.1.0
 */
export const runArgs = (args: ReadonlyArray<string>) => outcome(runRoot(args))
