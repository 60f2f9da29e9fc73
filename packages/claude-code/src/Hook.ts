/**
 * Claude Code's hooks, journaled and guarded: the input of every hook event
 * (docs/claude-code/PROTOCOL.md (a)) as Schemas, decoded from bounded, strictly UTF-8 bytes; the
 * journal session of a Claude Code session; what each event puts on its chain;
 * and the answer Claude Code expects (docs/claude-code/PROTOCOL.md (b)).
 *
 * `handle` is the one place a tool call is decided and recorded. Every door
 * calls it and none decides on its own: the command hook (`HookRunner`,
 * `session-journal claude-code hook`), the resident guard (`GuardServer`, and
 * through it the forwarder's hooks, `Forwarder`, which never decides: it denies
 * when the guard gives no proved answer) and the driven session (`Session`,
 * `session-journal claude-code run`, its hook callbacks and `can_use_tool`).
 * What each door adds is what `handle` reads (`HandleOptions`: the policy, the
 * sub-agent's depth, the count of allowed calls, the protected paths) and how
 * it answers when `handle` cannot (`Refusal`).
 *
 * What goes on the chain, one journal session per Claude Code session
 * (`sessionId`), in the order the hooks arrive:
 *
 * - `PreToolUse`: the call's chio tool entry (`tool_name` as Claude Code names
 *   it; `server_id` `server` for `mcp__server__tool`, else `claude-code`;
 *   `agent_id` `main` or the sub-agent's `agent_id`; `delegation_depth` 0 for the
 *   main agent, a sub-agent's real nesting inside one (`AgentDepth`: 1, 2, …;
 *   1 when it cannot be known, and then a guard that would deny deeper denies;
 *   never below what was recorded for the agent before, `AgentDepth.atLeast`); `bytes_written` the UTF-8 length of the
 *   JSON text of `tool_input`, `bytes_read` 0), decided by the policy, and in the
 *   same append a `claude-code.decision` entry: `tool_use_id`, `tool_name`,
 *   `tool_input`, `cwd`, `agent_id`, `verdict` (`allow` | `ask` | `deny`), `guard`,
 *   `reason`, `tokens` (the tokens the session had used, when the door measures
 *   them; null when it could not tell), and, when the policy's own state changed
 *   (its windows, counters, flows: docs/DESIGN.md §16), a `guard.state` entry.
 *   The policy sees the call itself (`tool_name`, `tool_input`, `cwd`), the
 *   project directory (`HandleOptions.projectDir`, else the session's first
 *   `cwd`), the home directory and the tokens.
 * - `PostToolUse` / `PostToolUseFailure`: a `tool.outcome` entry (core's
 *   `Entry.OUTCOME_KIND`): `tool_use_id`, `tool_name`, `agent_id`, `bytes_read`
 *   (what the call returned to the agent, `responseBytes`, or the `error`),
 *   `bytes_written` 0, `duration_ms`, `error` (null on success), `is_interrupt`,
 *   and the SHA-256 of the response's JSON text. Its bytes reach the data-flow
 *   counters (docs/DESIGN.md §13): a Read's bytes are known only after it ran;
 *   with a compiled policy, also its scoped byte limits (`Policy.observePlan`),
 *   the next state in the same append.
 *   One whose input cannot be journaled as is (too large, too deep, not
 *   well-formed text) is an outcome marker (`Unrecorded`): the response's size as
 *   written, the input's size and SHA-256, `not_recorded` the reason.
 * - `UserPromptSubmit`: a `message` entry `{role: "user", content, prompt_id,
 *   source: "claude-code"}`.
 * - every other event (SessionStart, SessionEnd, Stop, SubagentStart,
 *   SubagentStop, PreCompact, PostCompact, PermissionRequest, PostToolBatch,
 *   Notification, …): `claude-code.<event>` with the hook input as payload
 *   (PostToolBatch without the responses, which the outcomes already counted);
 *   an event this version does not know: `claude-code.unknown`, the input as
 *   payload.
 *
 * An allowed call is answered `{}` (no opinion), never `"allow"`: an `allow`
 * would skip Claude Code's own permission rules. An ask is answered
 * `permissionDecision: "ask"` where the door can prompt someone
 * (`HandleOptions.canAsk`), else denied saying approval was needed.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import {
  Entry,
  Guard,
  type JournalState,
  messageOf,
  type Pattern,
  Policy,
  SessionJournal,
  Utf8
} from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as AgentDepth from "./AgentDepth.ts"
import * as TopLevel from "./internal/topLevel.ts"
import * as ProjectDir from "./ProjectDir.ts"
import * as Refusal from "./Refusal.ts"
import { digestPrefix, sessionId as custodyId } from "./SessionIds.ts"
import { jsonBytes, serverOf, utf8Length } from "./Transcript.ts"

// ---------------------------------------------------------------------------
// Bounds

/**
 * Default bound on one hook input, in bytes (4 MiB: a Write of a few MiB of
 * content fits; the input is refused past it, before it is read whole).
 *
 * @since 0.1.0
 */
export const MAX_INPUT_BYTES = 4 * 1024 * 1024

/**
 * Default bound on the nesting of a hook input, in levels of arrays and objects
 * (checked on the text, before it is parsed).
 *
 * @since 0.1.0
 */
export const MAX_INPUT_DEPTH = 128

/**
 * The bounds of `decode`.
 *
 * @since 0.1.0
 */
export interface Limits {
  /** Largest input in bytes (default `MAX_INPUT_BYTES`). */
  readonly maxBytes?: number | undefined
  /** Deepest nesting (default `MAX_INPUT_DEPTH`, at most core's `MAX_PAYLOAD_DEPTH` − 1). */
  readonly maxDepth?: number | undefined
}

// ---------------------------------------------------------------------------
// Schemas

const Json = Schema.Json
const ToolInput = Schema.Record(Schema.String, Schema.Json)

const common = {
  session_id: Schema.String.check(Schema.isNonEmpty()),
  transcript_path: Schema.optionalKey(Schema.String),
  cwd: Schema.String,
  prompt_id: Schema.optionalKey(Schema.String),
  permission_mode: Schema.optionalKey(Schema.String),
  agent_id: Schema.optionalKey(Schema.String),
  agent_type: Schema.optionalKey(Schema.String)
}

const event = <Name extends string, Fields extends Schema.Struct.Fields>(name: Name, fields: Fields) =>
  Schema.Struct({ ...common, hook_event_name: Schema.Literal(name), ...fields })

/**
 * The fields every hook input carries (docs/claude-code/PROTOCOL.md (a)); `agent_id` and
 * `agent_type` only inside a sub-agent.
 *
 * @since 0.1.0
 */
