/**
 * The message model of Claude Code's stream-json protocol (docs/claude-code/PROTOCOL.md (d)): one
 * Schema per message type the CLI 2.1.328 writes or reads, each keeping every key
 * it does not name (the CLI adds fields from version to version), and `Unknown`
 * for anything else. Decoding a line is total: a JSON object of a type this model
 * does not know, or of a known type in a shape it does not expect, is kept as
 * `Unknown { type, json }`; a line that is not JSON at all is `Garbled { line }`.
 * Nothing is dropped and nothing fails. Absent keys and `null` stay distinct
 * (`parent_tool_use_id: null` is the main agent; a missing `tool_use_result` is
 * not a `null` one).
 *
 * A decoded message is its wire object plus `_tag`; `encode` removes `_tag` again,
 * so `decode(encode(m))` is `m` for every message (property-tested). A wire object
 * that itself has a `_tag` key decodes as `Unknown` (the CLI never writes one), so
 * that law cannot be broken by the wire.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"

// ---------------------------------------------------------------------------
// Building blocks

/** JSON values of the keys a schema does not name, kept as they came. */
const Rest = [Schema.Record(Schema.String, Schema.Json)] as const

const open = <const F extends Schema.Struct.Fields>(fields: F) => Schema.StructWithRest(Schema.Struct(fields), Rest)

/** A finite number (JSON has no NaN or infinities). */
const Num = Schema.Finite

// ---------------------------------------------------------------------------
// Content blocks

/**
 * A `text` content block.
 *
 * @since 0.1.0
 */
export const TextBlock = open({ type: Schema.Literal("text"), text: Schema.String })

/**
 * A `tool_use` content block: a tool call of the model.
 *
 * @since 0.1.0
 */
export const ToolUseBlock = open({
  type: Schema.Literal("tool_use"),
  id: Schema.String,
  name: Schema.String,
  input: Schema.Record(Schema.String, Schema.Json)
})

/**
 * A `tool_result` content block: the answer to a tool call.
 *
 * @since 0.1.0
 */
export const ToolResultBlock = open({
  type: Schema.Literal("tool_result"),
  tool_use_id: Schema.String,
  content: Schema.optionalKey(Schema.Union([Schema.String, Schema.Array(Schema.Json)])),
  is_error: Schema.optionalKey(Schema.Boolean)
})

/**
 * Any other content block (`thinking`, `image`, kinds of later versions).
 *
 * @since 0.1.0
 */
export const OtherBlock = open({ type: Schema.String })

/**
 * A content block.
 *
 * @since 0.1.0
 */
export const ContentBlock = Schema.Union([TextBlock, ToolUseBlock, ToolResultBlock, OtherBlock])

/**
 * A content block.
 *
 * @since 0.1.0
 */
export type ContentBlock = typeof ContentBlock.Type

// ---------------------------------------------------------------------------
// Wire objects, one per message type

const common = {
  session_id: Schema.optionalKey(Schema.String),
  uuid: Schema.optionalKey(Schema.String)
}

/**
 * `system/init`: emitted at the start of every turn; names the session, model, tools.
 *
 * @since 0.1.0
 */
export const SystemInitWire = open({
  type: Schema.Literal("system"),
  subtype: Schema.Literal("init"),
  session_id: Schema.String,
  model: Schema.String,
  cwd: Schema.String,
  tools: Schema.Array(Schema.String),
  permissionMode: Schema.optionalKey(Schema.String),
  claude_code_version: Schema.optionalKey(Schema.String),
  apiKeySource: Schema.optionalKey(Schema.String),
  uuid: Schema.optionalKey(Schema.String)
})

/**
 * Every other `system` message (`hook_started`, `notification`, `task_started`, `api_retry`, …).
 *
 * @since 0.1.0
 */
export const SystemWire = open({ type: Schema.Literal("system"), subtype: Schema.String, ...common })

/**
 * `assistant`: one content block of the model's answer (the CLI writes one message
 * per block, repeating `message.id`).
 *
 * @since 0.1.0
 */
export const AssistantWire = open({
  type: Schema.Literal("assistant"),
  message: open({
    role: Schema.Literal("assistant"),
    content: Schema.Array(ContentBlock),
    id: Schema.optionalKey(Schema.String),
    model: Schema.optionalKey(Schema.String)
  }),
  parent_tool_use_id: Schema.optionalKey(Schema.NullOr(Schema.String)),
  ...common
})

/**
 * `user`: a prompt (ours, on stdin) or a tool result (the CLI's, with `tool_use_result`).
 *
 * @since 0.1.0
 */
