/**
 * JSON text for stored entries. `JSON.stringify` writes `-0` as `0`, which would
 * change a payload on its way through storage (the hash survives, since RFC 8785
 * also writes `0`, but the entry read back would differ from the one written).
 * This writer keeps `-0`; everything else is exactly `JSON.stringify`, and
 * `JSON.parse` reads it back unchanged.
 */

/**
 * Serializes plain JSON data (as produced by `Entry.encode`), keeping `-0`.
 */
export const stringify = (value: unknown): string => {
  if (typeof value === "number") return Object.is(value, -0) ? "-0" : JSON.stringify(value)
  if (value === null || typeof value !== "object") return JSON.stringify(value)
  if (Array.isArray(value)) {
    let out = "["
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ","
      const item: unknown = value[i]
      out += item === undefined ? "null" : stringify(item)
    }
    return out + "]"
  }
  let out = "{"
  let first = true
  for (const [key, item] of Object.entries(value as Record<string, unknown>)) {
    if (item === undefined) continue
    if (!first) out += ","
    first = false
    out += JSON.stringify(key) + ":" + stringify(item)
  }
  return out + "}"
}
