/**
 * Codex CLI's hooks, journaled and guarded: the input of each hook event
 * (docs/codex-PROTOCOL.md (b)) as Schemas, decoded from bounded, strictly UTF-8
 * bytes; the journal session of a Codex session; what each event puts on its
 * chain; and the only answers Codex obeys (docs/codex-PROTOCOL.md (c)). The command hook
 * (`session-journal codex hook`) calls `handle`.
 *
 * What goes on the chain, one journal session per Codex session (`sessionId`):
 *
 * - `PreToolUse`: the call's tool entry (`tool_name` as Codex sends it: `Bash`
 *   for `exec_command`, `apply_patch`, `spawn_agent`, …; `server_id` `codex`;
 *   `agent_id` `main` at depth 0 or a sub-agent's `agent_id` at depth 1;
 *   `bytes_written` the UTF-8 length of the JSON text of `tool_input`), decided
 *   by the policy, and in the same append a `codex.decision` entry: the fields
 *   of core's `Guard.decisionPayload` plus `tool_use_id`, `turn_id`,
 *   `tool_name`, `tool_input`, `cwd`, `agent_id`, `policy`.
 * - `PostToolUse`: a `tool.outcome` entry (core's `Entry.OUTCOME_KIND`):
 *   `tool_use_id`, `tool_name`, `agent_id`, `bytes_read` (the UTF-8 length of the
 *   text Codex gives back as `tool_response`, which is what the model sees),
 *   `bytes_written` 0, `error` null, and the SHA-256 of the response's JSON text;
 *   under a compiled policy, with the policy's next state in the same append when
 *   its scoped byte limits count the call (`Policy.observePlan`).
 * - every other event: `codex.<event>` with the hook input as payload.
 *
 * Codex treats everything but three outputs as "run the call" (a crash, a
 * timeout, unparsable output, `allow`, `ask`, a deny without a reason), so an
 * allowed call is answered with `{}` and a denied one with the reasoned deny
 * form only (`denyOutput`), whose reason is never empty.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"
import { deeperThan } from "@session-journal/claude-code/Hook"
import * as Refusal from "@session-journal/claude-code/Refusal"
import { digestPrefix } from "@session-journal/claude-code/SessionIds"
import { jsonBytes, utf8Length } from "@session-journal/claude-code/Transcript"
import { Entry, Guard, messageOf, Policy, SessionJournal, Utf8 } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"

// ---------------------------------------------------------------------------
// Bounds

/**
 * Default bound on one hook input, in bytes (4 MiB; Codex's tool responses are
 * cut to about 40 KB, an `apply_patch` carries its whole patch).
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

const NonEmpty = Schema.String.check(Schema.isNonEmpty())
const ToolInput = Schema.Record(Schema.String, Schema.Json)

const common = {
  session_id: NonEmpty,
  transcript_path: Schema.NullOr(Schema.String),
  cwd: NonEmpty,
  model: Schema.optionalKey(Schema.String),
  turn_id: Schema.optionalKey(Schema.String),
  permission_mode: Schema.optionalKey(Schema.String),
  agent_id: Schema.optionalKey(NonEmpty),
  agent_type: Schema.optionalKey(Schema.String)
}

/**
 * The fields every Codex hook input carries (docs/codex-PROTOCOL.md (b)): `session_id`,
 * `transcript_path` (null for an `--ephemeral` run), `cwd`, `hook_event_name`;
 * `model`, `turn_id` and `permission_mode` on most events; `agent_id` and
 * `agent_type` inside a sub-agent.
 *
 * @since 0.1.0
 */
export const Common = Schema.Struct({ ...common, hook_event_name: Schema.String })

/**
 * A PreToolUse input: the common fields, `turn_id`, `tool_name`, `tool_input`
 * (an object) and `tool_use_id` (the model's `call_id`).
 *
 * @since 0.1.0
 */
export const PreToolUse = Schema.Struct({
  ...common,
  hook_event_name: Schema.Literal("PreToolUse"),
  turn_id: NonEmpty,
  tool_name: NonEmpty,
  tool_input: ToolInput,
  tool_use_id: NonEmpty
})

