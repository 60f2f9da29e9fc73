/**
 * What one transcript line says, as far as the journal cares: the `tool_use`
 * blocks of an assistant line, the `tool_result` blocks of a user line, and the
 * hints that tie a sub-agent to the `Task` call that spawned it. Everything else
 * in a line (its type, thinking, text, snapshots, types this version does not
 * know) is kept verbatim by the line entry and never interpreted here; a line
 * that is not JSON, or JSON of an unexpected shape, says nothing. Pure and
 * total: no input makes it throw.
 *
 * `Pairing` then pairs each `tool_use` with its `tool_result` (by id, across
 * lines and runs) into the parameters of one chio tool entry.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { Entry } from "@session-journal/core"
import { jsonBytes, strictDecoder as strictUtf8 } from "@session-journal/core/Utf8"
import { Base64 } from "effect/encoding"
import * as Result from "effect/Result"

/**
 * One `tool_use` block.
 *
 * @since 0.1.0
 */
export interface ToolUse {
  readonly id: string
  readonly name: string
  /** UTF-8 bytes of the JSON of its `input`. */
  readonly inputBytes: number
  /** The `prompt` of a sub-agent call (`Task` / `Agent`), to recognise its transcript. */
  readonly prompt: string | undefined
  /**
   * The call as a policy judges it, its `input` and the line's `cwd`: only from
   * `parseCalls` (a replay), never in what custody keeps while a call waits for
   * its result.
   */
  readonly call?: { readonly input: unknown; readonly cwd: string | undefined }
}

/**
 * One `tool_result` block.
 *
 * @since 0.1.0
 */
export interface ToolResult {
  readonly toolUseId: string
  /** UTF-8 bytes of its `content`: the string itself, or the JSON of any other value. */
  readonly contentBytes: number
  /**
   * Whether Claude Code refused the call, so that it never ran: its line says
   * `"permissionDecision":{"decision":"reject",…}` or carries a `toolDenialKind`
   * (a hook's deny and Claude Code's own permission rules alike; docs/claude-code/PROTOCOL.md (e)).
   *
   * @since 0.1.0
   */
  readonly denied: boolean
}

/**
 * What a line says.
 *
 * @since 0.1.0
 */
export interface LineInfo {
  /** The record's `type`, or null for a line that is not a JSON object with a string `type`. */
  readonly type: string | null
  readonly toolUses: ReadonlyArray<ToolUse>
  readonly toolResults: ReadonlyArray<ToolResult>
  /** A sub-agent id tied to the `tool_use` that spawned it (from a result's `toolUseResult.agentId` or a progress line). */
  readonly agentLink: { readonly agentId: string; readonly toolUseId: string } | undefined
  /** The text of a user line whose content is a plain string (a sub-agent's first line is its prompt). */
  readonly userText: string | undefined
}

const EMPTY: LineInfo = { type: null, toolUses: [], toolResults: [], agentLink: undefined, userText: undefined }

const encoder = new TextEncoder()

export {
  /**
   * The UTF-8 length of a value's JSON text (of a string itself); 0 for a value
   * without one. What a tool call's `bytes_written` (its input) and `bytes_read`
   * (its result) count, in custody and in hooked sessions alike (core's `Utf8`).
   *
   * @since 0.1.0
   */
  jsonBytes,
  /**
   * UTF-8 length of a string without encoding it (core's `Utf8`).
   *
   * @since 0.1.0
   */
  utf8Length
} from "@session-journal/core/Utf8"

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)

/**
 * The names of the tool Claude Code spawns sub-agents with.
 *
 * @since 0.1.0
 */
export const SPAWN_TOOLS: ReadonlySet<string> = new Set(["Task", "Agent"])

/**
 * Reads one line (its text without the newline).
 *
 * @since 0.1.0
 */
export const parse = (text: string): LineInfo => read(text, false)

/**
 * Reads one line as `parse` does, each `tool_use` also holding its input and the
 * line's `cwd` (`ToolUse.call`): what a replay judges a call by.
 *
 * @since 0.1.0
 */
export const parseCalls = (text: string): LineInfo => read(text, true)