export const Common = Schema.Struct({ ...common, hook_event_name: Schema.String })

/**
 * The input of each event docs/claude-code/PROTOCOL.md (a) describes, by `hook_event_name`. Fields
 * not listed are kept in the event's `raw` input (and journaled), not refused.
 *
 * @since 0.1.0
 */
export const Inputs = {
  SessionStart: event("SessionStart", { source: Schema.optionalKey(Schema.String) }),
  UserPromptSubmit: event("UserPromptSubmit", { prompt: Schema.String }),
  PreToolUse: event("PreToolUse", { tool_name: Schema.String, tool_input: ToolInput, tool_use_id: Schema.String }),
  PermissionRequest: event("PermissionRequest", { tool_name: Schema.String, tool_input: ToolInput }),
  PostToolUse: event("PostToolUse", {
    tool_name: Schema.String,
    tool_input: ToolInput,
    tool_response: Json,
    tool_use_id: Schema.String,
    duration_ms: Schema.optionalKey(Schema.Number)
  }),
  PostToolUseFailure: event("PostToolUseFailure", {
    tool_name: Schema.String,
    tool_input: ToolInput,
    tool_use_id: Schema.String,
    error: Schema.String,
    is_interrupt: Schema.optionalKey(Schema.Boolean),
    duration_ms: Schema.optionalKey(Schema.Number)
  }),
  PostToolBatch: event("PostToolBatch", { tool_calls: Schema.Array(Json) }),
  Stop: event("Stop", { stop_hook_active: Schema.optionalKey(Schema.Boolean) }),
  SubagentStart: event("SubagentStart", {}),
  SubagentStop: event("SubagentStop", { stop_hook_active: Schema.optionalKey(Schema.Boolean) }),
  PreCompact: event("PreCompact", { trigger: Schema.optionalKey(Schema.String) }),
  PostCompact: event("PostCompact", { trigger: Schema.optionalKey(Schema.String) }),
  SessionEnd: event("SessionEnd", { reason: Schema.optionalKey(Schema.String) }),
  Notification: event("Notification", {}),
  PermissionDenied: event("PermissionDenied", {}),
  StopFailure: event("StopFailure", {})
} as const

/**
 * The name of an event this version knows.
 *
 * @since 0.1.0
 */
export type KnownName = keyof typeof Inputs

/**
 * Every event name this version knows.
 *
 * @since 0.1.0
 */
export const knownNames: ReadonlyArray<KnownName> = Object.keys(Inputs) as Array<KnownName>

const isKnown = (name: string): name is KnownName => Object.hasOwn(Inputs, name)

/**
 * A decoded hook input: `name` its event (`Unknown` for an event this version
 * does not know), `input` its decoded fields, `raw` the whole input as it came.
 *
 * @since 0.1.0
 */
export type HookEvent =
  | {
    [K in KnownName]: {
      readonly name: K
      readonly input: (typeof Inputs)[K]["Type"]
      readonly raw: { readonly [key: string]: Schema.Json }
    }
  }[KnownName]
  | {
    readonly name: "Unknown"
    readonly input: typeof Common.Type
    readonly raw: { readonly [key: string]: Schema.Json }
  }
  | Unrecorded

/**
 * A PostToolUse or PostToolUseFailure whose input cannot be journaled as is (too
 * large, nested too deep, a string that is not well-formed, bytes that are not
 * UTF-8): what a scan of its top level still tells (`salvage`). It is recorded as
 * an outcome marker, so the call's bytes still reach the counters.
 *
 * @since 0.1.0
 */
export interface Unrecorded {
  readonly name: "Unrecorded"
  /** The event it was. */
  readonly event: "PostToolUse" | "PostToolUseFailure"
  readonly input: typeof Common.Type & {
    readonly tool_name: string
    readonly tool_use_id: string
    readonly duration_ms?: number
    readonly is_interrupt?: boolean
  }
  /** The input's size in bytes and SHA-256, as it came. */
  readonly inputBytes: number
  readonly inputSha256: string
  /** The size in bytes of the response (`tool_response`, or `error` for a failure) as written. */
  readonly responseBytes: number
  /** Why it could not be journaled as is. */
  readonly problem: string
}

// ---------------------------------------------------------------------------
// Errors

/**
 * Why a hook could not be handled: the input (`TooLarge`, `NotUtf8`, `TooDeep`,
 * `NotJson`, `Invalid`) or the journal (`Journal`: storage, a corrupt session, a
 * lock not obtained in time). `event` is the input's `hook_event_name` when it
 * could be read, so a refusal takes the event's form (`refusal`).
 *
 * @since 0.1.0
 */
export class HookError extends Schema.TaggedError<HookError>()("HookError", {
  reason: Schema.Literals(["TooLarge", "NotUtf8", "TooDeep", "NotJson", "Invalid", "Journal"]),
  detail: Schema.String,
  event: Schema.NullOr(Schema.String),
  cause: Schema.optionalKey(Schema.Defect())
}) {
  override get message(): string {
    return this.detail
  }
}

// ---------------------------------------------------------------------------
// Decoding

// The nesting of a JSON text, scanned without parsing: brackets outside strings.
// Stops at the first level past `max` (returns max + 1).
const depthOf = (text: string, max: number): number => {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 92) i++
      else if (c === 34) inString = false
    } else if (c === 34) inString = true
    else if (c === 91 || c === 123) {
      depth++
      if (depth > deepest) {
        deepest = depth
        if (deepest > max) return deepest
      }
    } else if (c === 93 || c === 125) depth--
  }
  return deepest
}

/**
 * Whether a JSON text nests deeper than `max` levels of arrays and objects,
 * scanned without parsing (brackets outside strings).
 *
 * @since 0.1.0
 */
export const deeperThan = (text: string, max: number): boolean => depthOf(text, max) > max

// The event name of an input that does not decode, when it has one.
const nameOf = (json: unknown): string | null => {
  if (typeof json !== "object" || json === null || Array.isArray(json)) return null
  const name = (json as Record<string, unknown>)["hook_event_name"]
  return typeof name === "string" ? name : null
}

const fail = (reason: HookError["reason"], detail: string, event: string | null = null) =>
  Result.fail(new HookError({ reason, detail, event }))

/**
 * Decodes one hook input from its bytes: at most `maxBytes`, strict UTF-8, nested
 * at most `maxDepth`, one JSON object that core can journal (well-formed strings,
 * finite numbers), with the fields of its event. An unknown event decodes as
 * `Unknown` when it has the common fields. A PostToolUse or PostToolUseFailure
 * refused only for what its values hold (its size, its nesting, its text) decodes
 * as `Unrecorded`, salvaged from a scan of its top level, so the call's bytes are
 * still counted.
 *
 * @since 0.1.0
 */
