/**
 * @session-journal/mcp: an MCP gateway. Every `tools/call` between an MCP client
 * and server decided by a policy and journaled on the hash chain with its result;
 * every other message passed through unchanged.
 *
 * @since 0.1.0
 */

/**
 * The typed failures of the gateway: the server could not be reached (`UpstreamFailed`), or it ended first (`ServerEnded`).
 *
 * @since 0.1.0
 */
export * from "./Errors.ts"
/**
 * The gateway: one connection between a client and a server, run until either side goes away.
 *
 * @since 0.1.0
 */
export * as Gateway from "./Gateway.ts"
/**
 * What a connection puts on the chain: session ids, tool names, the decision and outcome entries.
 *
 * @since 0.1.0
 */
export * as Journaling from "./Journaling.ts"
/**
 * JSON-RPC 2.0 as the gateway reads and writes it.
 *
 * @since 0.1.0
 */
export * as JsonRpc from "./JsonRpc.ts"