/**
 * A PostToolUse input: a PreToolUse's fields and `tool_response` (the text the
 * model is given, as observed for every tool; any JSON value is accepted).
 *
 * @since 0.1.0
 */
export const PostToolUse = Schema.Struct({
  ...common,
  hook_event_name: Schema.Literal("PostToolUse"),
  turn_id: NonEmpty,
  tool_name: NonEmpty,
  tool_input: ToolInput,
  tool_use_id: NonEmpty,
  tool_response: Schema.Json
})

/**
 * A decoded hook input: a PreToolUse, a PostToolUse, or any other event (`Other`,
 * its common fields checked), each with `raw`, the whole input as it came.
 *
 * @since 0.1.0
 */
export type HookEvent =
  | {
    readonly name: "PreToolUse"
    readonly input: typeof PreToolUse.Type
    readonly raw: { readonly [key: string]: Schema.Json }
  }
  | {
    readonly name: "PostToolUse"
    readonly input: typeof PostToolUse.Type
    readonly raw: { readonly [key: string]: Schema.Json }
  }
  | {
    readonly name: "Other"
    readonly input: typeof Common.Type
    readonly raw: { readonly [key: string]: Schema.Json }
  }

// ---------------------------------------------------------------------------
// Errors

/**
 * Why a hook could not be handled: the input (`TooLarge`, `NotUtf8`, `TooDeep`,
 * `NotJson`, `Invalid`) or the journal (`Journal`). `event` is the input's
 * `hook_event_name` when it could be read, so a refusal takes the event's form.
 *
 * @since 0.1.0
 */
