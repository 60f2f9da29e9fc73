/**
 * What the resident guard needs of the hook handler: one function from a parsed
 * hook event to the hook's answer, journaling it in the `SessionJournal` it is
 * given. The guard is built against this interface only; the handler itself (the
 * hook input Schemas and the mapping of each event to journal entries) is the
 * command hook's, in `@session-journal/claude-code`.
 *
 * Until that module is on this branch, this file holds a minimal stand-in:
 * PreToolUse is decided by the policy (`decide`), every other event is appended
 * as it came. It is replaced, not extended, when the handler lands.
 */
import { Entry, Guard, Policy, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

/**
 * The answer to one hook event: the JSON object Claude Code reads as the hook's
 * output (a command hook's stdout, an HTTP hook's response body); `{}` has no opinion.
 */
export interface HookAnswer {
  readonly output: Readonly<Record<string, unknown>>
}

/** An event that could not be journaled (bad input, storage failure): the guard fails closed on it. */
export class HookError extends Schema.TaggedError<HookError>()("HookError", {
  reason: Schema.String
}) {
  override get message(): string {
    return this.reason
  }
}

/** What the handler is given besides the event. */
export interface HandleOptions {
  /** The policy PreToolUse is decided by; null records only (every call allowed). */
  readonly policy: Policy.Policy | null
}

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

const sessionOf = (sessionId: string): string =>
  `claude-code-hook-${sessionId.replace(/[^A-Za-z0-9-]/g, "_").slice(0, 80)}`

/** Journals one hook event and answers it. */
export const handle = (
  event: unknown,
  options: HandleOptions
): Effect.Effect<HookAnswer, HookError, SessionJournal.SessionJournal> =>
  Effect.gen(function*() {
    if (!isRecord(event) || typeof event["hook_event_name"] !== "string" || typeof event["session_id"] !== "string") {
      return yield* new HookError({
        reason: "not a Claude Code hook event (hook_event_name and session_id are required)"
      })
    }
    const journal = yield* SessionJournal.SessionJournal
    const id = sessionOf(event["session_id"])
    if (event["hook_event_name"] !== "PreToolUse") {
      yield* journal.append(id, "claude-code.hook", event).pipe(
        Effect.mapError((e) => new HookError({ reason: e.message }))
      )
      return { output: {} }
    }
    const agent = typeof event["agent_id"] === "string" ? event["agent_id"] : null
    const params: Entry.ToolParams = {
      tool_name: String(event["tool_name"]),
      server_id: "claude-code",
      agent_id: agent ?? "main",
      bytes_read: 0,
      bytes_written: 0,
      delegation_depth: agent === null ? 0 : 1
    }
    const guard = options.policy === null ? () => Guard.allow : Policy.toGuard(options.policy)
    const decision = yield* journal.decide(id, params, guard).pipe(
      Effect.mapError((e) => new HookError({ reason: e.message }))
    )
    if (decision.verdict._tag === "Allow") return { output: {} }
    return { output: deny(`${decision.verdict.reason} [${decision.verdict.guard}]`) }
  })

const deny = (reason: string): Record<string, unknown> => ({
  hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: reason }
})

/**
 * The answer to an event that could not be journaled: a PreToolUse is denied with
 * the reason; any other event gets null (nothing to deny: the caller says why).
 */
export const failClosed = (event: unknown, reason: string): HookAnswer | null =>
  isRecord(event) && event["hook_event_name"] === "PreToolUse" ? { output: deny(reason) } : null
