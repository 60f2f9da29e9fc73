/**
 * The command tree's shared parts: global flags, the handler wrappers that give each
 * handler its storage and turn its failures into one sentence and an exit code,
 * and common arguments.
 */
import { Entry } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { Argument, Flag, GlobalFlag } from "effect/cli"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { Failure } from "../Failure.ts"
import * as Storage from "../Storage.ts"
import { parseWaitMillis } from "./hookArgs.ts"
import * as JournalRun from "./journalRun.ts"

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
export type Context = JournalRun.Context

/** What a journal handler may use. */
export type Journal = JournalRun.Journal

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
 * Runs a handler with the journal of the chosen storage (`JournalRun.run`).
 * Failures are reported here, so the top level only sees `Exit`.
 *
 * @since 0.1.0
 */
export const withJournal = <E extends Failure>(
  body: (ctx: Context) => Effect.Effect<void, E, Journal | Scope.Scope>,
  options?: Omit<JournalRun.Options, "lockWait"> & {
    readonly lockWait?: Option.Option<Duration.Duration>
  }
) =>
  Effect.flatMap(settings, (given) =>
    JournalRun.run(given, body, {
      ...options,
      lockWait: options?.lockWait === undefined ? undefined : Option.getOrUndefined(options.lockWait)
    }))

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
      Effect.catchCause((cause) => JournalRun.reportFailure(cause, verbose, false))
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
