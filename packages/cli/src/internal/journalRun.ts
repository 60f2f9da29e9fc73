/**
 * How a command runs with its journal, whether the command tree parsed it
 * (`commandKit.withJournal`) or the entry recognized it first (`record`,
 * `commands/RecordProcess.ts`): the storage and session layers of its settings,
 * and its failures reported in one sentence on stderr as an `Exit` with the
 * contract's exit code. No `effect/cli` here: `record` starts without it.
 */
import { type Persistence, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { describe as describeFailure, Exit, ExitCode, exitCodeOf, type Failure, stackOf } from "../Failure.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"

/** What every handler gets besides its own flags. */
export interface Context {
  readonly json: boolean
  readonly storage: Storage.Options
}

/** What a journal handler may use. */
export type Journal = SessionJournal.SessionJournal | Persistence.Persistence

/** A command's global settings: `--json`, `--verbose` and the storage they chose. */
export interface Settings extends Context {
  readonly verbose: boolean
}

/** How a command uses its journal. */
export interface Options {
  /** Failures name the command's flags (`describe`'s `flags`). */
  readonly flags?: boolean | undefined
  /** `--wait`: how long to wait for a session's lock. */
  readonly lockWait?: Duration.Duration | undefined
  /** A reading command: creates no journal directory and no table (`Storage.Options.readOnly`). */
  readonly readOnly?: boolean | undefined
}

/** Reports a handler's failure on stderr and fails with the `Exit` of its code; an interruption stays one. */
export const reportFailure = (cause: Cause.Cause<Failure>, verbose: boolean, flags: boolean) =>
  Effect.gen(function*() {
    if (Cause.hasInterruptsOnly(cause)) return yield* Effect.failCause(cause as Cause.Cause<never>)
    const error = Cause.squash(cause)
    const typed = Cause.findErrorOption(cause)
    // A closed pipe (`session-journal export x | head`) is a normal end, not a failure.
    if (Option.isSome(typed) && typed.value._tag === "OutputFailed" && typed.value.code === "EPIPE") {
      return yield* new Exit({ code: ExitCode.ok })
    }
    // A defect is a bug; a typed failure is not, whatever its code (`CliDied` shares 70 with defects).
    const defect = Option.isNone(typed)
    const code = Option.isSome(typed) ? exitCodeOf(typed.value) : ExitCode.defect
    const text = defect
      ? `unexpected failure (a bug): ${describeFailure(error)}`
      : describeFailure(error, { flags })
    yield* Output.errorLine(`session-journal: ${text}`)
    if (verbose || defect) yield* Output.errorLine(stackOf(cause))
    return yield* new Exit({ code })
  })

/**
 * Runs a handler with the journal of `settings`' storage. Failures are reported
 * here, so the caller only sees `Exit`.
 */
export const run = <E extends Failure>(
  settings: Settings,
  body: (ctx: Context) => Effect.Effect<void, E, Journal | Scope.Scope>,
  options?: Options
) => {
  const given: Storage.Options = options?.readOnly === true
    ? { ...settings.storage, readOnly: true }
    : settings.storage
  const lockWait = options?.lockWait
  const storage: Storage.Options = lockWait === undefined ? given : { ...given, lockWait }
  const live = SessionJournal.layer().pipe(Layer.provideMerge(Storage.layer(storage)))
  return Effect.scoped(body({ json: settings.json, storage })).pipe(
    Effect.provide(live),
    Effect.catchCause((cause) => reportFailure(cause, settings.verbose, options?.flags === true))
  )
}
