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
import * as Stream from "effect/Stream"
import { PolicyWouldDeny } from "../Failure.ts"
import { sessionId, validId, withJournalToRead, withoutJournal } from "../internal/commandKit.ts"
import * as Output from "../Output.ts"
import { load } from "../PolicyFile.ts"

export {
  /**
   * Reads and decodes a policy file (strict UTF-8, bounded); see `PolicyFile`.
   *
   * @since 0.4.0
   */
  load,
  /**
   * Largest policy file read (1 MiB).
   *
   * @since 0.4.0
   */
  MAX_POLICY_BYTES
} from "../PolicyFile.ts"

const file = Argument.String("file").pipe(Argument.withDescription("Policy file (JSON)"))

const summary = (p: Policy.Policy): string => {
  return `${Output.count(Policy.size(p), "guard")}: ${Policy.format(p)}`
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

const test = Command.make(
  "test",
  { file, id: sessionId },
  (a) =>
    withJournalToRead(({ json }) =>
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
        const denying = new Set<string>()
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
              denying.add(step.verdict.guard)
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
            `${a.id}: ${denied} of ${Output.count(calls, "call")} would be denied` +
              (denying.size === 0 ? "" : ` (by ${Array.from(denying).join(", ")})`) +
              ` under ${Policy.format(policy)}\n`
          )
        }
        if (denied > 0) return yield* new PolicyWouldDeny({ denied, calls })
      })
    )
).pipe(Command.withDescription(
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
