/**
 * `session-journal policy …`: the policy file (`Policy` of core). `check FILE`
 * validates it; `test FILE ID` replays a stored session's tool calls against it,
 * writing nothing, and lists the calls it would have denied, each with its guard:
 * the what-if a user runs before switching a policy on.
 *
 * @since 0.4.0
 */
import { Entry, JournalState, Policy, SessionJournal } from "@session-journal/core"
import { Argument, Command } from "effect/cli"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as fs from "node:fs"
import { InvalidInput, PolicyWouldDeny } from "./Failure.ts"
import * as Input from "./Input.ts"
import { sessionId, validId, withJournal, withoutJournal } from "./internal/commandKit.ts"
import * as Output from "./Output.ts"

/**
 * Largest policy file read (1 MiB): far beyond any policy written by hand.
 *
 * @since 0.4.0
 */
export const MAX_POLICY_BYTES = 1024 * 1024

/**
 * Reads and decodes a policy file: strict UTF-8, at most `MAX_POLICY_BYTES`. A file
 * that cannot be read or does not decode is `InvalidInput` on the file, naming
 * every JSON path that is wrong and what was expected there.
 *
 * @since 0.4.0
 */
export const load = (file: string): Effect.Effect<Policy.Policy, InvalidInput> =>
  Effect.tryPromise({
    try: () => Input.readBounded(fs.createReadStream(file), file, MAX_POLICY_BYTES),
    catch: (e) =>
      new InvalidInput({ field: file, reason: `cannot read it: ${e instanceof Error ? e.message : String(e)}` })
  }).pipe(
    Effect.flatMap(Effect.fromResult),
    Effect.flatMap((text) => {
      const decoded = Policy.decodeText(text)
      return Result.isSuccess(decoded)
        ? Effect.succeed(decoded.success)
        : Effect.fail(new InvalidInput({ field: `policy ${file}`, reason: decoded.failure.message }))
    })
  )

const file = Argument.String("file").pipe(Argument.withDescription("Policy file (JSON)"))

const summary = (p: Policy.Policy): string => {
  const n = Policy.size(p)
  return `${n} guard${n === 1 ? "" : "s"}: ${Policy.format(p)}`
}

const check = Command.make("check", { file }, (a) =>
  withoutJournal(({ json }) =>
    Effect.gen(function*() {
      const policy = yield* load(a.file)
      if (json) return yield* Output.json({ file: a.file, guards: Policy.size(policy), policy: Policy.format(policy) })
      yield* Output.write(`${a.file}: ok, ${summary(policy)}\n`)
    })
  )).pipe(Command.withDescription(
    "Validate a policy file; exit 2 naming each JSON path that is wrong and what was expected"
  ))

const test = Command.make("test", { file, id: sessionId }, (a) =>
  withJournal(({ json }) =>
    Effect.gen(function*() {
      const policy = yield* load(a.file)
      yield* validId(a.id)
      const guard = Policy.toGuard(policy)
      const journal = yield* SessionJournal.SessionJournal
      // The session's own caps: requirePredecessors reads tool_counts, whose cap it keeps.
      const stored = yield* journal.state(a.id)
      let state = JournalState.empty(a.id, { entry_cap: stored.entry_cap, tool_counts_cap: stored.tool_counts_cap })
      let calls = 0
      let denied = 0
      yield* journal.entries(a.id).pipe(
        Stream.runForEachArray((chunk) => {
          const out: Array<string> = []
          for (const entry of chunk) {
            const step = Policy.whatIf(guard, state, entry)
            state = step.state
            if (step.verdict === null || !Entry.isTool(entry)) continue
            calls++
            if (step.verdict._tag === "Allow") continue
            denied++
            out.push(
              json
                ? JSON.stringify({
                  type: "denied",
                  sequence: entry.sequence,
                  tool_name: entry.tool_name,
                  agent_id: entry.agent_id,
                  recorded_allowed: entry.allowed,
                  guard: step.verdict.guard,
                  reason: step.verdict.reason
                })
                : `#${entry.sequence} ${entry.tool_name} (agent ${entry.agent_id}${
                  entry.allowed ? "" : ", recorded denied"
                }): ` +
                  `${step.verdict.reason} [${step.verdict.guard}]`
            )
          }
          return Output.lines(out)
        })
      )
      if (json) {
        yield* Output.json({ type: "summary", session: a.id, policy: Policy.format(policy), calls, denied })
      } else {
        yield* Output.write(
          `${a.id}: ${denied} of ${calls} call${calls === 1 ? "" : "s"} would be denied by ${summary(policy)}\n`
        )
      }
      if (denied > 0) return yield* new PolicyWouldDeny({ denied, calls })
    })
  )).pipe(Command.withDescription(
    "Replay a stored session's tool calls against a policy, writing nothing, and list the calls it would deny with their guard; " +
      "exit 5 when it would deny any"
  ))

/**
 * The `policy` command and its subcommands.
 *
 * @since 0.4.0
 */
export const policy = Command.make("policy").pipe(
  Command.withDescription(
    "The policy file: one key per guard (maxStreak, forbiddenTransitions, …); check it, test it on a session"
  ),
  Command.withSubcommands([check, test])
)
