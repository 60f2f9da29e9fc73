/**
 * `session-journal codex hook`: Codex CLI's command hook (PreToolUse,
 * PostToolUse, and any other event it is installed for). It reads one hook input
 * from stdin (at most `--max-input-bytes`, 4 MiB by default, strict UTF-8,
 * nested at most 128 levels), journals it in the session of its Codex session
 * (`Hook.handle` of `@session-journal/codex`) and answers on stdout; a
 * PreToolUse is decided with the policy (`--policy FILE`, else
 * `$SESSION_JOURNAL_POLICY`; none: record only, every call allowed).
 *
 * Codex runs the call on every hook failure except a reasoned deny
 * (docs/codex-PROTOCOL.md), so everything this hook controls fails closed in a
 * form Codex obeys: bad input, a policy file that does not decode, a journal
 * that cannot be written, the session's lock not obtained within `--wait`, and
 * its own deadline (`--deadline`, 50 s, under the 60 s timeout `codex install`
 * sets) all deny the call with the reason (`Hook.refusal`: the reasoned deny
 * for a PreToolUse, exit 2 and the reason on stderr for an input whose event
 * cannot be read). `--fail-open` turns every such refusal into exit 1, which
 * Codex reports and ignores.
 *
 * Hooks of parallel calls run at once (Codex does not serialise them); each waits
 * for the session's lock, so every one is decided on the state the previous ones
 * stored. The deadline, the storage and the refusals are the Claude Code hook's
 * own (`HookCommand`).
 *
 * Loaded without the command tree (`main.ts` recognizes the invocation first).
 *
 * @since 0.8.0
 */
import * as Hook from "@session-journal/codex/Hook"
import { Policy, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Input from "../Input.ts"
import type { HookArgs } from "../internal/hookArgs.ts"
import { load } from "../PolicyFile.ts"
import * as Storage from "../Storage.ts"
import {
  answerWithin,
  type Io,
  mainOf,
  type Outcome,
  POLICY_VAR,
  refuseReply,
  type Reply,
  replyOf,
  type Seen,
  storageOf
} from "./HookCommand.ts"

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

const handled = async (args: HookArgs, io: Io, seen: Seen): Promise<Reply<Hook.HookAnswer>> => {
  const refuse = (reason: string) => refuseReply<Hook.HookAnswer>(args, seen, reason)
  try {
    const maxBytes = args.maxInputBytes ?? Hook.MAX_INPUT_BYTES
    seen.stage = "reading the hook input"
    const bytes = await readInput(io.stdin, maxBytes)
    if (bytes === null) return refuse(`hook input longer than the bound of ${Input.describeBytes(maxBytes)}`)
    const decoded = Hook.decode(bytes, { maxBytes })
    if (Result.isFailure(decoded)) {
      seen.event = decoded.failure.event
      return refuse(decoded.failure.message)
    }
    const event = decoded.success
    seen.event = event.input.hook_event_name
    seen.stopHookActive = event.raw["stop_hook_active"] === true

    const file = args.policy ?? (io.env[POLICY_VAR] === "" ? undefined : io.env[POLICY_VAR])
    let options: Hook.HandleOptions = { policy: null }
    if (file !== undefined) {
      seen.stage = `reading the policy file ${file}`
      const policy = await Effect.runPromiseExit(load(file))
      if (Exit.isFailure(policy)) return refuse(describe(Cause.squash(policy.cause)))
      options = { policy: Policy.toGuard(policy.value), policyName: Policy.format(policy.value) }
    }
    const storage = await storageOf(args, io.env)
    if (typeof storage === "string") return refuse(storage)
    seen.stage = `recording ${seen.event} in the journal`
    const exit = await Effect.runPromiseExit(
      Hook.handle(event, options).pipe(
        Effect.provide(SessionJournal.layer().pipe(Layer.provide(Storage.layer(storage))))
      )
    )
    return replyOf(exit, (e) => e instanceof Hook.HookError, seen, refuse)
  } catch (e) {
    return refuse(`unexpected failure (a bug): ${describe(e)}`)
  }
}

/**
 * Runs one hook: reads the input, journals it, answers. Never throws; every
 * failure is a refusal (or, with `failOpen`, exit 1), and it answers within its
 * deadline (`deadlineMillis`, default 50 s) whatever storage, the lock or the
 * policy file do: past it, a PreToolUse is denied naming what it was still doing.
 *
 * @since 0.8.0
 */
export const run = (args: HookArgs, io: Io): Promise<Outcome<Hook.HookAnswer>> =>
  answerWithin(args, io, (seen) => handled(args, io, seen))

/**
 * Runs the hook on the process's stdin, stdout and stderr; resolves with the exit
 * code.
 *
 * @since 0.8.0
 */
export const main = mainOf(run)
