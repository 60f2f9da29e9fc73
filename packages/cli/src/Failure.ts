/**
 * The failures of the command line and how each maps to an exit code.
 *
 * Scripts branch on the exit code, so the mapping is part of the contract:
 * 0 success, 1 verification failed (integrity violation or corruption), 2 bad
 * usage or invalid input, 3 storage error, 4 session locked by another writer.
 * Outside that range: 70 (EX_SOFTWARE of sysexits.h) for a defect, which is a
 * bug and is reported with its stack, and 130 (128 + SIGINT, as shells report it)
 * when the run was interrupted. Every failure is reported on stderr as one sentence; `--verbose` adds the stack.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Schema from "effect/Schema"

/**
 * Input given on the command line or read from a file is not acceptable. `field`
 * names the flag, argument or JSON field; `line` the input line when there is one.
 *
 * @since 0.1.0
 */
export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  field: Schema.String,
  reason: Schema.String,
  line: Schema.optionalKey(Schema.Number)
}) {
  override get message(): string {
    const where = this.line === undefined ? "" : ` on line ${this.line}`
    return `invalid ${this.field}${where}: ${this.reason}`
  }
}

/**
 * One or more sessions failed verification; the report has already been printed.
 *
 * @since 0.1.0
 */
export class VerificationFailed extends Schema.TaggedError<VerificationFailed>()("VerificationFailed", {
  failed: Schema.Number,
  total: Schema.Number
}) {
  override get message(): string {
    return `verification failed for ${this.failed} of ${this.total} session${this.total === 1 ? "" : "s"}`
  }
}

/**
 * A storage backend or operation that this installation does not provide.
 *
 * @since 0.1.0
 */
export class NotAvailable extends Schema.TaggedError<NotAvailable>()("NotAvailable", {
  feature: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.feature} is not available: ${this.reason}`
  }
}

/**
 * Exit codes of the command (see the module header).
 *
 * @since 0.1.0
 */
export const ExitCode = {
  ok: 0,
  verificationFailed: 1,
  usage: 2,
  storage: 3,
  locked: 4,
  /** A bug: an unexpected defect, reported with its stack (sysexits' EX_SOFTWARE). */
  defect: 70,
  /** Interrupted (SIGINT or SIGTERM): 128 + SIGINT, as shells report an interrupted command. */
  interrupted: 130
} as const

const codeByTag: Record<string, number> = {
  IntegrityViolation: ExitCode.verificationFailed,
  CorruptJournal: ExitCode.verificationFailed,
  VerificationFailed: ExitCode.verificationFailed,
  InvalidSessionId: ExitCode.usage,
  InvalidRecordField: ExitCode.usage,
  InvalidInput: ExitCode.usage,
  SessionNotFound: ExitCode.usage,
  StorageError: ExitCode.storage,
  SequenceConflict: ExitCode.storage,
  NotAvailable: ExitCode.storage,
  SessionLocked: ExitCode.locked
}

/**
 * The exit code for a typed failure (by its `_tag`); unknown values are defects.
 *
 * @since 0.1.0
 */
export const exitCodeOf = (error: unknown): number => {
  const tag = typeof error === "object" && error !== null && "_tag" in error ? String(error._tag) : ""
  return codeByTag[tag] ?? ExitCode.defect
}

// Core names fields by their JSON names; on the command line the user typed a flag.
const flagOfField: Record<string, string> = {
  tool_name: "--tool",
  server_id: "--server",
  agent_id: "--agent",
  bytes_read: "--read",
  bytes_written: "--written",
  delegation_depth: "--depth",
  payload: "--payload",
  kind: "--kind"
}

/**
 * One sentence describing a failure for stderr. `flags` adds the flag that
 * carries a field when the input came from flags rather than from a file.
 *
 * @since 0.1.0
 */
export const describe = (error: unknown, options?: { readonly flags?: boolean }): string => {
  const message = error instanceof Error ? error.message : String(error)
  if (
    options?.flags === true && typeof error === "object" && error !== null &&
    "_tag" in error && error._tag === "InvalidRecordField" && "field" in error
  ) {
    const flag = flagOfField[String(error.field)]
    if (flag !== undefined) return sentence(`${message} (${flag})`)
  }
  return sentence(message)
}

const sentence = (s: string): string => {
  const one = s.replace(/\s*\n\s*/g, " ").trim()
  return one.length === 0 ? "failed." : /[.!?]$/.test(one) ? one : `${one}.`
}

/**
 * The stack of the first failure or defect in a cause, for `--verbose`.
 *
 * @since 0.1.0
 */
export const stackOf = (cause: Cause.Cause<unknown>): string => {
  const squashed = Cause.squash(cause)
  if (squashed instanceof Error && squashed.stack !== undefined) return squashed.stack
  return Cause.pretty(cause)
}

/**
 * Ends the command with an exit code once its failure has been reported.
 *
 * @since 0.1.0
 */
export class Exit extends Schema.TaggedError<Exit>()("CliExit", {
  code: Schema.Number
}) {}
