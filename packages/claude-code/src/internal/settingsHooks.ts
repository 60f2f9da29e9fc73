/**
 * Our hooks in a Claude Code settings file: which hooks are ours (`isOurs`),
 * taking them out and putting them in, on values (`remove`, `merge`) and on the
 * file's text (`removeText`, `installText`, `readText`) through the
 * text-preserving editor (`jsonText.ts`), so every byte that is not ours stays.
 */
import * as JsonText from "./jsonText.ts"

/**
 * The events our hooks are installed for (docs/claude-code/PROTOCOL.md (a)): every one whose record
 * goes on the chain.
 *
 * @since 0.1.0
 */
export const EVENTS = [
  "SessionStart",
  "UserPromptSubmit",
  "PreToolUse",
  "PostToolUse",
  "PostToolUseFailure",
  "SubagentStart",
  "SubagentStop",
  "Stop",
  "PreCompact",
  "PostCompact",
  "SessionEnd"
] as const

/** A JSON value. */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }
/** A JSON object. */
export type JsonObject = { readonly [key: string]: Json }

const isObject = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v)

const OUR_COMMAND = /(^|\s)'?claude-code'?\s+'?(hook|forward)'?(\s|$)/

/**
 * Whether a hook of a settings file is one of ours: a command hook running
 * `claude-code hook` or `claude-code forward` (wrapped or not), or an `http` hook
 * to a loopback `/hook` with a bearer token from the environment (the guard's
 * plain form).
 *
 * @since 0.1.0
 */
export const isOurs = (hook: unknown): boolean => {
  if (!isObject(hook)) return false
  if (hook["type"] === "command") {
    const command = hook["command"]
    return typeof command === "string" && command.includes("session-journal") && OUR_COMMAND.test(command)
  }
  if (hook["type"] === "http" && typeof hook["url"] === "string") {
    let url: URL
    try {
      url = new URL(hook["url"])
    } catch {
      return false
    }
    const headers = hook["headers"]
    const auth = isObject(headers) ? headers["Authorization"] : undefined
    return ["127.0.0.1", "localhost", "[::1]"].includes(url.hostname) && url.pathname === "/hook" &&
      typeof auth === "string" && auth.startsWith("Bearer $")
  }
  return false
}

/**
 * The settings without our hooks: ours removed from every matcher group, groups
 * and events left empty by that removed, `hooks` removed when nothing is left in
 * it. Everything else is kept as it was, in its order. (On values; `removeText`
 * does it on a file's text.)
 *
 * @since 0.1.0
 */
export const remove = (settings: JsonObject): JsonObject => {
  const hooks = settings["hooks"]
  if (!isObject(hooks)) return settings
  const kept: Record<string, Json> = {}
  for (const [event, groups] of Object.entries(hooks)) {
    if (!Array.isArray(groups)) {
      kept[event] = groups
      continue
    }
    const left: Array<Json> = []
    for (const group of groups as ReadonlyArray<Json>) {
      if (!isObject(group) || !Array.isArray(group["hooks"])) {
        left.push(group)
        continue
      }
      const inner = group["hooks"] as ReadonlyArray<Json>
      const others = inner.filter((h) => !isOurs(h))
      if (others.length === inner.length) left.push(group)
      else if (others.length > 0) left.push({ ...group, hooks: others })
    }
    if (left.length > 0 || groups.length === 0) kept[event] = left
  }
  const { hooks: _, ...rest } = settings
  return Object.keys(kept).length === 0 ? rest : { ...settings, hooks: kept }
}

/**
 * The settings with our hooks: our earlier hooks removed (`remove`), then for
 * every event of `events` one group `{matcher: "", hooks: [hook]}` appended to
 * the event's list. `hook` is one hook object for all, or one per event.
 *
 * @since 0.1.0
 */
export const merge = (
  settings: JsonObject,
  hook: JsonObject | ((event: string) => JsonObject),
  events: ReadonlyArray<string> = EVENTS
): JsonObject => {
  const without = remove(settings)
  const hooks: Record<string, Json> = isObject(without["hooks"]) ? { ...without["hooks"] } : {}
  for (const event of events) {
    const list = hooks[event]
    const group: Json = { matcher: "", hooks: [typeof hook === "function" ? hook(event) : hook] }
    hooks[event] = Array.isArray(list) ? [...(list as ReadonlyArray<Json>), group] : [group]
  }
  return { ...without, hooks }
}

/**
 * Settings text that cannot be edited: not JSON (with comments and trailing
 * commas), not an object, or `hooks` (or an event's list) of another type.
 *
 * @since 0.1.0
 */
export class SettingsTextError extends Error {
  readonly _tag = "SettingsTextError"
}

