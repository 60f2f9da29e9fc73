/**
 * Input validation of entries: the limits, chio's rules for tool parameters, the
 * kinds and payloads of other entries, timestamps and session ids.
 */
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import { InvalidRecordField, InvalidSessionId } from "../Errors.ts"
import * as RecordFieldReason from "../RecordFieldReason.ts"
import { utf8Length } from "../Utf8.ts"
import { check, isWellFormed, own, type Owned, type Problem, taken } from "./jcs.ts"

/**
 * Largest value of `bytes_read`, `bytes_written`, `sequence` and `timestamp_secs`
 * (2^53 − 1: every such value is exact as a JSON number).
 *
 * @since 0.1.0
 */
export const MAX_U53 = Number.MAX_SAFE_INTEGER

/**
 * Whether `n` is a whole number in 0..2^53−1: the rule of every u53 field
 * (`sequence`, `timestamp_secs`, the byte counts), applied by the decoder to
 * stored entries and by the writer to its own clock before it appends.
 *
 * @since 0.1.0
 */
export const isU53 = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0

/**
 * Largest `delegation_depth` (chio stores it as u32).
 *
 * @since 0.1.0
 */
export const MAX_U32 = 4294967295

/**
 * Deepest nesting a payload (and the free `data` of session metadata) may have,
 * counted in levels of arrays and objects: a scalar has depth 0, `[]` and `{}`
 * depth 1, `{"a":[1]}` depth 2. A deeper payload is refused before anything is
 * appended (`InvalidRecordField` on `payload`), and a stored one fails to decode.
 * 256 is far beyond any real transcript and far below the depth at which any reader
 * of a stored entry runs out of stack (`JSON.stringify` gives up a few thousand
 * levels down, PostgreSQL's jsonb parser near its `max_stack_depth`).
 *
 * @since 0.1.0
 */
export const MAX_PAYLOAD_DEPTH = 256

/**
 * Largest payload, measured as the value written out as a tree: one per value plus
 * the UTF-16 length of every string and key (a value shared in several places counts
 * every time; that is how it is hashed and stored). 16 Mi keeps the canonical text
 * and the stored line within what a JavaScript string can hold, so a small object
 * graph that would be huge written out is refused rather than hanging the writer.
 * Storage may bound entries more tightly (the Node adapter's line length).
 *
 * @since 0.1.0
 */
export const MAX_PAYLOAD_SIZE = 16 * 1024 * 1024

/** The payload limits as `check` takes them. */
export const payloadLimits = { maxDepth: MAX_PAYLOAD_DEPTH, maxSize: MAX_PAYLOAD_SIZE } as const

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

// Why a payload is not acceptable, as a reason.
const payloadReason = (payload: unknown): RecordFieldReason.Reason | undefined => {
  const problem = check(payload, payloadLimits)
  return problem === undefined ? undefined : reasonOf(problem)
}

/**
 * Why a payload is not acceptable (not RFC 8785 JSON, nested deeper than
 * `MAX_PAYLOAD_DEPTH`, larger than `MAX_PAYLOAD_SIZE`), or `undefined` when it is.
 * Iterative: total for any input, however deep or cyclic.
 *
 * @since 0.1.0
 */
export const payloadProblem = (payload: unknown): string | undefined => payloadReason(payload)?.message

/**
 * The parameters of one tool invocation, as a caller passes them to `record`.
 * `allowed` defaults to `true`.
 *
 * @since 0.1.0
 */
export interface ToolParams {
  readonly tool_name: string
  readonly server_id: string
  readonly agent_id: string
  readonly bytes_read: number
  readonly bytes_written: number
  readonly delegation_depth: number
  readonly allowed?: boolean | undefined
}

/**
 * Tool parameters after validation (`allowed` resolved).
 *
 * @since 0.1.0
 */
export interface ValidToolParams extends ToolParams {
  readonly allowed: boolean
}

const whiteSpace = /^\p{White_Space}$/u
const control = /\p{Cc}/u

