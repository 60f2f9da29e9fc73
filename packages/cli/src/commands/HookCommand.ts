/**
 * `session-journal claude-code hook`: Claude Code's `command` hook for every
 * event. It reads one hook input from stdin (at most `--max-input-bytes`, 4 MiB
 * by default, strict UTF-8, nested at most 128 levels), journals it in the
 * session of its Claude Code session (`Hook.handle` of
 * `@session-journal/claude-code`) and answers on stdout; a PreToolUse is decided
 * with the policy (`--policy FILE`, else `$SESSION_JOURNAL_POLICY`; none: record
 * only, every call allowed).
 *
 * It fails closed: when the event cannot be recorded (bad input, a policy file
 * that does not decode, a storage error, a corrupt session, the session's lock
 * not obtained within `--wait`), a PreToolUse is denied with the reason and every
 * other event ends with exit 2 and the reason on stderr (`Hook.refusal`).
 * `--fail-open` turns every such refusal into exit 1 with the reason on stderr,
 * which Claude Code reports and ignores: the call runs.
 *
 * Hooks of parallel calls are separate processes on one session: each waits for
 * the session's lock (up to `--wait`, 30 s by default) rather than failing, so
 * every one of them is answered and the policy holds across them (each decides on
 * the state the previous ones stored).
 *
 * This module is loaded without the command tree (`main.ts` recognizes the
 * invocation first): a hook runs once per tool call, and its start is most of
 * its cost.
 *
 * @since 0.4.0
 */
import * as Hook from "@session-journal/claude-code/Hook"
import { Policy, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Input from "../Input.ts"
import type { HookArgs } from "../internal/hookArgs.ts"
import * as ProcessStreams from "../internal/processStreams.ts"
import { load } from "../PolicyFile.ts"
import * as Storage from "../Storage.ts"

/**
 * The environment variable naming the policy file when `--policy` is not given.
 *
 * @since 0.4.0
 */
export const POLICY_VAR = "SESSION_JOURNAL_POLICY"

/**
 * How long a hook waits for its session's lock by default (30 s): far longer than
 * a burst of parallel hooks holds it, shorter than the hook timeout `install`
 * sets (60 s).
 *
 * @since 0.4.0
 */
export const DEFAULT_WAIT_MILLIS = 30_000

/**
 * Where a hook reads and writes.
 *
 * @since 0.4.0
 */
export interface Io {
  readonly stdin: AsyncIterable<Uint8Array | string>
  readonly stdout: (text: string) => Promise<void>
  readonly stderr: (text: string) => Promise<void>
  readonly env: Readonly<Record<string, string | undefined>>
}

/**
 * What one hook did: its exit code, and for a handled event its answer.
 *
 * @since 0.4.0
 */
export interface Outcome {
  readonly exitCode: 0 | 1 | 2
  readonly answer: Hook.HookAnswer | null
  /** Why it refused (or failed open), when it did. */
  readonly refused: string | null
}

const describe = (e: unknown): string =>
  typeof e === "object" && e !== null && "message" in e && typeof e.message === "string" && e.message !== ""
    ? e.message
    : String(e)

/**
 * Runs one hook: reads the input, journals it, answers. Never throws; every
 * failure is a refusal (or, with `failOpen`, exit 1).
 *
 * @since 0.4.0
 */
export const run = async (args: HookArgs, io: Io): Promise<Outcome> => {
  let event: string | null = null
  let stopHookActive = false
  const refuse = async (reason: string): Promise<Outcome> => {
    if (args.failOpen) {
      await io.stderr(`session-journal: ${reason} (failing open: the call is not guarded)\n`)
      return { exitCode: 1, answer: null, refused: reason }
    }
    const r = Hook.refusal(event, reason, { stopHookActive })
    if (r.output !== null) await io.stdout(JSON.stringify(r.output))
    await io.stderr(r.stderr)
    return { exitCode: r.exitCode, answer: null, refused: reason }
  }
  try {
    const maxBytes = args.maxInputBytes ?? Hook.MAX_INPUT_BYTES
    const text = await Input.readBounded(io.stdin, "hook input", maxBytes)
    if (Result.isFailure(text)) return await refuse(text.failure.message)
    const decoded = Hook.decodeText(text.success, { maxBytes })
    if (Result.isFailure(decoded)) {
      event = decoded.failure.event
      return await refuse(decoded.failure.message)
    }
    const hookEvent = decoded.success
    event = hookEvent.name === "Unknown" ? hookEvent.input.hook_event_name : hookEvent.name
    stopHookActive = (hookEvent.name === "Stop" || hookEvent.name === "SubagentStop") &&
      hookEvent.input.stop_hook_active === true

    const file = args.policy ?? (io.env[POLICY_VAR] === "" ? undefined : io.env[POLICY_VAR])
    let options: Hook.HandleOptions = { policy: null }
    if (file !== undefined) {
      const policy = await Effect.runPromiseExit(load(file))
      if (Exit.isFailure(policy)) return await refuse(describe(Cause.squash(policy.cause)))
      options = { policy: Policy.toGuard(policy.value), policyName: Policy.format(policy.value) }
    }

    // Parallel hooks of one session queue for its lock (the filesystem adapter's
    // `lockWait`: a directory watch and a jittered backoff) rather than fail.
    const waitMillis = args.waitMillis ?? DEFAULT_WAIT_MILLIS
    const storage: Storage.Options = {
      ...Storage.resolve({ dir: args.root, postgres: args.postgres }, Storage.environmentOf(io.env)),
      lockWait: Duration.millis(waitMillis)
    }
    const exit = await Effect.runPromiseExit(
      Hook.handle(hookEvent, options).pipe(
        Effect.provide(SessionJournal.layer().pipe(Layer.provide(Storage.layer(storage))))
      )
    )
    if (Exit.isSuccess(exit)) {
      await io.stdout(JSON.stringify(exit.value.output))
      return { exitCode: 0, answer: exit.value, refused: null }
    }
    const error = Cause.squash(exit.cause)
    // `handle`'s own failures name the event; the storage layer's do not.
    const why = error instanceof Hook.HookError ? describe(error) : `cannot record ${event}: ${describe(error)}`
    return await refuse(Cause.hasDies(exit.cause) ? `unexpected failure (a bug): ${why}` : why)
  } catch (e) {
    return await refuse(`unexpected failure (a bug): ${describe(e)}`)
  }
}

/**
 * Runs the hook on the process's stdin, stdout and stderr; resolves with the exit
 * code.
 *
 * @since 0.4.0
 */
export const main = async (args: HookArgs): Promise<number> => {
  const outcome = await run(args, {
    stdin: process.stdin,
    stdout: ProcessStreams.writeStdoutAwait,
    stderr: ProcessStreams.writeStderrAwait,
    env: process.env
  })
  return outcome.exitCode
}