export const UserWire = open({
  type: Schema.Literal("user"),
  message: open({
    role: Schema.Literal("user"),
    content: Schema.Union([Schema.String, Schema.Array(ContentBlock)])
  }),
  parent_tool_use_id: Schema.optionalKey(Schema.NullOr(Schema.String)),
  tool_use_result: Schema.optionalKey(Schema.Json),
  ...common
})

/**
 * `result`: the end of a turn, with the whole envelope.
 *
 * @since 0.1.0
 */
export const ResultWire = open({
  type: Schema.Literal("result"),
  subtype: Schema.String,
  is_error: Schema.Boolean,
  result: Schema.optionalKey(Schema.String),
  num_turns: Schema.optionalKey(Num),
  stop_reason: Schema.optionalKey(Schema.NullOr(Schema.String)),
  terminal_reason: Schema.optionalKey(Schema.String),
  duration_ms: Schema.optionalKey(Num),
  duration_api_ms: Schema.optionalKey(Num),
  total_cost_usd: Schema.optionalKey(Num),
  usage: Schema.optionalKey(Schema.Record(Schema.String, Schema.Json)),
  modelUsage: Schema.optionalKey(Schema.Record(Schema.String, Schema.Json)),
  permission_denials: Schema.optionalKey(Schema.Array(Schema.Json)),
  errors: Schema.optionalKey(Schema.Array(Schema.Json)),
  ...common
})

/**
 * `stream_event` (with `--include-partial-messages`): one SSE event of the API.
 *
 * @since 0.1.0
 */
export const StreamEventWire = open({
  type: Schema.Literal("stream_event"),
  event: open({ type: Schema.String }),
  parent_tool_use_id: Schema.optionalKey(Schema.NullOr(Schema.String)),
  ...common
})

/**
 * `control_request`: from the CLI (`can_use_tool`, `hook_callback`) or to it
 * (`initialize`, `interrupt`), correlated by `request_id`.
 *
 * @since 0.1.0
 */
export const ControlRequestWire = open({
  type: Schema.Literal("control_request"),
  request_id: Schema.String,
  request: open({ subtype: Schema.String })
})

/**
 * `control_response`: the answer to a `control_request`, by its `request_id`.
 *
 * @since 0.1.0
 */
export const ControlResponseWire = open({
  type: Schema.Literal("control_response"),
  response: open({
    subtype: Schema.String,
    request_id: Schema.String,
    response: Schema.optionalKey(Schema.Json),
    error: Schema.optionalKey(Schema.String)
  })
})

/**
 * `control_cancel_request`: the CLI no longer wants the answer to `request_id`.
 *
 * @since 0.1.0
 */
export const ControlCancelRequestWire = open({
  type: Schema.Literal("control_cancel_request"),
  request_id: Schema.String
})

/**
 * `keep_alive`.
 *
 * @since 0.1.0
 */
export const KeepAliveWire = open({ type: Schema.Literal("keep_alive") })

// ---------------------------------------------------------------------------
// Messages

type Tagged<T extends string, S extends Schema.Top> = { readonly _tag: T } & S["Type"]

/** @since 0.1.0 */
export type SystemInit = Tagged<"SystemInit", typeof SystemInitWire>
/** @since 0.1.0 */
export type System = Tagged<"System", typeof SystemWire>
/** @since 0.1.0 */
export type Assistant = Tagged<"Assistant", typeof AssistantWire>
/** @since 0.1.0 */
export type User = Tagged<"User", typeof UserWire>
/** @since 0.1.0 */
export type ResultMessage = Tagged<"Result", typeof ResultWire>
/** @since 0.1.0 */
export type StreamEvent = Tagged<"StreamEvent", typeof StreamEventWire>
/** @since 0.1.0 */
export type ControlRequest = Tagged<"ControlRequest", typeof ControlRequestWire>
/** @since 0.1.0 */
export type ControlResponse = Tagged<"ControlResponse", typeof ControlResponseWire>
/** @since 0.1.0 */
export type ControlCancelRequest = Tagged<"ControlCancelRequest", typeof ControlCancelRequestWire>
/** @since 0.1.0 */
export type KeepAlive = Tagged<"KeepAlive", typeof KeepAliveWire>

/**
 * A JSON value this model does not know: its `type` (when it is an object with a
 * string `type`, else null) and the whole value, as it came.
 *
 * @since 0.1.0
 */
export interface Unknown {
  readonly _tag: "Unknown"
  readonly type: string | null
  readonly json: Schema.Json
}

/**
 * A line that is not JSON, kept as its text.
 *
 * @since 0.1.0
 */
