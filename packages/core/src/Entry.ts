/**
 * Journal entries: their JSON schemas (field names exactly chio-http-session's), the
 * hash encodings of DESIGN §2, input validation, and constructors that link and hash
 * a new entry. Plain functions and schemas; nothing here runs an effect.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { InvalidRecordField, InvalidSessionId } from "./Errors.ts"
import { canonicalize, check, isWellFormed, type Problem } from "./internal/jcs.ts"
import { hashOther, hashTool } from "./internal/preimage.ts"

/**
 * The hash that the first entry of a chain links to: 64 ASCII zeros.
 *
 * @since 0.1.0
 */
export const ZERO_HASH = "0000000000000000000000000000000000000000000000000000000000000000"

/**
 * Largest value of `bytes_read`, `bytes_written`, `sequence` and `timestamp_secs`
 * (2^53 − 1: every such value is exact as a JSON number).
 *
 * @since 0.1.0
 */
export const MAX_U53 = Number.MAX_SAFE_INTEGER

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

const payloadLimits = { maxDepth: MAX_PAYLOAD_DEPTH, maxSize: MAX_PAYLOAD_SIZE } as const

const describe = (problem: Problem): string => {
  switch (problem._tag) {
    case "NotJson":
      return `not canonical JSON at ${problem.path}`
    case "TooDeep":
      // No path: it would be the limit's worth of "[0]"s.
      return `nesting depth ${problem.depth} exceeds the limit of ${MAX_PAYLOAD_DEPTH}`
    case "TooLarge":
      return `larger than the limit of ${MAX_PAYLOAD_SIZE} (one per value plus the length of every string and key)`
  }
}

/**
 * Why a payload is not acceptable (not RFC 8785 JSON, nested deeper than
 * `MAX_PAYLOAD_DEPTH`, larger than `MAX_PAYLOAD_SIZE`), or `undefined` when it is.
 * Iterative: total for any input, however deep or cyclic.
 *
 * @since 0.1.0
 */
export const payloadProblem = (payload: unknown): string | undefined => {
  const problem = check(payload, payloadLimits)
  return problem === undefined ? undefined : describe(problem)
}

const U53 = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_U53 }))
const U32 = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_U32 }))
const Hash = Schema.String.check(Schema.isPattern(/^[0-9a-f]{64}$/))

// Hashing encodes strings as UTF-8, which maps every lone surrogate to U+FFFD: two
// different stored strings would then share one hash. Refusing them keeps the
// encoding injective, so a swapped surrogate cannot pass verification.
const WellFormed = Schema.String.check(
  Schema.makeFilter((s: string) => isWellFormed(s) ? undefined : "well-formed Unicode (no lone surrogates)")
)

/**
 * A tool invocation as stored and exchanged: chio's `SessionJournalEntry` JSON plus
 * `kind: "tool"`. Decoding input without `kind` yields a tool entry.
 *
 * @since 0.1.0
 */
export const ToolEntry = Schema.Struct({
  sequence: U53,
  prev_hash: Hash,
  entry_hash: Hash,
  timestamp_secs: U53,
  kind: Schema.Literal("tool").pipe(Schema.withDecodingDefaultKey(Effect.succeed("tool" as const))),
  tool_name: WellFormed,
  server_id: WellFormed,
  agent_id: WellFormed,
  bytes_read: U53,
  bytes_written: U53,
  delegation_depth: U32,
  allowed: Schema.Boolean
})

/**
 * A decoded tool entry.
 *
 * @since 0.1.0
 */
export type ToolEntry = typeof ToolEntry.Type

const OtherKind = WellFormed.check(
  Schema.makeFilter((k: string) => k.length > 0 && k !== "tool" ? undefined : "a non-empty kind other than \"tool\"")
)

