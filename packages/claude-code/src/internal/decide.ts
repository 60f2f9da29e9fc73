/**
 * How the driver decides: the hook callbacks it registers with `initialize`
 * (PreToolUse, PostToolUse and PostToolUseFailure, matcher `""`: every tool,
 * pre-allowed or not, main agent or sub-agent), each decoded and handled by
 * `Hook.handle` (the pipeline of the command hook and the resident guard) in the
 * driver's own journal session; and `can_use_tool`, answered from the PreToolUse
 * callback's decision for the same call when there was one (so the call is
 * recorded once), else decided through the same pipeline from a PreToolUse built
 * from the request. Whatever cannot be handled is refused in the event's own form
 * (`Hook.refusal`: a deny for PreToolUse), never answered `{}`; a refusal because
 * the journal could not record says so (`fatal`), and the session then ends.
 *
 * An ask reaches a person only through the host's `approve` (the session's
 * `Options.approve`): with it, an `Ask` is answered `permissionDecision: "ask"`,
 * the CLI sends `can_use_tool`, and `approve` answers it; without it, no one can
 * be asked and an ask is a denial saying approval was needed. The tokens are read
 * from the transcripts the hook inputs name (`TranscriptScan`, kept in memory).
 */
import { type Guard, messageOf, type Policy, type SessionJournal } from "@session-journal/core"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import type * as Schema from "effect/Schema"
import * as AgentDepth from "../AgentDepth.ts"
import * as Hook from "../Hook.ts"
import * as Message from "../Message.ts"
import * as TranscriptScan from "./transcriptScan.ts"

/**
 * A question to the person a host puts a driven session's asks to: the call
 * (`toolName`, `input`, `toolUseId`) and why the policy asks (its reason and
 * guard, `Hook.denialReason`).
 */
export interface Approval {
  readonly toolName: string
  readonly input: { readonly [key: string]: Schema.Json }
  readonly toolUseId: string | undefined
  readonly reason: string
}

/** The person's answer: the call runs, or not (`message` is what the model reads). */
export type Approved = { readonly allow: true } | { readonly allow: false; readonly message: string }

/** The callback id of each hook the driver registers. */
export const CALLBACKS = {
  PreToolUse: "session_journal_pre_tool_use",
  PostToolUse: "session_journal_post_tool_use",
  PostToolUseFailure: "session_journal_post_tool_use_failure"
} as const

/** The event a callback id of this driver is registered for, if it is one. */
export const eventOfCallback = (callbackId: string): string | null => {
  for (const [event, id] of Object.entries(CALLBACKS)) if (id === callbackId) return event
  return null
}

/**
 * The `initialize` request registering the callbacks, every tool matched.
 * `timeoutSeconds` is the CLI's wait for an answer; the driver answers within its
 * own, shorter deadline, so the CLI's (which would let the call run) never fires.
 */
export const initialize = (timeoutSeconds: number): { readonly subtype: string; readonly hooks: Schema.Json } => ({
  subtype: "initialize",
  hooks: Object.fromEntries(
    Object.entries(CALLBACKS).map(([event, id]) => [
      event,
      [{ matcher: "", hookCallbackIds: [id], timeout: timeoutSeconds }]
    ])
  )
})

/**
 * One answer: the `response` of the control response, and, when the journal
 * could not record what was asked, why the session must end (else null).
 */
export interface Answer {
  readonly response: Schema.Json
  readonly fatal: string | null
}

/** What a PreToolUse decided, as `can_use_tool` repeats it (`input`: the JSON text of the input decided). */
type Verdict =
  | { readonly allow: true; readonly input?: string | undefined }
  | { readonly allow: false; readonly reason: string; readonly input?: string | undefined }
  | { readonly allow: "ask"; readonly reason: string; readonly input?: string | undefined }

/** Decisions kept for `can_use_tool` at most (the oldest go first). */
const MAX_KEPT = 4096

const isObject = (u: unknown): u is { readonly [key: string]: Schema.Json } =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** The reason of a PreToolUse refusal, as the model reads it. */
const reasonOf = (output: Hook.HookOutput): string => {
  const specific = output["hookSpecificOutput"]
  const reason = isObject(specific) ? specific["permissionDecisionReason"] : undefined
  return typeof reason === "string" ? reason : "session-journal: denied"
}

type Handled =
  | { readonly _tag: "Answered"; readonly answer: Hook.HookAnswer }
  | { readonly _tag: "Refused"; readonly reason: string; readonly fatal: boolean }

/**
 * The decider of one session.
 */
