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
 * (docs/codex-PROTOCOL.md (c)), so everything this hook controls fails closed in
 * that one form: bad input, a policy file that does not decode, a journal that
 * cannot be written, the session's lock not obtained within `--wait`, and its
 * own deadline (`--deadline`, 50 s, under the 60 s timeout `codex install`
 * sets) all deny the call with the reason (`Hook.refusal`). `--fail-open` turns
 * every such refusal into exit 1, which Codex reports and ignores.
 *
 * Hooks of parallel calls run at once (Codex does not serialise them); each waits
 * for the session's lock, so every one is decided on the state the previous ones
 * stored.
 *
 * Loaded without the command tree (`main.ts` recognizes the invocation first).
 *
 * @since 0.8.0
 */
import * as Hook from "@session-journal/codex/Hook"
import { Policy, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import * as Input from "../Input.ts"
import type { HookArgs } from "../internal/hookArgs.ts"
import * as ProcessStreams from "../internal/processStreams.ts"
import * as Watchdog from "../internal/watchdog.ts"
import { load } from "../PolicyFile.ts"
import * as Storage from "../Storage.ts"
import { DEFAULT_DEADLINE_MILLIS, DEFAULT_WAIT_MILLIS, type Io, POLICY_VAR } from "./HookCommand.ts"

/**
 * What one hook did: its exit code, its answer when it handled the event, and
 * why it refused when it did.
 *
 * @since 0.8.0
 */
export interface Outcome {
  readonly exitCode: 0 | 1 | 2
  readonly answer: Hook.HookAnswer | null
  readonly refused: string | null
  /** Whether it answered because its deadline passed. */
  readonly late?: boolean | undefined
}

interface Reply {
  readonly stdout: string | null
  readonly stderr: string | null
  readonly outcome: Outcome
}

interface Seen {
  event: string | null
  stopHookActive: boolean
  stage: string
}

const describe = (e: unknown): string =>
  typeof e === "object" && e !== null && "message" in e && typeof e.message === "string" && e.message !== ""
    ? e.message
    : String(e)

const refuseReply = (args: HookArgs, seen: Seen, reason: string): Reply => {
  if (args.failOpen) {
    return {
      stdout: null,
      stderr: `session-journal: ${reason} (failing open: the call is not guarded)\n`,
      outcome: { exitCode: 1, answer: null, refused: reason }
    }
  }
  const r = Hook.refusal(seen.event, reason, { stopHookActive: seen.stopHookActive })
  return {
    stdout: r.output === null ? null : JSON.stringify(r.output),
    stderr: r.stderr,
    outcome: { exitCode: r.exitCode, answer: null, refused: reason }
  }
}

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

const handled = async (args: HookArgs, io: Io, seen: Seen): Promise<Reply> => {
  const refuse = (reason: string) => refuseReply(args, seen, reason)
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

    const environment = Storage.environmentOf(io.env)
    const dir = args.root ?? environment.dir ?? Storage.userStateDir(io.env)
    if (dir === undefined && args.postgres === undefined && environment.postgres === undefined) {
      return refuse("no journal directory: give --root DIR, or set SESSION_JOURNAL_DIR or HOME")
    }
    if (
      dir !== undefined && args.root === undefined && environment.dir === undefined &&
      args.postgres === undefined && environment.postgres === undefined
    ) {
      try {
        await fs.promises.mkdir(dir, { recursive: true, mode: 0o700 })
      } catch (e) {
        return refuse(`the default journal directory ${dir} cannot be made (${describe(e)}); give --root DIR`)
      }
    }
    const storage: Storage.Options = {
      ...Storage.resolve({ dir, postgres: args.postgres }, environment),
      lockWait: Duration.millis(args.waitMillis ?? DEFAULT_WAIT_MILLIS)
    }
    seen.stage = `recording ${seen.event} in the journal`
    const exit = await Effect.runPromiseExit(
      Hook.handle(event, options).pipe(
        Effect.provide(SessionJournal.layer().pipe(Layer.provide(Storage.layer(storage))))
      )
    )
    if (Exit.isSuccess(exit)) {
      return {
        stdout: JSON.stringify(exit.value.output),
        stderr: null,
        outcome: { exitCode: 0, answer: exit.value, refused: null }
      }
    }
    const error = Cause.squash(exit.cause)
    const why = error instanceof Hook.HookError ? describe(error) : `cannot record ${seen.event}: ${describe(error)}`
    return refuse(Cause.hasDies(exit.cause) ? `unexpected failure (a bug): ${why}` : why)
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
export const run = async (args: HookArgs, io: Io): Promise<Outcome> => {
  const seen: Seen = { event: null, stopHookActive: false, stage: "starting" }
  const deadline = args.deadlineMillis ?? DEFAULT_DEADLINE_MILLIS
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<Reply>((resolve) => {
    timer = setTimeout(() => {
      const reply = refuseReply(
        args,
        seen,
        `no decision within the hook's deadline of ${deadline} ms (still ${seen.stage})`
      )
      resolve({ ...reply, outcome: { ...reply.outcome, late: true } })
    }, deadline)
  })
  const reply = await Promise.race([handled(args, io, seen), late])
  clearTimeout(timer)
  if (reply.stdout !== null) await io.stdout(reply.stdout)
  if (reply.stderr !== null) await io.stderr(reply.stderr)
  return reply.outcome
}

/**
 * Runs the hook on the process's stdin, stdout and stderr; resolves with the exit
 * code. Past the deadline a watchdog ends a process whose exit hangs.
 *
 * @since 0.8.0
 */
export const main = async (args: HookArgs): Promise<number> => {
  const outcome = await run(args, {
    stdin: process.stdin,
    stdout: ProcessStreams.writeStdoutAwait,
    stderr: ProcessStreams.writeStderrAwait,
    env: process.env
  })
  if (outcome.late === true && !args.failOpen) Watchdog.arm(1)
  return outcome.exitCode
}
