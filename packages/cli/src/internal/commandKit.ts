/**
 * The command tree's shared parts: global flags, the handler wrappers that give each
 * handler its storage and turn its failures into one sentence and an exit code,
 * and common arguments.
 */
import { Entry, Persistence, SessionJournal } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import * as Cause from "effect/Cause"
import { Argument, Flag, GlobalFlag } from "effect/cli"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import { describe as describeFailure, Exit, ExitCode, exitCodeOf, type Failure, stackOf } from "../Failure.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"
import { parseWaitMillis } from "./hookArgs.ts"

// ---------------------------------------------------------------------------
// Global flags

/**
 * A `--dir` or `--postgres` value and where it came from: the command line, or
 * the environment variable the flag falls back to (through `Config`).
 *
 * @since 0.1.0
 */
export interface Given {
  readonly value: string
  readonly from: "flag" | "env"
}

const fromFlag = (value: string): Given => ({ value, from: "flag" })
const fromEnv = (name: string): Config.Config<Given> =>
  Config.map(Config.String(name), (value): Given => ({ value, from: "env" }))

/**
 * The value of a `Given` setting when the command line gave it (not the environment).
 *
 * @since 0.1.0
 */
export const onCommandLine = (given: Option.Option<Given>): string | undefined =>
  Option.isSome(given) && given.value.from === "flag" ? given.value.value : undefined

/**
 * `--dir DIR`: the journal root (default `$SESSION_JOURNAL_DIR`, else `./.session-journal`).
 *
 * @since 0.1.0
 */
export const Dir = GlobalFlag.Setting("dir")({
  flag: Flag.String("dir").pipe(
    Flag.map(fromFlag),
    Flag.withFallbackConfig(fromEnv(Storage.DIR_VAR)),
    Flag.optional,
    Flag.withMetavar("DIR"),
    Flag.withDescription("Journal directory (default $SESSION_JOURNAL_DIR, else ./.session-journal)")
  )
})

/**
 * `--json`: machine output (one JSON document, or JSON lines for streams).
 *
 * @since 0.1.0
 */
export const Json = GlobalFlag.Setting("json")({
  flag: Flag.Boolean("json").pipe(
    Flag.withDefault(false),
    Flag.withDescription("Machine output: one JSON document, or JSON lines for streams")
  )
})

/**
 * `--verbose`: add stack traces to failures.
 *
 * @since 0.1.0
 */
export const Verbose = GlobalFlag.Setting("verbose")({
  flag: Flag.Boolean("verbose").pipe(Flag.withDefault(false), Flag.withDescription("Print stack traces of failures"))
})

/**
 * `--postgres URL`: keep journals in PostgreSQL (default `$SESSION_JOURNAL_PG_URL`).
 *
 * @since 0.1.0
 */
export const Postgres = GlobalFlag.Setting("postgres")({
  flag: Flag.String("postgres").pipe(
    Flag.map(fromFlag),
    Flag.withFallbackConfig(fromEnv(Storage.PG_URL_VAR)),
    Flag.optional,
    Flag.withMetavar("URL"),
    Flag.withDescription("Keep journals in PostgreSQL at URL (default $SESSION_JOURNAL_PG_URL)")
  )
})

// ---------------------------------------------------------------------------
// Handler wrapper

/**
 * What every handler gets besides its own flags.
 *
 * @since 0.1.0
 */
export interface Context {
  readonly json: boolean
  readonly storage: Storage.Options
}

/** What a journal handler may use. */
export type Journal = SessionJournal.SessionJournal | Persistence.Persistence

const reportFailure = (cause: Cause.Cause<Failure>, verbose: boolean, flags: boolean) =>
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

const settings = Effect.gen(function*() {
  const dir = yield* Dir
  const json = yield* Json
  const verbose = yield* Verbose
  const postgres = yield* Postgres
  // The flags fall back to the same variables; reading them here as well keeps
  // an empty flag (`--dir ""`) falling back to them as before.
  const env = yield* Storage.environment
  const storage = Storage.resolve({ dir: onCommandLine(dir), postgres: onCommandLine(postgres) }, env)
  return { json, verbose, storage }
})

/**
 * Runs a handler with the journal of the chosen storage. Failures are reported
 * here, so the top level only sees `Exit`.
 *
 * @since 0.1.0
 */
export const withJournal = <E extends Failure>(
  body: (ctx: Context) => Effect.Effect<void, E, Journal | Scope.Scope>,
  options?: {
    readonly flags?: boolean
    readonly lockWait?: Option.Option<Duration.Duration>
    /** A reading command: creates no journal directory and no table (`Storage.Options.readOnly`). */
    readonly readOnly?: boolean
  }
) =>
  Effect.gen(function*() {
    const { json, verbose, storage: settled } = yield* settings
    const given: Storage.Options = options?.readOnly === true ? { ...settled, readOnly: true } : settled
    const lockWait = options?.lockWait === undefined ? undefined : Option.getOrUndefined(options.lockWait)
    const storage: Storage.Options = lockWait === undefined ? given : { ...given, lockWait }
    const live = SessionJournal.layer().pipe(Layer.provideMerge(Storage.layer(storage)))
    yield* Effect.scoped(body({ json, storage })).pipe(
      Effect.provide(live),
      Effect.catchCause((cause) => reportFailure(cause, verbose, options?.flags === true))
    )
  })

/**
 * `withJournal` for a command that only reads: it creates no journal directory and
 * no table, and a journal that does not exist holds no session.
 *
 * @since 0.1.0
 */
export const withJournalToRead = <E extends Failure>(
  body: (ctx: Context) => Effect.Effect<void, E, Journal | Scope.Scope>
) => withJournal(body, { readOnly: true })

/**
 * Runs a handler that works on files directly (no journal service).
 *
 * @since 0.1.0
 */
export const withoutJournal = <E extends Failure>(body: (ctx: Context) => Effect.Effect<void, E, Scope.Scope>) =>
  Effect.gen(function*() {
    const { json, verbose, storage } = yield* settings
    yield* Effect.scoped(body({ json, storage })).pipe(
      Effect.catchCause((cause) => reportFailure(cause, verbose, false))
    )
  })

/** Validates a session id argument. */
export const validId = (id: string) => Effect.fromResult(Entry.validateSessionId(id))

/** The `id` argument. */
export const sessionId = Argument.String("id").pipe(Argument.withDescription("Session id (^[A-Za-z0-9_-]{1,128}$)"))

/** A non-negative integer flag. */
export const nonNegative = (name: string) =>
  Flag.Int(name).pipe(Flag.filter((n) => n >= 0, (n) => `must be a non-negative integer, got ${n}`))

/**
 * Parses a `--wait` value (`500ms`, `30s`, `2m`, `1h`; a bare number is seconds).
 *
 * @since 0.1.0
 */
export const parseWait = (text: string): Duration.Duration => Duration.millis(parseWaitMillis(text))

/**
 * `--wait DURATION` of the writing commands: how long to wait for a session's lock
 * while another writer holds it (default: not at all, exit 4 at once).
 *
 * @since 0.1.0
 */
export const waitFlag = Flag.String("wait").pipe(
  Flag.withMetavar("DURATION"),
  Flag.mapTryCatch(parseWait, (e) => `invalid --wait: ${messageOf(e)}`),
  Flag.optional,
  Flag.withDescription(
    "Wait up to DURATION (500ms, 30s, 2m) for the session's lock while another writer holds it, instead of exit 4 at once"
  )
)
