/**
 * The failures of the command line and how each maps to an exit code.
 *
 * Scripts branch on the exit code, so the mapping is part of the contract:
 * 0 success, 1 verification failed (integrity violation, corruption, or history a
 * follower printed that was replaced), 2 bad usage or invalid input, 3 storage
 * error, 4 session locked by another writer, 5 `policy test`: the policy would
 * have denied at least one call, 6 the output could not be written (stdout failed) — any entry the command
 * wrote is durable, so a caller must not write it again, 7 `otel export`: spans did not reach the collector.
 * Outside that range: 70 (EX_SOFTWARE of sysexits.h) for a defect, which is a
 * bug and is reported with its stack, and 130 (128 + SIGINT, as shells report it)
 * when the run was interrupted. `claude-code run` adds two meanings: 1 a turn
 * ended with an error result, 70 the Claude Code CLI it drove died (its stderr in
 * the sentence; not a defect, no stack). Every failure is reported on stderr as one sentence; `--verbose` adds the stack.
 *
 * @since 0.1.0
 */
import type { CliDied, SessionStorageError } from "@session-journal/claude-code"
import type {
  CorruptJournal,
  HistoryDiverged,
  IntegrityViolation,
  InvalidRecordField,
  InvalidSessionId,
  SequenceConflict,
  SessionLocked,
  SessionNotFound,
  StorageError,
  Tiles,
  Transparency
} from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
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
 * `import` stopped at a line it could not accept. Every line before it is
 * committed; `imported` and `lastSequence` say what was (`lastSequence` is null
 * when nothing was), so a caller can resume after the bad line.
 *
 * @since 0.1.0
 */
