/**
 * A transcript line as a turn of the conversation: the `claude-code.line`
 * entries of custody and of the Agent SDK's store hold Claude Code's transcript
 * lines as text (docs/claude-code/PROTOCOL.md (e)); a person reads them as who said what,
 * when the transcript says it happened. Pure: a line's text in, a `Turn` out.
 *
 * - `user` and `assistant` records are turns of their role, their content as
 *   parts: text, thinking, a tool use (the tool and the one line of `CallLine`
 *   saying what it does) and a tool result (its text, whether it failed or was
 *   refused);
 * - a sub-agent's lines (`isSidechain`) are marked with its `agentId`;
 * - every other record (attachments, system notes, queue operations, …) is a
 *   note: its type and subtype, its text when it has one;
 * - `timestamp` is the time the transcript states (milliseconds), null when it
 *   states none.
 *
 * @since 0.1.0
 */
import * as CallLine from "./CallLine.ts"

/**
 * One part of a turn.
 *
 * @since 0.1.0
 */
export type Part =
  | { readonly _tag: "Text"; readonly text: string }
  | { readonly _tag: "Thinking"; readonly text: string }
  | { readonly _tag: "ToolUse"; readonly id: string; readonly name: string; readonly line: string }
  | {
    readonly _tag: "ToolResult"
    readonly id: string
    readonly text: string
    readonly error: boolean
    readonly denied: boolean
  }

/**
 * One transcript line as the conversation shows it.
 *
 * @since 0.1.0
 */
export interface Turn {
  /** `user`, `assistant`, or `note` for any other record. */
  readonly role: "user" | "assistant" | "note"
  /** The record's type, with its subtype for a note (`system/compact_boundary`, `attachment/date`). */
  readonly type: string
  /** The time the transcript states, milliseconds since the epoch. */
  readonly timestamp: number | null
  /** The sub-agent whose line it is, when it is one's. */
  readonly agentId: string | null
  readonly parts: ReadonlyArray<Part>
}

/**
 * The kind of the entries that hold transcript lines (`@session-journal/claude-code`'s `Planner.LINE_KIND`).
 *
 * @since 0.1.0
 */
export const LINE_KIND = "claude-code.line"

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const str = (v: unknown): string | null => (typeof v === "string" ? v : null)

const textOf = (content: unknown): string => {
  if (typeof content === "string") return content
  if (Array.isArray(content)) {
    return content
      .map((
        p
      ) => (isRecord(p) && typeof p["text"] === "string" ? p["text"] : isRecord(p) ? `[${String(p["type"])}]` : ""))
      .join("\n")
  }
  return content === undefined || content === null ? "" : JSON.stringify(content)
}

const partsOf = (content: unknown, denied: boolean): Array<Part> => {
  if (typeof content === "string") return [{ _tag: "Text", text: content }]
  if (!Array.isArray(content)) return []
  const parts: Array<Part> = []
  for (const block of content) {
    if (!isRecord(block)) continue
    switch (block["type"]) {
      case "text":
        parts.push({ _tag: "Text", text: str(block["text"]) ?? "" })
        break
      case "thinking":
        parts.push({ _tag: "Thinking", text: str(block["thinking"]) ?? "" })
        break
      case "tool_use": {
        const name = str(block["name"]) ?? "?"
        parts.push({ _tag: "ToolUse", id: str(block["id"]) ?? "", name, line: CallLine.summary(name, block["input"]) })
        break
      }
      case "tool_result":
        parts.push({
          _tag: "ToolResult",
          id: str(block["tool_use_id"]) ?? "",
          text: textOf(block["content"]),
          error: block["is_error"] === true,
          denied
        })
        break
      default:
        parts.push({ _tag: "Text", text: `[${String(block["type"])}]` })
    }
  }
  return parts
}

const noteText = (value: Record<string, unknown>): string => {
  for (const key of ["content", "summary", "text"]) {
    const v = value[key]
    if (typeof v === "string") return v
  }
  const attachment = value["attachment"]
  if (isRecord(attachment)) {
    const c = attachment["content"] ?? attachment["prompt"]
    if (typeof c === "string") return c
  }
  return ""
}

/**
 * The time a transcript's `timestamp` field states, or null.
 *
 * @since 0.1.0
 */
export const timeOf = (value: unknown): number | null => {
  if (typeof value !== "string") return null
  const ms = Date.parse(value)
  return Number.isFinite(ms) ? ms : null
}

/**
 * The turn one transcript line's text makes, or null when it is not a JSON
 * object with a string `type`.
 *
 * @since 0.1.0
 */
export const parse = (text: string): Turn | null => {
  if (text.length === 0 || text.charCodeAt(0) !== 0x7b) return null
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return null
  }
  if (!isRecord(value) || typeof value["type"] !== "string") return null
  const type = value["type"]
  const timestamp = timeOf(value["timestamp"])
  const agentId = value["isSidechain"] === true ? str(value["agentId"]) ?? "sub-agent" : null
  if (type === "user" || type === "assistant") {
    const message = value["message"]
    const decision = value["permissionDecision"]
    const denied = (isRecord(decision) && decision["decision"] === "reject") ||
      typeof value["toolDenialKind"] === "string"
    const content = isRecord(message) ? message["content"] : undefined
    return { role: type, type, timestamp, agentId, parts: partsOf(content, denied) }
  }
  const sub = str(value["subtype"]) ?? (isRecord(value["attachment"]) ? str(value["attachment"]["type"]) : null) ??
    str(value["operation"])
  const note = noteText(value)
  return {
    role: "note",
    type: sub === null ? type : `${type}/${sub}`,
    timestamp,
    agentId,
    parts: note === "" ? [] : [{ _tag: "Text", text: note }]
  }
}

/**
 * The turn of an entry: a `claude-code.line` entry whose payload holds the line
 * as text (`{line}`); null for any other entry.
 *
 * @since 0.1.0
 */
export const ofEntry = (entry: { readonly kind: string; readonly payload?: unknown }): Turn | null => {
  if (entry.kind !== LINE_KIND || !isRecord(entry.payload)) return null
  const line = entry.payload["line"]
  return typeof line === "string" ? parse(line) : null
}
