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

// ES2024's `String.prototype.isWellFormed` (Node 20, current browsers; core's
// ES2022 lib does not declare it): the same answer as the expression, several times
// faster on long strings.
const native = (String.prototype as { readonly isWellFormed?: (this: string) => boolean }).isWellFormed

/**
 * Whether a string has a UTF-8 encoding (no lone surrogates). In unicode mode a
 * correctly paired surrogate is one code point, so only a lone surrogate matches Cs.
 *
 * @internal
 */
export const isWellFormed: (s: string) => boolean = native === undefined
  ? (s) => !loneSurrogate.test(s)
  : (s) => native.call(s)

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
  // When taking a value over (`own`): the copy, the children's RFC 8785 texts (an
  // object's as `"key":text`), the JSON text so far, and whether the two texts of
  // everything so far are the same (no -0, keys in order).
  readonly copy: Array<Json> | Record<string, Json> | undefined
  readonly canons: Array<string> | undefined
  text: string
  same: boolean
}

interface Done {
  readonly height: number
  readonly size: number
}

// A subtree taken over: its shape, its copy, its texts and what it was copied from.
interface OwnedTree extends Done {
  readonly copy: Json
  readonly canonical: string
  readonly text: string
  readonly same: boolean
  readonly source: object
}

/**
 * A value taken over by `own`: the journal's copy of it, its RFC 8785 text (what
 * the hash is taken over), its JSON text (`toJsonText` of the copy: keys in their
 * order, `-0` kept; what storage writes) and its size as `Limits.maxSize` counts it.
 *
 * @internal
 */
export interface Owned {
  readonly _tag: "Owned"
  readonly value: Json
  readonly canonical: string
  readonly text: string
  readonly size: number
}

// Frozen copies `own` made with `freeze`, with their texts: met again (a policy's
// next state shares most of the last one), they are taken as they are.
const frozen = new WeakMap<object, OwnedTree>()

/**
 * What `own` made of a frozen copy it made with `freeze`, or `undefined` for any
 * other value.
 *
 * @internal
 */
export const taken = (value: unknown): Owned | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const tree = frozen.get(value)
  return tree === undefined ? undefined : owned(tree, tree.size)
}

/**
 * The array or object a frozen copy of `own` was made from (what it held then),
 * or `undefined` for any other value: lets the maker of a value, which knows it
 * never changes what it made, recognise the journal's copy of it.
 *
 * @internal
 */
export const copiedFrom = (value: unknown): object | undefined =>
  typeof value === "object" && value !== null ? frozen.get(value)?.source : undefined

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
    const found = walk(value, limits, stack, undefined)
    return found?._tag === "Owned" ? undefined : found
  } catch {
    // A proxy or getter that throws is not JSON.
    return { _tag: "NotJson", path: pathOf(stack) }
  }
}

/**
 * `check`, and in the same walk the value taken over: a copy of it (fresh arrays
 * and plain objects; strings, numbers, booleans and null as they are) with its
 * RFC 8785 text and its JSON text. Every property is read once, so what was checked
 * is what is copied and written: a getter that answers differently the next time
 * changes nothing. With `freeze`, the copies are frozen and remembered, and a frozen
 * copy met again is taken as it is (its texts known): a state made from the last
 * one costs only what is new in it. Refuses exactly what `check` refuses, with the
 * same problem.
 *
 * @internal
 */
export const own = (value: unknown, limits: Limits, freeze = false): Owned | Problem => {
  const stack: Array<Frame> = []
  try {
    return walk(value, limits, stack, freeze)!
  } catch {
    return { _tag: "NotJson", path: pathOf(stack) }
  }
}

// Up to this depth a cycle is looked for on the path itself; deeper, in a set.
const SHALLOW = 8

const onPath = (stack: ReadonlyArray<Frame>, value: object): boolean => {
  for (let i = 0; i < stack.length; i++) if (stack[i]!.value === value) return true
  return false
}

// What `own` keeps of the child it visited or closed last.
interface Child {
  copy: Json
  canonical: string
  text: string
  same: boolean
}

// Adds the child just visited or closed to its parent, `top`, whose index points
// past it.
const addChild = (top: Frame, child: Child): void => {
  const i = top.index - 1
  const comma = i > 0 ? "," : ""
  if (top.keys === undefined) {
    ;(top.copy as Array<Json>).push(child.copy)
    top.canons!.push(child.canonical)
    top.text += comma + child.text
  } else {
    const key = top.keys[i]!
    const copy = top.copy as Record<string, Json>
    if (key === "__proto__") {
      // A member named __proto__ is data, as JSON.parse makes it; assigning it would
      // set the copy's prototype.
      Object.defineProperty(copy, key, { value: child.copy, writable: true, enumerable: true, configurable: true })
    } else {
      copy[key] = child.copy
    }
    const keyText = JSON.stringify(key)
    top.canons!.push(keyText + ":" + child.canonical)
    top.text += comma + keyText + ":" + child.text
  }
  if (!child.same) top.same = false
}

// `parts` (one per key) in the order of their keys' UTF-16 code units, the order
// RFC 8785 requires: an insertion sort of positions while there are few keys.
const inKeyOrder = (keys: ReadonlyArray<string>, parts: ReadonlyArray<string>): Array<string> => {
  const n = keys.length
  const order: Array<number> = []
  if (n > 16) {
    for (let i = 0; i < n; i++) order.push(i)
    order.sort((a, b) => (keys[a]! < keys[b]! ? -1 : 1))
  } else {
    for (let i = 0; i < n; i++) {
      let j = i
      while (j > 0 && keys[order[j - 1]!]! > keys[i]!) j--
      order.splice(j, 0, i)
    }
  }
  const out: Array<string> = []
  for (let i = 0; i < n; i++) out.push(parts[order[i]!]!)
  return out
}