// Every White_Space code point is in the BMP and not a surrogate, so testing one
// UTF-16 unit at a time is exact. A scan, not `/\p{White_Space}+$/u`: that regex
// retries from every position of an inner run of spaces, which is quadratic (a
// 160,000-character name took over a minute).
const isWhiteSpaceAt = (s: string, i: number): boolean => whiteSpace.test(s[i]!)

/**
 * Rust's `str::trim`: strips Unicode `White_Space` (which includes U+0085 and excludes
 * U+FEFF) from both ends. Linear in the length of `s`.
 *
 * @since 0.1.0
 */
export const trimWhiteSpace = (s: string): string => {
  let start = 0
  let end = s.length
  while (start < end && isWhiteSpaceAt(s, start)) start++
  while (end > start && isWhiteSpaceAt(s, end - 1)) end--
  return start === 0 && end === s.length ? s : s.slice(start, end)
}

// Printable ASCII with no space at either end: none of the rules below can refuse
// it. Names and ids nearly always are; checking that costs less than the rules.
const isPlainAscii = (s: string): boolean => {
  const n = s.length
  if (n === 0 || n > 256) return false
  const first = s.charCodeAt(0)
  const last = s.charCodeAt(n - 1)
  if (first <= 0x20 || first >= 0x7f || last <= 0x20 || last >= 0x7f) return false
  for (let i = 1; i < n - 1; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x20 || c >= 0x7f) return false
  }
  return true
}

const checkIdentity = (field: string, value: unknown): InvalidRecordField | undefined => {
  if (typeof value !== "string") return new InvalidRecordField({ field, reason: new RecordFieldReason.NotString() })
  if (isPlainAscii(value)) return undefined
  const trimmed = trimWhiteSpace(value)
  if (trimmed.length === 0) return new InvalidRecordField({ field, reason: new RecordFieldReason.Blank() })
  if (trimmed !== value) return new InvalidRecordField({ field, reason: new RecordFieldReason.Padded() })
  if (control.test(value)) return new InvalidRecordField({ field, reason: new RecordFieldReason.ControlCharacter() })
  if (!isWellFormed(value)) return new InvalidRecordField({ field, reason: new RecordFieldReason.IllFormed() })
  return undefined
}

/**
 * Whether `value` is acceptable as `tool_name`, `server_id` or `agent_id` (chio's
 * rules: non-empty after trimming Unicode `White_Space`, equal to its trimmed form,
 * no `Cc` character, well-formed Unicode). `validateToolParams` applies the same
 * check and names the failing field.
 *
 * @since 0.1.0
 */
export const isIdentity = (value: unknown): value is string => checkIdentity("identity", value) === undefined

const checkInt = (field: string, value: unknown, max: number): InvalidRecordField | undefined =>
  typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= max
    ? undefined
    : new InvalidRecordField({ field, reason: new RecordFieldReason.OutOfRange({ max }) })

/**
 * Validates tool parameters exactly as chio does, naming the first failing field in
 * the order tool_name, server_id, agent_id, bytes_read, bytes_written,
 * delegation_depth, allowed.
 *
 * @since 0.1.0
 */
export const validateToolParams = (params: ToolParams): Result.Result<ValidToolParams, InvalidRecordField> => {
  const bad = checkIdentity("tool_name", params.tool_name) ??
    checkIdentity("server_id", params.server_id) ??
    checkIdentity("agent_id", params.agent_id) ??
    checkInt("bytes_read", params.bytes_read, MAX_U53) ??
    checkInt("bytes_written", params.bytes_written, MAX_U53) ??
    checkInt("delegation_depth", params.delegation_depth, MAX_U32) ??
    (params.allowed === undefined || typeof params.allowed === "boolean"
      ? undefined
      : new InvalidRecordField({ field: "allowed", reason: new RecordFieldReason.NotBoolean() }))
  if (bad !== undefined) return Result.fail(bad)
  return Result.succeed({
    tool_name: params.tool_name,
    server_id: params.server_id,
    agent_id: params.agent_id,
    bytes_read: params.bytes_read,
    bytes_written: params.bytes_written,
    delegation_depth: params.delegation_depth,
    allowed: params.allowed ?? true
  })
}

const kindPattern = /^[A-Za-z0-9_.:-]{1,64}$/

