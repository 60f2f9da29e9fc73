/**
 * The size of an entry as storage holds it, for `WriteHandle.maxRecordBytes`: the
 * UTF-8 bytes of its JSON text (`toJsonText(encode(entry))`).
 */
import * as Entry from "../Entry.ts"
import { utf8Length } from "../Utf8.ts"
import * as TakenEntry from "./takenEntry.ts"

/** UTF-8 bytes of an entry's JSON text. */
export const recordBytes = (entry: Entry.Entry): number => utf8Length(Entry.jsonText(entry))

// A tool entry's text is its names, escaped (at most 6 bytes per UTF-16 unit), plus
// keys, two hashes and numbers that never take 400 bytes: below this, no need to
// write it out.
const toolBound = (entry: Entry.ToolEntry): number =>
  400 + 6 * (entry.tool_name.length + entry.server_id.length + entry.agent_id.length)

// The longest JSON text of a finite number ("-1.2345678901234567e-308" is 24 bytes).
const NUMBER_BYTES = 25

/**
 * An upper bound on the UTF-8 bytes of `toJsonText(value)` for JSON data, without
 * writing it out: each UTF-16 unit of a string or key counts 6 bytes (the widest
 * escape, `\u001f`; a character above U+007F takes at most 3 bytes per unit), a
 * number 25, every separator and bracket one. The walk stops as soon as the bound
 * passes `limit` and returns what it has counted then (more than `limit`): a
 * value shared in many places, or a cycle, costs at most `limit` of walking.
 */
export const jsonBound = (value: unknown, limit: number): number => {
  let bytes = 0
  const stack: Array<unknown> = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (typeof v === "string") bytes += 2 + 6 * v.length
    else if (typeof v === "number") bytes += NUMBER_BYTES
    else if (typeof v === "boolean") bytes += 5
    else if (typeof v !== "object" || v === null) bytes += 4
    else if (Array.isArray(v)) {
      // Brackets and at most one comma per element.
      bytes += 2 + v.length
      for (let i = v.length - 1; i >= 0; i--) stack.push(v[i])
    } else {
      const keys = Object.keys(v)
      // Braces, and per member its quoted key, a colon and a comma.
      bytes += 2 + keys.length
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!
        bytes += 3 + 6 * key.length
        stack.push((v as Record<string, unknown>)[key])
      }
    }
    if (bytes > limit) return bytes
  }
  return bytes
}

// An entry's text around its payload's: keys, two hashes, two numbers, the kind
// (escaped, at most 6 bytes per UTF-16 unit).
const otherBound = (entry: Entry.OtherEntry): number => 300 + 6 * entry.kind.length

/**
 * An upper bound on `recordBytes(entry)`, or a number above `max` once the bound
 * passes it: a tool entry by the lengths of its names, another entry by its
 * payload's JSON text when the walk that took the payload over made it (at most 3
 * UTF-8 bytes per UTF-16 unit), else by `jsonBound` of its encoding (a line's
 * payload is a few fields, so the bound is found without escaping its text).
 */
export const bound = (entry: Entry.Entry, max: number): number => {
  if (Entry.isTool(entry)) return toolBound(entry)
  const text = TakenEntry.payloadText(entry, false)
  return text === undefined ? jsonBound(Entry.encode(entry), max) : otherBound(entry) + 3 * text.length
}

/**
 * The size of `entry` when it is more than `max` bytes, otherwise `undefined`. The
 * entry is written out only when its bound (`bound`) says it may not fit.
 */
export const over = (entry: Entry.Entry, max: number): number | undefined => {
  if (bound(entry, max) <= max) return undefined
  const bytes = recordBytes(entry)
  return bytes > max ? bytes : undefined
}
