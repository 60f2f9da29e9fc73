/**
 * A hooked Claude Code session for the tests of what reads one (`otel export`,
 * the report's call rows): recorded through the hooks' own decision path,
 * `Hook.handle`, with a policy that denies `Write`, at known times (`T0` plus the
 * second each event names): a Bash call with Claude Code's `duration_ms`, an
 * Agent call whose sub-agent reads a file, a denied Write.
 */
import { Hook } from "@session-journal/claude-code"
import { type Entry, Guard, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { TestClock } from "effect/testing"

/** Claude Code's session id. */
export const SID = "5f0e1c2a-7b3d-4e8f-9a10-b2c3d4e5f601"
/** The first event's time, in seconds. */
export const T0 = 1_764_400_000 // seconds
const W = "/tmp/otel/work"

const base = (name: string, extra: Record<string, unknown> = {}) => ({
  session_id: SID,
  transcript_path: `/home/u/.claude/projects/-tmp-otel-work/${SID}.jsonl`,
  cwd: W,
  hook_event_name: name,
  ...extra
})
/** The sub-agent. */
export const sub = { agent_id: "a1b14090cc7d1bd2d", agent_type: "general-purpose" }
/** A PreToolUse input. */
export const pre = (tool: string, input: Record<string, unknown>, id: string, extra: Record<string, unknown> = {}) =>
  base("PreToolUse", { tool_name: tool, tool_input: input, tool_use_id: id, ...extra })
/** A PostToolUse input. */
export const post = (tool: string, id: string, extra: Record<string, unknown> = {}) =>
  base("PostToolUse", { tool_name: tool, tool_input: {}, tool_use_id: id, tool_response: { ok: true }, ...extra })

/** The events: [second after T0, hook input]. */
export const EVENTS: ReadonlyArray<readonly [number, Record<string, unknown>]> = [
  [0, base("SessionStart", { source: "startup" })],
  [1, pre("Bash", { command: "npm test" }, "toolu_bash")],
  [3, post("Bash", "toolu_bash", { duration_ms: 1500 })],
  [4, pre("Agent", { description: "review", prompt: "review the diff" }, "toolu_agent")],
  [5, base("SubagentStart", sub)],
  [6, pre("Read", { file_path: "/tmp/otel/work/a.ts" }, "toolu_read", sub)],
  [7, post("Read", "toolu_read", sub)],
  [8, base("SubagentStop", { ...sub, stop_hook_active: false })],
  [9, post("Agent", "toolu_agent")],
  [10, pre("Write", { file_path: "/etc/passwd", content: "x" }, "toolu_write")],
  [11, base("SessionEnd", { reason: "exit" })]
]

const encoder = new TextEncoder()
const decodeHook = (value: unknown): Hook.HookEvent => {
  const r = Hook.decode(encoder.encode(JSON.stringify(value)))
  if (Result.isFailure(r)) throw new Error(r.failure.message)
  return r.success
}

const journalLayer = (dir: string) => SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: dir })))

/**
 * Records hook events in the journal at `dir` (the session's `EVENTS` unless
 * given); the session's id and all its entries.
 */
export const writeHooked = (
  dir: string,
  events: ReadonlyArray<readonly [number, Record<string, unknown>]> = EVENTS
): Promise<{ session: string; entries: ReadonlyArray<Entry.Entry> }> =>
  Effect.runPromise(
    Effect.gen(function*() {
      let session = ""
      for (const [at, input] of events) {
        yield* TestClock.setTime((T0 + at) * 1000)
        const answer = yield* Hook.handle(decodeHook(input), { policy: Guard.denyList(["Write"]), policyName: "test" })
        session = answer.session
      }
      const journal = yield* SessionJournal.SessionJournal
      const entries = yield* Stream.runCollect(journal.entries(session))
      return { session, entries }
    }).pipe(Effect.provide(Layer.merge(journalLayer(dir), TestClock.layer())))
  )