// The payload is hashed in its RFC 8785 form, so a stored payload must be one that
// RFC 8785 defines (no lone surrogates in strings or keys), and within the bounds
// every writer and reader can handle; a deeper stored payload is an issue, never a
// stack overflow in whoever decodes it.
const Payload = Schema.Json.check(
  Schema.makeFilter((p: Schema.Json) => {
    const bad = payloadProblem(p)
    return bad === undefined ? undefined : `JSON that RFC 8785 can canonicalize within the payload limits (${bad})`
  })
)

/**
 * Any entry that is not a tool invocation: conversation messages (`kind: "message"`)
 * and kinds this version does not know, which are kept verbatim. `payload` is any
 * JSON; it is hashed in its RFC 8785 canonical form.
 *
 * @since 0.1.0
 */
export const OtherEntry = Schema.Struct({
  sequence: U53,
  prev_hash: Hash,
  entry_hash: Hash,
  timestamp_secs: U53,
  kind: OtherKind,
  payload: Payload
})

/**
 * A decoded non-tool entry.
 *
 * @since 0.1.0
 */
export type OtherEntry = typeof OtherEntry.Type

/**
 * Any journal entry.
 *
 * @since 0.1.0
 */
export const Entry = Schema.Union([ToolEntry, OtherEntry])

/**
 * Any journal entry.
 *
 * @since 0.1.0
 */
export type Entry = ToolEntry | OtherEntry

/**
 * Entries as a JSON string (one JSONL line), decoded and encoded with the same rules.
 * Decode with `{ onExcessProperty: "error" }` (as `decodeJson` does): the default
 * strips unknown keys, which would silently drop data from an entry.
 *
 * @since 0.1.0
 */
export const EntryFromJson = Schema.fromJsonString(Entry)

/**
 * Whether an entry is a tool invocation.
 *
 * @since 0.1.0
 */
export const isTool = (entry: Entry): entry is ToolEntry => entry.kind === "tool"

// Unknown keys are refused, not stripped: a tool entry carrying a payload, or a
// message carrying tool fields, is not an entry this version can keep verbatim.
const strict = { onExcessProperty: "error" } as const

/**
 * Decodes unknown input (e.g. parsed JSON) into an entry, or a `SchemaError`.
 * Unknown keys are an error, so `encode(decode(x))` equals `x` whenever decoding
 * succeeds on an entry that carries its `kind`.
 *
 * @since 0.1.0
 */
export const decode = (input: unknown): Result.Result<Entry, Schema.SchemaError> => {
  const fast = decodeFast(input)
  return fast !== undefined ? Result.succeed(fast) : decodeSchema(input)
}

/**
 * `decode` through the schema alone (no hand-written fast path); the reference the
 * fast path is tested against.
 *
 * @since 0.1.0
 */
export const decodeSchema = Schema.decodeUnknownResult(Entry, strict)

const hashPattern = /^[0-9a-f]{64}$/
const isU53 = (n: unknown): n is number => typeof n === "number" && Number.isSafeInteger(n) && n >= 0
const isHash = (h: unknown): h is string => typeof h === "string" && hashPattern.test(h)
const isText = (t: unknown): t is string => typeof t === "string" && isWellFormed(t)