export const decode = (bytes: Uint8Array, limits?: Limits): Result.Result<HookEvent, HookError> => {
  const maxBytes = limits?.maxBytes ?? MAX_INPUT_BYTES
  if (bytes.length > maxBytes) {
    return orSalvage(fail("TooLarge", `hook input over the bound of ${maxBytes} bytes`), bytes)
  }
  let text: string
  try {
    text = Utf8.decodeStrict(bytes, { keepBom: true })
  } catch {
    return orSalvage(fail("NotUtf8", "hook input is not valid UTF-8"), bytes)
  }
  return orSalvage(decodeStrict(text, limits), bytes)
}

// A PostToolUse or PostToolUseFailure refused for what its values hold (not for
// missing or mistyped fields) is salvaged from a scan of its bytes.
const orSalvage = (
  decoded: Result.Result<HookEvent, HookError>,
  bytes: Uint8Array | (() => Uint8Array)
): Result.Result<HookEvent, HookError> => {
  if (Result.isSuccess(decoded) || !salvageable(decoded.failure)) return decoded
  const scanner = new TopLevel.Scanner(scanHash())
  scanner.push(typeof bytes === "function" ? bytes() : bytes)
  const found = salvage(scanner.finish(), decoded.failure.detail)
  return Result.isSuccess(found) ? found : decoded
}

// The scanner's SHA-256, on the implementation this module loads anyway.
const scanHash = (): TopLevel.Hash => {
  const hash = sha256.create()
  return { update: (bytes) => hash.update(bytes), hex: () => bytesToHex(hash.digest()) }
}

const salvageable = (e: HookError): boolean =>
  e.reason === "TooLarge" || e.reason === "TooDeep" || e.reason === "NotUtf8" ||
  (e.reason === "Invalid" && e.detail.startsWith("hook input cannot be journaled"))

/**
 * A scan of a hook input's top level (`TopLevel.Scanner`), for a streaming reader
 * that stops keeping bytes past its bound: `push` every chunk, read `event` to
 * decide early whether reading on can help (only a PostToolUse or
 * PostToolUseFailure can be salvaged), then `salvage`.
 *
 * @since 0.1.0
 */
export class Salvager {
  private readonly scanner = new TopLevel.Scanner(scanHash())
  /** Feeds the next bytes. */
  push(bytes: Uint8Array): void {
    this.scanner.push(bytes)
  }
  /** The input's `hook_event_name` once its bytes went by, else null. */
  get event(): string | null {
    const v = this.scanner.seen("hook_event_name")
    return v === undefined ? null : stringOf(v)
  }
  /** The input as an `Unrecorded` event, refused for `problem`; fails when it cannot be salvaged. */
  salvage(problem: string): Result.Result<HookEvent, HookError> {
    return salvage(this.scanner.finish(), problem)
  }
}

const stringOf = (v: { readonly raw: Uint8Array; readonly string: boolean }): string | null => {
  const s = TopLevel.textOf(v)
  return s !== null && Entry.payloadProblem(s) === undefined ? s : null
}

/**
 * A bound as people read it (as the command line says its own).
 *
 * @since 0.1.0
 */
export const describeBytes = (n: number): string =>
  n % (1024 * 1024) === 0 ? `${n / (1024 * 1024)} MiB (${n} bytes)` : `${n} bytes`

/**
 * Why an input over the bound of `maxBytes` is not journaled as is.
 *
 * @since 0.1.0
 */
export const overBound = (maxBytes: number): string => `hook input over the bound of ${describeBytes(maxBytes)}`

/**
 * Decodes what the forwarder sends for an input it could not send whole (over
 * the bound of `maxBytes`): its scan as JSON (`Wire` of `internal/topLevel.ts`:
 * the top-level values a salvage reads, the response's size, the input's size
 * and SHA-256), salvaged as the command hook salvages the input itself
 * (`Salvager`): an `Unrecorded` PostToolUse or PostToolUseFailure, so its bytes
 * are counted. A scan of an input within the bound is refused (that input is
 * sent whole), and so is anything that is not a scan.
 *
 * @since 0.1.0
 */
export const decodeScan = (bytes: Uint8Array, maxBytes: number): Result.Result<HookEvent, HookError> => {
  let json: unknown
  try {
    json = JSON.parse(Utf8.decodeStrict(bytes, { keepBom: true }))
  } catch {
    return fail("NotJson", "the scan of a hook input is not JSON in UTF-8")
  }
  const found = TopLevel.fromWire(json)
  if (found === null) return fail("Invalid", "the scan of a hook input is not one")
  if (found.bytes <= maxBytes) {
    const name = found.values.get("hook_event_name")
    return fail(
      "Invalid",
      `the scan of a hook input within the bound of ${describeBytes(maxBytes)}: it is sent whole`,
      name === undefined ? null : stringOf(name)
    )
  }
  return salvage(found, overBound(maxBytes))
}

const scalarOf = (v: { readonly raw: Uint8Array; readonly string: boolean } | undefined): unknown => {
  if (v === undefined || v.string) return undefined
  try {
    return JSON.parse(Utf8.decodeStrict(v.raw, { keepBom: true }))
  } catch {
    return undefined
  }
}

const salvage = (found: TopLevel.Found, problem: string): Result.Result<HookEvent, HookError> => {
  const text = (key: string): string | undefined => {
    const v = found.values.get(key)
    return v === undefined ? undefined : stringOf(v) ?? undefined
  }
  const name = text("hook_event_name")
  if (!found.complete || (name !== "PostToolUse" && name !== "PostToolUseFailure")) {
    return fail("Invalid", problem, name ?? null)
  }
  const session_id = text("session_id")
  const cwd = text("cwd")
  const tool_name = text("tool_name")
  const tool_use_id = text("tool_use_id")
  if (
    session_id === undefined || session_id === "" || cwd === undefined || tool_name === undefined ||
    tool_use_id === undefined
  ) {
    return fail("Invalid", `${problem}; its common fields cannot be read either`, name)
  }
  const optional = (key: string) => {
    const v = text(key)
    return v === undefined ? {} : { [key]: v }
  }
  const duration = scalarOf(found.values.get("duration_ms"))
  const interrupt = scalarOf(found.values.get("is_interrupt"))
  const response = name === "PostToolUse" ? "tool_response" : "error"
  return Result.succeed({
    name: "Unrecorded",
    event: name,
    input: {
      session_id,
      cwd,
      hook_event_name: name,
      tool_name,
      tool_use_id,
      ...optional("transcript_path"),
      ...optional("prompt_id"),
      ...optional("permission_mode"),
      ...optional("agent_id"),
      ...optional("agent_type"),
      ...(typeof duration === "number" ? { duration_ms: duration } : {}),
      ...(typeof interrupt === "boolean" ? { is_interrupt: interrupt } : {})
    },
    inputBytes: found.bytes,
    inputSha256: found.sha256,
    responseBytes: found.sizes.get(response) ?? 0,
    problem
  })
}

