/**
 * The JSON text writer of stored data: `JSON.stringify` that keeps `-0` and never
 * recurses on the value.
 */

// JSON.stringify recurses, and overflows the call stack a few thousand levels down
// (fewer when called from deep in a stack). Entries never come near that (payloads
// are bounded by MAX_PAYLOAD_DEPTH), but this writer takes any plain data, so past
// this depth it writes with its own stack instead.
const NATIVE_MAX_DEPTH = 512

// One iterative pass: does the value hold a -0, or nest deeper than NATIVE_MAX_DEPTH?
// A cycle answers "native", so JSON.stringify reports it as it always does.
const needsOwnWriter = (root: unknown): boolean => {
  if (typeof root === "number") return Object.is(root, -0)
  if (typeof root !== "object" || root === null) return false
  const open = new Set<object>()
  const stack: Array<{ readonly value: object; readonly children: ReadonlyArray<unknown>; index: number }> = []
  const enter = (value: object): boolean => {
    if (open.has(value)) return false
    open.add(value)
    stack.push({ value, children: Array.isArray(value) ? value : Object.values(value), index: 0 })
    return true
  }
  enter(root)
  while (stack.length > 0) {
    if (stack.length > NATIVE_MAX_DEPTH) return true
    const top = stack[stack.length - 1]!
    if (top.index >= top.children.length) {
      stack.pop()
      open.delete(top.value)
      continue
    }
    const child = top.children[top.index++]
    if (typeof child === "number") {
      if (Object.is(child, -0)) return true
    } else if (typeof child === "object" && child !== null && !enter(child)) {
      return false
    }
  }
  return false
}

// What JSON.stringify writes for a value that is not an array or object, or
// undefined where it writes nothing (undefined, functions, symbols).
const scalarText = (value: unknown): string | undefined =>
  typeof value === "number" && Object.is(value, -0) ? "-0" : JSON.stringify(value) as string | undefined

// JSON.stringify for plain data, with its own stack, writing -0 as -0. Called only
// when `needsOwnWriter` found no cycle.
const stringifyOwn = (root: unknown): string => {
  if (typeof root !== "object" || root === null) return scalarText(root) ?? "null"
  const stack: Array<{
    readonly value: object
    readonly keys: ReadonlyArray<string> | undefined
    index: number
    first: boolean
  }> = []
  let out = ""
  let next: unknown = root
  while (true) {
    if (typeof next === "object" && next !== null) {
      const isArray = Array.isArray(next)
      out += isArray ? "[" : "{"
      stack.push({ value: next, keys: isArray ? undefined : Object.keys(next), index: 0, first: true })
    } else {
      // Array slots that JSON.stringify would drop are written as null.
      out += scalarText(next) ?? "null"
    }
    let top = stack[stack.length - 1]!
    while (true) {
      if (top.keys === undefined) {
        if (top.index < (top.value as ReadonlyArray<unknown>).length) {
          next = (top.value as ReadonlyArray<unknown>)[top.index++]
          if (!top.first) out += ","
          top.first = false
          break
        }
      } else {
        let found = false
        while (top.index < top.keys.length) {
          const key = top.keys[top.index++]!
          const item = (top.value as Record<string, unknown>)[key]
          if ((typeof item !== "object" || item === null) && scalarText(item) === undefined) continue
          if (!top.first) out += ","
          top.first = false
          out += JSON.stringify(key) + ":"
          next = item
          found = true
          break
        }
        if (found) break
      }
      out += top.keys === undefined ? "]" : "}"
      stack.pop()
      if (stack.length === 0) return out
      top = stack[stack.length - 1]!
    }
  }
}

/**
 * JSON text of plain JSON data (entries as `encode` gives them, checkpoints, lines
 * of storage), exactly `JSON.stringify` except that `-0` is written as `-0`, so a
 * payload reads back as it was written (`JSON.parse` keeps `-0`; the hash is the same
 * either way, since RFC 8785 writes `0`). Values without `-0` — nearly all — go
 * through the native `JSON.stringify` after one cheap scan. Never recurses on the
 * value: data nested deeper than the native writer can take is written iteratively.
 *
 * @since 0.1.0
 */
export const toJsonText = (value: unknown): string =>
  needsOwnWriter(value) ? stringifyOwn(value) : JSON.stringify(value)