const parseRoot = (text: string): JsonText.ObjectNode => {
  let root: JsonText.Node
  try {
    root = JsonText.parse(text)
  } catch (e) {
    throw new SettingsTextError(e instanceof Error ? e.message : String(e))
  }
  if (root.kind !== "object") throw new SettingsTextError("it is not a JSON object")
  const hooks = JsonText.member(root, "hooks")
  if (hooks !== undefined && hooks.value.kind !== "object") throw new SettingsTextError("its hooks is not an object")
  return root
}

// The next splice that takes one of our hooks out, or undefined when none is left.
const nextRemoval = (text: string, root: JsonText.ObjectNode): JsonText.Splice | undefined => {
  for (const hm of root.items) {
    if (hm.key !== "hooks" || hm.value.kind !== "object") continue
    const hooks = hm.value
    for (const em of hooks.items) {
      if (em.value.kind !== "array") continue
      const groups = em.value
      for (let i = 0; i < groups.items.length; i++) {
        const group = groups.items[i]!.value
        if (group.kind !== "object") continue
        const inner = JsonText.member(group, "hooks")?.value
        if (inner === undefined || inner.kind !== "array") continue
        const ours = inner.items.map((h) => isOurs(JsonText.toValue(h.value)))
        if (!ours.includes(true)) continue
        if (ours.includes(false)) return JsonText.removeItem(text, inner, ours.indexOf(true))
        // A sole group with space before it came with its event's list, and a sole
        // event with space before it with the `hooks` object: they go with it.
        if (groups.items.length > 1 || !JsonText.hasGap(groups)) return JsonText.removeItem(text, groups, i)
        if (hooks.items.length > 1 || !JsonText.hasGap(hooks)) {
          return JsonText.removeItem(text, hooks, hooks.items.indexOf(em))
        }
        return JsonText.removeItem(text, root, root.items.indexOf(hm))
      }
    }
  }
  return undefined
}

/**
 * A settings file's text without our hooks (`isOurs`), every other byte kept;
 * matcher groups, event lists and a `hooks` object left empty by that go too,
 * unless they were there, empty, before (`internal/jsonText.ts`). Throws
 * `SettingsTextError`.
 *
 * @since 0.1.0
 */
export const removeText = (text: string): string => {
  if (text.trim() === "") return text
  let current = text
  for (;;) {
    const splice = nextRemoval(current, parseRoot(current))
    if (splice === undefined) return current
    current = JsonText.apply(current, splice)
  }
}

const groupOf = (hook: JsonObject): JsonObject => ({ matcher: "", hooks: [hook] })

/**
 * A settings file's text with our hooks: ours removed first (`removeText`), then
 * for every event of `events` the group `{matcher: "", hooks: [hookFor(event)]}`
 * appended to the event's list (the list, or the `hooks` object, added when
 * missing), in the file's own indentation and line breaks; nothing else changes.
 * Throws `SettingsTextError`.
 *
 * @since 0.1.0
 */
export const installText = (
  text: string,
  hookFor: (event: string) => JsonObject,
  events: ReadonlyArray<string> = EVENTS
): string => {
  const all = () => Object.fromEntries(events.map((e) => [e, [groupOf(hookFor(e))]]))
  let current = removeText(text)
  if (current.trim() === "") return JsonText.render({ hooks: all() }, "  ", "", "\n") + "\n"
  for (const event of events) {
    const root = parseRoot(current)
    const hm = JsonText.member(root, "hooks")
    if (hm === undefined) {
      current = JsonText.apply(
        current,
        JsonText.insertItem(current, root, (base, unit, nl) => JsonText.renderMember("hooks", all(), unit, base, nl))
      )
      break
    }
    const hooks = hm.value as JsonText.ObjectNode
    const em = JsonText.member(hooks, event)
    const group = groupOf(hookFor(event))
    if (em === undefined) {
      current = JsonText.apply(
        current,
        JsonText.insertItem(current, hooks, (base, unit, nl) => JsonText.renderMember(event, [group], unit, base, nl))
      )
    } else if (em.value.kind !== "array") {
      throw new SettingsTextError(`its hooks.${event} is not a list`)
    } else {
      current = JsonText.apply(
        current,
        JsonText.insertItem(current, em.value, (base, unit, nl) => JsonText.render(group, unit, base, nl))
      )
    }
  }
  return current
}

/**
 * The settings a text holds, as Claude Code reads them (comments and trailing
 * commas allowed); `{}` for an empty text. Throws `SettingsTextError`.
 *
 * @since 0.1.0
 */
export const readText = (text: string): JsonObject =>
  text.trim() === "" ? {} : JsonText.toValue(parseRoot(text)) as JsonObject