export interface Garbled {
  readonly _tag: "Garbled"
  readonly line: string
}

/**
 * A message of the stream, in either direction.
 *
 * @since 0.1.0
 */
export type Message =
  | SystemInit
  | System
  | Assistant
  | User
  | ResultMessage
  | StreamEvent
  | ControlRequest
  | ControlResponse
  | ControlCancelRequest
  | KeepAlive
  | Unknown
  | Garbled

/**
 * The tags of the known message types and the wire schema of each, in the order
 * `decode` tries them for a `type` (`system/init` before the other `system`s).
 *
 * @since 0.1.0
 */
export const wires = {
  system: [["SystemInit", SystemInitWire], ["System", SystemWire]],
  assistant: [["Assistant", AssistantWire]],
  user: [["User", UserWire]],
  result: [["Result", ResultWire]],
  stream_event: [["StreamEvent", StreamEventWire]],
  control_request: [["ControlRequest", ControlRequestWire]],
  control_response: [["ControlResponse", ControlResponseWire]],
  control_cancel_request: [["ControlCancelRequest", ControlCancelRequestWire]],
  keep_alive: [["KeepAlive", KeepAliveWire]]
} as const satisfies Record<string, ReadonlyArray<readonly [string, Schema.Codec<unknown, unknown>]>>

const decoders = new Map<string, ReadonlyArray<readonly [string, (u: unknown) => Result.Result<unknown, unknown>]>>(
  Object.entries(wires).map(([type, list]) => [
    type,
    list.map(([tag, schema]) => [tag, Schema.decodeUnknownResult(schema as Schema.Codec<unknown, unknown>)] as const)
  ])
)

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Decodes a parsed JSON value. Total: what fits no schema is `Unknown`.
 *
 * @since 0.1.0
 */
export const decode = (json: Schema.Json): Message => {
  if (!isObject(json)) return { _tag: "Unknown", type: null, json }
  const type = typeof json["type"] === "string" ? json["type"] : null
  if (type === null || Object.hasOwn(json, "_tag")) return { _tag: "Unknown", type, json }
  const candidates = decoders.get(type)
  if (candidates !== undefined) {
    for (const [tag, decodeWire] of candidates) {
      const r = decodeWire(json)
      if (Result.isSuccess(r)) return { _tag: tag, ...(r.success as object) } as Message
    }
  }
  return { _tag: "Unknown", type, json }
}

// ---------------------------------------------------------------------------
// The direct path of `decodeLine`
//
// A check per wire schema, written out: for the shapes the CLI writes it gives
// the very message the schema's decoding gives (the same keys in the same order:
// the named ones in the schema's order, then the others as they came), without
// the schema's walk over every value. Anything it is not sure of, it declines,
// and the line takes the schema's path: what a line decodes to never depends on
// which path it took (tested against the schemas).

/** A check's answer when it declines. */
const NO: unique symbol = Symbol("NO")

type Check = (u: unknown) => unknown

/** One key of a struct: its name, its check, and whether it may be absent. */
type Field = readonly [key: string, check: Check, optional: boolean]

const str: Check = (u) => typeof u === "string" ? u : NO
const bool: Check = (u) => typeof u === "boolean" ? u : NO
const finite: Check = (u) => typeof u === "number" && Number.isFinite(u) ? u : NO
const strOrNull: Check = (u) => u === null || typeof u === "string" ? u : NO
// A JSON value: only called on values of a line whose text cannot hold a number
// that parses to an infinity (`textIsPlain`), so every value is JSON.
const json: Check = (u) => u
const jsonObject: Check = (u) => isObject(u) ? u : NO
const jsonArray: Check = (u) => Array.isArray(u) ? u : NO
const literal = (value: string): Check => (u) => u === value ? u : NO

const req = (key: string, check: Check): Field => [key, check, false]
const opt = (key: string, check: Check): Field => [key, check, true]

/**
 * An open struct: the fields in order (each checked), then every other key as it
 * came; `tag`, when given, is the first key of the result.
 */
const struct = (fields: ReadonlyArray<Field>) => {
  const named = new Set(fields.map(([key]) => key))
  return (u: unknown, tag?: string): Record<string, unknown> | typeof NO => {
    if (!isObject(u)) return NO
    const out: Record<string, unknown> = tag === undefined ? {} : { _tag: tag }
    for (const [key, check, optional] of fields) {
      if (!Object.hasOwn(u, key)) {
        if (optional) continue
        return NO
      }
      const v = check(u[key])
      if (v === NO) return NO
      out[key] = v
    }
    for (const key of Object.keys(u)) {
      if (!named.has(key)) out[key] = u[key]
    }
    return out
  }
}

