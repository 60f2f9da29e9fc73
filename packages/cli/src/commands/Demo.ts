/**
 * `session-journal demo`: a simulated coding-agent session, written through the
 * real service into the journal directory. The conversation is journaled as
 * messages; every tool call goes through `decide` with a set of guards, so some
 * calls are denied (and journaled as denied). The session is then verified.
 * Each run uses a new session id (`demo-<milliseconds>`), so it can run again and
 * again.
 *
 * @since 0.1.0
 */
import { Guard, SessionJournal } from "@session-journal/core"
import type { Entry } from "@session-journal/core"
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import { VerificationFailed } from "../Failure.ts"
import * as Output from "../Output.ts"
import type * as Storage from "../Storage.ts"
import * as Verify from "../Verify.ts"

type Step =
  | { readonly _tag: "say"; readonly role: "user" | "assistant"; readonly content: string }
  | {
    readonly _tag: "call"
    readonly tool: string
    readonly read?: number
    readonly written?: number
    readonly agent?: string
    readonly depth?: number
  }

/**
 * The guards of the demo: never `rm_rf`, at most 3 calls of one tool in a row, no
 * `deploy` right after `write_file`, at most 200 kB read in the whole session
 * (denied calls count too), delegation at most 2 levels deep.
 *
 * @since 0.1.0
 */
export const guard: Guard.Guard = Guard.all(
  Guard.denyList(["rm_rf"]),
  Guard.maxStreak(3),
  Guard.forbiddenTransitions([["write_file", "deploy"]]),
  Guard.maxBytesRead(200_000),
  Guard.maxDelegationDepth(2)
)

const script: ReadonlyArray<Step> = [
  { _tag: "say", role: "user", content: "The parser tests fail on main. Please fix them and deploy." },
  { _tag: "call", tool: "search_code", read: 4_200 },
  { _tag: "say", role: "assistant", content: "The failure is in src/parser.ts; reading the related files." },
  { _tag: "call", tool: "read_file", read: 12_800 },
  { _tag: "call", tool: "read_file", read: 9_100 },
  { _tag: "call", tool: "read_file", read: 15_300 },
  { _tag: "call", tool: "read_file", read: 7_700 },
  { _tag: "call", tool: "run_tests", read: 3_000, agent: "test-runner", depth: 1 },
  { _tag: "call", tool: "write_file", written: 2_048 },
  { _tag: "call", tool: "deploy", written: 512 },
  { _tag: "call", tool: "run_tests", read: 2_900, agent: "test-runner", depth: 1 },
  { _tag: "call", tool: "review", agent: "reviewer", depth: 3 },
  { _tag: "call", tool: "read_file", read: 180_000 },
  { _tag: "call", tool: "rm_rf" },
  {
    _tag: "say",
    role: "assistant",
    content: "Fixed the off-by-one in parser.ts; all tests pass. Deploy was refused by policy right after a write."
  }
]

/**
 * Runs the demo: writes the session, verifies it, and prints what happened.
 *
 * @since 0.1.0
 */
export const run = (json: boolean, storage: Storage.Options) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const id = `demo-${yield* Clock.currentTimeMillis}`
    yield* journal.setMeta(id, { title: "Demo: fix the parser tests", labels: ["demo", "coding-agent"] })
    const steps: Array<{ readonly entry: Entry.Entry; readonly denied: string | null }> = []
    for (const step of script) {
      if (step._tag === "say") {
        const entry = yield* journal.append(id, "message", { role: step.role, content: step.content })
        steps.push({ entry, denied: null })
        if (!json) yield* Output.write(`${step.role.padEnd(9)} ${step.content}\n`)
      } else {
        const decision = yield* journal.decide(id, {
          tool_name: step.tool,
          server_id: "demo-tools",
          agent_id: step.agent ?? "coder",
          bytes_read: step.read ?? 0,
          bytes_written: step.written ?? 0,
          delegation_depth: step.depth ?? 0
        }, guard)
        const denied = decision.verdict._tag === "Deny" ? decision.verdict.reason : null
        steps.push({ entry: decision.entry, denied }, { entry: decision.record, denied: null })
        if (!json) {
          yield* Output.write(
            denied === null ? `  allow   ${step.tool}\n` : `  DENY    ${step.tool}: ${denied}\n`
          )
        }
      }
    }
    // Release the writer lock before verifying, as a separate reader would.
    yield* journal.close(id)
    const report = yield* Verify.session(id, storage)
    const state = yield* journal.state(id)
    const deniedCount = steps.filter((s) => s.denied !== null).length
    if (json) {
      yield* Output.json({
        session: id,
        entries: steps.map((s) => ({
          ...Output.entryJsonValue(s.entry),
          ...(s.denied === null ? {} : { denied_reason: s.denied })
        })),
        denied: deniedCount,
        stats: Output.statsJson(state),
        verify: report
      })
    } else {
      yield* Output.lines([
        "",
        `session ${id}: ${steps.length} entries, ${deniedCount} ${
          deniedCount === 1 ? "call" : "calls"
        } denied by guards`,
        Verify.text(report),
        `next: session-journal stats ${id}   (in this repository: npx -y pnpm@10 sj stats ${id})`
      ])
    }
    if (!report.ok) return yield* new VerificationFailed({ failed: 1, total: 1 })
  })
