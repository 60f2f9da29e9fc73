/**
 * A Claude Code CLI session as an Effect service: the CLI spawned in a `Scope`
 * with stream-json in and out and `--permission-prompt-tool stdio`
 * (docs/claude-code/PROTOCOL.md (d)), in its own process group, and ended with SIGTERM, then
 * SIGKILL after a grace period, when the scope closes.
 *
 * Every tool call is decided. Before anything else the driver sends `initialize`
 * registering hook callbacks for PreToolUse, PostToolUse and PostToolUseFailure
 * on every tool; user messages wait for the CLI's answer (bounded), and a CLI
 * that does not answer is ended and the session fails: it never runs
 * unguarded. Each callback is handled by `Hook.handle` (the one place every
 * door decides: the command hook and the resident guard too) with the
 * session's policy, recorded in the session's own
 * journal session: a PreToolUse gets its tool entry and `claude-code.decision`
 * entry in one append and is answered `{}` or denied with the guard's reason,
 * the guard in brackets; a PostToolUse its `tool.outcome`. `can_use_tool` (a call the CLI would prompt for) is answered
 * from the PreToolUse decision of the same call, or, when none came, decided
 * through the same pipeline. What cannot be handled is refused in the event's
 * own form (`Hook.refusal`), never left unanswered or answered `{}`.
 *
 * Life of a line: every line, in both directions, goes on the session's journal
 * chain, durably, before anything else happens with it. A line the CLI wrote is
 * journaled (a stdout chunk's lines with one append), then folded into `state`
 * and published to `events`, so a subscriber never sees what a crash could lose;
 * a line of ours (prompts, `initialize`, `interrupt`, every answer) is journaled,
 * then written to the CLI's stdin, and nothing reaches stdin any other way. A
 * line above `maxLineBytes` is hashed as it streams and never held whole. When
 * the journal cannot record (a line, a decision, an answer), the session ends:
 * the CLI's process group is ended rather than answered unrecorded. Our control
 * requests (`initialize`, `interrupt`) are correlated with their answers by
 * request id. When the CLI exits, everything waiting on it fails with `CliDied`
 * carrying its stderr.
 *
 * @since 0.1.0
 */
import { type Guard, Persistence, type Policy, SessionJournal, type StorageError } from "@session-journal/core"
import type * as Arr from "effect/Array"
import type * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as ChildProcess from "effect/process/ChildProcess"
import type { ChildProcessSpawner } from "effect/process/ChildProcessSpawner"
import * as PubSub from "effect/PubSub"
import * as Queue from "effect/Queue"
import * as Schedule from "effect/Schedule"
import type * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Semaphore from "effect/Semaphore"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Archive from "./Archive.ts"
import type * as Hook from "./Hook.ts"
import * as Decide from "./internal/decide.ts"
import * as Lines from "./internal/lines.ts"
import * as Message from "./Message.ts"
import { CliDied, ControlError, type SessionError, SessionStorageError } from "./SessionErrors.ts"
import * as SessionState from "./SessionState.ts"
import type * as Sync from "./Sync.ts"
import * as UserInput from "./UserInput.ts"

/**
 * Who wrote a line: the CLI (its stdout) or the driver (the CLI's stdin).
 *
 * @since 0.1.0
 */
export type From = "cli" | "driver"

/**
 * One element of `events`: a journaled message with its position among all the
 * session's lines (from 0, both directions); a line above `maxLineBytes`, known
 * by its size and SHA-256 only; or how many this subscriber missed
 * because it fell more than the capacity behind.
 *
 * @since 0.1.0
 */
export type Event =
  | { readonly _tag: "Message"; readonly index: number; readonly from: From; readonly message: Message.Message }
  | {
    readonly _tag: "Oversized"
    readonly index: number
    readonly from: From
    readonly bytes: number
    readonly sha256: string
  }
  | { readonly _tag: "Missed"; readonly count: number }

/**
 * What the CLI reported for an interrupt (`still_queued`: the queued prompts it
 * still holds), or `Closed` when it did not answer within `interruptTimeout` and
 * the process was ended instead.
 *
 * @since 0.1.0
 */
