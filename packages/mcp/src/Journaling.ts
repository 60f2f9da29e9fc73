/**
 * What an MCP connection puts on the chain, apart from how bytes move: the
 * connection's session id, the tool names calls are decided under, the one
 * function that decides a call (`decideCall`), and the payloads of the
 * connection's `initialize`, of each decision and of each outcome.
 *
 * @since 0.1.0
 */
import { Entry, Guard, Policy, type SessionJournal } from "@session-journal/core"
import { jsonBytes } from "@session-journal/core/Utf8"
import * as Effect from "effect/Effect"
import type * as Schema from "effect/Schema"
import * as Lines from "./internal/lines.ts"
import type * as JsonRpc from "./JsonRpc.ts"

/**
 * The kind of the entry beside each decided call.
 *
 * @since 0.1.0
 */
export const DECISION_KIND = "mcp.decision"

/**
 * The kind of the entry that records a connection's `initialize`.
 *
 * @since 0.1.0
 */
export const INITIALIZE_KIND = "mcp.initialize"

/**
 * A server name as it stands in tool names: every character other than
 * `[A-Za-z0-9_-]` becomes `_` (as Claude Code names MCP tools), at most 64.
 *
 * @since 0.1.0
 */
export const normalizeName = (name: string): string => {
  const n = name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64)
  return n.length === 0 ? "server" : n
}

/**
 * The tool name a call is decided and journaled under: `mcp__<name>__<tool>`.
 *
 * @since 0.1.0
 */
export const toolName = (name: string, tool: string): string => `mcp__${normalizeName(name)}__${tool}`

/**
 * The journal session of a connection: `mcp-` and the first 32 hex digits of
 * the SHA-256 of the JSON text of `[name, clientInfo, startMillis]` (the
 * server's name, the client's `clientInfo` or null, the gateway's start in
 * milliseconds). The same connection always gets the same id; two connections
 * started apart never share one.
 *
 * @since 0.1.0
 */
export const sessionIdOf = (name: string, clientInfo: unknown, startMillis: number): string =>
  `mcp-${
    Lines.sha256Hex(new TextEncoder().encode(JSON.stringify([name, clientInfo ?? null, startMillis]))).slice(0, 32)
  }`

/**
 * One `tools/call` as it is decided.
 *
 * @since 0.1.0
 */
export interface Call {
  readonly id: JsonRpc.Id
  /** `mcp__<name>__<tool>`. */
  readonly tool_name: string
  /** The tool's name on the server. */
  readonly mcp_tool: string
  readonly tool_input: { readonly [key: string]: unknown }
  readonly server: string
  readonly agent: string
  readonly policy: string | null
}

/**
 * Decides one call and records it with its decision in one append. The one
 * place the gateway calls `decide`. The guard sees the call (`mcp__<name>__<tool>`
 * and its arguments as `tool_input`), so patterns judge it; an ask is a denial
 * (no one can be asked through the gateway), the tokens are unknown.
 *
 * @since 0.1.0
 */
export const decideCall = (
  journal: SessionJournal.SessionJournal["Service"],
  session: string,
  call: Call,
  guard: Guard.Guard
): Effect.Effect<SessionJournal.Decision, SessionJournal.WriteError> =>
  journal.decide(
    session,
    {
      tool_name: call.tool_name,
      server_id: call.server,
      agent_id: call.agent,
      bytes_read: 0,
      bytes_written: jsonBytes(call.tool_input),
      delegation_depth: 0
    },
    guard,
    (verdict, entry) => [{
      kind: DECISION_KIND,
      payload: {
        jsonrpc_id: call.id,
        tool_name: call.tool_name,
        mcp_tool: call.mcp_tool,
        server: call.server,
        tool_input: call.tool_input as Schema.Json,
        ...Guard.decisionPayload(verdict, entry.sequence),
        policy: call.policy
      }
    }],
    // The policy sees the call as Claude Code names MCP calls, its arguments as the
    // input; no one can be asked here, so an ask is a denial saying so.
    { call: { tool_name: call.tool_name, tool_input: call.tool_input }, canAsk: false }
  )

