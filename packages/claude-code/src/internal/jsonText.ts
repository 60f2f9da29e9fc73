/**
 * A text-preserving editor of JSON settings files: JSON with the `//` and
 * `/* *\/` comments and the trailing commas Claude Code's settings files may
 * hold. `parse` gives the document's values with their byte positions; the
 * edits (`insertItem`, `removeItem`) splice text into and out of objects and
 * arrays and never rewrite anything else, so every other number keeps its
 * spelling (`12345678901234567890`, `1.50`), every comment, key order and
 * indentation stays as the user wrote it.
 *
 * An edit undoes another exactly: an item appended after the last one is
 * `,` + newline + indentation + the item, and removing an item that follows
 * another deletes from the end of the one before it to its own end; an item put
 * into an empty container goes right after its opening bracket, with no space
 * in between, and removing a sole item that sits right after the bracket gives
 * back the container's old inside. A sole item with space before it was put
 * there with its container (`hasGap`): the caller removes the container with it.
 *
 * Pure; no Node built-ins.
 */

/** Why a text is not a JSON document this editor takes, and where. */
export class JsonTextError extends Error {
  readonly _tag = "JsonTextError"
  readonly reason: string
  readonly offset: number
  constructor(reason: string, offset: number) {
    super(`${reason} at offset ${offset}`)
    this.reason = reason
    this.offset = offset
  }
}

/** A value of the document with its span `[start, end)`. */
export type Node = ObjectNode | ArrayNode | ScalarNode

/** An object: its members in order (duplicates kept), `start` at `{`, `end` after `}`. */
export interface ObjectNode {
  readonly kind: "object"
  readonly start: number
  readonly end: number
  readonly items: ReadonlyArray<Member>
}

/** An array: its elements, `start` at `[`, `end` after `]`. */
export interface ArrayNode {
  readonly kind: "array"
  readonly start: number
  readonly end: number
  readonly items: ReadonlyArray<Element>
}

/** A string, number, boolean or null, with its value (numbers as JavaScript reads them). */
export interface ScalarNode {
  readonly kind: "scalar"
  readonly start: number
  readonly end: number
  readonly value: string | number | boolean | null
}

/** An object's member: from its key's opening quote to its value's end. */
export interface Member {
  readonly start: number
  readonly end: number
  readonly key: string
  readonly value: Node
}

/** An array's element: the value's span. */
export interface Element {
  readonly start: number
  readonly end: number
  readonly value: Node
}

const MAX_DEPTH = 256
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y

/** The position of the next character that is not whitespace or a comment. */
export const skipTrivia = (text: string, from: number): number => {
  let i = from
  for (;;) {
    const c = text.charCodeAt(i)
    if (c === 32 || c === 9 || c === 10 || c === 13 || c === 0xfeff) i++
    else if (c === 47 && text.charCodeAt(i + 1) === 47) {
      const nl = text.indexOf("\n", i + 2)
      i = nl < 0 ? text.length : nl
    } else if (c === 47 && text.charCodeAt(i + 1) === 42) {
      const close = text.indexOf("*/", i + 2)
      if (close < 0) throw new JsonTextError("unterminated comment", i)
      i = close + 2
    } else return i
  }
}

/** Parses `text`: one value, surrounded by whitespace and comments only. */
export const parse = (text: string): Node => {
  let pos = 0
  const fail = (reason: string): never => {
    throw new JsonTextError(reason, pos)
  }
  const value = (depth: number): Node => {
    if (depth > MAX_DEPTH) fail(`nested deeper than ${MAX_DEPTH} levels`)
    pos = skipTrivia(text, pos)
    const start = pos
    const c = text[pos]
    if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]"
      pos++
      const items: Array<Member | Element> = []
      for (;;) {
        pos = skipTrivia(text, pos)
        if (text[pos] === close) break
        if (c === "{") {
          if (text[pos] !== "\"") fail("expected a key")
          const keyStart = pos
          const key = string()
          pos = skipTrivia(text, pos)
          if (text[pos] !== ":") fail("expected ':'")
          pos++
          const v = value(depth + 1)
          items.push({ start: keyStart, end: v.end, key, value: v })
        } else {
          const v = value(depth + 1)
          items.push({ start: v.start, end: v.end, value: v })
        }
        pos = skipTrivia(text, pos)
        if (text[pos] === ",") pos++
        else if (text[pos] !== close) fail(`expected ',' or '${close}'`)
      }
      pos++
      return c === "{"
        ? { kind: "object", start, end: pos, items: items as Array<Member> }
        : { kind: "array", start, end: pos, items: items as Array<Element> }
    }
    if (c === "\"") {
      const s = string()
      return { kind: "scalar", start, end: pos, value: s }
    }
    for (const [word, v] of [["true", true], ["false", false], ["null", null]] as const) {
      if (text.startsWith(word, pos)) {
        pos += word.length
        return { kind: "scalar", start, end: pos, value: v }
      }
    }
    NUMBER.lastIndex = pos
    const m = NUMBER.exec(text)
    if (m === null) return fail(pos >= text.length ? "unexpected end" : "expected a value")
    pos += m[0].length
    return { kind: "scalar", start, end: pos, value: Number(m[0]) }
  }
  const string = (): string => {
    const start = pos
    let i = pos + 1
    for (;;) {
      const c = text.charCodeAt(i)
      if (Number.isNaN(c)) {
        pos = start
        fail("unterminated string")
      }
      if (c === 92) i += 2
      else if (c === 34) break
      else i++
    }
    pos = i + 1
    try {
      return JSON.parse(text.slice(start, pos)) as string
    } catch {
      pos = start
      return fail("invalid string")
    }
  }
  const root = value(0)
  pos = skipTrivia(text, pos)
  if (pos < text.length) fail("unexpected text after the value")
  return root
}

