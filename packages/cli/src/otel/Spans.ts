/**
 * A session as trace spans, in the OpenTelemetry GenAI semantic conventions
 * (`SEMCONV_VERSION`): a pure fold that takes a session's entries one at a time,
 * in chain order, and says which span to start, annotate or end, and when (`Op`).
 * No I/O and no Effect inside; `OtlpExport` turns the operations into spans of
 * Effect's OTLP tracer.
 *
 * - The session is an `invoke_agent` span (`gen_ai.operation.name`,
 *   `gen_ai.agent.name`, `gen_ai.conversation.id`: the agent's own session id
 *   when the metadata names it, such as Claude Code's `claude_code_session`,
 *   else the journal session id) from its first entry's time to its last.
 * - Each tool entry is an `execute_tool <tool>` span (`gen_ai.tool.name`, and
 *   `gen_ai.tool.call.id` once its decision entry names it; an MCP call through
 *   the gateway `mcp.method.name` and `jsonrpc.request.id`) from the tool entry's
 *   time to its outcome's (the outcome paired by `Denials.callKey`, as reports
 *   pair it): the outcome entry's time, or, when the outcome records
 *   `duration_ms` (the agent's or the gateway's own measure, finer than the
 *   journal's seconds), the tool entry's time plus that. A call ends as its
 *   outcome comes, so a door sends it then. A denied call ends where it was
 *   denied, with an error status; a call with no outcome recorded ends where it
 *   started.
 * - Each guard verdict is a `gen_ai.evaluation.result` event on its call's span
 *   (`gen_ai.evaluation.name` the guard, `gen_ai.evaluation.score.label`
 *   `allow` or `deny`, `gen_ai.evaluation.explanation` the reason): the
 *   conventions' released form of a verdict on a GenAI operation (a guardrail
 *   span of their own is proposed, not released).
 * - A sub-agent is an `invoke_agent` span of its own (`gen_ai.agent.id`,
 *   `gen_ai.agent.name` its type) from its `SubagentStart` (or first call) to its
 *   `SubagentStop` (or last event), nested under the `Agent` / `Task` call that
 *   started it (the oldest such call still open and not hosting one), else under
 *   the session; its calls nest under it.
 * - Every span carries the journal session id and the sequence and hash of the
 *   entry it stands for (`session_journal.*`); a call's span also its decision's
 *   and its outcome's.
 *
 * - Ids are the session's, not chance's (`traceIdOf`, `spanIdOf`): the trace id
 *   is derived from the journal session id and each span id from the session id
 *   and the span's key, so a session sent twice (live by a door, then by
 *   `otel export`) arrives as the same spans, not as two copies.
 *
 * Memory is bounded whatever the session's length: at most `MAX_OPEN_CALLS` calls
 * and `MAX_OPEN_AGENTS` sub-agents are open at once (the oldest is ended, marked,
 * when a new one would pass the bound). Message contents, tool inputs and outputs
 * are never put on a span: the conventions make content opt-in.
 *
 * @since 0.1.0
 */
import { Entry, Sha256 } from "@session-journal/core"
import type { SessionMeta } from "@session-journal/core"
import * as Denials from "../viewer/Denials.ts"
import * as Stories from "../viewer/Stories.ts"

/**
 * The version of the OpenTelemetry semantic conventions whose GenAI attribute
 * names the spans use (as `@opentelemetry/semantic-conventions` of that version
 * defines them; the GenAI conventions are of status Development there).
 *
 * @since 0.1.0
 */
export const SEMCONV_VERSION = "1.45.0"

/**
 * A span attribute's value.
 *
 * @since 0.1.0
 */
export type Value = string | number | boolean

/**
 * Attributes of a span or event.
 *
 * @since 0.1.0
 */
export type Attributes = { readonly [key: string]: Value }

/**
 * What to do with the spans, in order. `key` names a span among the operations
 * of one fold; times are nanoseconds since the epoch. `parent` is null for the
 * session's span.
 *
 * @since 0.1.0
 */
export type Op =
  | {
    readonly _tag: "Start"
    readonly key: string
    readonly parent: string | null
    readonly name: string
    readonly time: bigint
    readonly attributes: Attributes
  }
  | { readonly _tag: "Annotate"; readonly key: string; readonly attributes: Attributes }
  | {
    readonly _tag: "Event"
    readonly key: string
    readonly name: string
    readonly time: bigint
    readonly attributes: Attributes
  }
  | { readonly _tag: "End"; readonly key: string; readonly time: bigint; readonly error: string | null }