// Finishes a frame's copy and texts into `child`.
const closeFrame = (top: Frame, child: Child): void => {
  const canons = top.canons!
  let same = top.same
  let canonical: string
  if (top.keys === undefined) {
    top.text += "]"
    canonical = same ? top.text : `[${canons.join(",")}]`
  } else {
    top.text += "}"
    const keys = top.keys
    let sorted = true
    for (let i = 1; i < keys.length; i++) {
      if (!(keys[i - 1]! < keys[i]!)) {
        sorted = false
        break
      }
    }
    if (sorted) {
      canonical = same ? top.text : `{${canons.join(",")}}`
    } else {
      same = false
      canonical = `{${inKeyOrder(keys, canons).join(",")}}`
    }
  }
  child.copy = top.copy as Json
  child.canonical = canonical
  child.text = top.text
  child.same = same
}

// The walk of `check` (`freeze` undefined) and of `own` (`freeze` a boolean).
const walk = (
  root: unknown,
  limits: Limits,
  stack: Array<Frame>,
  freeze: boolean | undefined
): Problem | Owned | undefined => {
  // Subtrees already checked, with their height and size, so that a value shared in
  // many places is walked once; a node on the current path is in `open` (a cycle).
  const wellFormed = limits.wellFormed === false ? () => true : isWellFormed
  const emit = freeze !== undefined
  // Made when first needed: most payloads are a few small objects, and a shallow
  // path is searched faster than a set is made.
  let done: WeakMap<object, Done> | undefined
  let open: Set<object> | undefined
  const child: Child = { copy: null, canonical: "", text: "", same: true }
  let size = 0
  let value: unknown = root
  while (true) {
    // Visit `value`: a leaf adds its size; a checked subtree adds its height and
    // size; a new array or object becomes the top frame.
    let height = -1
    let known: Done | undefined
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
        if (open === undefined ? onPath(stack, value) : open.has(value)) return { _tag: "NotJson", path: pathOf(stack) }
        known = done?.get(value) ?? (freeze === true ? frozen.get(value) : undefined)
        if (known !== undefined) {
          if (stack.length + known.height > limits.maxDepth) {
            return { _tag: "TooDeep", path: pathOf(stack), depth: depthOf(root) }
          }
          size += known.size
          height = known.height
          break
        }
        const isArray = Array.isArray(value)
        if (!isArray && !isPlain(value)) return { _tag: "NotJson", path: pathOf(stack) }
        if (stack.length + 1 > limits.maxDepth) {
          return { _tag: "TooDeep", path: pathOf(stack), depth: depthOf(root) }
        }
        const keys = isArray ? undefined : Object.keys(value)
        if (open !== undefined) open.add(value)
        else if (stack.length >= SHALLOW) open = new Set([...stack.map((f) => f.value), value])
        stack.push({
          value,
          keys,
          length: keys === undefined ? (value as ReadonlyArray<unknown>).length : keys.length,
          index: 0,
          height: 0,
          sizeAtStart: size,
          copy: emit ? (isArray ? [] : {}) : undefined,
          canons: emit ? [] : undefined,
          text: isArray ? "[" : "{",
          same: true
        })
        size += 1
        break
      }
      default:
        return { _tag: "NotJson", path: pathOf(stack) }
    }
    if (size > limits.maxSize) return { _tag: "TooLarge", path: pathOf(stack) }
    if (emit && height >= 0) {
      if (known !== undefined) {
        const tree = known as OwnedTree
        child.copy = tree.copy
        child.canonical = tree.canonical
        child.text = tree.text
        child.same = tree.same
      } else {
        // A leaf: JSON.stringify writes ECMAScript's shortest round-trip number form
        // (and "0" for -0) and the string escaping RFC 8785 prescribes.
        child.copy = value as Json
        child.canonical = JSON.stringify(value)
        child.same = !Object.is(value, -0)
        child.text = child.same ? child.canonical : "-0"
      }
    }
    let top = stack[stack.length - 1]
    if (top === undefined) return emit ? owned(child, size) : undefined
    // A leaf or a checked subtree: count its height in its parent.
    if (height >= 0) {
      if (height + 1 > top.height) top.height = height + 1
      if (emit) addChild(top, child)
    }
    // Close every finished frame, then descend into the next child.
    while (top.index >= top.length) {
      stack.pop()
      open?.delete(top.value)
      const h = Math.max(top.height, 1)
      done ??= new WeakMap()
      if (emit) {
        closeFrame(top, child)
        const tree: OwnedTree = {
          height: h,
          size: size - top.sizeAtStart,
          copy: child.copy,
          canonical: child.canonical,
          text: child.text,
          same: child.same,
          source: top.value
        }
        if (stack.length > 0) done.set(top.value, tree)
        if (freeze) frozen.set(Object.freeze(child.copy as object), tree)
      } else if (stack.length > 0) {
        done.set(top.value, { height: h, size: size - top.sizeAtStart })
      }
      const parent = stack[stack.length - 1]
      if (parent === undefined) return emit ? owned(child, size) : undefined
      if (h + 1 > parent.height) parent.height = h + 1
      if (emit) addChild(parent, child)
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

const owned = (child: Child, size: number): Owned => ({
  _tag: "Owned",
  value: child.copy,
  canonical: child.canonical,
  text: child.text,
  size
})

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
