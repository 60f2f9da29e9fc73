/**
 * RFC 8785 JSON Canonicalization Scheme for values that are already plain JSON.
 *
 * Written here rather than taken from a package because RFC 8785 reduces to three
 * ECMAScript rules (JSON.stringify for strings and numbers, keys sorted by UTF-16
 * code units, no whitespace) and the available packages either pull in more than
 * that or accept non-JSON input silently. Input is validated first (`check`), so
 * the only values reaching `canonicalize` are null, booleans, finite numbers,
 * well-formed strings, arrays and plain objects.
 *
 * Payloads are caller data of any shape, so nothing here recurses on them: every
 * walk keeps its own stack, and a 100,000-level array costs memory, not the call
 * stack of whoever reads it.
 */

/** @internal */
export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

const loneSurrogate = /\p{Cs}/u

/**
 * Whether a string has a UTF-8 encoding (no lone surrogates). In unicode mode a
 * correctly paired surrogate is one code point, so only a lone surrogate matches Cs.
 *
 * @internal
 */
export const isWellFormed = (s: string): boolean => !loneSurrogate.test(s)

/**
 * Bounds a value must keep. `maxDepth` counts levels of arrays and objects (a scalar
 * has depth 0, `[]` depth 1, `[[1]]` depth 2). `maxSize` bounds the value written
 * out as a tree: one per value plus the UTF-16 length of every string and key, a
 * value shared in several places counting each time it appears.
 *
 * @internal
 */
export interface Limits {
  readonly maxDepth: number
  readonly maxSize: number
  /** Whether strings and keys must be well-formed Unicode (default true; RFC 8785 needs it). */
  readonly wellFormed?: boolean | undefined
}

/**
 * Why a value is refused by `check`.
 *
 * @internal
 */
export type Problem =
  | { readonly _tag: "NotJson"; readonly path: string }
  | { readonly _tag: "TooDeep"; readonly path: string; readonly depth: number }
  | { readonly _tag: "TooLarge"; readonly path: string }

interface Frame {
  readonly value: object
  // Object keys, or undefined for an array (whose length is read once, below).
  readonly keys: ReadonlyArray<string> | undefined
  readonly length: number
  index: number
  // Height of the tallest child seen so far, and the running size when it was entered.
  height: number
  readonly sizeAtStart: number
}

interface Done {
  readonly height: number
  readonly size: number
}

const pathOf = (stack: ReadonlyArray<Frame>): string => {
  let path = "$"
  for (const frame of stack) {
    const i = frame.index - 1
    path += frame.keys === undefined ? `[${i}]` : `.${frame.keys[i]}`
  }
  return path
}