export type InterruptOutcome =
  | { readonly _tag: "Answered"; readonly stillQueued: ReadonlyArray<Schema.Json> }
  | { readonly _tag: "Closed" }

/**
 * A question `Options.approve` answers: the call (`toolName`, `input`,
 * `toolUseId`) the policy asks about, and why (its reason, the guard in brackets).
 *
 * @since 0.1.0
 */
export type Approval = Decide.Approval

/**
 * The person's answer to an `Approval`: the call runs, or not (`message` is what
 * the model reads).
 *
 * @since 0.1.0
 */
export type Approved = Decide.Approved

/**
 * Options of a session.
 *
 * @since 0.1.0
 */
export interface Options {
  /** The journal session the lines go to (`^[A-Za-z0-9_-]{1,128}$`). */
  readonly journalSession: string
  /** The CLI's executable (default `claude`, found on PATH). */
  readonly claude?: string | undefined
  /** Arguments after the protocol's own (`--tools`, `--allowedTools`, `--model`, …). */
  readonly args?: ReadonlyArray<string> | undefined
  /** The CLI's working directory (default: this process's). */
  readonly cwd?: string | undefined
  /** The CLI's whole environment (default: this process's). */
  readonly env?: Readonly<Record<string, string>> | undefined
  /**
   * The policy every tool call is decided with, by `Hook.handle` (default: none,
   * every call allowed and still journaled with its decision). A compiled policy
   * (`Policy.compile`) also folds outcomes into its scoped byte limits.
   */
  readonly guard?: Guard.Guard | Policy.Compiled | undefined
  /**
   * The person the policy's asks are put to: a call the policy asks
   * about is answered `permissionDecision: "ask"`, the CLI then sends
   * `can_use_tool`, and this answers it (its failure denies). Without it no one can
   * be asked, and an ask is a denial saying approval was needed.
   *
   * @since 0.1.0
   */
  readonly approve?: ((approval: Approval) => Effect.Effect<Approved>) | undefined
  /**
   * The policy's name as the decision entries keep it (`Policy.format` of a
   * policy file; default `policy`).
   *
   * @since 0.1.0
   */
  readonly policyName?: string | undefined
  /**
   * What no call may touch (`Hook.selfProtection`: the journal directory, the
   * policy file, the settings that hold hooks), decided before the policy;
   * none by default.
   *
   * @since 0.1.0
   */
  readonly protect?: ReadonlyArray<Hook.Protected> | undefined
  /**
   * How long the CLI has to answer `initialize` (default 30 s); user messages
   * wait for the answer, and without it the CLI is ended and the session fails
   * with `CliDied` saying so.
   *
   * @since 0.1.0
   */
  readonly initializeTimeout?: Duration.Input | undefined
  /**
   * How long one decision may take (default 10 s); past it the call is refused
   * and the session ends, as for a journal failure. The CLI is told to wait 30 s
   * longer, so its own timeout (which would let the call run) never fires first.
   *
   * @since 0.1.0
   */
  readonly decisionTimeout?: Duration.Input | undefined
  /**
   * Capacity of the `events` fan-out (default 1024): a subscriber more than this
   * many events behind loses the oldest and is told how many (`Missed`).
   */
  readonly eventsCapacity?: number | undefined
  /**
   * How long `interrupt` waits for the CLI's answer before ending the process
   * (default 10 s). This, `killGrace`, `archive.interval`, `initializeTimeout`
   * and `decisionTimeout` are `Duration.Input`s: one that is no duration, or a
   * negative one, fails `make` (before the process starts) with a `StorageError`
   * of operation "configure" whose reason is `InvalidOption` naming it.
   */
  readonly interruptTimeout?: Duration.Input | undefined
  /** Between SIGTERM and SIGKILL when the process is ended (default 2 s). */
  readonly killGrace?: Duration.Input | undefined
  /** Bytes of the CLI's stderr kept, the last ones (default 64 KiB). */
  readonly stderrBytes?: number | undefined
  /**
   * Largest line journaled with its bytes (default 4 MiB); a longer one is
   * journaled by size and SHA-256, hashed as it streams: the driver never holds
   * more than this of an unfinished line.
   */
  readonly maxLineBytes?: number | undefined
  /**
   * Mirrors the CLI's transcripts of this working directory into their own journal
   * sessions while the session runs (`Archive.follow`, in a fiber of its own, off
   * the path from stdout to `events`), with one last pass after the CLI exited.
   * `source` defaults to the projects directory of the CLI's environment
   * (`$CLAUDE_CONFIG_DIR/projects`, else `$HOME/.claude/projects`).
   */
  readonly archive?: {
    readonly source?: string | undefined
    readonly interval?: Duration.Input | undefined
  } | undefined
}

