/**
 * JSON-RPC 2.0 as the gateway reads it: one line classified (request,
 * notification, response, batch, or invalid with the error the sender gets), the
 * key a request id is tracked by, and the lines the gateway writes itself
 * (errors, and the tool result of a denied call). Pure: no I/O.
 *
 * @since 0.1.0
 */
import * as Utf8 from "@session-journal/core/Utf8"

/**
 * A request id: a string or a number (JSON-RPC allows null only in an error
 * response to a message whose id could not be read).
 *
 * @since 0.1.0
 */
export type Id = string | number

/**
 * JSON-RPC's error codes the gateway answers with.
 *
 * @since 0.1.0
 */
export const ErrorCode = {
  parseError: -32700,
  invalidRequest: -32600,
  invalidParams: -32602,
  internalError: -32603,
  /** Implementation-defined: the server is gone, or the gateway refuses the request for a bound. */
  serverError: -32000
} as const

/**
 * One line, classified. `Batch` is a JSON array (MCP 2025-06-18 removed
 * batching); `Invalid` carries the error its sender gets, with the id when one
 * could be read.
 *
 * @since 0.1.0
 */
export type Message =
  | { readonly _tag: "Request"; readonly id: Id; readonly method: string; readonly params: unknown }
  | { readonly _tag: "Notification"; readonly method: string; readonly params: unknown }
  | {
    readonly _tag: "Response"
    readonly id: Id | null
    readonly isError: boolean
    readonly error: string | null
  }
  | { readonly _tag: "Batch"; readonly ids: ReadonlyArray<Id> }
  | { readonly _tag: "Invalid"; readonly id: Id | null; readonly code: number; readonly message: string }

const isRecord = (u: unknown): u is { readonly [key: string]: unknown } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * Whether a value is a request id (a string, or a finite number).
 *
 * @since 0.1.0
 */
export const isId = (u: unknown): u is Id => typeof u === "string" || (typeof u === "number" && Number.isFinite(u))

/**
 * The key a request id is tracked by: `1` and `"1"` are different ids.
 *
 * @since 0.1.0
 */
export const key = (id: Id): string => typeof id === "number" ? `n:${id}` : `s:${id}`

const invalid = (id: Id | null, code: number, message: string): Message => ({ _tag: "Invalid", id, code, message })

const classifyValue = (value: unknown): Message => {
  if (Array.isArray(value)) {
    return { _tag: "Batch", ids: value.flatMap((m) => isRecord(m) && isId(m["id"]) ? [m["id"]] : []) }
  }
  if (!isRecord(value)) return invalid(null, ErrorCode.invalidRequest, "a JSON-RPC message is a JSON object")
  const id = isId(value["id"]) ? value["id"] : null
  if (value["jsonrpc"] !== "2.0") return invalid(id, ErrorCode.invalidRequest, "jsonrpc must be \"2.0\"")
  const method = value["method"]
  if (method !== undefined) {
    if (typeof method !== "string") return invalid(id, ErrorCode.invalidRequest, "method must be a string")
    if (!("id" in value)) return { _tag: "Notification", method, params: value["params"] }
    if (id === null) return invalid(null, ErrorCode.invalidRequest, "a request id is a string or a number")
    return { _tag: "Request", id, method, params: value["params"] }
  }
  if ("result" in value || "error" in value) {
    const error = value["error"]
    const result = value["result"]
    return {
      _tag: "Response",
      id,
      isError: error !== undefined || (isRecord(result) && result["isError"] === true),
      error: isRecord(error) && typeof error["message"] === "string"
        ? error["message"]
        : error === undefined
        ? null
        : "error"
    }
  }
  return invalid(id, ErrorCode.invalidRequest, "neither a request, a notification nor a response")
}

/**
 * Classifies one line (without its newline): bytes that are not UTF-8 or not
 * JSON are a parse error, anything else is read as JSON-RPC 2.0.
 *
 * @since 0.1.0
 */
export const classify = (line: Uint8Array): { readonly message: Message; readonly value: unknown } => {
  let text: string
  try {
    text = Utf8.decodeStrict(line, { keepBom: true })
  } catch {
    return { message: invalid(null, ErrorCode.parseError, "the line is not UTF-8"), value: undefined }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { message: invalid(null, ErrorCode.parseError, "the line is not JSON"), value: undefined }
  }
  return { message: classifyValue(value), value }
}

/**
 * The `name` and `arguments` of a `tools/call` request's params, or why they
 * cannot be read.
 *
 * @since 0.1.0
 */
export const toolCall = (
  params: unknown
):
  | { readonly _tag: "Call"; readonly name: string; readonly arguments: { readonly [key: string]: unknown } }
  | { readonly _tag: "Invalid"; readonly message: string } =>
{
  if (!isRecord(params)) return { _tag: "Invalid", message: "tools/call needs params with a name" }
  const name = params["name"]
  if (typeof name !== "string" || name.length === 0) {
    return { _tag: "Invalid", message: "tools/call needs a tool name (params.name)" }
  }
  const args = params["arguments"]
  if (args !== undefined && !isRecord(args)) {
    return { _tag: "Invalid", message: "tools/call arguments must be an object" }
  }
  return { _tag: "Call", name, arguments: args ?? {} }
}

/**
 * The `requestId` of a `notifications/cancelled`, or null.
 *
 * @since 0.1.0
 */
export const cancelledId = (params: unknown): Id | null =>
  isRecord(params) && isId(params["requestId"]) ? params["requestId"] : null

/**
 * The `clientInfo` and `protocolVersion` of an `initialize` request's params.
 *
 * @since 0.1.0
 */
export const initializeOf = (params: unknown): { readonly clientInfo: unknown; readonly protocolVersion: unknown } =>
  isRecord(params)
    ? { clientInfo: params["clientInfo"] ?? null, protocolVersion: params["protocolVersion"] ?? null }
    : { clientInfo: null, protocolVersion: null }

const encoder = new TextEncoder()

/**
 * An error response as one line, newline included.
 *
 * @since 0.1.0
 */
export const errorLine = (id: Id | null, code: number, message: string): Uint8Array =>
  encoder.encode(JSON.stringify({ jsonrpc: "2.0", id, error: { code, message } }) + "\n")

/**
 * The answer to a denied `tools/call`: a tool result with `isError: true` whose
 * text names the tool, the guard and the reason, as one line.
 *
 * @since 0.1.0
 */
export const deniedLine = (id: Id, text: string): Uint8Array =>
  encoder.encode(
    JSON.stringify({ jsonrpc: "2.0", id, result: { content: [{ type: "text", text }], isError: true } }) + "\n"
  )