const isPlain = (value: object): boolean => {
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

const unbounded: Limits = { maxDepth: Infinity, maxSize: Infinity }

/**
 * Checks that `value` is JSON RFC 8785 can canonicalize (finite numbers, well-formed
 * strings and keys, plain objects and arrays, no cycles) within `limits`, returning
 * the first problem in document order. Iterative and linear in the number of
 * distinct arrays and objects (a subtree shared in many places is walked once), so
 * it is total for any input: deep, cyclic, or a small graph that would be huge
 * written out.
 *
 * @internal
 */
export const check = (value: unknown, limits: Limits = unbounded): Problem | undefined => {
  const stack: Array<Frame> = []
  try {
    return walk(value, limits, stack)
  } catch {
    // A proxy or getter that throws is not JSON.
    return { _tag: "NotJson", path: pathOf(stack) }
  }
}

const walk = (root: unknown, limits: Limits, stack: Array<Frame>): Problem | undefined => {
  // Subtrees already checked, with their height and size, so that a value shared in
  // many places is walked once; a node on the current path is in `open` (a cycle).
  const wellFormed = limits.wellFormed === false ? () => true : isWellFormed
  const done = new WeakMap<object, Done>()
  const open = new Set<object>()
  let size = 0
  let value: unknown = root
  while (true) {
    // Visit `value`: a leaf adds its size; a checked subtree adds its height and
    // size; a new array or object becomes the top frame.
    let height = -1
    switch (typeof value) {
      case "boolean":
        size += 1
        height = 0
        break
      case "number":
        if (!Number.isFinite(value)) return { _tag: "NotJson", path: pathOf(stack) }
        size += 1
        height = 0
        break
      case "string":
        if (!wellFormed(value)) return { _tag: "NotJson", path: pathOf(stack) }
        size += 1 + value.length
        height = 0
        break
      case "object": {
        if (value === null) {
          size += 1
          height = 0
          break
        }
        if (open.has(value)) return { _tag: "NotJson", path: pathOf(stack) }
        const seen = done.get(value)
        if (seen !== undefined) {
          if (stack.length + seen.height > limits.maxDepth) {
            return { _tag: "TooDeep", path: pathOf(stack), depth: depthOf(root) }
          }
          size += seen.size
          height = seen.height
          break
        }
        const isArray = Array.isArray(value)
        if (!isArray && !isPlain(value)) return { _tag: "NotJson", path: pathOf(stack) }
        if (stack.length + 1 > limits.maxDepth) {
          return { _tag: "TooDeep", path: pathOf(stack), depth: depthOf(root) }
        }
        const keys = isArray ? undefined : Object.keys(value)
        open.add(value)
        stack.push({
          value,
          keys,
          length: keys === undefined ? (value as ReadonlyArray<unknown>).length : keys.length,
          index: 0,
          height: 0,
          sizeAtStart: size
        })
        size += 1
        break
      }
      default:
        return { _tag: "NotJson", path: pathOf(stack) }
    }
    if (size > limits.maxSize) return { _tag: "TooLarge", path: pathOf(stack) }
    let top = stack[stack.length - 1]
    if (top === undefined) return undefined
    // A leaf or a checked subtree: count its height in its parent.
    if (height >= 0 && height + 1 > top.height) top.height = height + 1
    // Close every finished frame, then descend into the next child.
    while (top.index >= top.length) {
      stack.pop()
      open.delete(top.value)
      const h = Math.max(top.height, 1)
      done.set(top.value, { height: h, size: size - top.sizeAtStart })
      const parent = stack[stack.length - 1]
      if (parent === undefined) return undefined
      if (h + 1 > parent.height) parent.height = h + 1
      top = parent
    }
    const i = top.index++
    if (top.keys === undefined) {
      // A hole reads as undefined, which is not JSON.
      value = (top.value as ReadonlyArray<unknown>)[i]
    } else {
      const key = top.keys[i]!
      if (!wellFormed(key)) return { _tag: "NotJson", path: `${pathOf(stack.slice(0, -1))}.<key>` }
      size += key.length
      value = (top.value as Record<string, unknown>)[key]
    }
  }
}

/**
 * The nesting depth of any value: levels of arrays and objects, a scalar being 0.
 * Iterative; a cycle ends the count where it closes, and a subtree shared in many
 * places is measured once.
 *
 * @internal
 */
export const depthOf = (root: unknown): number => {
  const heights = new WeakMap<object, number>()
  const open = new Set<object>()
  const stack: Array<{ readonly value: object; readonly children: Array<unknown>; index: number; height: number }> = []
  const enter = (value: unknown): number | undefined => {
    if (typeof value !== "object" || value === null) return 0
    const known = heights.get(value)
    if (known !== undefined) return known
    if (open.has(value)) return 0
    open.add(value)
    let children: Array<unknown>
    try {
      children = Array.isArray(value) ? Array.from(value) : Object.values(value)
    } catch {
      children = []
    }
    stack.push({ value, children, index: 0, height: 1 })
    return undefined
  }
  const first = enter(root)
  if (first !== undefined) return first
  while (true) {
    const top = stack[stack.length - 1]!
    if (top.index < top.children.length) {
      const h = enter(top.children[top.index++])
      if (h !== undefined && h + 1 > top.height) top.height = h + 1
      continue
    }
    stack.pop()
    open.delete(top.value)
    heights.set(top.value, top.height)
    const parent = stack[stack.length - 1]
    if (parent === undefined) return top.height
    if (top.height + 1 > parent.height) parent.height = top.height + 1
  }
}

/**
 * Returns the path of the first non-JSON part of `value`, or `undefined` when the
 * whole value is JSON that RFC 8785 can canonicalize (finite numbers, well-formed
 * strings, plain objects and arrays, no cycles). No depth or size bound.
 *
 * @internal
 */
export const firstInvalid = (value: unknown): string | undefined => check(value)?.path

/**
 * The RFC 8785 canonical form of a JSON value (call `check` first).
 *
 * @internal
 */
export const canonicalize = (value: Json): string => {
  if (value === null || typeof value !== "object") {
    // JSON.stringify gives ECMAScript's shortest round-trip number form (and "0" for -0)
    // and the string escaping RFC 8785 prescribes.
    return JSON.stringify(value)
  }
  const stack: Array<{ readonly value: Json; readonly keys: ReadonlyArray<string> | undefined; index: number }> = []
  let out = ""
  let next: Json = value
  while (true) {
    if (next !== null && typeof next === "object") {
      if (Array.isArray(next)) {
        out += "["
        stack.push({ value: next, keys: undefined, index: 0 })
      } else {
        out += "{"
        // Default sort compares UTF-16 code units, which is the order RFC 8785 requires.
        stack.push({ value: next, keys: Object.keys(next).sort(), index: 0 })
      }
    } else {
      out += JSON.stringify(next)
    }
    let top = stack[stack.length - 1]!
    while (top.index >= (top.keys === undefined ? (top.value as ReadonlyArray<Json>).length : top.keys.length)) {
      out += top.keys === undefined ? "]" : "}"
      stack.pop()
      if (stack.length === 0) return out
      top = stack[stack.length - 1]!
    }
    const i = top.index++
    if (i > 0) out += ","
    if (top.keys === undefined) {
      next = (top.value as ReadonlyArray<Json>)[i]!
    } else {
      const key = top.keys[i]!
      out += JSON.stringify(key) + ":"
      next = (top.value as { readonly [key: string]: Json })[key]!
    }
  }
}
