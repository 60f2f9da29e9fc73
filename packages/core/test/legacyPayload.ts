/**
 * The payload validation of before the single walk, kept verbatim as the reference
 * the walk is tested against (`PayloadWalk.test.ts`): `check` with its own walk,
 * then a `structuredClone` of the caller's value, then `canonicalize` of the copy
 * for the hash and `toJsonText` of it for storage — three walks and a clone.
 */
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import { InvalidRecordField, RecordFieldReason } from "../src/index.ts"
import { canonicalize, depthOf, type Limits, type Problem } from "../src/internal/jcs.ts"
import { toJsonText } from "../src/internal/jsonText.ts"
import {
  GUARD_STATE_KIND,
  isU53,
  MAX_GUARD_STATE_BYTES,
  MAX_PAYLOAD_DEPTH,
  MAX_PAYLOAD_SIZE,
  MAX_U53,
  OUTCOME_KIND
} from "../src/internal/validate.ts"
import { utf8Length } from "../src/Utf8.ts"

const isWellFormed = (s: string): boolean => !/\p{Cs}/u.test(s)

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

const reasonOf = (problem: Problem): RecordFieldReason.Reason => {
  switch (problem._tag) {
    case "NotJson":
      return new RecordFieldReason.NotJson({ path: problem.path })
    case "TooDeep":
      // No path: it would be the limit's worth of "[0]"s.
      return new RecordFieldReason.TooDeep({ depth: problem.depth, limit: MAX_PAYLOAD_DEPTH })
    case "TooLarge":
      return new RecordFieldReason.TooLarge({ limit: MAX_PAYLOAD_SIZE })
  }
}

const payloadLimits = { maxDepth: MAX_PAYLOAD_DEPTH, maxSize: MAX_PAYLOAD_SIZE } as const

const payloadReason = (payload: unknown): RecordFieldReason.Reason | undefined => {
  const problem = check(payload, payloadLimits)
  return problem === undefined ? undefined : reasonOf(problem)
}

const kindPattern = /^[A-Za-z0-9_.:-]{1,64}$/

const outcomeProblem = (payload: unknown): RecordFieldReason.Reason | undefined => {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    return new RecordFieldReason.NotObject({ kind: OUTCOME_KIND })
  }
  const o = payload as Record<string, unknown>
  for (const field of ["bytes_read", "bytes_written"]) {
    if (Object.hasOwn(o, field) && !isU53(o[field])) {
      return new RecordFieldReason.OutOfRange({ max: MAX_U53, member: field })
    }
  }
  return undefined
}

export const guardStateProblem = (payload: unknown): string | undefined => {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) {
    return `of kind ${GUARD_STATE_KIND} must be an object`
  }
  // Bounded before it is written out: a value of tree size over the bound has a
  // longer text (every value and key costs at least one character).
  if (check(payload, { maxDepth: MAX_PAYLOAD_DEPTH, maxSize: MAX_GUARD_STATE_BYTES }) !== undefined) {
    return `of kind ${GUARD_STATE_KIND} must be JSON whose text is at most ${MAX_GUARD_STATE_BYTES} bytes`
  }
  let text: string
  try {
    text = JSON.stringify(payload)
  } catch {
    return `of kind ${GUARD_STATE_KIND} must be JSON`
  }
  return utf8Length(text) > MAX_GUARD_STATE_BYTES
    ? `of kind ${GUARD_STATE_KIND} must be JSON whose text is at most ${MAX_GUARD_STATE_BYTES} bytes`
    : undefined
}

export const validatePayload = (
  kind: string,
  payload: unknown
): Result.Result<Schema.Json, InvalidRecordField> => {
  if (typeof kind !== "string" || !kindPattern.test(kind) || kind === "tool") {
    return Result.fail(
      new InvalidRecordField({ field: "kind", reason: new RecordFieldReason.BadKind() })
    )
  }
  if (payload === undefined) {
    return Result.fail(new InvalidRecordField({ field: "payload", reason: new RecordFieldReason.Required() }))
  }
  const bad = payloadReason(payload)
  if (bad !== undefined) return Result.fail(new InvalidRecordField({ field: "payload", reason: bad }))
  if (kind === OUTCOME_KIND || kind === GUARD_STATE_KIND) {
    const state = kind === GUARD_STATE_KIND ? guardStateProblem(payload) : undefined
    const wrong = kind === OUTCOME_KIND
      ? outcomeProblem(payload)
      : state === undefined
      ? undefined
      : new RecordFieldReason.NotGuardState({ problem: state })
    if (wrong !== undefined) return Result.fail(new InvalidRecordField({ field: "payload", reason: wrong }))
  }
  if (typeof payload !== "object" || payload === null) return Result.succeed(payload as Schema.Json)
  // The entry keeps its own copy: a caller that changes its object after the call
  // must not change what was hashed and stored.
  try {
    return Result.succeed(structuredClone(payload) as Schema.Json)
  } catch {
    return Result.fail(new InvalidRecordField({ field: "payload", reason: new RecordFieldReason.NotCopyable() }))
  }
}

/**
 * What the old path made of a payload: the clone, the RFC 8785 text of the clone
 * (hashed) and its JSON text (stored), or the failure.
 */
export const take = (
  kind: string,
  payload: unknown
): Result.Result<
  { readonly value: Schema.Json; readonly canonical: string; readonly text: string },
  InvalidRecordField
> =>
  Result.map(validatePayload(kind, payload), (value) => ({
    value,
    canonical: canonicalize(value),
    text: toJsonText(value)
  }))
