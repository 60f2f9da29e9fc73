/**
 * The command tree on Node: runs it and turns the outcome into the process exit
 * code of the contract (loaded by `main.ts` for every command but the hook).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import { describe, ExitCode, OutputFailed } from "../Failure.ts"
import { main } from "../index.ts"
import * as ProcessStreams from "./processStreams.ts"

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
NodeRuntime.runMain(main.pipe(Effect.provide(NodeServices.layer)), {
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