/**
 * `decode` of a text already decoded (its UTF-8 length is bounded the same way).
 *
 * @since 0.1.0
 */
export const decodeText = (text: string, limits?: Limits): Result.Result<HookEvent, HookError> =>
  orSalvage(decodeStrict(text, limits), () => new TextEncoder().encode(text))

const decodeStrict = (text: string, limits?: Limits): Result.Result<HookEvent, HookError> => {
  const maxBytes = limits?.maxBytes ?? MAX_INPUT_BYTES
  const maxDepth = Math.min(limits?.maxDepth ?? MAX_INPUT_DEPTH, Entry.MAX_PAYLOAD_DEPTH - 1)
  if (text.length > maxBytes || utf8Length(text) > maxBytes) {
    return fail("TooLarge", `hook input over the bound of ${maxBytes} bytes`)
  }
  if (depthOf(text, maxDepth) > maxDepth) return fail("TooDeep", `hook input nested deeper than ${maxDepth} levels`)
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return fail("NotJson", `hook input is not JSON: ${messageOf(e)}`)
  }
  const name = nameOf(json)
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return fail("Invalid", "hook input is not a JSON object")
  }
  const problem = Entry.payloadProblem(json)
  if (problem !== undefined) return fail("Invalid", `hook input cannot be journaled: ${problem}`, name)
  const raw = json as { readonly [key: string]: Schema.Json }
  const schema = name !== null && isKnown(name) ? Inputs[name] : Common
  const decoded = Schema.decodeUnknownResult(schema as typeof Common)(raw)
  if (Result.isFailure(decoded)) {
    return fail("Invalid", `hook input of ${name ?? "no event"} is invalid: ${decoded.failure.message}`, name)
  }
  const known = name !== null && isKnown(name)
  return Result.succeed({ name: known ? name : "Unknown", input: decoded.success, raw } as HookEvent)
}

// ---------------------------------------------------------------------------
// The journal session

/**
 * Prefix of the journal sessions of hooked Claude Code sessions (custody's
 * transcripts use `cc-`; `cch-` never starts with it).
 *
 * @since 0.1.0
 */
export const PREFIX = "cch-"

const sessionStem = /^[A-Za-z0-9-]{1,64}$/

/**
 * The project directory name of an event: the directory holding its transcript
 * when `transcript_path` ends in `/<session_id>.jsonl` (Claude Code's own name,
 * also for a long path it truncates), else the working directory encoded as
 * Claude Code encodes it (`ProjectDir.encode`).
 *
 * @since 0.1.0
 */
export const projectOf = (input: typeof Common.Type): string => {
  const t = input.transcript_path
  if (t !== undefined) {
    const parts = t.split(/[\\/]/)
    if (
      parts.length >= 2 && parts[parts.length - 1] === `${input.session_id}.jsonl` && parts[parts.length - 2] !== ""
    ) {
      return parts[parts.length - 2]!
    }
  }
  return ProjectDir.encode(input.cwd)
}

/**
 * The journal session of a Claude Code session, from its project and
 * `session_id` alone: `cch-<P>-<session_id>`, where `<P>` is the first 8 hex
 * digits of the SHA-256 of the project directory name (`projectOf`; the same
 * `<P>` as custody's `cc-<P>-<session_id>` of its transcript), or
 * `cch-<P>-_<H>` when `session_id` is not 1 to 64 of `[A-Za-z0-9-]` (a forged id
 * with `/`, `..` or anything else), `<H>` the first 40 hex digits of the SHA-256
 * of `session_id`. Every id matches `^[A-Za-z0-9_-]{1,128}$`. Pure.
 *
 * @since 0.1.0
 */
export const sessionId = (input: typeof Common.Type): string => {
  const base = `${PREFIX}${digestPrefix(projectOf(input), 8)}-`
  return sessionStem.test(input.session_id) ? base + input.session_id : `${base}_${digestPrefix(input.session_id, 40)}`
}

/**
 * The custody session of the event's main transcript (`SessionIds`), named in the
 * hooked session's metadata.
 *
 * @since 0.1.0
 */
export const custodySessionId = (input: typeof Common.Type): string =>
  custodyId({ _tag: "Main", project: projectOf(input), session: input.session_id })

/**
 * The agent of an event: `main` at depth 0, or the sub-agent's `agent_id` (an id
 * chio would refuse is journaled as `invalid-agent-id`) at `depth` when its real
 * depth is known (`AgentDepth`), else at the least it can be (1, or the depth
 * recorded for it before: `AgentDepth.atLeast`).
 *
 * @since 0.1.0
 */
export const agentOf = (
  input: typeof Common.Type,
  depth?: AgentDepth.Depth | undefined
): { readonly agent_id: string; readonly delegation_depth: number } =>
  input.agent_id === undefined
    ? { agent_id: "main", delegation_depth: 0 }
    : {
      agent_id: Entry.isIdentity(input.agent_id) ? input.agent_id : "invalid-agent-id",
      delegation_depth: depth === undefined ? 1 : Math.max(1, AgentDepth.recordedDepth(depth))
    }

/**
 * The chio tool parameters of a PreToolUse: the call as Claude Code names it,
 * its input's bytes as `bytes_written`, nothing read yet.
 *
 * @since 0.1.0
 */
export const toolParams = (
  input: (typeof Inputs)["PreToolUse"]["Type"],
  depth?: AgentDepth.Depth | undefined
): Entry.ToolParams => ({
  tool_name: Entry.isIdentity(input.tool_name) ? input.tool_name : "invalid-tool-name",
  server_id: serverOf(input.tool_name),
  ...agentOf(input, depth),
  bytes_read: 0,
  bytes_written: jsonBytes(input.tool_input),
  allowed: true
})

/**
 * The kind of the entry written beside each PreToolUse's tool entry.
 *
 * @since 0.1.0
 */
export const DECISION_KIND = "claude-code.decision"

/**
 * The kind of an event this version does not know.
 *
 * @since 0.1.0
 */
export const UNKNOWN_KIND = "claude-code.unknown"

/**
 * The kind of a non-tool event's entry: `claude-code.<event>`.
 *
 * @since 0.1.0
 */
export const kindOf = (name: KnownName): string => `claude-code.${name}`

const WRITING_TOOLS = new Set(["Write", "Edit", "MultiEdit", "NotebookEdit"])

const field = (o: Schema.Json | undefined, key: string): Schema.Json | undefined =>
  typeof o === "object" && o !== null && !Array.isArray(o)
    ? (o as { readonly [k: string]: Schema.Json })[key]
    : undefined