/** The plain value of a node (objects keep the last of duplicate keys, as `JSON.parse` does). */
export const toValue = (node: Node): unknown => {
  if (node.kind === "scalar") return node.value
  if (node.kind === "array") return node.items.map((e) => toValue(e.value))
  const o: Record<string, unknown> = {}
  for (const m of node.items) {
    Object.defineProperty(o, m.key, { value: toValue(m.value), enumerable: true, writable: true, configurable: true })
  }
  return o
}

/** The last member named `key` (the one a JSON reader keeps), if any. */
export const member = (node: ObjectNode, key: string): Member | undefined => {
  for (let i = node.items.length - 1; i >= 0; i--) if (node.items[i]!.key === key) return node.items[i]
  return undefined
}

/** The line break the text uses (`\r\n` when it has one, else `\n`). */
export const newlineOf = (text: string): string => (text.includes("\r\n") ? "\r\n" : "\n")

/**
 * One level of the text's indentation: a tab when the first indented line starts
 * with one, else the smallest number of leading spaces of a line (2 when no line
 * is indented).
 */
export const indentUnitOf = (text: string): string => {
  let spaces = Infinity
  for (const m of text.matchAll(/\n([ \t]+)\S/g)) {
    const ws = m[1]!
    if (ws.startsWith("\t")) {
      if (spaces === Infinity) return "\t"
      continue
    }
    spaces = Math.min(spaces, ws.length)
  }
  return spaces === Infinity ? "  " : " ".repeat(Math.min(spaces, 8))
}

const lineStart = (text: string, pos: number): number => text.lastIndexOf("\n", pos - 1) + 1

/** The leading whitespace of the line holding `pos`. */
export const lineIndent = (text: string, pos: number): string => {
  const start = lineStart(text, pos)
  return /^[ \t]*/.exec(text.slice(start, pos))![0]
}

/** `value` as JSON text indented by `unit`, each line after the first prefixed with `base`. */
export const render = (value: unknown, unit: string, base: string, newline: string): string =>
  JSON.stringify(value, null, unit).split("\n").join(newline + base)

/** `key: value` as a member's text (see `render`). */
export const renderMember = (key: string, value: unknown, unit: string, base: string, newline: string): string =>
  `${JSON.stringify(key)}: ${render(value, unit, base, newline)}`

/** One splice: `text` inserted at `at` after deleting `[at, at + deleted)`. */
export interface Splice {
  readonly at: number
  readonly deleted: number
  readonly text: string
}

/** `text` with the splice applied. */
export const apply = (text: string, s: Splice): string => text.slice(0, s.at) + s.text + text.slice(s.at + s.deleted)

/**
 * The splice that appends an item to `container`; `item` renders it at a given
 * base indentation (the indentation of the lines after its first). Appended
 * after the last item as `,` + newline + indentation + the item (the last item's
 * indentation when it starts its line, else one level deeper than the
 * container's line); into an empty container right after its opening bracket,
 * at the container's own indentation.
 */
export const insertItem = (
  text: string,
  container: ObjectNode | ArrayNode,
  item: (base: string, unit: string, newline: string) => string
): Splice => {
  const unit = indentUnitOf(text)
  const newline = newlineOf(text)
  const last = container.items.at(-1)
  if (last === undefined) {
    return { at: container.start + 1, deleted: 0, text: item(lineIndent(text, container.start), unit, newline) }
  }
  const ownLine = /^[ \t]*$/.test(text.slice(lineStart(text, last.start), last.start))
  const indent = ownLine ? lineIndent(text, last.start) : lineIndent(text, container.start) + unit
  return { at: last.end, deleted: 0, text: `,${newline}${indent}${item(indent, unit, newline)}` }
}

/** Whether anything (space, a comment) stands between a sole item and its container's opening bracket. */
export const hasGap = (container: ObjectNode | ArrayNode): boolean =>
  container.items.length > 0 && container.items[0]!.start > container.start + 1

/**
 * The splice that removes item `index` of `container`: after another item, from
 * that item's end to its own; the first of several, up to the next one's start;
 * a sole item right after the opening bracket, with a comma that follows it; a
 * sole item with space before it, from the line break before it (or the bracket)
 * to the closing bracket when only whitespace follows it, else to its end and a
 * comma that follows it.
 */
export const removeItem = (text: string, container: ObjectNode | ArrayNode, index: number): Splice => {
  const items = container.items
  const item = items[index]!
  const span = (from: number, to: number): Splice => ({ at: from, deleted: to - from, text: "" })
  if (index > 0) return span(items[index - 1]!.end, item.end)
  if (items.length > 1) return span(item.start, items[1]!.start)
  const afterComma = () => {
    const next = skipTrivia(text, item.end)
    return text[next] === "," ? next + 1 : item.end
  }
  if (!hasGap(container)) return span(container.start + 1, afterComma())
  const close = container.end - 1
  const nl = text.lastIndexOf("\n", item.start - 1)
  const from = nl > container.start ? (text[nl - 1] === "\r" ? nl - 1 : nl) : container.start + 1
  return /^\s*$/.test(text.slice(item.end, close)) ? span(from, close) : span(from, afterComma())
}