/**
 * A running session.
 *
 * @since 0.1.0
 */
export interface Session {
  /** The CLI's process id (its process group's too). */
  readonly pid: number
  /** The journal session holding the lines. */
  readonly journalSession: string
  /**
   * Journals a user message and writes it to the CLI; returns once written (it
   * does not wait for the turn). The first waits until the CLI has accepted the
   * driver's hooks, and fails if it did not.
   */
  readonly send: (input: UserInput.UserInput) => Effect.Effect<void, SessionError>
  /** Journals and writes any message (an `initialize`, a raw user line). */
  readonly write: (message: Message.Message) => Effect.Effect<void, SessionError>
  /** The events from when the stream starts; ends after the CLI's last line. */
  readonly events: Stream.Stream<Event>
  /** Subscribes now, so no event after this call is missed unreported; the stream is the subscription's. */
  readonly subscribe: Effect.Effect<Stream.Stream<Event>, never, Scope.Scope>
  /** The fold of the CLI's messages. */
  readonly state: SubscriptionRef.SubscriptionRef<SessionState.SessionState>
  /**
   * Waits until more than `n` results were seen and returns the latest; fails
   * with the session's error if it ends first. Reads and waits on one
   * subscription, so no result can slip in between.
   */
  readonly awaitResultAfter: (n: number) => Effect.Effect<Message.ResultMessage, SessionError>
  /** The first `system/init` (the CLI writes it when the first turn starts); fails if the session ends first. */
  readonly info: Effect.Effect<Message.SystemInit, SessionError>
  /** Interrupts the running turn through the control protocol; always settles (see `InterruptOutcome`). */
  readonly interrupt: Effect.Effect<InterruptOutcome, SessionError | ControlError>
  /** Closes the CLI's stdin (it ends after the current turn) and waits for the exit. */
  readonly end: Effect.Effect<SessionState.Exit>
  /** Completes when the session is over, with its error (`CliDied` for a normal exit too). */
  readonly ended: Effect.Effect<SessionError>
  /**
   * With `archive`: the latest report of each transcript mirrored so far, and the
   * archive's failure if it stopped (it never ends the session).
   */
  readonly archived: Effect.Effect<{
    readonly files: ReadonlyArray<Sync.FileReport>
    readonly failure: string | null
  }>
  /**
   * Bytes of the CLI's stdout kept for an unfinished line (or the 4 KiB head of
   * an oversized one): now, and the most at any time so far (at most
   * `maxLineBytes` + 4 KiB).
   *
   * @since 0.1.0
   */
  readonly lineBuffer: Effect.Effect<{ readonly held: number; readonly peak: number }>
}

/**
 * The service of one session.
 *
 * @since 0.1.0
 */
export class ClaudeCodeSession extends Context.Service<ClaudeCodeSession, Session>()(
  "@session-journal/claude-code/Session"
) {}

/**
 * The journal entry kind of a line of the session (payload `{ index, from, line }`,
 * or `line_base64` for bytes that are not UTF-8).
 *
 * @since 0.1.0
 */
export const LINE_KIND = Lines.LINE_KIND

/**
 * The journal entry kind of a line above `maxLineBytes` (payload `{ index, from, bytes, sha256 }`).
 *
 * @since 0.1.0
 */
export const OVERSIZED_KIND = Lines.OVERSIZED_KIND