// Replay decodes every stored entry, so the common, well-formed shapes are checked
// by hand here; anything this does not accept goes through the schema, which is the
// authority on what is valid and produces the error. This path never accepts an
// input the schema would refuse.
const decodeFast = (input: unknown): Entry | undefined => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return undefined
  const o = input as Record<string, unknown>
  const keys = Object.keys(o).length
  if (
    !isU53(o.sequence) || !isHash(o.prev_hash) || !isHash(o.entry_hash) || !isU53(o.timestamp_secs)
  ) return undefined
  const kind = o.kind
  if (kind === undefined || kind === "tool") {
    if (keys !== (kind === undefined ? 11 : 12)) return undefined
    const depth = o.delegation_depth
    if (
      !isText(o.tool_name) || !isText(o.server_id) || !isText(o.agent_id) || !isU53(o.bytes_read) ||
      !isU53(o.bytes_written) || typeof depth !== "number" || !Number.isInteger(depth) || depth < 0 ||
      depth > MAX_U32 || typeof o.allowed !== "boolean"
    ) return undefined
    return {
      sequence: o.sequence,
      prev_hash: o.prev_hash,
      entry_hash: o.entry_hash,
      timestamp_secs: o.timestamp_secs,
      kind: "tool",
      tool_name: o.tool_name,
      server_id: o.server_id,
      agent_id: o.agent_id,
      bytes_read: o.bytes_read,
      bytes_written: o.bytes_written,
      delegation_depth: depth,
      allowed: o.allowed
    }
  }
  if (keys !== 6 || !isText(kind) || kind.length === 0 || !("payload" in o)) return undefined
  if (check(o.payload, payloadLimits) !== undefined) return undefined
  return {
    sequence: o.sequence,
    prev_hash: o.prev_hash,
    entry_hash: o.entry_hash,
    timestamp_secs: o.timestamp_secs,
    kind,
    payload: o.payload as Schema.Json
  }
}

/**
 * Decodes one JSON text (a JSONL line) into an entry, with the same rules as `decode`.
 *
 * @since 0.1.0
 */
export const decodeJson = Schema.decodeUnknownResult(EntryFromJson, strict)

/**
 * Encodes an entry to its canonical JSON object (with `kind`).
 *
 * @since 0.1.0
 */
export const encode = (entry: Entry): typeof Entry.Encoded =>
  // Written by hand (the same output as the schema's encoder, field for field and in
  // this order): every append and checkpoint encodes entries, and the values are
  // already typed entries.
  isTool(entry)
    ? {
      sequence: entry.sequence,
      prev_hash: entry.prev_hash,
      entry_hash: entry.entry_hash,
      timestamp_secs: entry.timestamp_secs,
      kind: "tool",
      tool_name: entry.tool_name,
      server_id: entry.server_id,
      agent_id: entry.agent_id,
      bytes_read: entry.bytes_read,
      bytes_written: entry.bytes_written,
      delegation_depth: entry.delegation_depth,
      allowed: entry.allowed
    }
    : {
      sequence: entry.sequence,
      prev_hash: entry.prev_hash,
      entry_hash: entry.entry_hash,
      timestamp_secs: entry.timestamp_secs,
      kind: entry.kind,
      payload: entry.payload
    }

/**
 * The schema's own encoder for entries (validates while encoding); `encode` gives the
 * same output faster for values that are already entries.
 *
 * @since 0.1.0
 */
export const encodeChecked = Schema.encodeSync(Entry)

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

const checkIdentity = (field: string, value: unknown): InvalidRecordField | undefined => {
  if (typeof value !== "string") return new InvalidRecordField({ field, reason: "must be a string" })
  const trimmed = trimWhiteSpace(value)
  if (trimmed.length === 0) return new InvalidRecordField({ field, reason: "must not be empty or only whitespace" })
  if (trimmed !== value) return new InvalidRecordField({ field, reason: "must not have leading or trailing whitespace" })
  if (control.test(value)) return new InvalidRecordField({ field, reason: "must not contain control characters" })
  if (!isWellFormed(value)) return new InvalidRecordField({ field, reason: "must be well-formed Unicode" })
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
    : new InvalidRecordField({ field, reason: `must be an integer in 0..${max}` })

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
      : new InvalidRecordField({ field: "allowed", reason: "must be a boolean" }))
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

// A global of every runtime Effect runs on (Node 17+, browsers, Deno, Bun); core's
// ES2022 lib does not declare it.
declare const structuredClone: <T>(value: T) => T

