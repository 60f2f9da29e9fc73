/**
 * `session-journal record` as the entry runs it when it recognizes a plain
 * invocation (`internal/recordArgs.ts`): the same command as the command tree's
 * `record` (`WriteCommands.ts`), one tool call appended to its session and printed
 * (`internal/recordCall.ts`) with the journal of the flags and the environment
 * (`--dir`, `--postgres`, else the variables, else `./.session-journal`),
 * its failures reported and its exit code the contract's
 * (`internal/journalRun.ts`, `internal/processMain.ts`), without loading the
 * command tree: an agent's hook records once per tool call, and the tree is most
 * of a command's start.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import { ExitCode } from "../Failure.ts"
import * as JournalRun from "../internal/journalRun.ts"
import * as Outcome from "../internal/outcome.ts"
import * as ProcessMain from "../internal/processMain.ts"
import type { RecordArgs } from "../internal/recordArgs.ts"
import * as RecordCall from "../internal/recordCall.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"

/**
 * The `record` of `args` with `env`'s storage variables, yielding its exit code;
 * its output goes through Effect's `Console` (the process's unless one is provided).
 *
 * @since 0.1.0
 */
export const program = (
  args: RecordArgs,
  env: Readonly<Record<string, string | undefined>>
): Effect.Effect<number> => {
  const storage = Storage.resolve({ dir: args.dir, postgres: args.postgres }, Storage.environmentOf(env))
  return JournalRun.run(
    { json: args.json, verbose: args.verbose, storage },
    ({ json }) => RecordCall.record(args, json),
    {
      flags: true,
      lockWait: args.waitMillis === undefined ? undefined : Duration.millis(args.waitMillis)
    }
  ).pipe(
    Effect.as(ExitCode.ok as number),
    Effect.catchTag("CliExit", (exit) => Effect.succeed(exit.code)),
    Effect.catchCause(Outcome.codeOfCause),
    Output.withCommandConsole
  )
}

/**
 * Runs `record` with `args` as the process (`ProcessMain.run`): it exits with the
 * command's code.
 *
 * @since 0.1.0
 */
export const main = (args: RecordArgs): void => ProcessMain.run(program(args, process.env))