export class HookError extends Schema.TaggedError<HookError>()("CodexHookError", {
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

const fail = (reason: HookError["reason"], detail: string, event: string | null = null) =>
  Result.fail(new HookError({ reason, detail, event }))

/**
 * Decodes one hook input from its bytes: at most `maxBytes`, strict UTF-8, nested
 * at most `maxDepth`, one JSON object that core can journal (well-formed strings,
 * finite numbers), with the fields of its event. Nothing in it is trusted: an
 * input that fails any check is an error naming the check.
 *
 * @since 0.1.0
 */
export const decode = (bytes: Uint8Array, limits?: Limits): Result.Result<HookEvent, HookError> => {
  const maxBytes = limits?.maxBytes ?? MAX_INPUT_BYTES
  const maxDepth = Math.min(limits?.maxDepth ?? MAX_INPUT_DEPTH, Entry.MAX_PAYLOAD_DEPTH - 1)
  if (bytes.length > maxBytes) return fail("TooLarge", `hook input over the bound of ${maxBytes} bytes`)
  let text: string
  try {
    text = Utf8.decodeStrict(bytes, { keepBom: true })
  } catch {
    return fail("NotUtf8", "hook input is not valid UTF-8")
  }
  if (deeperThan(text, maxDepth)) return fail("TooDeep", `hook input nested deeper than ${maxDepth} levels`)
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return fail("NotJson", `hook input is not JSON: ${messageOf(e)}`)
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) {
    return fail("Invalid", "hook input is not a JSON object")
  }
  const raw = json as { readonly [key: string]: Schema.Json }
  const name = typeof raw["hook_event_name"] === "string" ? raw["hook_event_name"] : null
  const problem = Entry.payloadProblem(json)
  if (problem !== undefined) return fail("Invalid", `hook input cannot be journaled: ${problem}`, name)
  const checked = <S extends Schema.Codec<unknown, unknown>>(schema: S) => {
    const r = Schema.decodeUnknownResult(schema as unknown as Schema.Codec<S["Type"]>)(raw)
    return Result.isFailure(r)
      ? fail("Invalid", `hook input of ${name ?? "no event"} is invalid: ${r.failure.message}`, name)
      : Result.succeed(r.success)
  }
  if (name === "PreToolUse") {
    return Result.map(checked(PreToolUse), (input): HookEvent => ({ name: "PreToolUse", input, raw }))
  }
  if (name === "PostToolUse") {
    return Result.map(checked(PostToolUse), (input): HookEvent => ({ name: "PostToolUse", input, raw }))
  }
  return Result.map(checked(Common), (input): HookEvent => ({ name: "Other", input, raw }))
}

// ---------------------------------------------------------------------------
// The journal session

/**
 * Prefix of the journal sessions of hooked Codex sessions.
 *
 * @since 0.1.0
 */
export const PREFIX = "codex-"

/**
 * Prefix of the custody sessions of Codex rollout files (`Rollout`).
 *
 * @since 0.1.0
 */
export const ROLLOUT_PREFIX = "codex-rollout-"

const stem = /^[A-Za-z0-9-]{1,64}$/

/**
 * The part of a session id that names a Codex thread: the thread id itself when
 * it is 1 to 64 of `[A-Za-z0-9-]` (Codex's ids are UUIDs), else `_` and the
 * first 40 hex digits of its SHA-256 (a forged id with `/`, `..` or anything
 * else never reaches a path). Pure.
 *
 * @since 0.1.0
 */
export const threadStem = (thread: string): string => stem.test(thread) ? thread : `_${digestPrefix(thread, 40)}`

/**
 * The journal session of a Codex session, from its `session_id` alone:
 * `codex-<session_id>` (`threadStem`). Sub-agents share their parent's
 * `session_id`, so their calls are decided on the parent's session. Pure.
 *
 * @since 0.1.0
 */
export const sessionId = (codexSession: string): string => `${PREFIX}${threadStem(codexSession)}`

/**
 * The custody session of a Codex thread's rollout file:
 * `codex-rollout-<thread id>` (`threadStem`). Pure.
 *
 * @since 0.1.0
 */
export const rolloutSessionId = (thread: string): string => `${ROLLOUT_PREFIX}${threadStem(thread)}`

/**
 * The agent of an event: `main` at depth 0, or the sub-agent's `agent_id` (an id
 * the journal would refuse is journaled as `invalid-agent-id`) at depth 1.
 *
 * @since 0.1.0
 */
export const agentOf = (
  input: typeof Common.Type
): { readonly agent_id: string; readonly delegation_depth: number } =>
  input.agent_id === undefined
    ? { agent_id: "main", delegation_depth: 0 }
    : { agent_id: Entry.isIdentity(input.agent_id) ? input.agent_id : "invalid-agent-id", delegation_depth: 1 }

/**
 * The server id of every Codex call's tool entry.
 *
 * @since 0.1.0
 */
export const SERVER_ID = "codex"

/**
 * The tool parameters of a PreToolUse: the call as Codex names it, its input's
 * bytes as `bytes_written`, nothing read yet.
 *
 * @since 0.1.0
 */
export const toolParams = (input: typeof PreToolUse.Type): Entry.ToolParams => ({
  tool_name: Entry.isIdentity(input.tool_name) ? input.tool_name : "invalid-tool-name",
  server_id: SERVER_ID,
  ...agentOf(input),
  bytes_read: 0,
  bytes_written: jsonBytes(input.tool_input),
  allowed: true
})

/**
 * The kind of the entry written beside each PreToolUse's tool entry.
 *
 * @since 0.1.0
 */
export const DECISION_KIND = "codex.decision"

/**
 * The kind of a non-tool event's entry: `codex.<event>` (an event name outside
 * `[A-Za-z]{1,64}` is `codex.unknown`).
 *
 * @since 0.1.0
 */
export const kindOf = (name: string): string => /^[A-Za-z]{1,64}$/.test(name) ? `codex.${name}` : "codex.unknown"

/**
 * The bytes a call returned to the model, from its PostToolUse `tool_response`:
 * the UTF-8 length of a text response (what Codex sends for every tool observed),
 * else of the response's JSON text.
 *
 * @since 0.1.0
 */
export const responseBytes = (response: Schema.Json): number =>
  typeof response === "string" ? utf8Length(response) : jsonBytes(response)

const digest = (value: Schema.Json): string => bytesToHex(sha256(new TextEncoder().encode(JSON.stringify(value))))

/**
 * The entry a PostToolUse or another event puts on the chain; the module header
 * lists them.
 *
 * @since 0.1.0
 */
export const entryOf = (event: Exclude<HookEvent, { readonly name: "PreToolUse" }>): {
  readonly kind: string
  readonly payload: Schema.Json
} =>
  event.name === "PostToolUse"
    ? {
      kind: Entry.OUTCOME_KIND,
      payload: {
        tool_use_id: event.input.tool_use_id,
        tool_name: event.input.tool_name,
        turn_id: event.input.turn_id,
        agent_id: agentOf(event.input).agent_id,
        bytes_read: responseBytes(event.input.tool_response),
        bytes_written: 0,
        duration_ms: null,
        is_interrupt: false,
        error: null,
        response_sha256: digest(event.input.tool_response)
      }
    }
    : { kind: kindOf(event.input.hook_event_name), payload: event.raw }

// ---------------------------------------------------------------------------
// Answers

/**
 * A hook output object as Codex reads it from a command hook's stdout; `{}` has
 * no opinion (the call runs).
 *
 * @since 0.1.0
 */
export type HookOutput = { readonly [key: string]: Schema.Json }

/**
 * The output that denies a PreToolUse in the form Codex obeys: `permissionDecision`
 * `deny` with a non-empty `permissionDecisionReason` (an empty reason is Codex's
 * "failed", and the call runs, so one is always given).
 *
 * @since 0.1.0
 */
export const denyOutput = (reason: string): HookOutput =>
  Refusal.denyOutput(reason.trim() === "" ? "session-journal: denied" : reason) as HookOutput

/**
 * The reason a denial gives: the guard's sentence and, in brackets, the guard
 * (`Refusal.denialReason`).
 *
 * @since 0.1.0
 */
export const denialReason = Refusal.denialReason

/**
 * How a hook that could not be handled refuses: a PreToolUse is denied with the
 * reason (`denyOutput`, exit 0); a Stop or SubagentStop already kept going ends
 * with exit 1; every other event with exit 2 and the reason on stderr, which
 * Codex shows as a block (a PostToolUse's output is then replaced by the reason,
 * a UserPromptSubmit sends no request) (`Refusal.refusal`).
 *
 * @since 0.1.0
 */
export const refusal = (event: string | null, reason: string, options?: {
  readonly stopHookActive?: boolean | undefined
}): {
  readonly output: HookOutput | null
  readonly exitCode: 0 | 1 | 2
  readonly stderr: string
} => {
  const r = Refusal.refusal(event, reason, options)
  return { output: r.output as HookOutput | null, exitCode: r.exitCode, stderr: r.stderr }
}

/**
 * The answer to one hook: the output, the journal session, and for a PreToolUse
 * the verdict recorded (`null` for other events).
 *
 * @since 0.1.0
 */
export interface HookAnswer {
  readonly output: HookOutput
  readonly session: string
  readonly verdict: Guard.Verdict | null
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
   * allowed). A compiled policy (`Policy.compile`) also counts each PostToolUse's
   * bytes in its scoped byte limits (`Policy.observePlan`), in the outcome's append.
   */
  readonly policy: Guard.Guard | Policy.Compiled | null
  /** The policy's name as denials cite it (`Policy.format`), kept in the decision entry. */
  readonly policyName?: string | undefined
  /**
   * The tokens the session used so far, main agent and sub-agents together, as
   * its rollouts report them (`Usage`); `null`: the hook measures them and does
   * not know (a `maxTokens` rule then denies); absent: not measured.
   */
  readonly tokens?: bigint | null | undefined
}