export class ImportStopped extends Schema.TaggedError<ImportStopped>()("ImportStopped", {
  input: InvalidInput,
  imported: Schema.Number,
  lastSequence: Schema.NullOr(Schema.Number)
}) {
  override get message(): string {
    const n = this.imported
    const committed = n === 0 || this.lastSequence === null
      ? "nothing was imported"
      : `the ${n} entr${n === 1 ? "y" : "ies"} before it ${
        n === 1 ? "is" : "are"
      } committed (last sequence ${this.lastSequence})`
    return `${this.input.message}; import stopped there, ${committed}`
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
 * A session's history read for a page or report did not continue what its
 * verification had just checked: storage changed between the two reads (an edit,
 * a cut, new writes in place of old), or was damaged after the verification.
 * Nothing read is shown; reading again verifies again.
 *
 * @since 0.1.0
 */
export class ChangedWhileRead extends Schema.TaggedError<ChangedWhileRead>()("ChangedWhileRead", {
  id: Schema.String,
  sequence: Schema.Number,
  what: Schema.String,
  expected: Schema.String,
  actual: Schema.String
}) {
  override get message(): string {
    return `session ${this.id} changed while it was read: entry ${this.sequence} does not continue the history verified (${this.what}: expected ${this.expected}, found ${this.actual}); read it again`
  }
}

/**
 * `codex install` / `codex status`: Codex will not run (all of) our hooks, so
 * its calls run unguarded; what to do has been printed.
 *
 * @since 0.1.0
 */
export class NotGuarded extends Schema.TaggedError<NotGuarded>()("NotGuarded", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/**
 * `policy test`: the policy would have denied calls of the stored session (listed
 * already). Its own exit code, so a script can tell "the policy bites" from a
 * damaged session (1) or a bad policy file (2).
 *
 * @since 0.1.0
 */
export class PolicyWouldDeny extends Schema.TaggedError<PolicyWouldDeny>()("PolicyWouldDeny", {
  denied: Schema.Number,
  calls: Schema.Number
}) {
  override get message(): string {
    return `the policy would have denied ${this.denied} of ${this.calls} call${this.calls === 1 ? "" : "s"}`
  }
}

/**
 * `verify --checkpoint`: the journal does not bear out a checkpoint held elsewhere, or
 * the checkpoint's signature does not verify (the report has been printed). `reason`
 * says which: `signature`, `other_log` (another session's checkpoint), `cut` (fewer
 * entries stored than it covers), `replaced` (the tree at its size has another root),
 * `chain` (the stored chain itself does not verify), `tree` (no tree can be computed
 * from the stored history).
 *
 * @since 0.1.0
 */
export class CheckpointMismatch extends Schema.TaggedError<CheckpointMismatch>()("CheckpointMismatch", {
  id: Schema.String,
  reason: Schema.Literals(["signature", "other_log", "cut", "replaced", "chain", "tree"]),
  detail: Schema.String
}) {
  override get message(): string {
    return `${this.id} does not match the checkpoint (${this.reason}): ${this.detail}`
  }
}

/**
 * `witness`: the witness would not cosign (the answer is its HTTP status): 409 (it has
 * cosigned a larger tree than the journal holds), 422 (the journal is not consistent
 * with what it cosigned), 403/404/400 (it does not trust the key or know the log), or
 * a cosignature that does not verify.
 *
 * @since 0.1.0
 */
export class WitnessRefused extends Schema.TaggedError<WitnessRefused>()("WitnessRefused", {
  url: Schema.String,
  id: Schema.String,
  status: Schema.Number,
  detail: Schema.String
}) {
  override get message(): string {
    return `the witness ${this.url} did not cosign ${this.id} (${this.status}): ${this.detail}`
  }
}

/**
 * `claude-code run`: turns of the session ended with an error result (the
 * conversation and each such turn are printed already).
 *
 * @since 0.1.0
 */
export class TurnFailed extends Schema.TaggedError<TurnFailed>()("TurnFailed", {
  errors: Schema.Number,
  turns: Schema.Number
}) {
  override get message(): string {
    return `${this.errors} of ${this.turns} turn${this.turns === 1 ? "" : "s"} ended with an error result`
  }
}

/**
 * `otel export`: spans were lost: the collector was down, refused them or did not
 * answer in time (the counts have been printed). The journal is untouched.
 *
 * @since 0.1.0
 */
export class SpansLost extends Schema.TaggedError<SpansLost>()("SpansLost", {
  url: Schema.String,
  lost: Schema.Number,
  spans: Schema.Number,
  reason: Schema.String
}) {
  override get message(): string {
    return `${this.lost} of ${this.spans} span${
      this.spans === 1 ? "" : "s"
    } did not reach ${this.url} (${this.reason}); ` +
      `the journal is unchanged, export again when the collector is up`
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
 * What a command had made durable when its output failed: the session and the
 * last durable entry (its sequence and hash), and how many entries the command
 * wrote.
 *
 * @since 0.1.0
 */
export const Durable = Schema.Struct({
  id: Schema.String,
  entries: Schema.Number,
  sequence: Schema.Number,
  hash: Schema.String
})

/**
 * Stdout could not be written (a full disk, a closed file, an I/O error). When
 * the command had written entries, `durable` says which: they are committed,
 * and the message says so, so that a caller does not write them again.
 *
 * @since 0.1.0
 */
export class OutputFailed extends Schema.TaggedError<OutputFailed>()("OutputFailed", {
  code: Schema.optionalKey(Schema.String),
  reason: Schema.String,
  durable: Schema.optionalKey(Durable)
}) {
  override get message(): string {
    const cause = `stdout could not be written (${this.reason})`
    const d = this.durable
    if (d === undefined) return cause
    const what = d.entries === 1
      ? `entry ${d.sequence} of ${d.id} (hash ${d.hash}) is durable`
      : `${d.entries} entries of ${d.id} through sequence ${d.sequence} (hash ${d.hash}) are durable`
    return `${what}, but ${cause}; do not write ${d.entries === 1 ? "it" : "them"} again`
  }

  /**
   * The same failure, saying which entries were durable when it happened.
   *
   * @since 0.1.0
   */
  afterDurable(durable: typeof Durable.Type): OutputFailed {
    return new OutputFailed({ ...this.code === undefined ? {} : { code: this.code }, reason: this.reason, durable })
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
  /** `policy test`: the policy would have denied at least one call. */
  policyWouldDeny: 5,
  /** Stdout could not be written; whatever the command wrote is durable (see `OutputFailed`). */
  output: 6,
  /** `claude-code run`: a turn ended with an error result. */
  turnFailed: 1,
  /** `otel export`: spans did not reach the collector (see `SpansLost`). */
  spansLost: 7,
  /** A bug: an unexpected defect, reported with its stack (sysexits' EX_SOFTWARE). */
  defect: 70,
  /** `claude-code run`: the Claude Code CLI died or could not be started (EX_SOFTWARE: the software it drives failed). */
  claudeDied: 70,
  /** `mcp proxy`: the MCP server it runs ended first, or left requests unanswered (EX_SOFTWARE, as `claudeDied`). */
  serverEnded: 70,
  /** Interrupted (SIGINT or SIGTERM): 128 + SIGINT, as shells report an interrupted command. */
  interrupted: 130
} as const

/**
 * Every typed failure a command may end with. A handler whose error type is not
 * part of this union does not compile, so no new error can slip through as a
 * defect (exit 70) unnoticed.
 *
 * @since 0.1.0
 */
export type Failure =
  | IntegrityViolation
  | CorruptJournal
  | HistoryDiverged
  | VerificationFailed
  | ChangedWhileRead
  | InvalidSessionId
  | InvalidRecordField
  | InvalidInput
  | ImportStopped
  | SessionNotFound
  | StorageError
  | SequenceConflict
  | NotAvailable
  | SessionLocked
  | PolicyWouldDeny
  | NotGuarded
  | OutputFailed
  | Transparency.TreeUnavailable
  | CheckpointMismatch
  | Tiles.TilesRefused
  | WitnessRefused
  | TurnFailed
  | CliDied
  | SessionStorageError
  | SpansLost

// A mapped type over the union's tags: a missing tag is a compile error.
const codeByTag: { readonly [Tag in Failure["_tag"]]: number } = {
  IntegrityViolation: ExitCode.verificationFailed,
  CorruptJournal: ExitCode.verificationFailed,
  HistoryDiverged: ExitCode.verificationFailed,
  VerificationFailed: ExitCode.verificationFailed,
  ChangedWhileRead: ExitCode.verificationFailed,
  InvalidSessionId: ExitCode.usage,
  InvalidRecordField: ExitCode.usage,
  InvalidInput: ExitCode.usage,
  ImportStopped: ExitCode.usage,
  SessionNotFound: ExitCode.usage,
  StorageError: ExitCode.storage,
  SequenceConflict: ExitCode.storage,
  NotAvailable: ExitCode.storage,
  SessionLocked: ExitCode.locked,
  PolicyWouldDeny: ExitCode.policyWouldDeny,
  NotGuarded: ExitCode.verificationFailed,
  OutputFailed: ExitCode.output,
  TreeUnavailable: ExitCode.verificationFailed,
  CheckpointMismatch: ExitCode.verificationFailed,
  TilesRefused: ExitCode.verificationFailed,
  WitnessRefused: ExitCode.verificationFailed,
  TurnFailed: ExitCode.turnFailed,
  CliDied: ExitCode.claudeDied,
  SessionStorageError: ExitCode.storage,
  SpansLost: ExitCode.spansLost
}

/**
 * The exit code for a typed failure.
 *
 * @since 0.1.0
 */
export const exitCodeOf = (error: Failure): number => codeByTag[error._tag]

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
  const message = messageOf(error)
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