/**
 * The text of a denied call's tool result.
 *
 * @since 0.1.0
 */
export const denialText = (tool: string, verdict: { readonly guard: string; readonly reason: string }): string =>
  `session-journal denied ${tool} [${verdict.guard}]: ${verdict.reason}`

/**
 * The agent of a connection's tool entries: the client's `clientInfo.name`
 * (control characters replaced, at most 128), else `mcp-client`.
 *
 * @since 0.1.0
 */
export const agentOf = (clientInfo: unknown): string => {
  if (typeof clientInfo === "object" && clientInfo !== null && "name" in clientInfo) {
    const name = (clientInfo as { readonly name: unknown }).name
    if (typeof name === "string") {
      const trimmed = name.trim().replace(/\p{Cc}/gu, "_").slice(0, 128)
      if (trimmed.length > 0) return trimmed
    }
  }
  return "mcp-client"
}

/**
 * How a call ended, as its outcome records it: the size and SHA-256 of the
 * server's response message (0 and null when there was none), whether it is an
 * error, and the error's message.
 *
 * @since 0.1.0
 */
export interface Outcome {
  readonly bytes: number
  readonly sha256: string | null
  readonly isError: boolean
  readonly error: string | null
}

/**
 * The `tool.outcome` entry of a call (`Entry.OUTCOME_KIND`): its `bytes_read`
 * is the size of the response, which the counters guards read add up.
 *
 * @since 0.1.0
 */
export const outcomeEntry = (
  call: { readonly id: JsonRpc.Id; readonly tool: string; readonly sequence: number },
  outcome: Outcome,
  durationMs: number
): { readonly kind: string; readonly payload: Schema.Json } => ({
  kind: Entry.OUTCOME_KIND,
  payload: {
    jsonrpc_id: call.id,
    tool_name: call.tool,
    tool_sequence: call.sequence,
    bytes_read: outcome.bytes,
    bytes_written: 0,
    response_sha256: outcome.sha256,
    is_error: outcome.isError,
    error: outcome.error,
    duration_ms: Math.max(0, durationMs)
  }
})

/**
 * Records how an allowed call ended (`outcomeEntry`), the one place the gateway
 * does. Under a compiled policy (the one that decided the call) the outcome's bytes
 * also reach the policy's scoped byte limits (`{"maxBytesRead": N, "of": …}`, with
 * `per` too) in the same append, from the session's state under its lock
 * (`Policy.observePlan`), as Claude Code's PostToolUse does: the next call a limit
 * covers is decided on what was read. Without one (a plain guard, or none) the
 * outcome is appended alone; the session's own counters count its bytes either way.
 *
 * @since 0.1.0
 */
export const recordOutcome = (
  journal: SessionJournal.SessionJournal["Service"],
  session: string,
  call: {
    readonly id: JsonRpc.Id
    readonly tool: string
    readonly sequence: number
    /** The call's arguments, as the policy judged them. */
    readonly input: { readonly [key: string]: unknown }
    readonly compiled: Policy.Compiled | null
  },
  outcome: Outcome,
  durationMs: number
): Effect.Effect<void, SessionJournal.WriteError> => {
  const entry = outcomeEntry(call, outcome, durationMs)
  return call.compiled === null
    ? Effect.asVoid(journal.append(session, entry.kind, entry.payload))
    : Effect.asVoid(journal.writeFrom(
      session,
      Policy.observePlan(
        call.compiled,
        entry,
        { tool_name: call.tool, tool_input: call.input },
        { read: outcome.bytes, written: 0 }
      )
    ))
}

/**
 * The payload of a connection's `INITIALIZE_KIND` entry, also its metadata's `data`.
 *
 * @since 0.1.0
 */
export const initializePayload = (
  server: string,
  serverLine: string,
  init: { readonly clientInfo: unknown; readonly protocolVersion: unknown }
): { readonly [key: string]: Schema.Json } => ({
  mcp_server: server,
  server: serverLine,
  client_info: init.clientInfo as Schema.Json,
  protocol_version: init.protocolVersion as Schema.Json
})
