/**
 * The MCP servers of a `.mcp.json` file (`{"mcpServers": {NAME: server}}`, the
 * form Claude Code, Cursor and others read) put through the gateway and taken
 * out of it, on the file's text through the text-preserving editor
 * (`jsonText.ts`), so every byte that is not ours stays.
 *
 * A stdio server (`command`, `args`) is wrapped by two edits: its `command` value
 * becomes `"session-journal"`, and the gateway's arguments (`head`, ending with
 * `--`) and the original command's own text are put in front of its `args`
 * (`args` added when it had none). An HTTP server (`"type": "http"`, `url`,
 * `headers`) is wrapped by making its `type` `"stdio"` and adding `command` and
 * `args` (`… --url URL --header "NAME: VALUE"`); its `url` and `headers` stay
 * where they are (Claude Code 2.1.328 ignores them on a stdio server,
 * docs/mcp-PROTOCOL.md (e)). Unwrapping undoes those edits exactly:
 *
 * - the command's text is taken back from the element after `--`, as it was
 *   written (escapes and all);
 * - the inserted elements go from the start of the array to the first original
 *   argument; where there is none, an array whose first element sits right
 *   after its `[` was there before (only its elements go), and one with space
 *   before its first element was added with them (the `args` member goes), as
 *   `jsonText.hasGap` says for every container this editor adds;
 * - an HTTP server's `args` and `command` members are removed, last first, and
 *   its `type` is `"http"` again.
 *
 * Pure; no Node built-ins.
 */
import * as JsonText from "./jsonText.ts"

/** The command a wrapped server runs: `session-journal` from PATH (a project's file names no path of one machine). */
export const GATEWAY_COMMAND = "session-journal"

/**
 * A `.mcp.json` text that cannot be edited: not JSON (with comments and
 * trailing commas), not an object, or `mcpServers` not an object.
 */
export class McpConfigTextError extends Error {
  readonly _tag = "McpConfigTextError"
}

/** Where one server stands: through the gateway, direct, or direct because the gateway cannot reach it (`why`). */
export type ServerState =
  | { readonly name: string; readonly state: "gateway" }
  | { readonly name: string; readonly state: "direct" }
  | { readonly name: string; readonly state: "unsupported"; readonly why: string }

const parseRoot = (text: string): JsonText.ObjectNode => {
  let root: JsonText.Node
  try {
    root = JsonText.parse(text)
  } catch (e) {
    throw new McpConfigTextError(e instanceof Error ? e.message : String(e))
  }
  if (root.kind !== "object") throw new McpConfigTextError("it is not a JSON object")
  const servers = JsonText.member(root, "mcpServers")
  if (servers !== undefined && servers.value.kind !== "object") {
    throw new McpConfigTextError("its mcpServers is not an object")
  }
  return root
}

// The servers object, or undefined when the file has none.
const serversOf = (text: string): JsonText.ObjectNode | undefined => {
  if (text.trim() === "") return undefined
  return JsonText.member(parseRoot(text), "mcpServers")?.value as JsonText.ObjectNode | undefined
}

const stringOf = (node: JsonText.Node | undefined): string | undefined =>
  node !== undefined && node.kind === "scalar" && typeof node.value === "string" ? node.value : undefined

const stringsOf = (node: JsonText.Node | undefined): ReadonlyArray<string> | undefined => {
  if (node === undefined || node.kind !== "array") return undefined
  const out: Array<string> = []
  for (const e of node.items) {
    const s = stringOf(e.value)
    if (s === undefined) return undefined
    out.push(s)
  }
  return out
}

// The gateway's place in a server: the index of `mcp proxy` in its args, and of `--` (stdio) after it.
interface Ours {
  readonly args: JsonText.ArrayNode
  readonly argsMember: JsonText.Member
  /** Index of the element after `--` (the original command), or -1 for an HTTP server. */
  readonly command: number
}

const oursIn = (server: JsonText.ObjectNode): Ours | undefined => {
  if (stringOf(JsonText.member(server, "command")?.value) !== GATEWAY_COMMAND) return undefined
  const argsMember = JsonText.member(server, "args")
  const args = stringsOf(argsMember?.value)
  if (argsMember === undefined || args === undefined) return undefined
  const at = args.findIndex((a, i) => a === "mcp" && args[i + 1] === "proxy")
  if (at < 0) return undefined
  const dashes = args.indexOf("--", at + 2)
  return {
    args: argsMember.value as JsonText.ArrayNode,
    argsMember,
    command: dashes >= 0 && dashes + 1 < args.length ? dashes + 1 : -1
  }
}

// An HTTP server we wrapped: `type` "stdio", a `url`, our `--url` and no `--`.
const isOurHttp = (server: JsonText.ObjectNode, ours: Ours): boolean =>
  ours.command < 0 && stringOf(JsonText.member(server, "type")?.value) === "stdio" &&
  stringOf(JsonText.member(server, "url")?.value) !== undefined &&
  (stringsOf(ours.args) ?? []).includes("--url")