/**
 * Calls open at once (started, not ended); past it the oldest is ended.
 *
 * @since 0.1.0
 */
export const MAX_OPEN_CALLS = 4096

/**
 * Characters a span's string attribute, event attribute or status message keeps
 * at most (longer ones are cut there, as OpenTelemetry's attribute value length
 * limit cuts them): what an open span holds does not grow with a payload's size.
 *
 * @since 0.1.0
 */
export const MAX_VALUE_CHARS = 1024

/**
 * Sub-agents open at once; past it the oldest is ended.
 *
 * @since 0.1.0
 */
export const MAX_OPEN_AGENTS = 256

/**
 * The session's span key.
 *
 * @since 0.1.0
 */
export const SESSION_KEY = "session"

/**
 * The attribute names used, as the conventions spell them.
 *
 * @since 0.1.0
 */
export const Attr = {
  operation: "gen_ai.operation.name",
  agentName: "gen_ai.agent.name",
  agentId: "gen_ai.agent.id",
  conversation: "gen_ai.conversation.id",
  toolName: "gen_ai.tool.name",
  toolCallId: "gen_ai.tool.call.id",
  toolType: "gen_ai.tool.type",
  evaluationName: "gen_ai.evaluation.name",
  evaluationLabel: "gen_ai.evaluation.score.label",
  evaluationExplanation: "gen_ai.evaluation.explanation",
  errorType: "error.type",
  mcpMethod: "mcp.method.name",
  jsonRpcId: "jsonrpc.request.id"
} as const

/**
 * The event a guard verdict is.
 *
 * @since 0.1.0
 */
export const EVALUATION_EVENT = "gen_ai.evaluation.result"

