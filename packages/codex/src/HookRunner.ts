/**
 * Codex's command hook as a library, its options given as values (the policy
 * reader, the journal, the bound, fail-open), as `@session-journal/claude-code`'s
 * `HookRunner` is Claude Code's: it reads one hook input (at most
 * `maxInputBytes`, 4 MiB by default), journals it and answers through
 * `Hook.handle`, within a deadline. The command line's `session-journal codex
 * hook` gives it its flags and environment.
 *
 * Codex runs the call on every hook failure except a reasoned deny
 * (docs/codex-PROTOCOL.md), so everything this hook controls fails closed in a
 * form Codex obeys: bad input, a policy file that does not decode, a journal
 * that cannot be written, the session's lock not obtained in time, and its own
 * deadline (50 s, under the 60 s timeout `codex install` sets) all deny the call
 * with the reason (`Hook.refusal`: the reasoned deny for a PreToolUse, exit 2
 * and the reason on stderr for an input whose event cannot be read).
 * `failOpen` turns every such refusal into exit 1, which Codex reports and
 * ignores. The deadline, the refusals and the reply are Claude Code's hook's own
 * (`HookRunner.answerWithin`, `refuseReply`, `replyOf`). Before a PreToolUse is
 * decided, the tokens the session used are read from its rollouts, only their
 * new lines (`internal/rolloutTokens.ts`), for `maxTokens` and the decision entry.
 *
 * @since 0.1.0
 */
import * as ClaudeRunner from "@session-journal/claude-code/HookRunner"
import * as TranscriptScan from "@session-journal/claude-code/TranscriptScan"
import { Policy, type Policy as PolicyModule, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as Result from "effect/Result"
import * as Hook from "./Hook.ts"
import * as RolloutTokens from "./internal/rolloutTokens.ts"

/**
 * What the command line tells the hook: its flags and what it read from the
 * environment, as values.
 *
 * @since 0.1.0
 */
export interface Options {
  /** Every refusal becomes exit 1, which Codex reports and ignores (the call runs). */
  readonly failOpen: boolean
  /** The bound of the input (default `Hook.MAX_INPUT_BYTES`). */
  readonly maxInputBytes?: number | undefined
  /** The hook answers within it whatever happens (default 50 s). */
  readonly deadlineMillis?: number | undefined
  /** The policy file, when one is named (none: record only, every call allowed). */
  readonly policyFile: string | undefined
  /** Reads and decodes the policy file; its failure is the refusal's reason. */
  readonly loadPolicy: (file: string) => Effect.Effect<PolicyModule.Policy, unknown>
  /** The journal, or why there is none (the refusal's reason); asked once the policy is read. */
  readonly journal: () => Promise<ClaudeRunner.Journal | string>
  /**
   * The user's state directory of journals: the rollouts' token scans are kept
   * beside it (`TranscriptScan.cacheDir`; none: not kept, every call reads the
   * rollouts whole).
   */
  readonly stateDir?: string | undefined
}

/**
 * What one hook did.
 *
 * @since 0.1.0
 */
export type Outcome = ClaudeRunner.Outcome<Hook.HookAnswer>

const describe = (e: unknown): string =>
  typeof e === "object" && e !== null && "message" in e && typeof e.message === "string" && e.message !== ""
    ? e.message
    : String(e)

// At most `maxBytes` are kept; a longer input is refused at the bound, unread beyond it.
const readInput = async (stdin: AsyncIterable<Uint8Array | string>, maxBytes: number) => {
  const parts: Array<Uint8Array> = []
  let size = 0
  for await (const chunk of stdin) {
    const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk
    size += bytes.length
    if (size > maxBytes) return null
    parts.push(Uint8Array.prototype.slice.call(bytes))
  }
  return Buffer.concat(parts, size)
}

const handled = async (
  args: Options,
  io: ClaudeRunner.Io,
  seen: ClaudeRunner.Seen
): Promise<ClaudeRunner.Reply<Hook.HookAnswer>> => {
  const refuse = (reason: string) => ClaudeRunner.refuseReply<Hook.HookAnswer>(args, seen, reason)
  try {
    const maxBytes = args.maxInputBytes ?? Hook.MAX_INPUT_BYTES
    seen.stage = "reading the hook input"
    const bytes = await readInput(io.stdin, maxBytes)
    if (bytes === null) return refuse(`hook input longer than the bound of ${ClaudeRunner.describeBytes(maxBytes)}`)
    const decoded = Hook.decode(bytes, { maxBytes })
    if (Result.isFailure(decoded)) {
      seen.event = decoded.failure.event
      return refuse(decoded.failure.message)
    }
    const event = decoded.success
    seen.event = event.input.hook_event_name
    seen.stopHookActive = event.raw["stop_hook_active"] === true

    let options: Hook.HandleOptions = { policy: null }
    if (args.policyFile !== undefined) {
      seen.stage = `reading the policy file ${args.policyFile}`
      const policy = await Effect.runPromiseExit(args.loadPolicy(args.policyFile))
      if (Exit.isFailure(policy)) return refuse(describe(Cause.squash(policy.cause)))
      options = { policy: Policy.compile(policy.value), policyName: Policy.format(policy.value) }
    }
    const journal = await args.journal()
    if (typeof journal === "string") return refuse(journal)
    if (event.name === "PreToolUse") {
      seen.stage = "reading in the rollouts the tokens used"
      const tokens = await RolloutTokens.totals(
        event.input,
        TranscriptScan.fileKeeper(TranscriptScan.cacheDir(args.stateDir), Random.Random.defaultValue()),
        Hook.sessionId(event.input.session_id)
      )
      options = { ...options, tokens }
    }
    seen.stage = `recording ${seen.event} in the journal`
    const exit = await Effect.runPromiseExit(
      Hook.handle(event, options).pipe(
        Effect.provide(SessionJournal.layer().pipe(Layer.provide(journal.layer)))
      )
    )
    return ClaudeRunner.replyOf(exit, (e) => e instanceof Hook.HookError, seen, refuse)
  } catch (e) {
    return refuse(`unexpected failure (a bug): ${describe(e)}`)
  }
}

/**
 * Runs one hook: reads the input, journals it, answers. Never throws; every
 * failure is a refusal (or, with `failOpen`, exit 1), and it answers within its
 * deadline whatever storage, the lock or the policy file do: past it, a
 * PreToolUse is denied naming what it was still doing.
 *
 * @since 0.1.0
 */
export const run = (args: Options, io: ClaudeRunner.Io): Promise<Outcome> =>
  ClaudeRunner.answerWithin(args, io, (seen) => handled(args, io, seen))
