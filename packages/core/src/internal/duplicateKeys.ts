/**
 * Finds the keys a JSON text repeats inside one object (`JSON.parse` keeps the last
 * and says nothing). A scanner of the text, iterative, linear in its length; a text
 * that is not JSON gives whatever it found before the fault (the parser reports it).
 */

/** One repeated key: the JSON path of the object and the key as decoded. */
export interface Duplicate {
  readonly path: ReadonlyArray<string | number>
  readonly key: string
}

interface Frame {
  readonly object: boolean
  readonly keys: Set<string> | null
  index: number
  key: string | null
}

/** The repeated keys of `text`, in the order they occur. */
export const duplicateKeys = (text: string): Array<Duplicate> => {
  const out: Array<Duplicate> = []
  const stack: Array<Frame> = []
  // The path of the innermost object: each enclosing container's current key or index.
  const path = (): Array<string | number> => stack.slice(0, -1).map((f) => f.object ? f.key ?? "" : f.index)
  let i = 0
  const n = text.length
  // Whether the next string in the current object is a key.
  let expectKey = false
  while (i < n) {
    const ch = text[i]!
    if (ch === "\"") {
      let j = i + 1
      let escaped = false
      while (j < n) {
        const c = text[j]!
        if (escaped) escaped = false
        else if (c === "\\") escaped = true
        else if (c === "\"") break
        j++
      }
      const raw = text.slice(i, j + 1)
      i = j + 1
      const top = stack[stack.length - 1]
      if (expectKey && top !== undefined && top.object) {
        let key: string
        try {
          key = JSON.parse(raw) as string
        } catch {
          return out
        }
        if (top.keys!.has(key)) out.push({ path: path(), key })
        top.keys!.add(key)
        top.key = key
        expectKey = false
      }
      continue
    }
    if (ch === "{") {
      stack.push({ object: true, keys: new Set(), index: 0, key: null })
      expectKey = true
    } else if (ch === "[") {
      stack.push({ object: false, keys: null, index: 0, key: null })
    } else if (ch === "}" || ch === "]") {
      stack.pop()
      expectKey = false
    } else if (ch === ",") {
      const top = stack[stack.length - 1]
      if (top !== undefined) {
        if (top.object) expectKey = true
        else top.index++
      }
    }
    i++
  }
  return out
}