/**
 * The kind of an entry that reports the outcome of a tool call after it ran: its
 * payload's `bytes_read` and `bytes_written` (integers in 0..2^53−1, each optional)
 * add to the session's data-flow counters, which count the call itself once, on
 * its tool entry (docs/DESIGN.md §13).
 *
 * @since 0.1.0
 */
export const OUTCOME_KIND = "tool.outcome"

/**
 * The bytes an entry of `OUTCOME_KIND` adds to the counters: its payload's
 * `bytes_read` and `bytes_written` when they are integers in 0..2^53−1, else 0
 * each. Total: any payload, also one stored before this rule, gives an answer.
 *
 * @since 0.1.0
 */
export const outcomeBytes = (payload: Schema.Json): { readonly read: number; readonly written: number } => {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return NO_BYTES
  const o = payload as { readonly [key: string]: Schema.Json }
  const read = Object.hasOwn(o, "bytes_read") && isU53(o["bytes_read"]) ? o["bytes_read"] : 0
  const written = Object.hasOwn(o, "bytes_written") && isU53(o["bytes_written"]) ? o["bytes_written"] : 0
  return read === 0 && written === 0 ? NO_BYTES : { read, written }
}

const NO_BYTES = { read: 0, written: 0 } as const

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

/**
 * The kind of the entry that holds a policy's state (`Guard.STATE_KIND`).
 *
 * @since 0.1.0
 */
export const GUARD_STATE_KIND = "guard.state"

/**
 * Longest JSON text of a policy's state (`Guard.MAX_STATE_BYTES`), 64 KiB.
 *
 * @since 0.1.0
 */
export const MAX_GUARD_STATE_BYTES = 64 * 1024

/**
 * Why `payload` is not a policy's state: not a plain object, not JSON, or its JSON
 * text longer than `MAX_GUARD_STATE_BYTES` UTF-8 bytes. Total.
 *
 * @since 0.1.0
 */
export const guardStateProblem = (payload: unknown): string | undefined => {
  // A state this journal took over and froze (`takePayload` with `freeze`) is known.
  const known = taken(payload)
  if (known !== undefined) return stateProblem(known)
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return NOT_A_STATE
  // Bounded before it is written out: a value of tree size over the bound has a
  // longer text (every value and key costs at least one character).
  if (check(payload, { maxDepth: MAX_PAYLOAD_DEPTH, maxSize: MAX_GUARD_STATE_BYTES }) !== undefined) {
    return STATE_TOO_LARGE
  }
  let text: string
  try {
    text = JSON.stringify(payload)
  } catch {
    return `of kind ${GUARD_STATE_KIND} must be JSON`
  }
  return utf8Length(text) > MAX_GUARD_STATE_BYTES ? STATE_TOO_LARGE : undefined
}

const NOT_A_STATE = `of kind ${GUARD_STATE_KIND} must be an object`
const STATE_TOO_LARGE = `of kind ${GUARD_STATE_KIND} must be JSON whose text is at most ${MAX_GUARD_STATE_BYTES} bytes`

// Why a value taken over is not a policy's state. Its JSON text has the length of
// its RFC 8785 text (the same tokens in another order, -0 written "0" by both), and
// a value of tree size over the bound has a longer text (every value and key costs
// at least one character); a text of n UTF-16 units has at most 3n UTF-8 bytes.
const stateProblem = (taken: Owned): string | undefined => {
  const value = taken.value
  if (typeof value !== "object" || value === null || Array.isArray(value)) return NOT_A_STATE
  if (taken.size > MAX_GUARD_STATE_BYTES) return STATE_TOO_LARGE
  const units = taken.canonical.length
  return units * 3 > MAX_GUARD_STATE_BYTES && utf8Length(taken.canonical) > MAX_GUARD_STATE_BYTES
    ? STATE_TOO_LARGE
    : undefined
}

