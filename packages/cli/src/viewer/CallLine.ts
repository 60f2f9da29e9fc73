/**
 * The one line that says what a tool call did, from its input (a hooked call's
 * `tool_input`, a transcript's `tool_use` block): the command of a `Bash` call,
 * the path of a file tool, the URL of a fetch, the query of a search, the type
 * and description of a sub-agent, the MCP tool with its main argument. Pure and
 * total: any input gives a line (possibly empty), at most `MAX_CHARS` long, on
 * one line.
 *
 * @since 0.1.0
 */

/**
 * The longest line, in characters.
 *
 * @since 0.1.0
 */
export const MAX_CHARS = 200

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)

// Where each tool keeps what it acts on, first found wins.
const MAIN_KEYS: ReadonlyMap<string, ReadonlyArray<string>> = new Map(Object.entries({
  Bash: ["command"],
  BashOutput: ["bash_id"],
  KillShell: ["shell_id"],
  Read: ["file_path"],
  Write: ["file_path"],
  Edit: ["file_path"],
  MultiEdit: ["file_path"],
  NotebookEdit: ["notebook_path"],
  NotebookRead: ["notebook_path"],
  Glob: ["pattern"],
  Grep: ["pattern"],
  LS: ["path"],
  WebFetch: ["url"],
  WebSearch: ["query"],
  Skill: ["skill", "command"]
}))

// What an MCP tool's main argument most often is called.
const COMMON_KEYS = ["command", "query", "url", "path", "file_path", "uri", "name", "id", "text", "prompt"]

const oneLine = (text: string): string => {
  const flat = text.replace(/\s*[\r\n]+\s*/g, " ⏎ ").trim()
  return flat.length <= MAX_CHARS ? flat : `${flat.slice(0, MAX_CHARS - 1)}…`
}

const firstString = (input: Record<string, unknown>, keys: ReadonlyArray<string>): string | null => {
  for (const k of keys) {
    const v = input[k]
    if (typeof v === "string" && v.length > 0) return v
  }
  return null
}

const anyString = (input: Record<string, unknown>): readonly [string, string] | null => {
  for (const k in input) {
    const v = input[k]
    if (typeof v === "string" && v.length > 0) return [k, v]
  }
  return null
}

/**
 * The MCP server and tool of a name `mcp__server__tool`, or null.
 *
 * @since 0.1.0
 */
export const mcpOf = (toolName: string): { readonly server: string; readonly tool: string } | null => {
  if (!toolName.startsWith("mcp__")) return null
  const rest = toolName.slice(5)
  const at = rest.indexOf("__")
  return at <= 0 ? null : { server: rest.slice(0, at), tool: rest.slice(at + 2) }
}

/**
 * The line for a call of `toolName` with `input`.
 *
 * @since 0.1.0
 */
export const summary = (toolName: string, input: unknown): string => {
  const mcp = mcpOf(toolName)
  const prefix = mcp === null ? "" : `${mcp.server} · ${mcp.tool}`
  if (!isRecord(input)) {
    const text = typeof input === "string" ? input : ""
    return oneLine(prefix === "" ? text : text === "" ? prefix : `${prefix}: ${text}`)
  }
  if (toolName === "Agent" || toolName === "Task") {
    const type = firstString(input, ["subagent_type"])
    const what = firstString(input, ["description", "prompt"]) ?? ""
    return oneLine(type === null ? what : `${type}: ${what}`)
  }
  if (toolName === "TodoWrite" && Array.isArray(input["todos"])) {
    const n = input["todos"].length
    return `${n} todo${n === 1 ? "" : "s"}`
  }
  // A Map: a tool named `constructor` or `toString` finds nothing of Object's.
  const known = MAIN_KEYS.get(toolName)
  if (known !== undefined) {
    const main = firstString(input, known)
    if (main !== null) {
      const where = (toolName === "Grep" || toolName === "Glob") ? firstString(input, ["path"]) : null
      return oneLine(where === null ? main : `${main} in ${where}`)
    }
  }
  const main = firstString(input, COMMON_KEYS)
  const found = main !== null ? main : anyString(input)?.join(": ") ?? ""
  return oneLine(prefix === "" ? found : found === "" ? prefix : `${prefix}: ${found}`)
}