/**
 * The bytes a call returned to the agent, from its PostToolUse `tool_response`:
 * a Read's file content (a text file; any other result's JSON text), a Bash
 * call's stdout plus stderr, nothing for the tools that write (Write, Edit,
 * MultiEdit, NotebookEdit: their response echoes what they wrote, which their
 * tool entry counted as written), and for every other tool the UTF-8 length of
 * the response's JSON text. What an outcome adds to `total_bytes_read`.
 *
 * @since 0.1.0
 */
export const responseBytes = (toolName: string, response: Schema.Json): number => {
  if (WRITING_TOOLS.has(toolName)) return 0
  if (toolName === "Read") {
    const content = field(field(response, "file"), "content")
    return typeof content === "string" ? utf8Length(content) : jsonBytes(response)
  }
  if (toolName === "Bash") {
    const out = field(response, "stdout")
    const err = field(response, "stderr")
    if (typeof out === "string" || typeof err === "string") {
      return (typeof out === "string" ? utf8Length(out) : 0) + (typeof err === "string" ? utf8Length(err) : 0)
    }
  }
  return jsonBytes(response)
}

const digest = (value: Schema.Json): string => bytesToHex(sha256(new TextEncoder().encode(JSON.stringify(value))))

/**
 * The entry a non-PreToolUse event puts on the chain (`kind`, `payload`); the
 * module header lists them.
 *
 * @since 0.1.0
 */
export const entryOf = (event: Exclude<HookEvent, { readonly name: "PreToolUse" }>): {
  readonly kind: string
  readonly payload: Schema.Json
} => {
  switch (event.name) {
    case "UserPromptSubmit":
      return {
        kind: "message",
        payload: {
          role: "user",
          content: event.input.prompt,
          ...(event.input.prompt_id === undefined ? {} : { prompt_id: event.input.prompt_id }),
          ...agentOf(event.input),
          source: "claude-code"
        }
      }
    case "PostToolUse":
    case "PostToolUseFailure": {
      const failed = event.name === "PostToolUseFailure"
      const response: Schema.Json = failed ? event.input.error : event.input.tool_response
      return outcome(event.input, failed, {
        bytes_read: failed ? utf8Length(event.input.error) : responseBytes(event.input.tool_name, response),
        error: failed ? event.input.error : null,
        response_sha256: digest(response)
      })
    }
    case "PostToolBatch": {
      const { tool_calls, ...rest } = event.raw
      const calls = Array.isArray(tool_calls) ? tool_calls : []
      return {
        kind: kindOf("PostToolBatch"),
        payload: {
          ...rest,
          tool_calls: calls.map((c) => {
            if (typeof c !== "object" || c === null || Array.isArray(c)) return null
            const o = c as { readonly [key: string]: Schema.Json }
            return { tool_name: o["tool_name"] ?? null, tool_use_id: o["tool_use_id"] ?? null }
          })
        }
      }
    }
    case "Unrecorded": {
      const failed = event.event === "PostToolUseFailure"
      return outcome(event.input, failed, {
        bytes_read: !failed && WRITING_TOOLS.has(event.input.tool_name) ? 0 : event.responseBytes,
        error: failed ? "(not recorded: see not_recorded)" : null,
        response_sha256: null,
        not_recorded: event.problem,
        input_bytes: event.inputBytes,
        input_sha256: event.inputSha256
      })
    }
    case "Unknown":
      return { kind: UNKNOWN_KIND, payload: event.raw }
    default:
      return { kind: kindOf(event.name), payload: event.raw }
  }
}

// An outcome entry: the fields every outcome has, then what this one says.
const outcome = (
  input: typeof Common.Type & {
    readonly tool_use_id: string
    readonly tool_name: string
    readonly duration_ms?: number | undefined
    readonly is_interrupt?: boolean | undefined
  },
  failed: boolean,
  fields: { readonly bytes_read: number; readonly error: string | null; readonly [key: string]: Schema.Json }
): { readonly kind: string; readonly payload: Schema.Json } => ({
  kind: Entry.OUTCOME_KIND,
  payload: {
    tool_use_id: input.tool_use_id,
    tool_name: input.tool_name,
    agent_id: agentOf(input).agent_id,
    bytes_written: 0,
    duration_ms: validDuration(input.duration_ms),
    is_interrupt: failed ? input.is_interrupt ?? false : false,
    ...fields
  }
})

// An outcome payload's `bytes_read`, as `entryOf` wrote it.
const outcomeRead = (payload: Schema.Json): number => {
  const n = field(payload, "bytes_read")
  return typeof n === "number" ? n : 0
}

const validDuration = (ms: number | undefined): number | null =>
  ms !== undefined && Number.isSafeInteger(ms) && ms >= 0 ? ms : null

// ---------------------------------------------------------------------------
// Answers

/**
 * A hook output object, as Claude Code reads it from a command hook's stdout or
 * an HTTP hook's response body; `{}` has no opinion.
 *
 * @since 0.1.0
 */
export type HookOutput = { readonly [key: string]: Schema.Json }

/**
 * The answer to one hook: the output to give Claude Code, the journal session,
 * and for a PreToolUse the verdict recorded (`null` for other events).
 *
 * @since 0.1.0
 */
export interface HookAnswer {
  readonly output: HookOutput
  readonly session: string
  readonly verdict: Guard.Verdict | null
}

/**
 * The output that denies a PreToolUse (`Refusal.denyOutput`).
 *
 * @since 0.1.0
 */
export const denyOutput = (reason: string): HookOutput => Refusal.denyOutput(reason) as HookOutput

/**
 * The reason a denial gives (`Refusal.denialReason`).
 *
 * @since 0.1.0
 */
export const denialReason = Refusal.denialReason

/**
 * How a hook that could not be handled refuses (`Refusal.refusal`, the one rule
 * every door uses).
 *
 * @since 0.1.0
 */
export const refusal = (event: string | null, reason: string, options?: {
  readonly stopHookActive?: boolean | undefined
}): {
  readonly output: HookOutput | null
  readonly httpOutput: HookOutput
  readonly exitCode: 0 | 1 | 2
  readonly stderr: string
} => Refusal.refusal(event, reason, options) as ReturnType<typeof refusal>

// ---------------------------------------------------------------------------
// Self-protection

/**
 * The guard name of a call denied because it would touch what guards the
 * session (the journal, the policy, the settings that install our hooks).
 *
 * @since 0.1.0
 */
export const SELF_PROTECTION = "selfProtection"

/**
 * Something a guarded call may not touch: an absolute path, a file or a
 * directory (everything under it too), and what it is, for the reason.
 *
 * @since 0.1.0
 */
