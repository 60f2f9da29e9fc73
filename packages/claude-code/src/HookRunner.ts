/**
 * The command hook (`session-journal claude-code hook`): Claude Code's `command`
 * hook for every event. It reads one hook input from stdin (at most `--max-input-bytes`, 4 MiB
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
 * The decision itself is `Hook.handle`'s, the one place every door (this hook,
 * the resident guard, the driven session) decides; this module reads the input,
 * gathers what `handle` needs (the policy, the sub-agent's depth, the count of
 * allowed calls, the protected paths), bounds it all by the deadline and answers.
 * The command line gives it the flags and the environment as values
 * (`Options`: the policy file, the journal, the state directory), writes its
 * answer and exits; the hook is loaded without the command tree (the cli's
 * `main.ts` recognizes the invocation first): a hook runs once per tool call,
 * and its start is most of its cost.
 *
 * @since 0.1.0
 */
import { type Persistence, Policy, SessionJournal } from "@session-journal/core"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Random from "effect/Random"
import * as Result from "effect/Result"
import * as AgentDepth from "./AgentDepth.ts"
import * as Hook from "./Hook.ts"
import * as Protect from "./internal/protect.ts"
import * as TranscriptScan from "./internal/transcriptScan.ts"

/**
 * The journal a hook records in: its storage (a layer whose failures become the
 * refusal's reason) and, when it is a directory, the directory (no guarded call
 * may touch it).
 *
 * @since 0.1.0
 */
export interface Journal {
  readonly layer: Layer.Layer<Persistence.Persistence, unknown>
  readonly dir: string | null
}

/**
 * What the command line tells a hook: its flags and what it read from the
 * environment, as values.
 *
 * @since 0.1.0
 */
export interface Options {
  /** `--fail-open`: every refusal becomes exit 1, which Claude Code reports and ignores. */
  readonly failOpen: boolean
  /** The bound of the input (default `Hook.MAX_INPUT_BYTES`). */
  readonly maxInputBytes?: number | undefined
  /** The hook answers within it whatever happens (default `DEFAULT_DEADLINE_MILLIS`). */
  readonly deadlineMillis?: number | undefined
  /** Calls may touch the journal, the policy and the hooks' settings. */
  readonly noSelfProtection?: boolean | undefined
  /** The policy file, when one is named (none: record only, every call allowed). */
  readonly policyFile: string | undefined
  /** Reads and decodes the policy file; its failure is the refusal's reason. */
  readonly loadPolicy: (file: string) => Effect.Effect<Policy.Policy, unknown>
  /** The journal, or why there is none (the refusal's reason); asked once the policy is read. */
  readonly journal: () => Promise<Journal | string>
  /** The user's state directory of journals: the transcript scans are kept beside it (none: not kept). */
  readonly stateDir: string | undefined
}

/**
 * Where a hook reads and writes.
 *
 * @since 0.1.0
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
 * @since 0.1.0
 */
export interface Outcome<A = Hook.HookAnswer> {
  readonly exitCode: 0 | 1 | 2
  readonly answer: A | null
  /** Why it refused (or failed open), when it did. */
  readonly refused: string | null
  /** Whether it answered because its deadline passed (something may still be stuck). */
  readonly late?: boolean | undefined
  /** The event's name as far as its input was read (null: not read), as `Seen.event`. */
  readonly event?: string | null | undefined
}

const describe = (e: unknown): string =>
  typeof e === "object" && e !== null && "message" in e && typeof e.message === "string" && e.message !== ""
    ? e.message
    : String(e)

/**
 * The hook's `checkpointMinBytes` (1 byte: `Checkpoint.due`'s quarter rule alone).
 * A hook opens its session once per event, and a load reads the checkpoint and what
 * was stored after it: checkpointing as often as the quarter rule allows keeps that
 * to about a quarter of the checkpoint (which is bounded by the session's caps)
 * however long the session, where the service's default (256 KiB) would have every
 * event replay up to 256 KiB of entries.
 *
 * @since 0.1.0
 */
export const CHECKPOINT_MIN_BYTES = 1

/**
 * How long a hook takes at most by default before it answers on its own (50 s):
 * below the `timeout` that `install` sets (60 s) by a margin for starting Node and
 * writing the answer, so Claude Code never cancels it (a cancelled hook fails
 * open). `--deadline` changes it.
 *
 * @since 0.1.0
 */
export const DEFAULT_DEADLINE_MILLIS = 50_000

/**
 * What a hook prints and exits with, decided before anything is written, so that
 * exactly one answer is written: the handled one or the deadline's refusal.
 *
 * @since 0.1.0
 */
