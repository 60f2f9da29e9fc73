/**
 * A command as a process: its program's exit code made the process's, whether
 * the program is the command tree (`runCli.ts`) or a command the entry recognized
 * first (`commands/RecordProcess.ts`). SIGINT and SIGTERM interrupt the program
 * (its scopes close: a session's lock is released) and end it with 130; a closed
 * stdout ends it with 0; any other failure of stdout met outside `Output.write`
 * turns a success into exit 5.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import type * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { describe, ExitCode, OutputFailed } from "../Failure.ts"
import * as ProcessStreams from "./processStreams.ts"

/** Runs `program` as the process: exits with the code it yields (see the module's documentation). */
export const run = (program: Effect.Effect<number>): void => {
  // A closed pipe (`session-journal export x | head`) is a normal end, not a crash.
  // Any other failure of stdout is reported by the write that met it (`Output.write`
  // fails with `OutputFailed`, exit 5); one met by a write outside it (help text)
  // turns a success into exit 5 here, in one sentence.
  let stdoutFailure: NodeJS.ErrnoException | undefined
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(0)
    stdoutFailure ??= e
  })

  // An interrupted command ends with 130, unless it set `process.exitCode` to 0 once
  // it had stopped cleanly: the resident guard's normal end is SIGTERM.
  NodeRuntime.runMain(program, {
    disableErrorReporting: true,
    teardown: (exit, onExit) => {
      const code = Exit.isSuccess(exit) ? Number(exit.value) : 130
      // A failed write's "error" event comes on the next tick.
      setImmediate(() => {
        if (code === ExitCode.ok && stdoutFailure !== undefined) {
          ProcessStreams.writeStderr(
            `session-journal: ${describe(new OutputFailed({ reason: stdoutFailure.message }))}\n`
          )
          return onExit(ExitCode.output)
        }
        onExit(code === ExitCode.interrupted && process.exitCode === 0 ? ExitCode.ok : code)
      })
    }
  })
}
