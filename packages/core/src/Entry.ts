/**
 * Journal entries: their JSON schemas (field names exactly chio-http-session's), the
 * hash encodings of docs/DESIGN.md §2, input validation, and constructors that link and hash
 * a new entry. Plain functions and schemas; nothing here runs an effect.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import { canonicalize, check, isWellFormed } from "./internal/jcs.ts"
import { toJsonText } from "./internal/jsonText.ts"
import { hashOther, hashTool } from "./internal/preimage.ts"
import * as TakenEntry from "./internal/takenEntry.ts"
import { isU53, MAX_U32, MAX_U53, payloadLimits, payloadProblem, type ValidToolParams } from "./internal/validate.ts"

export {
  /**
   * Whether `value` is acceptable as `tool_name`, `server_id` or `agent_id`.
   *
   * @since 0.1.0
   */
  isIdentity,
  /**
   * Whether `id` is a valid session id (`^[A-Za-z0-9_-]{1,128}$`).
   *
   * @since 0.1.0
   */
  isSessionId,
  /**
   * Deepest nesting a payload (and the free `data` of session metadata) may have.
   *
   * @since 0.1.0
   */
  MAX_PAYLOAD_DEPTH,
  /**
   * Largest payload, measured as the value written out as a tree.
   *
   * @since 0.1.0
   */
  MAX_PAYLOAD_SIZE,
  /**
   * Largest `delegation_depth` (chio stores it as u32).
   *
   * @since 0.1.0
   */
  MAX_U32,
  /**
   * Largest value of `bytes_read`, `bytes_written`, `sequence` and `timestamp_secs`.
   *
   * @since 0.1.0
   */
  MAX_U53,
  /**
   * The kind of an entry reporting a tool call's outcome, whose byte counts add to
   * the data-flow counters (docs/DESIGN.md §13).
   *
   * @since 0.1.0
   */
  OUTCOME_KIND,
  /**
   * The bytes an outcome entry's payload adds to the data-flow counters.
   *
   * @since 0.1.0
   */
  outcomeBytes,
  /**
   * Why a payload is not acceptable, or `undefined` when it is.
   *
   * @since 0.1.0
   */
  payloadProblem,
  /**
   * Rust's `str::trim`: strips Unicode `White_Space` from both ends.
   *
   * @since 0.1.0
   */
  trimWhiteSpace,
  /**
   * Validates the kind and payload of a non-tool entry.
   *
   * @since 0.1.0
   */
  validatePayload,
  /**
   * Validates a session id; to be called before any storage call.
   *
   * @since 0.1.0
   */
  validateSessionId,
  /**
   * Validates a timestamp (whole seconds since the epoch, 0..2^53−1).
   *
   * @since 0.1.0
   */
  validateTimestamp,
  /**
   * Validates tool parameters exactly as chio does.
   *
   * @since 0.1.0
   */
  validateToolParams
} from "./internal/validate.ts"

export type {
  /**
   * The parameters of one tool invocation, as a caller passes them to `record`.
   *
   * @since 0.1.0
   */
  ToolParams,
  /**
   * Tool parameters after validation (`allowed` resolved).
   *
   * @since 0.1.0
   */
  ValidToolParams
} from "./internal/validate.ts"

export {
  /**
   * JSON text of plain JSON data, exactly `JSON.stringify` except that `-0` is
   * written as `-0`; never recurses on the value.
   *
   * @since 0.1.0
   */
  toJsonText
} from "./internal/jsonText.ts"

/**
 * The hash that the first entry of a chain links to: 64 ASCII zeros.
 *
 * @since 0.1.0
 */
export const ZERO_HASH = "0000000000000000000000000000000000000000000000000000000000000000"

const U53 = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_U53 }))
const U32 = Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_U32 }))

/**
 * A SHA-256 hash as the journal stores it: 64 lowercase hexadecimal characters.
 * The one definition of the pattern; `isHash` checks the same without the schema.
 *
 * @since 0.1.0
 */
export const Hash = Schema.String.check(Schema.isPattern(/^[0-9a-f]{64}$/))

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

// `Hash`'s pattern, /^[0-9a-f]{64}$/, checked by hand: two per entry, and a table
// lookup per character costs about half the regular expression on a hot replay.
const HEX_DIGIT = new Uint8Array(128)
for (const c of "0123456789abcdef") HEX_DIGIT[c.charCodeAt(0)] = 1
const isHexHash = (h: string): boolean => {
  if (h.length !== 64) return false
  let ok = 1
  for (let i = 0; i < 64; i++) {
    const c = h.charCodeAt(i)
    ok &= c < 128 ? HEX_DIGIT[c]! : 0
  }
  return ok === 1
}

/**
 * Whether a value is a string `Hash` accepts (64 lowercase hexadecimal characters),
 * checked without the schema: the hot decoding paths call it per entry.
 *
 * @since 0.1.0
 */
export const isHash = (h: unknown): h is string => typeof h === "string" && isHexHash(h)
const isText = (t: unknown): t is string => typeof t === "string" && isWellFormed(t)

// Recovery decodes every stored entry, so the common, well-formed shapes are checked
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
 * The JSON text of an entry, exactly `toJsonText(encode(entry))`, faster: a tool
 * entry is one flat object, which `JSON.stringify` writes the same way unless one
 * of its numbers is -0; an entry the service just built from a payload it took over
 * has its payload's text from that walk, until the first call here takes it (the
 * storage writing the entry). What a filesystem segment's line and the checkpoint
 * that later holds the entry both write (`Checkpoint.writeJsonText`). Not kept
 * longer: a cache of the texts cost more memory (about 1.2 MB a session with a full
 * ring) than it saved time.
 *
 * @since 0.1.0
 */
export const jsonText = (entry: Entry): string => {
  if (isTool(entry)) return hasNegativeZero(entry) ? toJsonText(encode(entry)) : JSON.stringify(encode(entry))
  const payload = TakenEntry.payloadText(entry, true)
  return payload === undefined ? toJsonText(encode(entry)) : otherHead(entry) + payload + "}"
}

// An entry's text up to its payload's, as `toJsonText(encode(entry))` writes it.
const otherHead = (entry: OtherEntry): string =>
  `{"sequence":${numberText(entry.sequence)},"prev_hash":${JSON.stringify(entry.prev_hash)},"entry_hash":${
    JSON.stringify(entry.entry_hash)
  },"timestamp_secs":${numberText(entry.timestamp_secs)},"kind":${JSON.stringify(entry.kind)},"payload":`

const numberText = (n: number): string => Object.is(n, -0) ? "-0" : JSON.stringify(n)

const hasNegativeZero = (entry: ToolEntry): boolean =>
  Object.is(entry.sequence, -0) || Object.is(entry.timestamp_secs, -0) || Object.is(entry.bytes_read, -0) ||
  Object.is(entry.bytes_written, -0) || Object.is(entry.delegation_depth, -0)

/**
 * The schema's own encoder for entries (validates while encoding); `encode` gives the
 * same output faster for values that are already entries.
 *
 * @since 0.1.0
 */
export const encodeChecked = Schema.encodeSync(Entry)

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
export const makeOther = (link: Link, kind: string, payload: Schema.Json): OtherEntry =>
  TakenEntry.make(link, kind, payload, canonicalize(payload))