export const make = (options: {
  readonly policy: Guard.Guard | Policy.Compiled | null
  /** Whom an ask is put to; none: no one can be asked. */
  readonly approve?: ((approval: Approval) => Effect.Effect<Approved>) | undefined
  readonly policyName: string | undefined
  readonly session: string
  readonly deadline: Duration.Duration
  readonly protect?: ReadonlyArray<Hook.Protected> | undefined
  readonly home?: string | undefined
}) => {
  const decided = new Map<string, Deferred.Deferred<Verdict>>()
  const handleOptions: Hook.HandleOptions = {
    policy: options.policy,
    policyName: options.policyName,
    session: options.session,
    protect: options.protect,
    home: options.home,
    canAsk: options.approve !== undefined
  }
  const keeper = TranscriptScan.memoryKeeper(16)

  // What `handle` reads besides the event: the sub-agent's depth, the tokens.
  const optionsFor = (event: Hook.HookEvent): Effect.Effect<Hook.HandleOptions> =>
    event.name !== "PreToolUse" ? Effect.succeed(handleOptions) : Effect.gen(function*() {
      const input = event.input
      const depth = input.agent_id === undefined ? undefined : yield* AgentDepth.of(input)
      const path = input.transcript_path
      const totals = path === undefined || path === ""
        ? null
        : yield* Effect.promise(async () => {
          // Read once the transcript holding this call holds it: the lines before it are then there too.
          await TranscriptScan.awaitCallOf(input)
          return TranscriptScan.totals(path, keeper, options.session)
        })
      return { ...handleOptions, ...(depth === undefined ? {} : { depth }), tokens: totals?.tokens ?? null }
    })

  const remember = (toolUseId: string): Deferred.Deferred<Verdict> => {
    const d = Deferred.makeUnsafe<Verdict>()
    decided.delete(toolUseId)
    if (decided.size >= MAX_KEPT) decided.delete(decided.keys().next().value!)
    decided.set(toolUseId, d)
    return d
  }

  /** `Hook.handle` under the deadline; its failures, the deadline and defects become refusals. */
  const handle = (event: Hook.HookEvent): Effect.Effect<Handled, never, SessionJournal.SessionJournal> =>
    Effect.flatMap(optionsFor(event), (o) => Hook.handle(event, o)).pipe(
      Effect.timeoutOption(options.deadline),
      Effect.map((o): Handled =>
        Option.isSome(o) ? { _tag: "Answered", answer: o.value } : {
          _tag: "Refused",
          reason: `the journal did not record the call within ${Duration.format(options.deadline)}`,
          fatal: true
        }
      ),
      Effect.catch((e) =>
        Effect.succeed<Handled>({ _tag: "Refused", reason: e.message, fatal: e.reason === "Journal" })
      ),
      Effect.catchDefect((defect) =>
        Effect.succeed<Handled>({
          _tag: "Refused",
          reason: `unexpected failure (a bug): ${messageOf(defect)}`,
          fatal: true
        })
      )
    )

  /** Answers one hook callback with the hook output `Hook.handle` gives, or the event's refusal. */
  const hookCallback = (request: Message.HookCallback): Effect.Effect<Answer, never, SessionJournal.SessionJournal> =>
    Effect.gen(function*() {
      const registered = eventOfCallback(request.callbackId)
      const input = request.input
      const named = isObject(input) && typeof input["hook_event_name"] === "string"
        ? input["hook_event_name"]
        : registered
      const refuse = (reason: string, fatal: boolean, event = named): Answer => ({
        response: Hook.refusal(event, reason).httpOutput,
        fatal: fatal ? reason : null
      })
      if (registered === null) return refuse(`no hook of this driver has the callback id ${request.callbackId}`, false)
      if (named !== registered) {
        return refuse(`the ${registered} callback was called with a ${String(named)} input`, false, registered)
      }
      const decoded = Hook.decodeText(JSON.stringify(input ?? null))
      if (Result.isFailure(decoded)) return refuse(decoded.failure.message, false, decoded.failure.event ?? registered)
      const event = decoded.success
      const pending = event.name === "PreToolUse" ? remember(event.input.tool_use_id) : undefined
      const handled = yield* handle(event).pipe(
        Effect.onInterrupt(() => pending === undefined ? Effect.void : Deferred.interrupt(pending))
      )
      if (event.name === "PostToolUse" || event.name === "PostToolUseFailure") decided.delete(event.input.tool_use_id)
      const answer = handled._tag === "Answered"
        ? { response: handled.answer.output as Schema.Json, fatal: null }
        : refuse(handled.reason, handled.fatal)
      if (pending !== undefined) {
        const verdict = handled._tag === "Answered" ? handled.answer.verdict : null
        const decidedInput = event.name === "PreToolUse" ? JSON.stringify(event.input.tool_input) : undefined
        const settled: Verdict = verdict !== null && verdict._tag === "Allow"
          ? { allow: true, input: decidedInput }
          : verdict !== null && verdict._tag === "Ask" && handled._tag === "Answered"
          ? { allow: "ask", reason: Hook.denialReason(verdict), input: decidedInput }
          : { allow: false, reason: reasonOf(answer.response as Hook.HookOutput), input: decidedInput }
        yield* Deferred.succeed(pending, settled)
      }
      return answer
    })

  /**
   * Answers one `can_use_tool`: from its PreToolUse callback's decision, else by
   * deciding a PreToolUse built from the request (`claudeSession` and `cwd` fill
   * the fields a request does not carry).
   */
  const canUseTool = (
    request: Message.CanUseTool,
    claudeSession: string | null,
    cwd: string
  ): Effect.Effect<Answer, never, SessionJournal.SessionJournal> =>
    Effect.gen(function*() {
      const answerOf = (verdict: Verdict, fatal: string | null): Effect.Effect<Answer> =>
        verdict.allow === "ask"
          ? Effect.map(ask(request, verdict.reason), (approved) => ({
            response: approved.allow
              ? { behavior: "allow", updatedInput: request.input }
              : { behavior: "deny", message: approved.message },
            fatal
          }))
          : Effect.succeed({
            response: verdict.allow
              ? { behavior: "allow", updatedInput: request.input }
              : { behavior: "deny", message: verdict.reason },
            fatal
          })
      const earlier = request.toolUseId === undefined ? undefined : decided.get(request.toolUseId)
      if (earlier !== undefined) {
        const verdict = yield* Deferred.await(earlier).pipe(
          Effect.catchCause(() =>
            Effect.succeed<Verdict>({ allow: false, reason: "session-journal: the call's decision was cancelled" })
          )
        )
        decided.delete(request.toolUseId!)
        // An input changed since it was decided (another hook rewrote it) is decided
        // again, as it now is; a denial stands whatever the input.
        if (verdict.allow === false || verdict.input === undefined || verdict.input === JSON.stringify(request.input)) {
          return yield* answerOf(verdict, null)
        }
      }
      const raw: { [key: string]: Schema.Json } = {
        session_id: claudeSession ?? "unknown",
        cwd,
        hook_event_name: "PreToolUse",
        tool_name: request.toolName,
        tool_input: request.input,
        tool_use_id: request.toolUseId ?? `can_use_tool:${request.requestId}`,
        ...(request.agentId === undefined ? {} : { agent_id: request.agentId })
      }
      const decoded = Hook.decodeText(JSON.stringify(raw))
      if (Result.isFailure(decoded)) {
        return yield* answerOf({
          allow: false,
          reason: reasonOf(Hook.refusal("PreToolUse", decoded.failure.message).httpOutput)
        }, null)
      }
      const handled = yield* handle(decoded.success)
      if (handled._tag === "Answered") {
        const verdict = handled.answer.verdict
        return yield* answerOf(
          verdict === null
            ? { allow: false, reason: "session-journal: the pipeline gave no verdict" }
            : verdict._tag === "Allow"
            ? { allow: true }
            : verdict._tag === "Ask"
            ? { allow: "ask", reason: Hook.denialReason(verdict) }
            : { allow: false, reason: Hook.denialReason(verdict) },
          null
        )
      }
      const text = reasonOf(Hook.refusal("PreToolUse", handled.reason).httpOutput)
      return yield* answerOf({ allow: false, reason: text }, handled.fatal ? handled.reason : null)
    })

  // Puts an ask to the host's person; a failure or a defect there is a denial.
  const ask = (request: Message.CanUseTool, reason: string): Effect.Effect<Approved> =>
    options.approve === undefined
      ? Effect.succeed({
        allow: false,
        message: `session-journal: approval was needed (${reason}) and no one could be asked`
      })
      : options.approve({ toolName: request.toolName, input: request.input, toolUseId: request.toolUseId, reason })
        .pipe(
          Effect.catchCause((cause) =>
            Effect.succeed<Approved>({
              allow: false,
              message: `session-journal: approval was needed (${reason}) and asking failed: ${messageOf(cause)}`
            })
          )
        )

  return { hookCallback, canUseTool }
}

/**
 * The answer to a control request of the CLI's that came as a line above the
 * bound, read from its head (`Lines.controlOf`): a deny for `can_use_tool`, the
 * event's refusal for a hook callback (a deny for PreToolUse), an error for any
 * other request.
 */
export const refuseOversized = (
  control: { readonly requestId: string; readonly subtype: string; readonly callbackId: string | null },
  bytes: number,
  maxLineBytes: number
): Message.Message => {
  const reason = `session-journal: the request is ${bytes} bytes, over the driver's line bound of ${maxLineBytes}`
  if (control.subtype === "can_use_tool") {
    return Message.controlSuccess(control.requestId, { behavior: "deny", message: reason })
  }
  if (control.subtype === "hook_callback") {
    const event = eventOfCallback(control.callbackId ?? "") ?? "PreToolUse"
    return Message.controlSuccess(control.requestId, Hook.refusal(event, reason).httpOutput)
  }
  return Message.controlFailure(control.requestId, reason)
}