export interface Reply<A = Hook.HookAnswer> {
  readonly stdout: string | null
  readonly stderr: string | null
  readonly outcome: Outcome<A>
}

// What the hook knows of its event so far, for a refusal in the event's form.
// An input refused at its bound, unread beyond it.
interface TooLong {
  readonly _tag: "TooLong"
  readonly message: string
}

/**
 * A bound as people read it (`Hook.describeBytes`).
 *
 * @since 0.1.0
 */
export const describeBytes = Hook.describeBytes

/**
 * What a hook knows of its event so far, for a refusal in the event's form.
 *
 * @since 0.1.0
 */
export interface Seen {
  event: string | null
  stopHookActive: boolean
  stage: string
}

/**
 * The reply that refuses the event (`Hook.refusal`, the one rule of every door,
 * Codex's too), or with `failOpen` exit 1 and the reason.
 *
 * @since 0.1.0
 */
export const refuseReply = <A = Hook.HookAnswer>(
  args: { readonly failOpen: boolean },
  seen: Seen,
  reason: string
): Reply<A> => {
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

/**
 * Reads and decodes one hook input: at most `maxBytes` are kept. Past the bound,
 * an input whose `hook_event_name` (in the bytes read so far) is a PostToolUse or
 * PostToolUseFailure is read on without being kept, its top level scanned, and
 * decoded as `Hook.Unrecorded` (its size and hash, so its bytes are counted); any
 * other input is refused at the bound, unread beyond it.
 */
const readInput = async (
  stdin: AsyncIterable<Uint8Array | string>,
  maxBytes: number
): Promise<Result.Result<Hook.HookEvent, Hook.HookError | TooLong>> => {
  const parts: Array<Uint8Array> = []
  const salvager = new Hook.Salvager()
  let size = 0
  for await (const chunk of stdin) {
    const bytes = typeof chunk === "string" ? new TextEncoder().encode(chunk) : chunk
    size += bytes.length
    salvager.push(bytes)
    if (size <= maxBytes) {
      parts.push(Uint8Array.prototype.slice.call(bytes))
      continue
    }
    parts.length = 0
    const event = salvager.event
    if (event !== "PostToolUse" && event !== "PostToolUseFailure") {
      return Result.fail({
        _tag: "TooLong",
        message: `invalid hook input: longer than the bound of ${describeBytes(maxBytes)}`
      })
    }
  }
  if (size > maxBytes) return salvager.salvage(Hook.overBound(maxBytes))
  const all = new Uint8Array(size)
  let at = 0
  for (const part of parts) {
    all.set(part, at)
    at += part.length
  }
  return Hook.decode(all, { maxBytes })
}

/**
 * The reply to a handled event: its answer's output on stdout, or the refusal of
 * its failure. `ownError` tells the handler's own failures, which name the event,
 * from the storage layer's, which do not; a defect is refused as a bug.
 *
 * @since 0.1.0
 */
export const replyOf = <A extends { readonly output: unknown }>(
  exit: Exit.Exit<A, unknown>,
  ownError: (e: unknown) => boolean,
  seen: Seen,
  refuse: (reason: string) => Reply<A>
): Reply<A> => {
  if (Exit.isSuccess(exit)) {
    return {
      stdout: JSON.stringify(exit.value.output),
      stderr: null,
      outcome: { exitCode: 0, answer: exit.value, refused: null }
    }
  }
  const error = Cause.squash(exit.cause)
  const why = ownError(error) ? describe(error) : `cannot record ${seen.event}: ${describe(error)}`
  return refuse(Cause.hasDies(exit.cause) ? `unexpected failure (a bug): ${why}` : why)
}

const handled = async (args: Options, io: Io, seen: Seen): Promise<Reply> => {
  const refuse = (reason: string) => refuseReply(args, seen, reason)
  try {
    const maxBytes = args.maxInputBytes ?? Hook.MAX_INPUT_BYTES
    seen.stage = "reading the hook input"
    const decoded = await readInput(io.stdin, maxBytes)
    if (Result.isFailure(decoded)) {
      const e = decoded.failure
      seen.event = e._tag === "HookError" ? e.event : null
      return refuse(e.message)
    }
    const hookEvent = decoded.success
    seen.event = Hook.eventName(hookEvent)
    seen.stopHookActive = (hookEvent.name === "Stop" || hookEvent.name === "SubagentStop") &&
      hookEvent.input.stop_hook_active === true

    const file = args.policyFile
    let options: Hook.HandleOptions = { policy: null }
    if (file !== undefined) {
      seen.stage = `reading the policy file ${file}`
      const policy = await Effect.runPromiseExit(args.loadPolicy(file))
      if (Exit.isFailure(policy)) return refuse(describe(Cause.squash(policy.cause)))
      options = { policy: Policy.compile(policy.value), policyName: Policy.format(policy.value) }
    }

    const journal = await args.journal()
    if (typeof journal === "string") return refuse(journal)
    if (hookEvent.name === "PreToolUse" && hookEvent.input.agent_id !== undefined) {
      seen.stage = "reading the sub-agent's depth"
      options = { ...options, depth: await Effect.runPromise(AgentDepth.of(hookEvent.input)) }
    }
    if (hookEvent.name === "PreToolUse") {
      seen.stage = "reading in the transcripts the calls the hooks allowed and the tokens used"
      const path = hookEvent.input.transcript_path
      // The transcripts are read once the one holding this call holds it: the lines before it are then there too.
      await TranscriptScan.awaitCallOf(hookEvent.input)
      const totals = path === undefined || path === ""
        ? { allowed: 0, tokens: null }
        : await TranscriptScan.totals(
          path,
          // No fiber runs here: Effect's default generator, the one a fiber would have.
          TranscriptScan.fileKeeper(TranscriptScan.cacheDir(args.stateDir), Random.Random.defaultValue()),
          options.session ?? Hook.sessionId(hookEvent.input)
        )
      const projectDir = io.env["CLAUDE_PROJECT_DIR"]
      options = {
        ...options,
        ...(args.noSelfProtection === true ? {} : { allowedByTranscript: totals.allowed }),
        tokens: totals.tokens,
        // Claude Code prompts the person for an ask.
        canAsk: true,
        ...(projectDir !== undefined && projectDir.startsWith("/") ? { projectDir } : {}),
        home: io.env["HOME"]
      }
    }
    if (hookEvent.name === "PreToolUse" && args.noSelfProtection !== true) {
      seen.stage = "reading the Claude Code settings that hold the hooks"
      options = {
        ...options,
        protect: await Protect.protectedPaths(
          hookEvent.input.cwd,
          io.env,
          journal.dir,
          file,
          hookEvent.input.transcript_path
        ),
        home: io.env["HOME"]
      }
    }
    seen.stage = `recording ${seen.event} in the journal`
    const exit = await Effect.runPromiseExit(
      Hook.handle(hookEvent, options).pipe(
        Effect.provide(
          SessionJournal.layer({ checkpointMinBytes: CHECKPOINT_MIN_BYTES }).pipe(Layer.provide(journal.layer))
        )
      )
    )
    return replyOf(exit, (e) => e instanceof Hook.HookError, seen, refuse)
  } catch (e) {
    return refuse(`unexpected failure (a bug): ${describe(e)}`)
  }
}

/**
 * Runs one hook: reads the input, journals it, answers. Never throws; every
 * failure is a refusal (or, with `failOpen`, exit 1). It answers within its
 * deadline (`deadlineMillis`, default `DEFAULT_DEADLINE_MILLIS`) whatever the
 * input, the policy file, the storage or the session's lock do: past it, the
 * event is refused in its form (a PreToolUse denied) with a reason naming what
 * it was still doing, and the caller ends the process. A write that storage
 * finishes after the deadline may still land: the journal can then hold a
 * decision for a call that was denied by the deadline.
 *
 * @since 0.1.0
 */
export const run = (args: Options, io: Io): Promise<Outcome> =>
  answerWithin(args, io, (seen) => handled(args, io, seen))

/**
 * Answers one event within the hook's deadline (`deadlineMillis`, default
 * `DEFAULT_DEADLINE_MILLIS`): the reply of `handle`, or past the deadline the
 * refusal of the event as far as it is known, naming what it was still doing;
 * exactly one of them is written.
 *
 * @since 0.1.0
 */
export const answerWithin = async <A>(
  args: { readonly failOpen: boolean; readonly deadlineMillis?: number | undefined },
  io: Io,
  handle: (seen: Seen) => Promise<Reply<A>>
): Promise<Outcome<A>> => {
  const seen: Seen = { event: null, stopHookActive: false, stage: "starting" }
  const deadline = args.deadlineMillis ?? DEFAULT_DEADLINE_MILLIS
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<Reply<A>>((resolve) => {
    timer = setTimeout(
      () => {
        const reply = refuseReply<A>(
          args,
          seen,
          `no decision within the hook's deadline of ${deadline} ms (still ${seen.stage})`
        )
        resolve({ ...reply, outcome: { ...reply.outcome, late: true } })
      },
      deadline
    )
  })
  const reply = await Promise.race([handle(seen), late])
  clearTimeout(timer)
  if (reply.stdout !== null) await io.stdout(reply.stdout)
  if (reply.stderr !== null) await io.stderr(reply.stderr)
  return { ...reply.outcome, event: seen.event }
}