const sortDescending = (splices: ReadonlyArray<JsonText.Splice>): ReadonlyArray<JsonText.Splice> =>
  [...splices].sort((a, b) => b.at - a.at)

const applyAll = (text: string, splices: ReadonlyArray<JsonText.Splice>): string =>
  sortDescending(splices).reduce(JsonText.apply, text)

// The effective servers (the last member of each name, as a JSON reader keeps), by index.
const effective = (servers: JsonText.ObjectNode): ReadonlyArray<number> =>
  servers.items.flatMap((m, i) => JsonText.member(servers, m.key) === m ? [i] : [])

const serverAt = (text: string, index: number): JsonText.Node => serversOf(text)!.items[index]!.value

const replaceScalar = (node: JsonText.Node, text: string): JsonText.Splice => ({
  at: node.start,
  deleted: node.end - node.start,
  text
})

const removeMember = (text: string, server: JsonText.ObjectNode, member: JsonText.Member): string =>
  JsonText.apply(text, JsonText.removeItem(text, server, server.items.indexOf(member)))

// The server at `index` taken out of the gateway, when it is ours and can be.
const unwrapAt = (text: string, index: number): string => {
  const server = serverAt(text, index)
  if (server.kind !== "object") return text
  const ours = oursIn(server)
  if (ours === undefined) return text
  const commandMember = JsonText.member(server, "command")!
  if (ours.command >= 0) {
    const items = ours.args.items
    const original = items[ours.command]!
    const raw = text.slice(original.start, original.end)
    const splices: Array<JsonText.Splice> = [replaceScalar(commandMember.value, raw)]
    if (ours.command + 1 < items.length) {
      splices.push({ at: items[0]!.start, deleted: items[ours.command + 1]!.start - items[0]!.start, text: "" })
    } else if (JsonText.hasGap(ours.args)) {
      splices.push(JsonText.removeItem(text, server, server.items.indexOf(ours.argsMember)))
    } else {
      splices.push({ at: items[0]!.start, deleted: items.at(-1)!.end - items[0]!.start, text: "" })
    }
    return applyAll(text, splices)
  }
  if (!isOurHttp(server, ours)) return text
  let current = removeMember(text, server, ours.argsMember)
  const without = serverAt(current, index) as JsonText.ObjectNode
  current = removeMember(current, without, JsonText.member(without, "command")!)
  const typed = serverAt(current, index) as JsonText.ObjectNode
  return JsonText.apply(current, replaceScalar(JsonText.member(typed, "type")!.value, "\"http\""))
}

/**
 * A `.mcp.json` text with every server taken out of the gateway where it was put
 * through it (as `wrapText` does, or by hand in the same form), every other byte
 * kept. Throws `McpConfigTextError`.
 */
export const unwrapText = (text: string): string => {
  const servers = serversOf(text)
  if (servers === undefined) return text
  let current = text
  for (const i of effective(servers)) current = unwrapAt(current, i)
  return current
}

// Why a server (not ours) cannot be put through the gateway, or its kind.
const kindOf = (text: string, server: JsonText.Node): "stdio" | "http" | { readonly why: string } => {
  if (server.kind !== "object") return { why: "it is not an object" }
  const typeNode = JsonText.member(server, "type")?.value
  const type = typeNode === undefined ? "stdio" : stringOf(typeNode)
  if (type === "http") {
    if (text.slice(typeNode!.start, typeNode!.end) !== "\"http\"") return { why: "its type is not written \"http\"" }
    if (stringOf(JsonText.member(server, "url")?.value) === undefined) return { why: "it has no url" }
    if (JsonText.member(server, "command") !== undefined || JsonText.member(server, "args") !== undefined) {
      return { why: "it has a url and a command" }
    }
    const headers = JsonText.member(server, "headers")?.value
    if (
      headers !== undefined && (headers.kind !== "object" || headers.items.some((m) => stringOf(m.value) === undefined))
    ) {
      return { why: "its headers are not an object of strings" }
    }
    return "http"
  }
  if (type !== "stdio") {
    return {
      why: `its type is ${
        type === undefined ? "not a string" : JSON.stringify(type)
      }: the gateway reaches stdio and Streamable HTTP (type "http") servers`
    }
  }
  const command = stringOf(JsonText.member(server, "command")?.value)
  if (command === undefined || command === "") return { why: "it has no command" }
  const args = JsonText.member(server, "args")
  if (args !== undefined && stringsOf(args.value) === undefined) return { why: "its args are not a list of strings" }
  return "stdio"
}

const quoted = (words: ReadonlyArray<string>): ReadonlyArray<string> => words.map((w) => JSON.stringify(w))

// A multi-line array of the given element texts, as a member at `base` (the form `hasGap` recognises).
const arrayMember = (key: string, elements: ReadonlyArray<string>) => (base: string, unit: string, nl: string) =>
  `${JSON.stringify(key)}: [${nl}${base}${unit}${elements.join(`,${nl}${base}${unit}`)}${nl}${base}]`

