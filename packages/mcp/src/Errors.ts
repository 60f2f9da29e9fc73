/**
 * The typed failures of the gateway: the server could not be started or reached
 * (`UpstreamFailed`), or it ended before the client did, crashed or leaving
 * requests unanswered (`ServerEnded`). Everything else a connection meets (a
 * malformed line, a call the journal could not record) is answered to the client
 * in JSON-RPC and is not a failure of the gateway.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * The MCP server could not be started (`server` names the command or URL).
 *
 * @since 0.1.0
 */
export class UpstreamFailed extends Schema.TaggedError<UpstreamFailed>()("UpstreamFailed", {
  server: Schema.String,
  reason: Schema.String
}) {
  override get message(): string {
    return `MCP server ${this.server}: ${this.reason}`
  }
}

/**
 * The MCP server ended before the client did, and not cleanly: it exited with a
 * code other than 0, was killed by a signal, or left requests unanswered. Each
 * unanswered request was answered with an error naming the same cause before
 * this failure. `session` is the connection's journal session (null when nothing
 * was journaled); `calls` and `denied` count its `tools/call`s.
 *
 * @since 0.1.0
 */
export class ServerEnded extends Schema.TaggedError<ServerEnded>()("ServerEnded", {
  server: Schema.String,
  code: Schema.NullOr(Schema.Number),
  signal: Schema.NullOr(Schema.String),
  unanswered: Schema.Number,
  session: Schema.NullOr(Schema.String),
  calls: Schema.Number,
  denied: Schema.Number
}) {
  /**
   * How the server ended: `exit code N`, `killed by SIGNAL`, or `its connection closed`.
   *
   * @since 0.1.0
   */
  get how(): string {
    return endedHow(this.code, this.signal)
  }

  override get message(): string {
    const left = this.unanswered === 0
      ? ""
      : `, ${this.unanswered} request${this.unanswered === 1 ? "" : "s"} unanswered`
    return `MCP server ${this.server} ended before the client (${this.how})${left}`
  }
}

/**
 * How a server ended, in words: `exit code N`, `killed by SIGNAL`, or, when
 * neither is known (a server reached over HTTP), `its connection closed`.
 *
 * @since 0.1.0
 */
export const endedHow = (code: number | null, signal: string | null): string =>
  signal !== null ? `killed by ${signal}` : code !== null ? `exit code ${code}` : "its connection closed"