const allowAll: Guard.Guard = () => Guard.allow

/**
 * The decision of one PreToolUse, recorded with the call in one append: the one
 * place a Codex call reaches core's `SessionJournal.decide`, which is given the
 * call (`tool_name`, `tool_input`, `cwd`) for the policy's patterns and the
 * tokens used so far (`options.tokens`), which the decision entry records
 * (`tokens: null` when the hook could not know them).
 *
 * @since 0.1.0
 */
export const decideCall = (
  session: string,
  input: typeof PreToolUse.Type,
  options: HandleOptions
): Effect.Effect<SessionJournal.Decision, SessionJournal.WriteError, SessionJournal.SessionJournal> =>
  Effect.flatMap(SessionJournal.SessionJournal, (journal) =>
    journal.decide(
      session,
      toolParams(input),
      options.policy === null ? allowAll : typeof options.policy === "function" ? options.policy : options.policy.guard,
      (verdict, entry) => [{
        kind: DECISION_KIND,
        payload: {
          ...Guard.decisionPayload(verdict, entry.sequence, options.tokens),
          ...(options.tokens === null ? { tokens: null } : {}),
          tool_use_id: input.tool_use_id,
          turn_id: input.turn_id,
          tool_name: input.tool_name,
          tool_input: input.tool_input,
          // With the input, the call's cwd: `policy test` replays the call as it came.
          cwd: input.cwd,
          agent_id: entry.agent_id,
          ...(input.agent_type === undefined ? {} : { agent_type: input.agent_type }),
          policy: options.policy === null ? null : options.policyName ?? "policy"
        }
      }],
      // Patterns see the call as Codex sends it; Codex cannot ask, so an ask is a denial.
      {
        call: { tool_name: input.tool_name, tool_input: input.tool_input, cwd: input.cwd },
        tokens: options.tokens ?? null
      }
    ))