const wrapAt = (text: string, index: number, head: ReadonlyArray<string>): string => {
  const server = serverAt(text, index)
  if (server.kind !== "object" || oursIn(server) !== undefined) return text
  const kind = kindOf(text, server)
  if (typeof kind !== "string") return text
  if (kind === "stdio") {
    const commandNode = JsonText.member(server, "command")!.value
    const raw = text.slice(commandNode.start, commandNode.end)
    const inserted = [...quoted([...head, "--"]), raw]
    const argsNode = JsonText.member(server, "args")?.value as JsonText.ArrayNode | undefined
    const argsSplice: JsonText.Splice = argsNode === undefined
      ? JsonText.insertItem(text, server, arrayMember("args", inserted))
      : argsNode.items.length === 0
      ? { at: argsNode.start + 1, deleted: 0, text: inserted.join(", ") }
      : { at: argsNode.items[0]!.start, deleted: 0, text: inserted.join(", ") + ", " }
    return applyAll(text, [replaceScalar(commandNode, JSON.stringify(GATEWAY_COMMAND)), argsSplice])
  }
  const url = stringOf(JsonText.member(server, "url")!.value)!
  const headersNode = JsonText.member(server, "headers")?.value as JsonText.ObjectNode | undefined
  const headers = (headersNode?.items ?? []).flatMap((m) => ["--header", `${m.key}: ${stringOf(m.value)!}`])
  let current = JsonText.apply(text, replaceScalar(JsonText.member(server, "type")!.value, "\"stdio\""))
  const typed = serverAt(current, index) as JsonText.ObjectNode
  current = JsonText.apply(
    current,
    JsonText.insertItem(current, typed, () => `"command": ${JSON.stringify(GATEWAY_COMMAND)}`)
  )
  const commanded = serverAt(current, index) as JsonText.ObjectNode
  return JsonText.apply(
    current,
    JsonText.insertItem(current, commanded, arrayMember("args", quoted([...head, "--url", url, ...headers])))
  )
}

/**
 * A `.mcp.json` text with every server it can put through the gateway wrapped:
 * first taken out of it (`unwrapText`), then each stdio or HTTP server made to
 * start `session-journal` with `head(name)` (the global flags, `mcp proxy
 * --name NAME` and its flags) before its own command or `--url`. A server the
 * gateway cannot reach (`servers` says why) stays as it is. Installing twice
 * changes nothing; `unwrapText` of the result is the original text. Throws
 * `McpConfigTextError`.
 */
export const wrapText = (text: string, head: (name: string) => ReadonlyArray<string>): string => {
  let current = unwrapText(text)
  const servers = serversOf(current)
  if (servers === undefined) return current
  for (const i of effective(servers)) current = wrapAt(current, i, head(servers.items[i]!.key))
  return current
}

/**
 * Every server of a `.mcp.json` text (the last of a repeated name) and where it
 * stands: through the gateway, direct, or direct because the gateway cannot reach
 * it. Throws `McpConfigTextError`.
 */
export const servers = (text: string): ReadonlyArray<ServerState> => {
  const node = serversOf(text)
  if (node === undefined) return []
  return effective(node).map((i): ServerState => {
    const { key: name, value } = node.items[i]!
    if (value.kind === "object" && oursIn(value) !== undefined) return { name, state: "gateway" }
    const kind = kindOf(text, value)
    return typeof kind === "string" ? { name, state: "direct" } : { name, state: "unsupported", why: kind.why }
  })
}

/** A server to add: a command and its arguments, or a Streamable HTTP URL. */
export type NewServer =
  | { readonly command: string; readonly args: ReadonlyArray<string> }
  | { readonly url: string }

/**
 * A `.mcp.json` text with the server `name` added to `mcpServers` (the object,
 * or the whole file, added when missing) as `{"command", "args"}` or `{"type":
 * "http", "url"}`, in the file's own indentation; nothing else changes. Throws
 * `McpConfigTextError`, also when a server of that name is there already.
 */
export const addServerText = (text: string, name: string, server: NewServer): string => {
  const value = "url" in server ? { type: "http", url: server.url } : { command: server.command, args: server.args }
  if (text.trim() === "") return JsonText.render({ mcpServers: { [name]: value } }, "  ", "", "\n") + "\n"
  const root = parseRoot(text)
  const servers = JsonText.member(root, "mcpServers")?.value as JsonText.ObjectNode | undefined
  if (servers === undefined) {
    return JsonText.apply(
      text,
      JsonText.insertItem(
        text,
        root,
        (base, unit, nl) => JsonText.renderMember("mcpServers", { [name]: value }, unit, base, nl)
      )
    )
  }
  if (JsonText.member(servers, name) !== undefined) {
    throw new McpConfigTextError(`it has a server named ${JSON.stringify(name)} already`)
  }
  return JsonText.apply(
    text,
    JsonText.insertItem(text, servers, (base, unit, nl) => JsonText.renderMember(name, value, unit, base, nl))
  )
}