const read = (text: string, calls: boolean): LineInfo => {
  // Cheap refusal of what cannot be a record, before JSON.parse.
  if (text.length === 0 || text.charCodeAt(0) !== 0x7b) return EMPTY
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return EMPTY
  }
  if (!isObject(value)) return EMPTY
  const type = str(value["type"]) ?? null
  const toolUses: Array<ToolUse> = []
  const toolResults: Array<ToolResult> = []
  let agentLink: LineInfo["agentLink"]
  let userText: string | undefined
  const message = value["message"]
  const content = isObject(message) ? message["content"] : undefined
  if (type === "user" && typeof content === "string") userText = content
  const decision = value["permissionDecision"]
  const denied = (isObject(decision) && decision["decision"] === "reject") ||
    typeof value["toolDenialKind"] === "string"
  if (Array.isArray(content)) {
    for (const block of content) {
      if (!isObject(block)) continue
      if (block["type"] === "tool_use") {
        const id = str(block["id"])
        const name = str(block["name"])
        if (id === undefined || name === undefined) continue
        const input = block["input"]
        const prompt = SPAWN_TOOLS.has(name) && isObject(input) ? str(input["prompt"]) : undefined
        toolUses.push(
          calls
            ? { id, name, inputBytes: jsonBytes(input ?? {}), prompt, call: { input, cwd: str(value["cwd"]) } }
            : { id, name, inputBytes: jsonBytes(input ?? {}), prompt }
        )
      } else if (block["type"] === "tool_result") {
        const id = str(block["tool_use_id"])
        if (id === undefined) continue
        toolResults.push({
          toolUseId: id,
          contentBytes: block["content"] === undefined ? 0 : jsonBytes(block["content"]),
          denied
        })
      }
    }
  }
  const result = value["toolUseResult"]
  if (isObject(result) && toolResults.length === 1) {
    const agentId = str(result["agentId"])
    if (agentId !== undefined) agentLink = { agentId, toolUseId: toolResults[0]!.toolUseId }
  }
  if (agentLink === undefined && type === "progress") {
    const data = value["data"]
    const parent = str(value["parentToolUseID"])
    const agentId = isObject(data) ? str(data["agentId"]) : undefined
    if (parent !== undefined && agentId !== undefined) agentLink = { agentId, toolUseId: parent }
  }
  return { type, toolUses, toolResults, agentLink, userText }
}

/**
 * A line's text as it is stored, or its bytes in base64 when they are not
 * UTF-8 (a string could not hold them exactly), or, for a line above the line
 * bound, only its size and the SHA-256 of its bytes (lowercase hex).
 *
 * @since 0.1.0
 */
export type LineValue =
  | { readonly text: string }
  | { readonly base64: string }
  | { readonly oversized: Oversized }

/**
 * What is kept of a line above the line bound: its size in bytes (without the
 * newline) and the SHA-256 of those bytes, lowercase hex.
 *
 * @since 0.1.0
 */
export interface Oversized {
  readonly bytes: number
  readonly sha256: string
}

/**
 * The marker of a line above the bound: its size and hash, no payload.
 *
 * @since 0.1.0
 */
export const oversized = (bytes: Uint8Array): LineValue => ({
  oversized: { bytes: bytes.length, sha256: bytesToHex(sha256(bytes)) }
})

/**
 * The `server_id` of a tool: `server` for an MCP tool `mcp__server__tool`,
 * else `claude-code`.
 *
 * @since 0.1.0
 */
export const serverOf = (name: string): string => {
  if (!name.startsWith("mcp__")) return "claude-code"
  const rest = name.slice("mcp__".length)
  const end = rest.indexOf("__")
  const server = end < 0 ? rest : rest.slice(0, end)
  return Entry.isIdentity(server) ? server : "claude-code"
}

/**
 * The pairing of `tool_use` blocks with their results: the uses still waiting
 * and the ids already paired (a repeated id is paired once). Both are bounded
 * (`PAIRING_PENDING_MAX`, `PAIRING_PAIRED_MAX`), so that what a transcript in
 * custody keeps does not grow with its history: the oldest waiting use is let go
 * of first (a result that comes after more than that many newer uses waited
 * pairs with nothing), and only the most recently paired ids are remembered (a
 * use repeated after that many other calls were paired is paired again).
 *
 * @since 0.1.0
 */
export interface Pairing {
  readonly pending: Map<string, ToolUse>
  readonly paired: Set<string>
}

/**
 * At most this many `tool_use` blocks wait for their results in a pairing.
 *
 * @since 0.1.0
 */
export const PAIRING_PENDING_MAX = 1024

/**
 * At most this many paired ids are remembered in a pairing, the newest.
 *
 * @since 0.1.0
 */
export const PAIRING_PAIRED_MAX = 1024

/**
 * Lets go of the oldest waiting uses and paired ids beyond the bounds (`Map` and
 * `Set` keep insertion order). `pair` does it as it goes; call it after adding
 * to a pairing directly.
 *
 * @since 0.1.0
 */
export const bound = (pairing: Pairing): void => {
  const { paired, pending } = pairing
  while (pending.size > PAIRING_PENDING_MAX) pending.delete(pending.keys().next().value!)
  while (paired.size > PAIRING_PAIRED_MAX) paired.delete(paired.values().next().value!)
}

/**
 * An empty pairing.
 *
 * @since 0.1.0
 */
