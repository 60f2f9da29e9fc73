/**
 * The size of an entry as storage holds it, for `WriteHandle.maxRecordBytes`: the
 * UTF-8 bytes of its JSON text (`toJsonText(encode(entry))`).
 */
import * as Entry from "../Entry.ts"

/** UTF-8 bytes of a string (a lone surrogate counts as U+FFFD, 3 bytes). */
export const utf8Length = (s: string): number => {
  let bytes = 0
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x80) bytes += 1
    else if (c < 0x800) bytes += 2
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) {
        bytes += 4
        i++
      } else bytes += 3
    } else bytes += 3
  }
  return bytes
}

/** UTF-8 bytes of an entry's JSON text. */
export const recordBytes = (entry: Entry.Entry): number => utf8Length(Entry.jsonText(entry))

// A tool entry's text is its names, escaped (at most 6 bytes per UTF-16 unit), plus
// keys, two hashes and numbers that never take 400 bytes: below this, no need to
// write it out.
const toolBound = (entry: Entry.ToolEntry): number =>
  400 + 6 * (entry.tool_name.length + entry.server_id.length + entry.agent_id.length)

/**
 * The size of `entry` when it is more than `max` bytes, otherwise `undefined`. A
 * tool entry whose names are short enough is not written out to find that.
 */
export const over = (entry: Entry.Entry, max: number): number | undefined => {
  if (Entry.isTool(entry) && toolBound(entry) <= max) return undefined
  const bytes = recordBytes(entry)
  return bytes > max ? bytes : undefined
}
