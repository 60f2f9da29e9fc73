/**
 * The typed failures of a session: the CLI died (with its exit and stderr), the
 * journal could not keep a line (so it was not published either), or the CLI
 * answered one of our control requests with an error.
 *
 * @since 0.1.0
 */
import { messageOf } from "@session-journal/core"
import * as Schema from "effect/Schema"

/**
 * The CLI exited (or could not be started) while something waited on it:
 * `info`, `awaitResultAfter`, `interrupt`, `send`. Carries its exit code or
 * signal and the tail of its stderr.
 *
 * @since 0.1.0
 */
export class CliDied extends Schema.TaggedError<CliDied>()("CliDied", {
  code: Schema.NullOr(Schema.Number),
  signal: Schema.NullOr(Schema.String),
  stderr: Schema.String
}) {
  override get message(): string {
    const how = this.signal !== null ? `signal ${this.signal}` : `exit code ${this.code}`
    const tail = this.stderr.trim()
    return `the Claude Code CLI ended (${how})${tail === "" ? "" : `: ${tail.slice(-2000)}`}`
  }
}

/**
 * The journal failed to store a line of the session (`operation` says which
 * step). The line was not published, and the session was ended: what the journal
 * does not hold is never shown.
 *
 * @since 0.1.0
 */
export class SessionStorageError extends Schema.TaggedError<SessionStorageError>()("SessionStorageError", {
  operation: Schema.String,
  cause: Schema.Defect()
}) {
  override get message(): string {
    return `the session's journal failed (${this.operation}): ${messageOf(this.cause)}`
  }
}

/**
 * The CLI answered a control request of ours with `subtype: "error"`.
 *
 * @since 0.1.0
 */
export class ControlError extends Schema.TaggedError<ControlError>()("ControlError", {
  requestId: Schema.String,
  error: Schema.String
}) {
  override get message(): string {
    return `control request ${this.requestId} failed: ${this.error}`
  }
}

/**
 * Why a session cannot go on.
 *
 * @since 0.1.0
 */
export type SessionError = CliDied | SessionStorageError
