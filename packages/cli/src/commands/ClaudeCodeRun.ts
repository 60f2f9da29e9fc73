/**
 * `session-journal claude-code run`: one Claude Code session through the driver
 * of `@session-journal/claude-code`, journaled line by line, every tool
 * call decided by the policy file's guards (`--policy`): the driver registers
 * hook callbacks for every tool before the first prompt, so calls the CLI runs
 * without asking (`--allowed-tools`) are decided and recorded too, each with its
 * `claude-code.decision` entry, and a denial tells the model the guard in
 * brackets.
 * Prompts come from the arguments, one turn each in order, or, with none, one per
 * line of stdin (blank lines skipped); each is sent once the turn before it has
 * its result. The conversation is printed as it streams (assistant text, tool
 * calls, a line for a turn that ended in error), or with `--json` every message
 * of both directions as a JSON line; a final line sums the run up.
 *
 * Ctrl-C: the CLI runs in its own process group, so a terminal's Ctrl-C reaches
 * this command only, which interrupts the running turn through the control
 * protocol (the CLI answers, ends the turn with an `error_during_execution`
 * result, and the run goes on with the next prompt). A second Ctrl-C, or one
 * while no turn runs, ends the session (SIGTERM to the CLI's group, SIGKILL after
 * the grace period), once the interrupt in flight has settled: its request and
 * the CLI's answer are on the chain (an interrupt unanswered for 10 s ends the
 * CLI itself). Exit codes: 0 every turn succeeded, 1 a turn ended with an
 * error result (an interrupted one included), 2 bad usage or policy file, 3 the
 * journal failed (the CLI is then ended: nothing is answered that the journal
 * does not hold), 6 stdout failed, 70 the Claude Code CLI died (or could not be
 * started, or did not accept the driver's hooks and was ended), 130 ended by
 * Ctrl-C.
 *
 * @since 0.1.0
 */
import { Message, Session } from "@session-journal/claude-code"
import * as Protect from "@session-journal/claude-code/ProtectedPaths"
import { Entry, Policy } from "@session-journal/core"
import { messageOf } from "@session-journal/core/ErrorMessage"
import { Argument, Command, Flag } from "effect/cli"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import { ChildProcessSpawner } from "effect/process/ChildProcessSpawner"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as crypto from "node:crypto"
import * as path from "node:path"
import { InvalidInput, TurnFailed } from "../Failure.ts"
import * as Input from "../Input.ts"
import { withJournal } from "../internal/commandKit.ts"
import * as LiveExport from "../internal/liveExport.ts"
import * as OtlpFlags from "../internal/otlpFlags.ts"
import * as Output from "../Output.ts"
import * as Storage from "../Storage.ts"
import { load } from "./PolicyCommands.ts"

const optionalString = (name: string, metavar: string, description: string) =>
  Flag.String(name).pipe(Flag.optional, Flag.withMetavar(metavar), Flag.withDescription(description))

const flags = {
  prompts: Argument.String("prompt").pipe(
    Argument.variadic(),
    Argument.withDescription("Prompts, one turn each, in order; none: one per line of stdin")
  ),
  policy: optionalString(
    "policy",
    "FILE",
    "Policy file deciding every tool call, pre-allowed ones included (default: allow, still journaled)"
  ),
  claude: optionalString("claude", "PATH", "The Claude Code executable (default: claude on PATH)"),
  cwd: optionalString("cwd", "DIR", "The CLI's working directory (default: this one)"),
  session: optionalString("session", "ID", "Journal session of the lines (default: claude-code-run-<time>-<random>)"),
  tools: optionalString("tools", "LIST", "The CLI's --tools (the tools offered to the model)"),
  allowedTools: optionalString(
    "allowed-tools",
    "LIST",
    "The CLI's --allowedTools (run without a permission prompt; the policy still decides them)"
  ),
  model: optionalString("model", "NAME", "The CLI's --model"),
  claudeArg: Flag.String("claude-arg").pipe(
    Flag.atLeast(0),
    Flag.withMetavar("ARG"),
    Flag.withDescription("One more argument for the CLI (repeatable; --claude-arg=--flag for a flag)")
  ),
  otlp: OtlpFlags.otlpFlag
}

// A new session's id: the time of the fiber's clock, and three random bytes so two
// runs in the same millisecond differ.
const defaultSession: Effect.Effect<string> = Effect.map(
  Clock.currentTimeMillis,
  (now) =>
    `claude-code-run-${new Date(now).toISOString().replace(/[:.]/g, "-")}-${crypto.randomBytes(3).toString("hex")}`
)

