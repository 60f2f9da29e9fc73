/**
 * The exit code of a command whose program failed with a cause, shared by the
 * command tree (`index.ts`) and the commands the entry runs without it
 * (`commands/RecordProcess.ts`).
 */
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import { describe, ExitCode, stackOf } from "../Failure.ts"
import * as Output from "../Output.ts"

/** 130 for an interruption, else 70 with the failure, a bug, on stderr. */
export const codeOfCause = (cause: Cause.Cause<unknown>): Effect.Effect<number> =>
  Cause.hasInterruptsOnly(cause)
    ? Effect.succeed(ExitCode.interrupted)
    : Effect.as(
      Output.errorLine(
        `session-journal: unexpected failure (a bug): ${describe(Cause.squash(cause))}\n${stackOf(cause)}`
      ),
      ExitCode.defect
    )