export interface Protected {
  readonly path: string
  readonly what: string
  readonly directory: boolean
}

/** The absolute POSIX path `p` resolved against `cwd`, with `.`, `..` and repeated `/` removed. */
const normalize = (p: string, cwd: string): string => {
  const parts: Array<string> = []
  for (const part of (p.startsWith("/") ? p : `${cwd}/${p}`).split("/")) {
    if (part === "" || part === ".") continue
    if (part === "..") parts.pop()
    else parts.push(part)
  }
  return `/${parts.join("/")}`
}

const within = (p: string, target: Protected): boolean =>
  p === target.path || (target.directory && p.startsWith(target.path.endsWith("/") ? target.path : `${target.path}/`))

// The ways a command or an argument may spell a protected path: as it is,
// relative to the working directory, from the home directory.
const spellings = (target: Protected, cwd: string, home: string | undefined): Array<string> => {
  const out = [target.path]
  const base = cwd.endsWith("/") ? cwd : `${cwd}/`
  if (target.path.startsWith(base) && target.path.length > base.length) {
    const rel = target.path.slice(base.length)
    out.push(rel, `./${rel}`)
  }
  if (home !== undefined && home !== "/" && home !== "") {
    const h = home.endsWith("/") ? home : `${home}/`
    if (target.path.startsWith(h)) {
      const rel = target.path.slice(h.length)
      out.push(`~/${rel}`, `$HOME/${rel}`, `\${HOME}/${rel}`)
    }
  }
  return out
}

const PATH_KEYS = new Set(["file_path", "path", "notebook_path", "cwd", "directory", "dir"])

// The fields of Claude Code's file tools that hold text to write, not places.
const FILE_TEXT: { readonly [tool: string]: ReadonlySet<string> } = {
  Write: new Set(["content"]),
  Edit: new Set(["old_string", "new_string"]),
  MultiEdit: new Set(["edits"]),
  NotebookEdit: new Set(["new_source"])
}
const MAX_STRINGS = 10_000

// The directories above a protected path that removing, moving or changing takes
// it along: those below the home directory and the working directory (which
// every call names), nearest first.
const ancestors = (target: Protected, cwd: string, home: string | undefined): Array<Protected> => {
  const out: Array<Protected> = []
  const stops = new Set([
    "/",
    cwd.replace(/\/+$/, "") || "/",
    ...(home === undefined ? [] : [home.replace(/\/+$/, "")])
  ])
  let p = target.path.replace(/\/+$/, "")
  for (;;) {
    const up = p.slice(0, p.lastIndexOf("/")) || "/"
    if (up === p || stops.has(up) || [...stops].some((s) => s !== "/" && s.startsWith(`${up}/`))) break
    out.push({ path: up, what: `${target.what} (in ${up})`, directory: true })
    p = up
  }
  return out
}