const array = (check: Check): Check => (u) => {
  if (!Array.isArray(u)) return NO
  const out = new Array<unknown>(u.length)
  for (let i = 0; i < u.length; i++) {
    const v = check(u[i])
    if (v === NO) return NO
    out[i] = v
  }
  return out
}

const textBlock = struct([req("type", str), req("text", str)])
const toolUseBlock = struct([req("type", str), req("id", str), req("name", str), req("input", jsonObject)])
const toolResultBlock = struct([
  req("type", str),
  req("tool_use_id", str),
  opt("content", (u) => typeof u === "string" || Array.isArray(u) ? u : NO),
  opt("is_error", bool)
])
const otherBlock = struct([req("type", str)])

/** A content block, as the first member of `ContentBlock` that takes it; declines the rest. */
const block: Check = (u) => {
  if (!isObject(u)) return NO
  switch (u["type"]) {
    case "text":
      return textBlock(u)
    case "tool_use":
      return toolUseBlock(u)
    case "tool_result":
      return toolResultBlock(u)
    default:
      return typeof u["type"] === "string" ? otherBlock(u) : NO
  }
}
const blocks = array(block)

const session = [opt("session_id", str), opt("uuid", str)] as const
const parent = opt("parent_tool_use_id", strOrNull)

const direct = new Map<string, readonly [tag: string, check: ReturnType<typeof struct>]>([
  ["system", ["System", struct([req("type", literal("system")), req("subtype", str), ...session])]],
  ["assistant", [
    "Assistant",
    struct([
      req("type", literal("assistant")),
      req(
        "message",
        struct([req("role", literal("assistant")), req("content", blocks), opt("id", str), opt("model", str)])
      ),
      parent,
      ...session
    ])
  ]],
  ["user", [
    "User",
    struct([
      req("type", literal("user")),
      req(
        "message",
        struct([req("role", literal("user")), req("content", (u) => typeof u === "string" ? u : blocks(u))])
      ),
      parent,
      opt("tool_use_result", json),
      ...session
    ])
  ]],
  ["result", [
    "Result",
    struct([
      req("type", literal("result")),
      req("subtype", str),
      req("is_error", bool),
      opt("result", str),
      opt("num_turns", finite),
      opt("stop_reason", strOrNull),
      opt("terminal_reason", str),
      opt("duration_ms", finite),
      opt("duration_api_ms", finite),
      opt("total_cost_usd", finite),
      opt("usage", jsonObject),
      opt("modelUsage", jsonObject),
      opt("permission_denials", jsonArray),
      opt("errors", jsonArray),
      ...session
    ])
  ]],
  ["stream_event", [
    "StreamEvent",
    struct([req("type", literal("stream_event")), req("event", struct([req("type", str)])), parent, ...session])
  ]],
  ["control_request", [
    "ControlRequest",
    struct([
      req("type", literal("control_request")),
      req("request_id", str),
      req("request", struct([req("subtype", str)]))
    ])
  ]],
  ["control_response", [
    "ControlResponse",
    struct([
      req("type", literal("control_response")),
      req(
        "response",
        struct([req("subtype", str), req("request_id", str), opt("response", json), opt("error", str)])
      )
    ])
  ]],
  ["control_cancel_request", [
    "ControlCancelRequest",
    struct([req("type", literal("control_cancel_request")), req("request_id", str)])
  ]],
  ["keep_alive", ["KeepAlive", struct([req("type", literal("keep_alive"))])]]
])

/**
 * Whether every value `JSON.parse` makes of the text is JSON as the schemas take
 * it, and a key of the text cannot touch a prototype: no number that may parse
 * to an infinity (an exponent of three digits or more, a run of 309 digits), no
 * `__proto__`. Text that holds one anywhere, strings included, takes the schema's
 * path.
 */
const textIsPlain = (line: string): boolean => !/\d[eE]\+?\d{3}|\d{309}|__proto__/.test(line)

/** The message of a parsed line by the direct path, or `NO`. */
const decodeDirect = (json: Schema.Json): Message | typeof NO => {
  if (!isObject(json) || Object.hasOwn(json, "_tag")) return NO
  const type = json["type"]
  if (typeof type !== "string") return NO
  // `system/init` is rare (one a turn) and tried before the other `system`s: the schema's.
  if (type === "system" && json["subtype"] === "init") return NO
  const found = direct.get(type)
  if (found === undefined) return NO
  return found[1](json, found[0]) as Message | typeof NO
}