/**
 * Validates the kind and payload of a non-tool entry: the kind matches
 * `^[A-Za-z0-9_.:-]{1,64}$` and is not `tool`; the payload is JSON that RFC 8785 can
 * canonicalize (finite numbers, well-formed strings, plain objects, no cycles),
 * nested at most `MAX_PAYLOAD_DEPTH` deep and at most `MAX_PAYLOAD_SIZE` large.
 *
 * @since 0.1.0
 */
export const validatePayload = (
  kind: string,
  payload: unknown
): Result.Result<Schema.Json, InvalidRecordField> => {
  if (typeof kind !== "string" || !kindPattern.test(kind) || kind === "tool") {
    return Result.fail(
      new InvalidRecordField({ field: "kind", reason: "must match ^[A-Za-z0-9_.:-]{1,64}$ and not be \"tool\"" })
    )
  }
  if (payload === undefined) return Result.fail(new InvalidRecordField({ field: "payload", reason: "is required" }))
  const bad = payloadProblem(payload)
  if (bad !== undefined) return Result.fail(new InvalidRecordField({ field: "payload", reason: bad }))
  if (typeof payload !== "object" || payload === null) return Result.succeed(payload as Schema.Json)
  // The entry keeps its own copy: a caller that changes its object after the call
  // must not change what was hashed and stored.
  try {
    return Result.succeed(structuredClone(payload) as Schema.Json)
  } catch {
    return Result.fail(new InvalidRecordField({ field: "payload", reason: "cannot be copied as plain JSON" }))
  }
}

/**
 * Validates a timestamp (whole seconds since the epoch, 0..2^53−1).
 *
 * @since 0.1.0
 */
export const validateTimestamp = (timestampSecs: number): Result.Result<number, InvalidRecordField> => {
  const bad = checkInt("timestamp_secs", timestampSecs, MAX_U53)
  return bad === undefined ? Result.succeed(timestampSecs) : Result.fail(bad)
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

/**
 * The canonical (RFC 8785) JSON text of a payload, as hashed.
 *
 * @since 0.1.0
 */
export const canonicalPayload = (payload: Schema.Json): string => canonicalize(payload)

/**
 * Recomputes the hash an entry should carry from its other fields.
 *
 * @since 0.1.0
 */
export const computeHash = (entry: Entry): string =>
  isTool(entry)
    ? hashTool(entry)
    : hashOther(entry.sequence, entry.prev_hash, entry.timestamp_secs, entry.kind, canonicalize(entry.payload))

/**
 * The position of a new entry in its chain.
 *
 * @since 0.1.0
 */
export interface Link {
  readonly sequence: number
  readonly prev_hash: string
  readonly timestamp_secs: number
}

/**
 * Builds and hashes a tool entry from validated parameters.
 *
 * @since 0.1.0
 */
export const makeTool = (link: Link, params: ValidToolParams): ToolEntry => {
  // The entry is every hashed field plus the hash and the kind; build it once and
  // hash it as it stands (extra fields are ignored by the encoder).
  const entry = {
    sequence: link.sequence,
    prev_hash: link.prev_hash,
    entry_hash: "",
    timestamp_secs: link.timestamp_secs,
    kind: "tool" as const,
    tool_name: params.tool_name,
    server_id: params.server_id,
    agent_id: params.agent_id,
    bytes_read: params.bytes_read,
    bytes_written: params.bytes_written,
    delegation_depth: params.delegation_depth,
    allowed: params.allowed
  }
  entry.entry_hash = hashTool(entry)
  return entry
}

/**
 * Builds and hashes a non-tool entry from a validated kind and payload.
 *
 * @since 0.1.0
 */
export const makeOther = (link: Link, kind: string, payload: Schema.Json): OtherEntry => ({
  sequence: link.sequence,
  prev_hash: link.prev_hash,
  entry_hash: hashOther(link.sequence, link.prev_hash, link.timestamp_secs, kind, canonicalize(payload)),
  timestamp_secs: link.timestamp_secs,
  kind,
  payload
})

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
