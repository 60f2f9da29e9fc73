/**
 * How a Claude Code hook refuses, for every door alike (the command hook, the
 * resident guard, the forwarder's own fallback, the stream-json driver's hook
 * callbacks): the output that denies a PreToolUse, the reason a denial gives,
 * and the form a refusal takes per event (docs/claude-code/PROTOCOL.md (b)). Pure, and it imports
 * nothing, so the forwarder can load it without the rest of the integration.
 *
 * @since 0.1.0
 */

/**
 * A hook output object, as Claude Code reads it from a command hook's stdout, an
 * HTTP hook's response body or a hook callback's answer; `{}` has no opinion.
 *
 * @since 0.1.0
 */
export type Output = { readonly [key: string]: unknown }

/**
 * The output that denies a PreToolUse: Claude Code does not run the call and the
 * model sees `PreToolUse:<tool> hook error: <reason>`.
 *
 * @since 0.1.0
 */
export const denyOutput = (reason: string): Output => ({
  hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny", permissionDecisionReason: reason }
})

/**
 * The output that asks the person at Claude Code to approve a PreToolUse: Claude
 * Code prompts (its permission dialog, or `can_use_tool` to a host run with
 * `--permission-prompt-tool stdio`); where no one can be prompted (`-p` without a
 * host) the call is refused and the model sees the reason (docs/claude-code/PROTOCOL.md (b)).
 *
 * @since 0.1.0
 */
export const askOutput = (reason: string): Output => ({
  hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "ask", permissionDecisionReason: reason }
})

/**
 * The output that denies a PermissionRequest: the call does not run and the
 * model sees `message`.
 *
 * @since 0.1.0
 */
export const denyPermissionOutput = (message: string): Output => ({
  hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "deny", message } }
})

/**
 * The reason a denial gives: the guard's sentence and, in brackets, the guard
 * that denied as the policy file writes it (`Bash would run more than 3 times in a
 * row [maxStreak(3)]`).
 *
 * @since 0.1.0
 */
export const denialReason = (verdict: { readonly reason: string; readonly guard: string }): string =>
  `${verdict.reason} [${verdict.guard}]`

/**
 * What a door does to refuse one event: `output` is what a command hook writes
 * to stdout (null: nothing), `httpOutput` what an HTTP hook or a hook callback
 * answers (there `{"decision":"block"}` takes exit 2's place), `exitCode` a
 * command hook's exit code, `stderr` its one line on stderr.
 *
 * @since 0.1.0
 */
export interface Refusal {
  readonly output: Output | null
  readonly httpOutput: Output
  readonly exitCode: 0 | 1 | 2
  readonly stderr: string
}

/**
 * How a hook that could not be handled refuses, per docs/claude-code/PROTOCOL.md (b): a PreToolUse
 * is denied (the reason reaches the model); a PermissionRequest is denied; every
 * other event (and an input whose event is unknown or unreadable, `event` null)
 * ends with exit code 2 and the reason on stderr, which blocks a prompt
 * (UserPromptSubmit), tells the model after a call that already ran
 * (PostToolUse), keeps a turn from ending (Stop), and is shown for the rest. A
 * Stop or SubagentStop that a refusal already kept going (`stopHookActive`, the
 * input's `stop_hook_active`) is let through with exit 1 and the reason: blocking
 * it again would keep the turn going forever. The reason is prefixed with
 * `session-journal: ` unless it already starts with it.
 *
 * @since 0.1.0
 */
export const refusal = (event: string | null, reason: string, options?: {
  readonly stopHookActive?: boolean | undefined
}): Refusal => {
  const text = reason.startsWith("session-journal: ") ? reason : `session-journal: ${reason}`
  const line = `${text.replace(/[\r\n]+/g, " ")}\n`
  if (event === "PreToolUse") {
    return { output: denyOutput(text), httpOutput: denyOutput(text), exitCode: 0, stderr: line }
  }
  if (event === "PermissionRequest") {
    const output = denyPermissionOutput(text)
    return { output, httpOutput: output, exitCode: 0, stderr: line }
  }
  if ((event === "Stop" || event === "SubagentStop") && options?.stopHookActive === true) {
    return { output: null, httpOutput: {}, exitCode: 1, stderr: line }
  }
  return { output: null, httpOutput: { decision: "block", reason: text }, exitCode: 2, stderr: line }
}

/**
 * The `stop_hook_active` of a raw hook input: true only for a Stop or
 * SubagentStop whose input says so.
 *
 * @since 0.1.0
 */
export const stopHookActive = (input: unknown): boolean => {
  if (typeof input !== "object" || input === null || Array.isArray(input)) return false
  const o = input as { readonly [key: string]: unknown }
  return (o["hook_event_name"] === "Stop" || o["hook_event_name"] === "SubagentStop") &&
    o["stop_hook_active"] === true
}