// Words of a command that remove, move or change what they name.
const DESTRUCTIVE =
  /(^|[\s;&|(`])(rm|rmdir|mv|unlink|truncate|shred|chmod|chown|ln|find|rsync|tar)(\s|$)|\bsed\s+(-\w*\s+)*-i|>/

// Whether `value` names the directory `spelled` as a whole (not a longer name
// that begins with it, nor something inside it).
const namesDir = (value: string, spelled: string): boolean => {
  let at = value.indexOf(spelled)
  while (at >= 0) {
    const next = value[at + spelled.length]
    const after = value[at + spelled.length + 1]
    if (next === undefined || /[\s"';&|)`]/.test(next)) return true
    if (next === "/" && (after === undefined || /[\s"';&|)`*]/.test(after))) return true
    at = value.indexOf(spelled, at + 1)
  }
  return false
}

/**
 * Whether a PreToolUse would touch one of `targets`, and the denial if so (guard
 * `SELF_PROTECTION`). Every string of the call's input is looked at (at most
 * 10,000 of them; not the text Write, Edit, MultiEdit and NotebookEdit write,
 * which is data, only their paths): a path argument (`file_path`, `path`, `notebook_path`, …) is
 * resolved against the call's `cwd` and compared by its components; any string
 * (a Bash command, a pattern, an MCP argument) that spells a protected path — as
 * it is, relative to `cwd`, or from the home directory (`~/`, `$HOME/`) — is a
 * touch; so is a command that removes, moves or changes (`rm`, `mv`, `chmod`,
 * `sed -i`, a redirection, …) a directory above one, below the home and the
 * working directory (`rm -rf ~/.local/state`, `rm -rf .claude`). It is a check
 * on what the call says, not on what it will do: a command
 * that builds the path at run time (`$(echo …)`, a variable, a link made by an
 * earlier call) is not seen, which is why a session that vanished or shrank is
 * refused too (README, Guarantees). Pure.
 *
 * @since 0.1.0
 */
export const selfProtection = (
  input: (typeof Inputs)["PreToolUse"]["Type"],
  targets: ReadonlyArray<Protected>,
  home?: string | undefined
): Guard.Verdict => {
  if (targets.length === 0) return Guard.allow
  const forms = targets.map((t) => ({ target: t, forms: spellings(t, input.cwd, home) }))
  const above = targets.flatMap((t) => ancestors(t, input.cwd, home)).map((a) => ({
    target: a,
    forms: spellings(a, input.cwd, home)
  }))
  let seen = 0
  const deny = (t: Protected) => Guard.deny(`${input.tool_name} would touch ${t.what} ${t.path}`, SELF_PROTECTION)
  const look = (value: Schema.Json, key: string | null): Guard.Verdict | null => {
    if (seen++ > MAX_STRINGS) return null
    if (typeof value === "string") {
      if (key !== null && PATH_KEYS.has(key) && value !== "") {
        const p = normalize(
          value.startsWith("~/") && home !== undefined ? `${home}/${value.slice(2)}` : value,
          input.cwd
        )
        for (const t of targets) if (within(p, t)) return deny(t)
      }
      for (const { forms: fs, target } of forms) {
        for (const f of fs) if (value.includes(f)) return deny(target)
      }
      // A command that removes, moves or changes a directory above one.
      if (above.length > 0 && DESTRUCTIVE.test(value)) {
        for (const { forms: fs, target } of above) {
          for (const f of fs) if (namesDir(value, f)) return deny(target)
        }
      }
      return null
    }
    if (Array.isArray(value)) {
      for (const v of value) {
        const r = look(v, null)
        if (r !== null) return r
      }
      return null
    }
    if (typeof value === "object" && value !== null) {
      for (const [k, v] of Object.entries(value)) {
        const r = look(v, k)
        if (r !== null) return r
      }
    }
    return null
  }
  // The file tools' text (what they write, the text an edit replaces) is data, not
  // a place: a README that mentions the settings is not a touch of them. Their
  // paths are looked at as for every tool.
  const text = FILE_TEXT[input.tool_name]
  const looked = text === undefined
    ? input.tool_input
    : Object.fromEntries(Object.entries(input.tool_input).filter(([k]) => !text.has(k)))
  return look(looked, null) ?? Guard.allow
}

// ---------------------------------------------------------------------------
// Handling

/**
 * What `handle` decides with.
 *
 * @since 0.1.0
 */
export interface HandleOptions {
  /**
   * The guard every PreToolUse is decided with; `null` records only (every call
   * allowed). A compiled policy (`Policy.compile`) also folds each
   * outcome's bytes into its scoped byte limits (`Policy.observePlan`), in the
   * outcome's append.
   */
  readonly policy: Guard.Guard | Policy.Compiled | null
  /** The policy's name as denials cite it (`Policy.format`), kept in the decision entry. */
  readonly policyName?: string | undefined
  /**
   * The journal session to record in, instead of the Claude Code session's own
   * (`sessionId`): a driver that keeps a session's lines and its decisions on one
   * chain.
   */
  readonly session?: string | undefined
  /**
   * What no call may touch (`selfProtection`), decided before the policy and
   * whether or not there is one; none by default.
   */
  readonly protect?: ReadonlyArray<Protected> | undefined
  /** The home directory, for `~/` and `$HOME/` spellings of protected paths. */
  readonly home?: string | undefined
  /**
   * The real delegation depth of the event's agent (`AgentDepth.of`). Without it
   * a sub-agent counts at depth 1; `Unknown` counts at 1 too, and a guard that
   * would deny the call at a greater depth denies it (fails closed), saying the
   * depth cannot be known. Either way never below the depth recorded for the agent
   * in this session, nor one more than its recorded parent's (`AgentDepth.atLeast`):
   * the meta file it comes from is a claim the agent can rewrite.
   */
  readonly depth?: AgentDepth.Depth | undefined
  /**
   * How many calls our hooks allowed in this Claude Code session by its
   * transcript's account (`HookRuns`): a journal session holding fewer tool
   * entries vanished or shrank, and every call is denied (`selfProtection`)
   * rather than decided on a budget started afresh.
   */
  readonly allowedByTranscript?: number | undefined
  /**
   * The project directory that `/path` patterns are anchored at:
   * `$CLAUDE_PROJECT_DIR` when the door has it. Without it, the session's first
   * `cwd`, kept in its metadata (`data.cwd`, set at SessionStart or by the first
   * call decided).
   *
   * @since 0.1.0
   */
  readonly projectDir?: string | undefined
  /**
   * The tokens the session used so far, main agent and sub-agents together, as the
   * door measured them (`Usage`); `null`: the door measures them and does not know
   * (a `maxTokens` rule then denies); absent: the door does not measure them.
   *
   * @since 0.1.0
   */
  readonly tokens?: bigint | null | undefined
  /**
   * Whether a person can be prompted (default false): an `Ask` is then answered
   * with `permissionDecision: "ask"`; otherwise it is a denial saying that approval
   * was needed (`Guard.unanswered`).
   *
   * @since 0.1.0
   */
  readonly canAsk?: boolean | undefined
}

const allowAll: Guard.Guard = () => Guard.allow

const guardOf = (policy: Guard.Guard | Policy.Compiled | null): Guard.Guard =>
  policy === null ? allowAll : typeof policy === "function" ? policy : policy.guard

// A journal holding fewer calls than the transcript says our hooks allowed lost them.
const shrunk = (allowed: number | undefined, guard: Guard.Guard): Guard.Guard =>
  allowed === undefined || allowed <= 0 ?
    guard :
    (snapshot, params, context) =>
      snapshot.data_flow.total_invocations < BigInt(allowed)
        ? Guard.deny(
          `the journal of this session holds ${snapshot.data_flow.total_invocations} calls, but Claude Code's transcript shows ` +
            `${allowed} that our hooks allowed: it vanished or shrank, so it is not started afresh (verify and repair ` +
            `it, or start a new Claude Code session)`,
          SELF_PROTECTION
        )
        : guard(snapshot, params, context)

// A call of a sub-agent whose depth cannot be known is decided at the least depth
// it can have and at the greatest: a guard that would deny it deeper denies it.
// The policy's next state is the one of the call as recorded (at depth 1).
const unknownDepth = (policy: Guard.Guard, agent: string, why: string): Guard.Guard => (snapshot, params, context) => {
  const verdict = policy(snapshot, params, context)
  if (verdict._tag === "Deny") return verdict
  const deeper = policy(snapshot, { ...params, delegation_depth: Entry.MAX_U32 }, context)
  return deeper._tag !== "Deny"
    ? verdict
    : {
      ...Guard.deny(
        `the delegation depth of sub-agent ${agent} cannot be known (${why}), and ${deeper.guard} fails closed`,
        deeper.guard
      ),
      ...(verdict.state === undefined ? {} : { state: verdict.state })
    }
}

/**
 * The project directory a session's metadata keeps (`data.cwd`: the first `cwd`
 * it saw), or null.
 *
 * @since 0.1.0
 */
export const keptProjectDir = (meta: JournalState.JournalState["meta"]): string | null => {
  const data = meta?.data
  if (typeof data !== "object" || data === null || Array.isArray(data)) return null
  const cwd = (data as { readonly [key: string]: Schema.Json })["cwd"]
  return typeof cwd === "string" && cwd.startsWith("/") ? cwd : null
}

// What a PreToolUse is decided at, from the session's metadata in its writer:
// the project directory (the door's, else the session's first cwd: the kept one,
// else this call's, kept so the first one wins) and a sub-agent's depth, never
// below the depth recorded for it or one more than its recorded parent's
// (`AgentDepth.atLeast`), the deeper one kept. Stored before the decision: a depth
// is the agent's whether its call is allowed or not.
const anchors = (
  journal: SessionJournal.SessionJournal["Service"],
  session: string,
  input: (typeof Inputs)["PreToolUse"]["Type"],
  options: HandleOptions
) =>
  Effect.map(
    journal.writeFrom(session, (state) => {
      const data = state.meta?.data
      const base = typeof data === "object" && data !== null && !Array.isArray(data) ? data : {}
      const kept = keptProjectDir(state.meta)
      const setCwd = options.projectDir === undefined && kept === null
      const projectDir = options.projectDir ?? kept ?? input.cwd
      if (input.agent_id === undefined) {
        const result = { projectDir, depth: options.depth }
        return setCwd ? { items: [], meta: { data: { ...base, cwd: input.cwd } }, result } : { items: [], result }
      }
      const agent = agentOf(input).agent_id
      const recorded = AgentDepth.recordedOf(base)
      const depth = AgentDepth.atLeast(options.depth ?? { _tag: "Known", depth: 1 }, recorded, agent)
      const deeper = AgentDepth.recordDepth(recorded, agent, depth)
      const result = { projectDir, depth }
      if (!setCwd && deeper === null) return { items: [], result }
      return {
        items: [],
        meta: {
          data: { ...base, ...(setCwd ? { cwd: input.cwd } : {}), ...(deeper === null ? {} : { agent_depths: deeper }) }
        },
        result
      }
    }),
    (planned) => planned.result
  )

/**
 * The answer to a decided PreToolUse: `{}` when allowed (no opinion), Claude
 * Code's `permissionDecision: "ask"` with the reason for an ask, its deny with the
 * reason for a denial.
 *
 * @since 0.1.0
 */
export const answerOf = (verdict: Guard.Verdict): HookOutput =>
  verdict._tag === "Allow"
    ? {}
    : verdict._tag === "Ask"
    ? Refusal.askOutput(denialReason(verdict)) as HookOutput
    : denyOutput(denialReason(verdict))

/**
 * The `hook_event_name` of a decoded event, as Claude Code sent it.
 *
 * @since 0.1.0
 */
export const eventName = (event: HookEvent): string =>
  event.name === "Unknown" ? event.input.hook_event_name : event.name === "Unrecorded" ? event.event : event.name

const journalError = (event: HookEvent, e: { readonly message: string; readonly _tag: string }) =>
  new HookError({
    reason: "Journal",
    detail: `cannot record ${eventName(event)}: ${e.message || e._tag}`,
    event: eventName(event),
    cause: e
  })

/**
 * Journals one hook event in its Claude Code session's journal session and
 * answers it. A PreToolUse is decided with `options.policy` and recorded with
 * its decision in one append (`SessionJournal.decide`), with the call, its
 * anchors, the tokens and whether someone can be asked as the guard's context:
 * answered `answerOf(verdict)` (`{}`, an ask, a deny). Every other event
 * is appended (SessionStart also sets the session's metadata: title, labels
 * `claude-code` and `hooked`, and in `data` the Claude Code session, the first
 * `cwd`, project and custody session id) and answered `{}`. Fails with `HookError` (`Journal`) when
 * the event cannot be recorded; nothing was then acknowledged, and the caller
 * refuses (`refusal`) unless it fails open. The one place every door decides
 * (`HookRunner`, `GuardServer`, `Session`).
 *
 * @since 0.1.0
 */
export const handle = (
  event: HookEvent,
  options: HandleOptions
): Effect.Effect<HookAnswer, HookError, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const session = options.session ?? sessionId(event.input)
    const compiled = options.policy !== null && typeof options.policy !== "function" ? options.policy : null
    if (event.name === "PreToolUse") {
      const input = event.input
      const policy = guardOf(options.policy)
      const protection = selfProtection(input, options.protect ?? [], options.home)
      const { depth, projectDir } = yield* anchors(journal, session, input, options)
      const tokens = options.tokens
      const decision = yield* journal.decide(
        session,
        toolParams(input, depth),
        shrunk(
          options.allowedByTranscript,
          protection._tag === "Deny"
            ? () => protection
            : depth?._tag === "Unknown" && input.agent_id !== undefined
            ? unknownDepth(policy, input.agent_id, depth.reason)
            : policy
        ),
        (verdict, entry) => {
          const decided = Guard.decisionPayload(verdict, entry.sequence, tokens)
          return [{
            kind: DECISION_KIND,
            payload: {
              tool_use_id: input.tool_use_id,
              tool_name: input.tool_name,
              tool_input: input.tool_input,
              // With the input, the call's cwd: `policy test` replays the call as it came.
              cwd: input.cwd,
              agent_id: entry.agent_id,
              ...(input.agent_type === undefined ? {} : { agent_type: input.agent_type }),
              ...(input.prompt_id === undefined ? {} : { prompt_id: input.prompt_id }),
              ...decided,
              // A door that measures tokens and does not know them says so.
              ...(tokens === null ? { tokens: null } : {}),
              policy: options.policy === null ? null : options.policyName ?? "policy",
              ...(depth?._tag === "Unknown" && input.agent_id !== undefined
                ? { delegation_depth_unknown: depth.reason }
                : {}),
              // A meta file that says less than the journal recorded for the agent.
              ...(depth?._tag === "Known" && depth.claimed !== undefined
                ? { delegation_depth_claimed: depth.claimed }
                : {})
            }
          }]
        },
        {
          call: { tool_name: input.tool_name, tool_input: input.tool_input, cwd: input.cwd },
          where: { cwd: input.cwd, projectDir, ...(options.home === undefined ? {} : { home: options.home }) },
          tokens: tokens ?? null,
          canAsk: options.canAsk === true
        }
      )
      const verdict = decision.verdict
      return { output: answerOf(verdict), session, verdict }
    }
    if (
      compiled !== null && (event.name === "PostToolUse" || event.name === "PostToolUseFailure" ||
        event.name === "Unrecorded")
    ) {
      // The outcome's bytes reach the policy's scoped byte limits in the outcome's
      // own append, from the session's state under its lock.
      const outcome = entryOf(event)
      const input = event.input
      const call: Pattern.Call = event.name === "Unrecorded"
        ? { tool_name: input.tool_name, cwd: input.cwd }
        : { tool_name: input.tool_name, tool_input: event.input.tool_input, cwd: input.cwd }
      const read = outcomeRead(outcome.payload)
      yield* journal.writeFrom(session, (state, nowMillis) => {
        const where = {
          cwd: input.cwd,
          projectDir: options.projectDir ?? keptProjectDir(state.meta) ?? input.cwd,
          ...(options.home === undefined ? {} : { home: options.home })
        }
        return Policy.observePlan(compiled, outcome, call, { read, written: 0 }, where)(state, nowMillis)
      })
      return { output: {}, session, verdict: null }
    }
    const { kind, payload } = entryOf(event)
    yield* journal.append(session, kind, payload)
    if (event.name === "SessionStart") {
      const input = event.input
      // A resumed session keeps its first cwd: `/path` patterns stay anchored there.
      yield* journal.writeFrom(session, (state) => ({
        items: [],
        meta: {
          title: `Claude Code ${input.session_id}`,
          labels: ["claude-code", "hooked"],
          data: {
            claude_code_session: input.session_id,
            cwd: keptProjectDir(state.meta) ?? input.cwd,
            project: projectOf(input),
            custody_session: custodySessionId(input)
          }
        },
        result: null
      }))
    }
    return { output: {}, session, verdict: null }
  }).pipe(Effect.mapError((e) => journalError(event, e)))