const oneLine = (s: string, max = 160): string => {
  const flat = s.replace(/\s+/g, " ").trim()
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat
}

/** What a message shows in the conversation (text mode); empty for what it does not show. */
const shown = (event: Session.Event): Array<string> => {
  if (event._tag === "Missed") {
    return [`[${event.count} message${event.count === 1 ? "" : "s"} not shown: output fell behind]`]
  }
  if (event._tag === "Oversized") {
    return event.from === "cli" ? [`[a line of ${event.bytes} bytes, over the line bound: journaled by its hash]`] : []
  }
  if (event.from !== "cli") return []
  const m = event.message
  switch (m._tag) {
    case "Assistant":
      return m.message.content.flatMap((b) =>
        b.type === "text" && typeof b["text"] === "string"
          ? [b["text"] as string]
          : b.type === "tool_use"
          ? [`> ${String(b["name"])} ${oneLine(JSON.stringify(b["input"] ?? {}))}`]
          : []
      )
    case "Result":
      return m.is_error
        ? [`[turn ended: ${m.subtype}${typeof m["terminal_reason"] === "string" ? `, ${m["terminal_reason"]}` : ""}]`]
        : []
    default:
      return []
  }
}

const asJson = (event: Session.Event): string =>
  event._tag === "Missed"
    ? JSON.stringify({ type: "missed", count: event.count })
    : event._tag === "Oversized"
    ? JSON.stringify({ index: event.index, from: event.from, oversized: { bytes: event.bytes, sha256: event.sha256 } })
    : JSON.stringify({ index: event.index, from: event.from, message: Message.encode(event.message) })

/** The prompts: the arguments, else the non-blank lines of stdin (strict UTF-8). */
const promptsOf = (args: ReadonlyArray<string>): Stream.Stream<string, InvalidInput> => {
  if (args.length > 0) return Stream.fromIterable(args)
  const splitter = new Input.LineSplitter(Input.MAX_LINE_BYTES, "stdin")
  const decode = (lines: ReadonlyArray<Input.Line>) =>
    Effect.forEach(lines, (l) => Effect.fromResult(Input.decodeUtf8(l.bytes, { field: "stdin", line: l.number })))
  return Stream.unwrap(Effect.map(Input.Stdin, (stdin) =>
    Stream.fromAsyncIterable(
      stdin() as AsyncIterable<Uint8Array>,
      (e) => new InvalidInput({ field: "stdin", reason: messageOf(e) })
    ))).pipe(
      Stream.mapEffect((chunk) => Effect.flatMap(Effect.fromResult(splitter.push(chunk)), decode)),
      Stream.concat(Stream.fromEffect(Effect.suspend(() => Effect.flatMap(Effect.fromResult(splitter.end()), decode)))),
      Stream.flatMap((texts) => Stream.fromIterable(texts)),
      Stream.filter((t) => t.trim() !== "")
    )
}

/**
 * SIGINT while the command runs: delivered to `queue` instead of the runtime's
 * handler (which interrupts the whole program), restored afterwards.
 */
const takeSigint = (queue: Queue.Queue<void>) =>
  Effect.acquireRelease(
    Effect.sync(() => {
      const prior = process.listeners("SIGINT")
      const mine = () => {
        Queue.offerUnsafe(queue, undefined)
      }
      process.removeAllListeners("SIGINT")
      process.on("SIGINT", mine)
      return { prior, mine }
    }),
    ({ mine, prior }) =>
      Effect.sync(() => {
        process.removeListener("SIGINT", mine)
        for (const l of prior) process.on("SIGINT", l)
      })
  )

/**
 * The `claude-code run` command.
 *
 * @since 0.1.0
 */