/**
 * Decodes one line of text (without its newline). Total: a line that is not JSON
 * is `Garbled`. The same message as `decode` of the parsed line, faster for the
 * shapes the CLI writes.
 *
 * @since 0.1.0
 */
export const decodeLine = (line: string): Message => {
  let json: Schema.Json
  try {
    json = JSON.parse(line) as Schema.Json
  } catch {
    return { _tag: "Garbled", line }
  }
  if (textIsPlain(line)) {
    const message = decodeDirect(json)
    if (message !== NO) return message
  }
  return decode(json)
}

/**
 * The wire value of a message (a `Garbled` line is its text).
 *
 * @since 0.1.0
 */
export const encode = (message: Message): Schema.Json => {
  if (message._tag === "Unknown") return message.json
  if (message._tag === "Garbled") return message.line
  const { _tag: _, ...wire } = message
  return wire as Schema.Json
}

/**
 * The line of a message, as written on the wire (no newline). A `Garbled`
 * message is its line again.
 *
 * @since 0.1.0
 */
export const encodeLine = (message: Message): string =>
  message._tag === "Garbled" ? message.line : JSON.stringify(encode(message))

// ---------------------------------------------------------------------------
// Messages the driver writes

/**
 * A user message line's wire object, with the content blocks of a `UserInput`.
 *
 * @since 0.1.0
 */
export const user = (content: ReadonlyArray<ContentBlock>): User => ({
  _tag: "User",
  type: "user",
  message: { role: "user", content },
  parent_tool_use_id: null,
  session_id: ""
})

/**
 * A control request of ours.
 *
 * @since 0.1.0
 */
export const controlRequest = (
  requestId: string,
  request: { readonly subtype: string; readonly [key: string]: Schema.Json }
): ControlRequest => ({
  _tag: "ControlRequest",
  type: "control_request",
  request_id: requestId,
  request
})

/**
 * A successful answer to a control request of the CLI.
 *
 * @since 0.1.0
 */
export const controlSuccess = (requestId: string, response: Schema.Json): ControlResponse => ({
  _tag: "ControlResponse",
  type: "control_response",
  response: { subtype: "success", request_id: requestId, response }
})

/**
 * A `can_use_tool` request, read from a `ControlRequest`.
 *
 * @since 0.1.0
 */
export interface CanUseTool {
  readonly requestId: string
  readonly toolName: string
  readonly input: { readonly [key: string]: Schema.Json }
  readonly toolUseId: string | undefined
  /** The sub-agent asking, when one is. */
  readonly agentId: string | undefined
}

/**
 * The `can_use_tool` request a control request is, if it is one.
 *
 * @since 0.1.0
 */
export const canUseTool = (message: Message): CanUseTool | undefined => {
  if (message._tag !== "ControlRequest" || message.request.subtype !== "can_use_tool") return undefined
  const r = message.request
  const toolName = r["tool_name"]
  if (typeof toolName !== "string") return undefined
  const input = r["input"]
  const toolUseId = r["tool_use_id"]
  const agentId = r["agent_id"]
  return {
    requestId: message.request_id,
    toolName,
    input: isObject(input) ? (input as { readonly [key: string]: Schema.Json }) : {},
    toolUseId: typeof toolUseId === "string" ? toolUseId : undefined,
    agentId: typeof agentId === "string" ? agentId : undefined
  }
}

/**
 * An error answer to a control request of the CLI (a request this driver does
 * not serve).
 *
 * @since 0.1.0
 */
export const controlFailure = (requestId: string, error: string): ControlResponse => ({
  _tag: "ControlResponse",
  type: "control_response",
  response: { subtype: "error", request_id: requestId, error }
})

/**
 * A `hook_callback` request: one of the hooks registered by `initialize`, with
 * the same input a command hook gets on stdin (docs/claude-code/PROTOCOL.md (d)).
 *
 * @since 0.1.0
 */
export interface HookCallback {
  readonly requestId: string
  readonly callbackId: string
  /** The hook input as it came (a JSON object when the CLI is well-behaved). */
  readonly input: Schema.Json | undefined
}

/**
 * The `hook_callback` request a control request is, if it is one.
 *
 * @since 0.1.0
 */
export const hookCallback = (message: Message): HookCallback | undefined => {
  if (message._tag !== "ControlRequest" || message.request.subtype !== "hook_callback") return undefined
  const callbackId = message.request["callback_id"]
  return {
    requestId: message.request_id,
    callbackId: typeof callbackId === "string" ? callbackId : "",
    input: message.request["input"]
  }
}