export const emptyPairing = (): Pairing => ({ pending: new Map(), paired: new Set() })

/**
 * Advances the pairing by one line (mutating it, for speed) and returns the
 * tool calls the line completes, as chio tool parameters, in the order of the
 * line's results. `agentId` and `depth` are the transcript's (`main` / 0, or
 * the sub-agent's id / 1). A call is `allowed: false` when its result says
 * Claude Code refused it (`ToolResult.denied`): the tool entry is written only
 * once the result is seen, so its verdict is known when it is hashed.
 *
 * @since 0.1.0
 */
export const pair = (
  pairing: Pairing,
  info: LineInfo,
  agentId: string,
  depth: number
): Array<Entry.ToolParams> => {
  const calls: Array<Entry.ToolParams> = []
  pairEach(pairing, info, (use, result) =>
    calls.push({
      tool_name: toolNameOf(use),
      server_id: serverOf(use.name),
      agent_id: agentId,
      bytes_read: result.contentBytes,
      bytes_written: use.inputBytes,
      delegation_depth: depth,
      allowed: !result.denied
    }))
  return calls
}

/**
 * Advances the pairing by one line as `pair` does and returns the `tool_use` of each
 * call it completes, in the same order: the call of each tool entry `pair` makes
 * (a replay reads their inputs: `parseCalls`).
 *
 * @since 0.1.0
 */
export const pairUses = (pairing: Pairing, info: LineInfo): Array<ToolUse> => {
  const uses: Array<ToolUse> = []
  pairEach(pairing, info, (use) => uses.push(use))
  return uses
}

/**
 * The tool name of a use's tool entry: its name, or `invalid-tool-name` for one chio
 * would refuse (empty, padded, control characters), which is still counted.
 *
 * @since 0.1.0
 */
export const toolNameOf = (use: ToolUse): string => Entry.isIdentity(use.name) ? use.name : "invalid-tool-name"

// The pairing's one step: the line's uses wait, each result completes the use it names.
const pairEach = (pairing: Pairing, info: LineInfo, f: (use: ToolUse, result: ToolResult) => void): void => {
  for (const use of info.toolUses) {
    if (!pairing.paired.has(use.id) && !pairing.pending.has(use.id)) pairing.pending.set(use.id, use)
  }
  for (const result of info.toolResults) {
    const use = pairing.pending.get(result.toolUseId)
    if (use === undefined) continue
    pairing.pending.delete(result.toolUseId)
    pairing.paired.add(result.toolUseId)
    f(use, result)
  }
  bound(pairing)
}

/**
 * A text decoder (the platform's `TextDecoder`).
 *
 * @since 0.1.0
 */
export interface Decoder {
  readonly decode: (input: Uint8Array) => string
}

/**
 * Decodes a line's bytes: its text when they are UTF-8 (a byte-order mark is
 * kept), else base64.
 *
 * @since 0.1.0
 */
export const decodeLine = (bytes: Uint8Array, decoder: Decoder): LineValue => {
  try {
    return { text: decoder.decode(bytes) }
  } catch {
    return { base64: Base64.encode(bytes) }
  }
}

/**
 * A strict UTF-8 decoder that keeps a byte-order mark, as `decodeLine` needs.
 *
 * @since 0.1.0
 */
export const strictDecoder = (): Decoder => strictUtf8({ keepBom: true })

/**
 * The bytes of a stored line; none for an oversized line, whose bytes are not
 * kept (see `isOversized`).
 *
 * @since 0.1.0
 */
export const lineBytes = (value: LineValue): Uint8Array =>
  "text" in value
    ? encoder.encode(value.text)
    : "base64" in value
    ? Result.getOrElse(Base64.decode(value.base64), () => new Uint8Array(0))
    : new Uint8Array(0)

/**
 * Whether a line is kept only as its size and hash.
 *
 * @since 0.1.0
 */
export const isOversized = (value: LineValue): value is { readonly oversized: Oversized } => "oversized" in value

/**
 * Whether two lines are the same bytes: equal values, or, when either is kept
 * only as its size and hash, the same size and SHA-256.
 *
 * @since 0.1.0
 */
export const sameLine = (a: LineValue, b: LineValue): boolean => {
  if ("text" in a && "text" in b) return a.text === b.text
  if ("base64" in a && "base64" in b) return a.base64 === b.base64
  if (!isOversized(a) && !isOversized(b)) return false
  const hashOf = (v: LineValue): Oversized =>
    isOversized(v) ? v.oversized : (oversized(lineBytes(v)) as { readonly oversized: Oversized }).oversized
  const x = hashOf(a)
  const y = hashOf(b)
  return x.bytes === y.bytes && x.sha256 === y.sha256
}
