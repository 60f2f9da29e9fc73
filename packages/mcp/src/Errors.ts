/**
 * The typed failure of the gateway: the server could not be started or reached.
 * Everything else a connection meets (a malformed line, a call the journal could
 * not record, a server that exits) is answered to the client in JSON-RPC and is
 * not a failure of the gateway.
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