const journalError = (event: HookEvent, e: { readonly message: string; readonly _tag: string }) =>
  new HookError({
    reason: "Journal",
    detail: `cannot record ${event.input.hook_event_name}: ${e.message || e._tag}`,
    event: event.input.hook_event_name,
    cause: e
  })

/**
 * The metadata of a hooked Codex session: title, labels `codex` and `hooked`,
 * and in `data` the Codex session, its working directory, its rollout file and
 * the custody session of that rollout (`rolloutSessionId`).
 *
 * @since 0.1.0
 */
export const metaOf = (input: typeof Common.Type) => ({
  title: `Codex ${input.session_id}`,
  labels: ["codex", "hooked"],
  data: {
    codex_session: input.session_id,
    cwd: input.cwd,
    rollout: input.agent_id === undefined ? input.transcript_path : null,
    custody_session: rolloutSessionId(input.session_id)
  }
})

/**
 * Journals one hook event in its Codex session's journal session and answers it.
 * A PreToolUse is decided with `options.policy` and recorded with its decision
 * in one append (`decideCall`): denied, it is answered with
 * `denyOutput(denialReason(verdict))`; allowed, with `{}`. Every other event is
 * appended and answered `{}`. The session's metadata (`metaOf`) is set by the
 * first event that finds it unset. Fails with `HookError` (`Journal`) when the
 * event cannot be recorded; the caller then refuses (`refusal`).
 *
 * @since 0.1.0
 */
export const handle = (
  event: HookEvent,
  options: HandleOptions
): Effect.Effect<HookAnswer, HookError, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const session = sessionId(event.input.session_id)
    let answer: HookAnswer
    if (event.name === "PreToolUse") {
      const { verdict } = yield* decideCall(session, event.input, options)
      answer = { output: verdict._tag === "Allow" ? {} : denyOutput(denialReason(verdict)), session, verdict }
    } else {
      const { kind, payload } = entryOf(event)
      const compiled = options.policy !== null && typeof options.policy !== "function" ? options.policy : null
      if (event.name === "PostToolUse" && compiled !== null) {
        // As Claude Code's PostToolUse: the outcome's bytes reach the policy's scoped
        // byte limits in the outcome's own append, from the session's state under its lock.
        const input = event.input
        yield* journal.writeFrom(
          session,
          Policy.observePlan(
            compiled,
            { kind, payload },
            { tool_name: input.tool_name, tool_input: input.tool_input, cwd: input.cwd },
            { read: responseBytes(input.tool_response), written: 0 }
          )
        )
      } else {
        yield* journal.append(session, kind, payload)
      }
      answer = { output: {}, session, verdict: null }
    }
    const state = yield* journal.state(session)
    if (state.meta === null || state.meta.title === "" || event.input.hook_event_name === "SessionStart") {
      yield* journal.setMeta(session, metaOf(event.input))
    }
    return answer
  }).pipe(Effect.mapError((e) => e instanceof HookError ? e : journalError(event, e)))