// An MCP call as the gateway records its decision: the request's JSON-RPC id.
const mcpRequest = (payload: Record<string, unknown>): Attributes => {
  const id = payload["jsonrpc_id"]
  return typeof id === "string" || typeof id === "number"
    ? { [Attr.mcpMethod]: "tools/call", [Attr.jsonRpcId]: String(id) }
    : {}
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const str = (v: unknown): string | null => (typeof v === "string" && v.length > 0 ? v : null)

const SUBAGENT_START = "claude-code.SubagentStart"
const SUBAGENT_STOP = "claude-code.SubagentStop"
const AGENT_TOOLS = new Set(["Agent", "Task"])
const MAIN = "main"

const nanos = (secs: number): bigint => BigInt(secs) * 1_000_000_000n

/**
 * The conversation id and agent name of a session, from its metadata: Claude
 * Code's own session id when the session is one of a Claude Code session's
 * records (hooked, custody or store: `Stories.memberOf`), and `claude-code`
 * then or for a session labelled so; otherwise the journal session id and the
 * agent of its first call.
 *
 * @since 0.1.0
 */
export const identityOf = (
  id: string,
  meta: SessionMeta.SessionMeta | null
): { readonly conversation: string; readonly agent: string | null } => {
  const member = Stories.memberOf(id, meta)
  const conversation = member?.agentSession ?? id
  const agent = member !== null || meta?.labels?.includes("claude-code") === true ? "claude-code" : null
  return { conversation, agent }
}

interface Call {
  readonly key: string
  readonly start: bigint
  readonly toolName: string
  readonly sequence: number
  callId: string | null
  /** What pairs its outcome with it (`Denials.callKey`), once its decision named it. */
  pair: string | null
  hosts: boolean
}

interface Agent {
  readonly key: string
  last: bigint
}

/**
 * The fold: `add` each entry in chain order, each call returning the operations
 * it causes; `finish` once, returning the operations that end what is still open.
 *
 * @since 0.1.0
 */
export interface Fold {
  readonly add: (entry: Entry.Entry) => ReadonlyArray<Op>
  readonly finish: () => ReadonlyArray<Op>
}

/**
 * A new fold for session `id` with its metadata.
 *
 * @since 0.1.0
 */
export const fold = (id: string, meta: SessionMeta.SessionMeta | null): Fold => {
  const identity = identityOf(id, meta)
  const calls = new Map<number, Call>() // by tool entry sequence, oldest first
  const byPair = new Map<string, Call>()
  const agents = new Map<string, Agent>() // sub-agents by agent_id, oldest first
  let started = false
  let last = 0n
  // A sub-agent's id may come back after it stopped: each of its spans gets a key of its own.
  let agentSpans = 0
  // A tool entry whose decision entry may follow (the hooks write both in one append).
  let pending: Call | null = null
  const common = (entry: Entry.Entry): Attributes => ({
    "session_journal.session.id": id,
    "session_journal.entry.sequence": entry.sequence,
    "session_journal.entry.hash": entry.entry_hash
  })

  const endCall = (out: Array<Op>, call: Call, time: bigint, error: string | null) => {
    calls.delete(call.sequence)
    if (call.pair !== null && byPair.get(call.pair) === call) byPair.delete(call.pair)
    if (pending === call) pending = null
    out.push({ _tag: "End", key: call.key, time: time < call.start ? call.start : time, error })
  }

  const agentSpan = (out: Array<Op>, entry: Entry.Entry, agentId: string, type: string | null, time: bigint) => {
    if (agentId === MAIN) return SESSION_KEY
    const known = agents.get(agentId)
    if (known !== undefined) {
      if (time > known.last) known.last = time
      return known.key
    }
    if (agents.size >= MAX_OPEN_AGENTS) {
      const [oldId, oldest] = agents.entries().next().value!
      agents.delete(oldId)
      out.push({ _tag: "End", key: oldest.key, time: oldest.last, error: null })
    }
    let host: Call | undefined
    for (const c of calls.values()) {
      if (AGENT_TOOLS.has(c.toolName) && !c.hosts) {
        host = c
        break
      }
    }
    if (host !== undefined) host.hosts = true
    const key = `agent:${agentSpans++}:${agentId}`
    agents.set(agentId, { key, last: time })
    out.push({
      _tag: "Start",
      key,
      parent: host?.key ?? SESSION_KEY,
      name: `invoke_agent ${type ?? agentId}`,
      time,
      attributes: {
        [Attr.operation]: "invoke_agent",
        [Attr.agentId]: agentId,
        ...(type === null ? {} : { [Attr.agentName]: type }),
        [Attr.conversation]: identity.conversation,
        ...common(entry)
      }
    })
    return key
  }

  const add = (entry: Entry.Entry): ReadonlyArray<Op> => {
    const out: Array<Op> = []
    const time = nanos(entry.timestamp_secs)
    if (time > last) last = time
    if (!started) {
      started = true
      const agent = identity.agent ?? (Entry.isTool(entry) ? entry.agent_id : null) ?? "agent"
      out.push({
        _tag: "Start",
        key: SESSION_KEY,
        parent: null,
        name: `invoke_agent ${agent}`,
        time,
        attributes: {
          [Attr.operation]: "invoke_agent",
          [Attr.agentName]: agent,
          [Attr.conversation]: identity.conversation,
          ...common(entry)
        }
      })
    }
    // A tool entry with no decision entry after it (a writer other than the hooks)
    // is a call whose outcome is not known: it ends where it started.
    const decision = Denials.decisionOf(entry)
    if (pending !== null && (decision === null || (decision.toolSequence ?? entry.sequence - 1) !== pending.sequence)) {
      endCall(out, pending, pending.start, null)
    }
    if (Entry.isTool(entry)) {
      if (calls.size >= MAX_OPEN_CALLS) {
        const oldest = calls.values().next().value!
        out.push({ _tag: "Annotate", key: oldest.key, attributes: { "session_journal.outcome": "not read" } })
        endCall(out, oldest, oldest.start, null)
      }
      const parent = agentSpan(out, entry, entry.agent_id, null, time)
      const call: Call = {
        key: `call:${entry.sequence}`,
        start: time,
        toolName: entry.tool_name,
        sequence: entry.sequence,
        callId: null,
        pair: null,
        hosts: false
      }
      calls.set(entry.sequence, call)
      pending = call
      out.push({
        _tag: "Start",
        key: call.key,
        parent,
        name: `execute_tool ${entry.tool_name}`,
        time,
        attributes: {
          [Attr.operation]: "execute_tool",
          [Attr.toolName]: entry.tool_name,
          [Attr.toolType]: "function",
          "session_journal.server.id": entry.server_id,
          "session_journal.agent.id": entry.agent_id,
          "session_journal.delegation_depth": entry.delegation_depth,
          "session_journal.bytes_written": entry.bytes_written,
          "session_journal.allowed": entry.allowed,
          ...common(entry)
        }
      })
      return out
    }
    const payload = isRecord(entry.payload) ? entry.payload : {}
    if (decision !== null) {
      const call = calls.get(decision.toolSequence ?? entry.sequence - 1)
      if (call === undefined) return out
      pending = null
      const tool_use_id = str(payload["tool_use_id"])
      // An id longer than any agent's names no call (`Denials.callKey` takes none either).
      const callId = tool_use_id !== null && tool_use_id.length <= Denials.MAX_CALL_ID_CHARS ? tool_use_id : null
      if (callId !== null && call.callId === null) call.callId = callId
      const pair = Denials.callKey(payload)
      if (pair !== null && call.pair === null) {
        call.pair = pair
        byPair.set(pair, call)
      }
      const agentType = str(payload["agent_type"])
      const agentId = str(payload["agent_id"])
      if (agentType !== null && agentId !== null && agentId !== MAIN) {
        const agent = agents.get(agentId)
        if (agent !== undefined) {
          out.push({ _tag: "Annotate", key: agent.key, attributes: { [Attr.agentName]: agentType } })
        }
      }
      const guard = decision.guard ?? str(payload["policy"]) ?? "policy"
      out.push({
        _tag: "Annotate",
        key: call.key,
        attributes: {
          ...(callId === null ? {} : { [Attr.toolCallId]: callId }),
          ...mcpRequest(payload),
          "session_journal.verdict": decision.verdict,
          "session_journal.decision.sequence": entry.sequence,
          "session_journal.decision.hash": entry.entry_hash
        }
      })
      out.push({
        _tag: "Event",
        key: call.key,
        name: EVALUATION_EVENT,
        time,
        attributes: {
          [Attr.evaluationName]: guard,
          [Attr.evaluationLabel]: decision.verdict,
          ...(decision.reason === null ? {} : { [Attr.evaluationExplanation]: decision.reason }),
          ...common(entry)
        }
      })
      if (decision.verdict === "deny") {
        out.push({ _tag: "Annotate", key: call.key, attributes: { [Attr.errorType]: "denied" } })
        endCall(out, call, time, `denied by ${guard}${decision.reason === null ? "" : `: ${decision.reason}`}`)
      }
      return out
    }
    if (entry.kind === Entry.OUTCOME_KIND) {
      const pair = Denials.callKey(payload)
      const call = pair === null ? undefined : byPair.get(pair)
      if (call === undefined) return out
      const ms = payload["duration_ms"]
      const end = typeof ms === "number" && Number.isSafeInteger(ms) && ms >= 0
        ? call.start + BigInt(ms) * 1_000_000n
        : time
      const error = str(payload["error"])
      const read = payload["bytes_read"]
      out.push({
        _tag: "Annotate",
        key: call.key,
        attributes: {
          "session_journal.outcome.sequence": entry.sequence,
          "session_journal.outcome.hash": entry.entry_hash,
          ...(typeof read === "number" ? { "session_journal.bytes_read": read } : {}),
          ...(error === null
            ? {}
            : { [Attr.errorType]: payload["is_interrupt"] === true ? "interrupted" : "tool_error" })
        }
      })
      endCall(out, call, end, error)
      return out
    }
    if (entry.kind === SUBAGENT_START || entry.kind === SUBAGENT_STOP) {
      const agentId = str(payload["agent_id"])
      if (agentId === null || agentId === MAIN) return out
      const key = agentSpan(out, entry, agentId, str(payload["agent_type"]), time)
      if (entry.kind === SUBAGENT_STOP) {
        agents.delete(agentId)
        out.push({ _tag: "End", key, time, error: null })
      }
      return out
    }
    const agentId = str(payload["agent_id"])
    const agent = agentId === null ? undefined : agents.get(agentId)
    if (agent !== undefined && time > agent.last) agent.last = time
    return out
  }

  const finish = (): ReadonlyArray<Op> => {
    const out: Array<Op> = []
    if (!started) return out
    // Deleting the entry being visited is safe in a Map's iteration.
    for (const call of calls.values()) {
      if (call !== pending) {
        out.push({ _tag: "Annotate", key: call.key, attributes: { "session_journal.outcome": "none recorded" } })
      }
      endCall(out, call, call.start, null)
    }
    for (const agent of agents.values()) out.push({ _tag: "End", key: agent.key, time: agent.last, error: null })
    agents.clear()
    out.push({ _tag: "End", key: SESSION_KEY, time: last, error: null })
    return out
  }

  return { add, finish }
}

const utf8 = new TextEncoder()

/**
 * The trace id of session `id`: the first 16 bytes of SHA-256 of
 * `session-journal trace\0<id>`, as 32 lowercase hex digits.
 *
 * @since 0.1.0
 */
export const traceIdOf = (id: string): string => Sha256.hex(utf8.encode(`session-journal trace\0${id}`)).slice(0, 32)

/**
 * The span id of the span `key` (an `Op`'s key) of session `id`: the first 8
 * bytes of SHA-256 of `session-journal span\0<id>\0<key>`, as 16 lowercase hex
 * digits. A fold's keys depend only on the entries before them, so every fold of
 * the same history gives every span the same id.
 *
 * @since 0.1.0
 */
export const spanIdOf = (id: string, key: string): string =>
  Sha256.hex(utf8.encode(`session-journal span\0${id}\0${key}`)).slice(0, 16)

/**
 * A span the operations ended: everything it carries, its parent by key (null
 * for the session's span), and its error when it ended in one.
 *
 * @since 0.1.0
 */
export interface Finished {
  readonly key: string
  readonly parent: string | null
  readonly name: string
  readonly start: bigint
  readonly end: bigint
  readonly attributes: Attributes
  readonly events: ReadonlyArray<{ readonly name: string; readonly time: bigint; readonly attributes: Attributes }>
  readonly error: string | null
}

/**
 * Spans put together from the operations of one fold: `apply` takes them in
 * order and returns the spans they ended, complete; `open` is how many are
 * started and not ended (bounded by the fold's own bounds).
 *
 * @since 0.1.0
 */
export interface Assembler {
  readonly apply: (ops: ReadonlyArray<Op>) => ReadonlyArray<Finished>
  readonly open: () => number
}

interface OpenSpan {
  readonly key: string
  readonly parent: string | null
  readonly name: string
  readonly start: bigint
  readonly attributes: { [key: string]: Value }
  readonly events: Array<{ readonly name: string; readonly time: bigint; readonly attributes: Attributes }>
}

/**
 * A new assembler. A span's parent is the key its `Start` names when that span
 * is open, else the session's span.
 *
 * @since 0.1.0
 */
export const assembler = (): Assembler => {
  const open = new Map<string, OpenSpan>()
  const cut = (v: string): string => (v.length > MAX_VALUE_CHARS ? v.slice(0, MAX_VALUE_CHARS) : v)
  const bounded = (attributes: Attributes): { [key: string]: Value } => {
    const out: { [key: string]: Value } = {}
    for (const k in attributes) {
      const v = attributes[k]!
      out[k] = typeof v === "string" ? cut(v) : v
    }
    return out
  }
  const apply = (ops: ReadonlyArray<Op>): ReadonlyArray<Finished> => {
    const out: Array<Finished> = []
    for (const op of ops) {
      switch (op._tag) {
        case "Start": {
          const parent = op.parent === null ? null : open.has(op.parent) ? op.parent : SESSION_KEY
          open.set(op.key, {
            key: op.key,
            parent,
            name: op.name,
            start: op.time,
            attributes: bounded(op.attributes),
            events: []
          })
          break
        }
        case "Annotate": {
          const span = open.get(op.key)
          if (span !== undefined) Object.assign(span.attributes, bounded(op.attributes))
          break
        }
        case "Event": {
          open.get(op.key)?.events.push({ name: op.name, time: op.time, attributes: bounded(op.attributes) })
          break
        }
        case "End": {
          const span = open.get(op.key)
          if (span === undefined) break
          open.delete(op.key)
          out.push({ ...span, end: op.time, error: op.error === null ? null : cut(op.error) })
        }
      }
    }
    return out
  }
  return { apply, open: () => open.size }
}