export const run = Command.make("run", flags, (a) =>
  Effect.gen(function*() {
    const spawner = yield* ChildProcessSpawner
    yield* withJournal(({ json, storage }) =>
      Effect.gen(function*() {
        const file = Option.getOrUndefined(a.policy)
        const policy = file === undefined ? undefined : yield* load(file)
        const guard = policy === undefined ? undefined : Policy.compile(policy)
        const policyName = policy === undefined ? undefined : Policy.format(policy)
        const journalSession = Option.isSome(a.session) ? a.session.value : yield* defaultSession
        yield* Effect.fromResult(Entry.validateSessionId(journalSession))
        const args: Array<string> = []
        const tools = Option.getOrUndefined(a.tools)
        if (tools !== undefined) args.push("--tools", tools)
        const allowed = Option.getOrUndefined(a.allowedTools)
        if (allowed !== undefined) args.push("--allowedTools", allowed)
        const model = Option.getOrUndefined(a.model)
        if (model !== undefined) args.push("--model", model)
        args.push(...a.claudeArg)

        const signals = yield* Queue.unbounded<void>()
        yield* takeSigint(signals)
        const session = yield* Session.make({
          journalSession,
          claude: Option.getOrUndefined(a.claude),
          cwd: Option.getOrUndefined(a.cwd),
          guard,
          policyName,
          // As the hooks: no call may touch the journal, the policy or hooked settings.
          protect: yield* Effect.promise(() =>
            Protect.protectedPaths(
              path.resolve(Option.getOrElse(a.cwd, () => ".")),
              process.env,
              Storage.isFilesystem(storage) ? path.resolve(storage.dir) : null,
              file === undefined ? undefined : path.resolve(file)
            )
          ),
          args
        })
        const events = yield* session.subscribe
        const printer = yield* events.pipe(
          Stream.runForEach((e) => json ? Output.write(asJson(e) + "\n") : Output.lines(shown(e))),
          Effect.forkScoped
        )

        // Ctrl-C: the first interrupts the running turn, the next (or one between turns) ends the session.
        let phase: "idle" | "running" | "interrupting" = "idle"
        // The interrupt in flight: a Ctrl-C that ends the session waits for it to
        // settle (the CLI's answer journaled, ~150 ms; or, unanswered, the CLI ended
        // after the interrupt's own 10 s), so its request and answer are on the chain.
        let interrupting: Fiber.Fiber<void> | undefined
        const quit = yield* Deferred.make<void>()
        yield* Queue.take(signals).pipe(
          Effect.flatMap((): Effect.Effect<unknown, never, Scope.Scope> => {
            if (phase !== "running") return Deferred.succeed(quit, undefined)
            phase = "interrupting"
            return Output.errorLine("session-journal: interrupting the turn (Ctrl-C again ends the session)").pipe(
              Effect.andThen(Effect.forkScoped(session.interrupt.pipe(
                Effect.flatMap((o) =>
                  o._tag === "Closed"
                    ? Output.errorLine("session-journal: the CLI did not answer the interrupt; it was ended")
                    : Effect.void
                ),
                Effect.catch((e) => Output.errorLine(`session-journal: the interrupt failed: ${e.message}`))
              ))),
              Effect.tap((fiber) => Effect.sync(() => (interrupting = fiber)))
            )
          }),
          Effect.forever,
          Effect.forkScoped
        )

        let turns = 0
        let errors = 0
        const turn = (text: string) =>
          Effect.gen(function*() {
            const before = (yield* SubscriptionRef.get(session.state)).resultsSeen
            phase = "running"
            yield* session.send({ text })
            const result = yield* session.awaitResultAfter(before)
            phase = "idle"
            turns++
            if (result.is_error) errors++
          })
        const conversation = Effect.gen(function*() {
          yield* promptsOf(a.prompts).pipe(Stream.runForEach(turn))
          yield* session.end
          // The stream ends after the CLI's last line: everything is shown before the summary.
          yield* Fiber.join(printer)
        })
        const ended = yield* Effect.raceFirst(
          Effect.as(conversation, "done" as const),
          Effect.as(Deferred.await(quit), "quit" as const)
        )
        if (ended === "quit" && interrupting !== undefined) {
          yield* Fiber.join(interrupting)
        }

        const state = yield* SubscriptionRef.get(session.state)
        const summary = {
          type: "summary",
          ended: ended === "quit" ? "ctrl-c" : errors > 0 ? "error" : "success",
          turns,
          errors,
          cost_usd: state.costUsd,
          claude_session: state.sessionId,
          journal_session: journalSession
        }
        yield* json ? Output.json(summary) : Output.write(
          `result: ${summary.ended}, ${turns} turn${turns === 1 ? "" : "s"}` +
            (errors > 0 ? ` (${errors} ended in error)` : "") +
            `, $${state.costUsd.toFixed(4)}, Claude Code session ${
              state.sessionId ?? "-"
            }, journal session ${journalSession}\n`
        )
        if (ended === "quit") return yield* Effect.interrupt
        if (errors > 0) return yield* new TurnFailed({ errors, turns })
      }).pipe(LiveExport.journaled(a.otlp), Effect.provideService(ChildProcessSpawner, spawner))
    )
  })).pipe(Command.withDescription(
    "Run one Claude Code session through the driver, every line journaled and every tool call decided by --policy " +
      "(pre-allowed ones included, through hook callbacks registered before the first prompt); " +
      "Ctrl-C interrupts the turn, a second ends the session. Exit 0 all turns succeeded, 1 a turn ended in error, " +
      "70 the Claude Code CLI died, 130 ended by Ctrl-C"
  ))