/**
 * Validates the kind and payload of a non-tool entry: the kind matches
 * `^[A-Za-z0-9_.:-]{1,64}$` and is not `tool`; the payload is JSON that RFC 8785 can
 * canonicalize (finite numbers, well-formed strings, plain objects, no cycles),
 * nested at most `MAX_PAYLOAD_DEPTH` deep and at most `MAX_PAYLOAD_SIZE` large. A
 * payload of kind `OUTCOME_KIND` is an object whose `bytes_read` and
 * `bytes_written`, when present, are integers in 0..2^53−1. The value given back is
 * the journal's own copy of the payload, read once (`takePayload`).
 *
 * @since 0.1.0
 */
export const validatePayload = (
  kind: string,
  payload: unknown
): Result.Result<Schema.Json, InvalidRecordField> => Result.map(takePayload(kind, payload), (taken) => taken.value)

/**
 * `validatePayload`, giving the payload taken over in the same walk: the journal's
 * copy, read once from the caller's value (a caller that changes its object after
 * the call, or a getter that answers differently the next time, cannot change what
 * is hashed and stored), with its RFC 8785 text, which the entry's hash is taken
 * over, and its JSON text, which storage writes. With `freeze` (a policy's state),
 * the copy is frozen and a frozen copy met again is taken as it is.
 */
export const takePayload = (
  kind: string,
  payload: unknown,
  freeze = false
): Result.Result<Owned, InvalidRecordField> => {
  if (typeof kind !== "string" || !kindPattern.test(kind) || kind === "tool") {
    return Result.fail(
      new InvalidRecordField({ field: "kind", reason: new RecordFieldReason.BadKind() })
    )
  }
  if (payload === undefined) {
    return Result.fail(new InvalidRecordField({ field: "payload", reason: new RecordFieldReason.Required() }))
  }
  const taken = own(payload, payloadLimits, freeze)
  if (taken._tag !== "Owned") return Result.fail(new InvalidRecordField({ field: "payload", reason: reasonOf(taken) }))
  if (kind === OUTCOME_KIND || kind === GUARD_STATE_KIND) {
    const state = kind === GUARD_STATE_KIND ? stateProblem(taken) : undefined
    const wrong = kind === OUTCOME_KIND
      ? outcomeProblem(taken.value)
      : state === undefined
      ? undefined
      : new RecordFieldReason.NotGuardState({ problem: state })
    if (wrong !== undefined) return Result.fail(new InvalidRecordField({ field: "payload", reason: wrong }))
  }
  return Result.succeed(taken)
}

/**
 * Validates a timestamp (whole seconds since the epoch, 0..2^53−1).
 *
 * @since 0.1.0
 */
export const validateTimestamp = (timestampSecs: number): Result.Result<number, InvalidRecordField> =>
  isU53(timestampSecs)
    ? Result.succeed(timestampSecs)
    : Result.fail(
      new InvalidRecordField({ field: "timestamp_secs", reason: new RecordFieldReason.OutOfRange({ max: MAX_U53 }) })
    )

/**
 * Why a writer must not use a clock reading (milliseconds since the epoch), or
 * `undefined` when it may: the entries' `timestamp_secs` (whole seconds) and the
 * metadata's times (milliseconds) must both be values the decoder accepts
 * (`isU53`). A clock before 1970 or past 2^53−1 ms would acknowledge an entry that
 * every later read refuses; this refuses it before anything is appended.
 */
export const clockProblem = (nowMillis: number): InvalidRecordField | undefined => {
  const millis = Math.floor(nowMillis)
  return isU53(millis) && isU53(Math.floor(millis / 1000))
    ? undefined
    : new InvalidRecordField({
      field: "timestamp_secs",
      reason: new RecordFieldReason.ClockOutOfRange({ nowMillis, max: MAX_U53 })
    })
}

const sessionIdPattern = /^[A-Za-z0-9_-]{1,128}$/

/**
 * Whether `id` is a valid session id (`^[A-Za-z0-9_-]{1,128}$`).
 *
 * @since 0.1.0
 */
export const isSessionId = (id: unknown): id is string => typeof id === "string" && sessionIdPattern.test(id)

/**
 * Validates a session id; to be called before any storage call.
 *
 * @since 0.1.0
 */
export const validateSessionId = (id: unknown): Result.Result<string, InvalidSessionId> =>
  isSessionId(id) ? Result.succeed(id) : Result.fail(new InvalidSessionId({ id: String(id) }))