/** The protocol's own arguments, ahead of the caller's. */
const protocolArgs = [
  "-p",
  "--input-format",
  "stream-json",
  "--output-format",
  "stream-json",
  "--verbose",
  "--permission-prompt-tool",
  "stdio"
]

type Line = Exclude<Event, { _tag: "Missed" }>
// The end of the events, with the index after the last line published before it,
// so a subscriber counts the lines it missed at the end too.
interface Ended {
  readonly _tag: "Ended"
  readonly next: number
}
type Published = Line | Ended

/** The projects directory of an environment: `$CLAUDE_CONFIG_DIR/projects`, else `$HOME/.claude/projects`. */
const projectsOf = (env: Readonly<Record<string, string | undefined>>): string => {
  const home = env["HOME"]
  return env["CLAUDE_CONFIG_DIR"] === undefined && home !== undefined && home !== ""
    ? `${home}/.claude/projects`
    : Archive.defaultSource(env)
}

/**
 * Starts a session; the scope owns the process.
 *
 * @since 0.1.0
 */
export const make = Effect.fn("ClaudeCodeSession.make")(function*(options: Options) {
  const journal = yield* SessionJournal.SessionJournal
  const session = options.journalSession
  const capacity = options.eventsCapacity ?? 1024
  const interruptTimeout = yield* Persistence.decodeInterval("interruptTimeout", options.interruptTimeout, "10 seconds")
  const killGrace = yield* Persistence.decodeInterval("killGrace", options.killGrace, "2 seconds")
  const archiveInterval = yield* Persistence.decodeInterval("archive.interval", options.archive?.interval, "200 millis")
  const initializeTimeout = yield* Persistence.decodeInterval(
    "initializeTimeout",
    options.initializeTimeout,
    "30 seconds"
  )
  const decisionTimeout = yield* Persistence.decodeInterval("decisionTimeout", options.decisionTimeout, "10 seconds")
  const stderrBytes = options.stderrBytes ?? 64 * 1024
  const maxLineBytes = options.maxLineBytes ?? 4 * 1024 * 1024

  const state = yield* SubscriptionRef.make(SessionState.initial)
  const hub = yield* PubSub.sliding<Published>(capacity)
  // The index after the last line published (set before it is published): where a
  // new subscriber's lines begin, and where the lines end for the `Ended` marker.
  let published = 0
  const willPublish = (index: number): void => {
    if (index >= published) published = index + 1
  }
  const initDeferred = yield* Deferred.make<Message.SystemInit, SessionError>()
  // Completes when the CLI has accepted the driver's hooks; user messages wait for it.
  const registered = yield* Deferred.make<void, SessionError>()
  const endedDeferred = yield* Deferred.make<SessionError>()
  const pending = new Map<string, Deferred.Deferred<Schema.Json, SessionError | ControlError>>()
  const decisions = yield* FiberMap.make<string>()
  const stdin = yield* Queue.unbounded<Uint8Array, Cause.Done>()
  const writeLock = yield* Semaphore.make(1)
  const stderr = Lines.tail(stderrBytes)
  const decider = Decide.make({
    policy: options.guard ?? null,
    approve: options.approve,
    policyName: options.policyName,
    session,
    deadline: decisionTimeout,
    protect: options.protect,
    home: (options.env ?? process.env)["HOME"]
  })
  const cwd = options.cwd ?? process.cwd()
  let index = 0
  let requests = 0
  // Why the driver ended the CLI, added to the `CliDied` of its exit.
  let endNote: string | null = null

  const command = ChildProcess.make(options.claude ?? "claude", [...protocolArgs, ...(options.args ?? [])], {
    cwd: options.cwd,
    env: options.env ?? (process.env as Record<string, string>),
    extendEnv: false,
    detached: true,
    stdin: { stream: Stream.fromQueue(stdin), endOnDone: true },
    stdout: "pipe",
    stderr: "pipe",
    killSignal: "SIGTERM",
    forceKillAfter: killGrace
  })
  // Transcript custody beside the session. Registered before the process, so
  // its last pass runs after the process has been ended.
  const archivedFiles = new Map<string, Sync.FileReport>()
  let archiveFailure: string | null = null
  const archiveOptions = options.archive === undefined ? undefined : {
    source: options.archive.source ?? projectsOf(options.env ?? process.env),
    project: options.cwd ?? process.cwd()
  }
  const noteReport = (report: Archive.Report) =>
    Effect.sync(() => {
      for (const f of report.files) archivedFiles.set(f.path, f)
    })
  const noteFailure = (e: { readonly message: string }) => Effect.sync(() => (archiveFailure = e.message))
  if (archiveOptions !== undefined) {
    yield* Effect.addFinalizer(() =>
      Archive.archive(archiveOptions).pipe(Effect.flatMap(noteReport), Effect.catch(noteFailure))
    )
  }

  const handle = yield* command.pipe(
    Effect.mapError((e) => new CliDied({ code: null, signal: null, stderr: `could not start the CLI: ${e.message}` }))
  )

  const storage = (operation: string) => (cause: unknown) => new SessionStorageError({ operation, cause })
  const kill = Effect.ignore(handle.kill({ forceKillAfter: killGrace }))

  // The session is over: everything waiting fails with `error`.
  const finish = (error: SessionError) =>
    Effect.gen(function*() {
      if (!(yield* Deferred.succeed(endedDeferred, error))) return
      yield* Deferred.fail(initDeferred, error)
      yield* Deferred.fail(registered, error)
      for (const d of pending.values()) yield* Deferred.fail(d, error)
      pending.clear()
      yield* Queue.end(stdin)
    })

  // The session cannot go on safely: over, and the CLI's process group ended, so
  // nothing it asked is left to run unanswered or answered unrecorded.
  const fatal = (error: SessionError) => Effect.andThen(finish(error), kill)

  // The driver ends the CLI for `note` (its exit's `CliDied` says why).
  const endFor = (note: string) =>
    Effect.andThen(
      Effect.sync(() => (endNote ??= note)),
      kill
    )

  const publish = (event: Line) =>
    Effect.suspend(() => {
      willPublish(event.index)
      return PubSub.publish(hub, event)
    })

  /**
   * Journals a line of ours, publishes it and queues it for the CLI's stdin, in
   * one order. A user message first waits until the hooks are registered.
   */
  const write = (message: Message.Message): Effect.Effect<void, SessionError> =>
    message._tag === "User" ? Effect.andThen(Deferred.await(registered), writeLine(message)) : writeLine(message)

  const writeLine = (message: Message.Message): Effect.Effect<void, SessionError> =>
    writeLock.withPermits(1)(Effect.gen(function*() {
      if (yield* Deferred.isDone(endedDeferred)) return yield* Effect.fail(yield* Deferred.await(endedDeferred))
      const text = Message.encodeLine(message)
      const bytes = Lines.encoder.encode(text + "\n")
      const at = index++
      yield* journal.writeAll(session, [Lines.item(at, "driver", bytes.subarray(0, bytes.length - 1), maxLineBytes)])
        .pipe(Effect.mapError(storage("journal a line to the CLI")), Effect.tapError(fatal))
      yield* publish({ _tag: "Message", index: at, from: "driver", message })
      yield* Queue.offer(stdin, bytes)
    }))

  /**
   * Writes an answer (journaled first, as every line of ours). When the journal
   * could not record the decision behind it, nothing is answered: the session
   * ends and the CLI's process group with it, so the call never runs and no
   * answer reaches the CLI that the chain does not hold.
   */
  const answer = (requestId: string, answered: Decide.Answer) =>
    answered.fatal === null
      ? Effect.ignore(write(Message.controlSuccess(requestId, answered.response)))
      : fatal(new SessionStorageError({ operation: `decide on control request ${requestId}`, cause: answered.fatal }))

  /** Answers a control request of the CLI's that came as an oversized line, from its head. */
  const onOversized = (line: Lines.OversizedLine) =>
    Effect.suspend(() => {
      const control = Lines.controlOf(line.head)
      if (control === null) return Effect.void
      if (control === "unreadable") {
        return endFor(
          `session-journal: a control request of ${line.bytes} bytes (over maxLineBytes) could not be read or answered; the CLI was ended`
        )
      }
      return Effect.forkChild(Effect.ignore(write(Decide.refuseOversized(control, line.bytes, maxLineBytes))))
    })

  /** Whether `act` does anything with a message. */
  const actsOn = (message: Message.Message): boolean =>
    message._tag === "SystemInit" || message._tag === "ControlResponse" ||
    message._tag === "ControlCancelRequest" || message._tag === "ControlRequest"

  /** Acts on one journaled line of the CLI's. */
  const act = (message: Message.Message) =>
    Effect.gen(function*() {
      switch (message._tag) {
        case "SystemInit":
          yield* Deferred.succeed(initDeferred, message)
          return
        case "ControlResponse": {
          const id = message.response.request_id
          const d = pending.get(id)
          if (d === undefined) return
          pending.delete(id)
          if (message.response.subtype === "success") {
            yield* Deferred.succeed(d, message.response.response ?? null)
          } else {
            yield* Deferred.fail(d, new ControlError({ requestId: id, error: message.response.error ?? "" }))
          }
          return
        }
        case "ControlCancelRequest":
          yield* FiberMap.remove(decisions, message.request_id)
          return
        case "ControlRequest": {
          const callback = Message.hookCallback(message)
          if (callback !== undefined) {
            yield* FiberMap.run(
              decisions,
              callback.requestId,
              Effect.flatMap(decider.hookCallback(callback), (a) => answer(callback.requestId, a))
            )
            return
          }
          const request = Message.canUseTool(message)
          if (request !== undefined) {
            const claudeSession = (yield* SubscriptionRef.get(state)).sessionId
            yield* FiberMap.run(
              decisions,
              request.requestId,
              Effect.flatMap(decider.canUseTool(request, claudeSession, cwd), (a) => answer(request.requestId, a))
            )
            return
          }
          // A request this driver does not serve: an error answer, so the CLI is
          // not left waiting (a can_use_tool without a tool name is refused).
          yield* Effect.forkChild(Effect.ignore(write(
            message.request.subtype === "can_use_tool"
              ? Message.controlSuccess(message.request_id, {
                behavior: "deny",
                message: "session-journal: a can_use_tool request without a tool name"
              })
              : Message.controlFailure(
                message.request_id,
                `session-journal: the driver does not serve ${message.request.subtype}`
              )
          )))
          return
        }
        default:
          return
      }
    })

  /** One stdout chunk's complete lines: one journal append, then fold, publish, act. */
  const onLines = (pieces: ReadonlyArray<Lines.Piece>) =>
    writeLock.withPermits(1)(Effect.gen(function*() {
      const first = index
      index += pieces.length
      yield* journal.writeAll(
        session,
        pieces.map((p, i) =>
          Lines.isOversized(p)
            ? Lines.oversizedItem(first + i, "cli", p)
            : Lines.item(first + i, "cli", p, maxLineBytes)
        )
      ).pipe(Effect.mapError(storage("journal lines of the CLI")))
      return pieces.map((p, i) =>
        Lines.isOversized(p)
          ? { index: first + i, oversized: p }
          : { index: first + i, message: Message.decodeLine(Lines.text(p)) }
      )
    })).pipe(Effect.flatMap(afterJournal))

  /**
   * Folds, publishes and acts on journaled lines in their order, a run of lines
   * at a time: the lines up to one the driver acts on (or an oversized one) are
   * folded into `state` with one update and published together, then that line
   * is acted on. A subscriber still sees each line only after it is in `state`.
   */
  const afterJournal = (
    decoded: ReadonlyArray<
      { readonly index: number; readonly oversized: Lines.OversizedLine } | {
        readonly index: number
        readonly message: Message.Message
      }
    >
  ) =>
    Effect.gen(function*() {
      let run: Array<Message.Message> = []
      let events: Array<Line> = []
      const flush = Effect.suspend(() => {
        if (run.length === 0) return Effect.void
        const messages = run
        const published = events
        run = []
        events = []
        return Effect.andThen(
          SubscriptionRef.update(state, (s) => messages.reduce(SessionState.fold, s)),
          Effect.suspend(() => {
            willPublish(published[published.length - 1]!.index)
            return PubSub.publishAll(hub, published)
          })
        )
      })
      for (const line of decoded) {
        if ("oversized" in line) {
          yield* flush
          const { bytes, sha256 } = line.oversized
          yield* publish({ _tag: "Oversized", index: line.index, from: "cli", bytes, sha256 })
          yield* onOversized(line.oversized)
          continue
        }
        const message = line.message
        run.push(message)
        events.push({ _tag: "Message", index: line.index, from: "cli", message })
        if (actsOn(message)) {
          yield* flush
          yield* act(message)
        }
      }
      yield* flush
    })

  // The CLI's stderr, with the driver's reason last when it ended the CLI.
  const stderrText = () => endNote === null ? stderr.text() : `${stderr.text()}\n${endNote}`

  yield* handle.stderr.pipe(
    Stream.runForEach((chunk) => Effect.sync(() => stderr.push(chunk))),
    Effect.ignore,
    Effect.forkScoped
  )

  if (archiveOptions !== undefined) {
    yield* Archive.follow({ ...archiveOptions, interval: archiveInterval }, noteReport).pipe(
      // The CLI creates its projects directory with the first transcript.
      Effect.retry({
        while: (e) => e._tag === "SourceError" && e.code === "ENOENT",
        schedule: Schedule.spaced(archiveInterval)
      }),
      Effect.catch(noteFailure),
      Effect.forkScoped
    )
  }

  const splitter = Lines.splitter(maxLineBytes)
  yield* handle.stdout.pipe(
    Stream.mapError(storage("read the CLI's stdout")),
    Stream.runForEach((chunk) => {
      const lines = splitter.push(chunk)
      return lines.length === 0 ? Effect.void : onLines(lines)
    }),
    Effect.andThen(Effect.suspend(() => {
      const rest = splitter.end()
      return rest.length === 0 ? Effect.void : onLines(rest)
    })),
    Effect.matchEffect({
      onFailure: fatal,
      onSuccess: () => Effect.void
    }),
    Effect.andThen(handle.exitCode.pipe(
      Effect.map((code): SessionState.Exit => ({ code, signal: null, stderr: stderrText() })),
      Effect.catch((e) =>
        Effect.succeed<SessionState.Exit>({
          code: null,
          // Node reports a signal exit as an error whose text names the signal.
          signal: /signal: '([A-Z0-9]+)'/.exec(`${e.message} ${String(e.reason.cause)}`)?.[1] ?? "unknown",
          stderr: stderrText()
        })
      )
    )),
    Effect.tap((exit) => SubscriptionRef.update(state, (s) => SessionState.fold(s, { _tag: "Exited", exit }))),
    Effect.tap((exit) => finish(new CliDied(exit))),
    Effect.andThen(Effect.suspend(() => PubSub.publish(hub, { _tag: "Ended", next: published }))),
    Effect.forkScoped
  )

  const subscribe = Effect.map(PubSub.subscribe(hub), (subscription) => {
    // Lines from here on are this subscriber's: one published while it subscribed
    // arrives with an index below this, which is no gap.
    let expected = published
    let end = -1
    return Stream.fromSubscription(subscription).pipe(
      Stream.takeWhile((e): e is Line => {
        if (e._tag !== "Ended") return true
        end = e.next
        return false
      }),
      // A gap in the indexes is lines the sliding hub dropped for this subscriber:
      // before its first line, between two, or (below) after its last.
      Stream.mapArray((lines) => {
        const out: Array<Event> = []
        for (const e of lines) {
          const missed = e.index - expected
          if (e.index + 1 > expected) expected = e.index + 1
          if (missed > 0) out.push({ _tag: "Missed", count: missed })
          out.push(e)
        }
        // Every line gives at least itself: a chunk of lines is a chunk of events.
        return out as Arr.NonEmptyArray<Event>
      }),
      Stream.concat(
        Stream.suspend(() =>
          end > expected ? Stream.make<Array<Event>>({ _tag: "Missed", count: end - expected }) : Stream.empty
        )
      )
    )
  })

  const ended = Deferred.await(endedDeferred)
  const orEnded = <A, E>(self: Effect.Effect<A, E>): Effect.Effect<A, E | SessionError> =>
    Effect.raceFirst(self, Effect.flatMap(ended, Effect.fail))

  const awaitResultAfter = (n: number) =>
    SubscriptionRef.changes(state).pipe(
      Stream.filter((s) => s.resultsSeen > n || SessionState.isDead(s)),
      Stream.take(1),
      Stream.runHead,
      Effect.flatMap((s) => {
        const st = Option.getOrThrow(s)
        return st.resultsSeen > n && st.lastResult !== null
          ? Effect.succeed(st.lastResult)
          : Effect.flatMap(ended, Effect.fail)
      })
    )

  const interrupt = Effect.gen(function*() {
    const id = `req_${++requests}_interrupt`
    const answered = yield* Deferred.make<Schema.Json, SessionError | ControlError>()
    pending.set(id, answered)
    yield* write(Message.controlRequest(id, { subtype: "interrupt" }))
    const r = yield* Deferred.await(answered).pipe(Effect.timeoutOption(interruptTimeout))
    if (Option.isNone(r)) {
      pending.delete(id)
      yield* Effect.ignore(handle.kill({ forceKillAfter: killGrace }))
      return { _tag: "Closed" } as InterruptOutcome
    }
    const value = r.value
    const queued = typeof value === "object" && value !== null && !Array.isArray(value)
      ? (value as Schema.JsonObject)["still_queued"]
      : undefined
    return { _tag: "Answered", stillQueued: Array.isArray(queued) ? queued : [] } as InterruptOutcome
  })

  // The hooks are registered before any prompt reaches the CLI: `initialize` is
  // the first line written, and user messages wait for its answer. Without one
  // within `initializeTimeout` the CLI is ended and the session fails.
  const initId = `req_${++requests}_initialize`
  const initialized = yield* Deferred.make<Schema.Json, SessionError | ControlError>()
  pending.set(initId, initialized)
  yield* write(Message.controlRequest(initId, Decide.initialize(Math.ceil(Duration.toSeconds(decisionTimeout)) + 30)))
  const unregistered = (why: string) =>
    Effect.andThen(
      Effect.sync(() => pending.delete(initId)),
      endFor(
        `session-journal: the CLI did not register the driver's hooks (${why}); it was ended rather than run unguarded`
      )
    )
  yield* Deferred.await(initialized).pipe(
    Effect.timeoutOption(initializeTimeout),
    Effect.flatMap((o) =>
      Option.isSome(o)
        ? Deferred.succeed(registered, undefined)
        : unregistered(`no answer to initialize within ${Duration.format(initializeTimeout)}`)
    ),
    Effect.catchTag("ControlError", (e) => unregistered(`initialize failed: ${e.error}`)),
    // The session ended first: `finish` has failed `registered` already.
    Effect.ignore,
    Effect.forkScoped
  )

  const end = Effect.gen(function*() {
    yield* writeLock.withPermits(1)(Queue.end(stdin))
    const e = yield* ended
    const s = yield* SubscriptionRef.get(state)
    return s.status._tag === "Dead" ? s.status.exit : { code: null, signal: null, stderr: e.message }
  })

  return ClaudeCodeSession.of({
    pid: handle.pid,
    journalSession: session,
    send: (input) => write(Message.user(UserInput.encode(input))),
    write,
    events: Stream.unwrap(subscribe),
    subscribe,
    state,
    awaitResultAfter,
    info: orEnded(Deferred.await(initDeferred)),
    interrupt,
    end,
    ended,
    archived: Effect.sync(() => ({ files: [...archivedFiles.values()], failure: archiveFailure })),
    lineBuffer: Effect.sync(() => splitter.stats())
  })
})

/**
 * A layer of one session, living as long as the layer.
 *
 * @since 0.1.0
 */
export const layer = (
  options: Options
): Layer.Layer<ClaudeCodeSession, SessionError | StorageError, SessionJournal.SessionJournal | ChildProcessSpawner> =>
  Layer.effect(ClaudeCodeSession, make(options))
