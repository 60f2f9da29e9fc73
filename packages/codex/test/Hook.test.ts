/**
 * Codex's hook inputs decoded (every field checked, hostile bytes refused with a
 * reason, never a throw), the session of a Codex session (safe characters only),
 * what each event puts on the chain, the answers (only the forms Codex obeys),
 * and parallel calls decided atomically on one session: eight calls under
 * `maxInvocations(5)` on a real temp-dir journal, exactly five allowed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Persistence, Policy, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Hook from "../src/Hook.ts"

const encoder = new TextEncoder()
const SID = "01a248a4-0d7d-7593-af00-61f2370f3d89"
const base = (name: string, extra: Record<string, unknown> = {}) => ({
  session_id: SID,
  turn_id: "01a248a4-0d92-7000-8000-000000000001",
  transcript_path: `/home/u/.codex/sessions/2026/12/05/rollout-2026-12-05T23-57-20-${SID}.jsonl`,
  cwd: "/tmp/w",
  hook_event_name: name,
  model: "gpt-5.5",
  permission_mode: "bypassPermissions",
  ...extra
})
const pre = (command: string, id: string, extra: Record<string, unknown> = {}) =>
  base("PreToolUse", { tool_name: "Bash", tool_input: { command }, tool_use_id: id, ...extra })

const decode = (value: unknown): Hook.HookEvent => {
  const r = Hook.decode(encoder.encode(JSON.stringify(value)))
  if (Result.isFailure(r)) throw new Error(r.failure.message)
  return r.success
}

const reasonOf = (bytes: Uint8Array, limits?: Hook.Limits): string => {
  const r = Hook.decode(bytes, limits)
  return Result.isFailure(r) ? r.failure.reason : "ok"
}

const memory = SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory()))

describe("Hook.decode", () => {
  it("decodes the inputs PROTOCOL.md (b) shows, an ephemeral run's null transcript_path too", () => {
    assert.strictEqual(decode(pre("echo hi > marker.txt", "call_1")).name, "PreToolUse")
    assert.strictEqual(
      decode(
        base("PostToolUse", { tool_name: "Bash", tool_input: { command: "x" }, tool_response: "", tool_use_id: "c" })
      )
        .name,
      "PostToolUse"
    )
    assert.strictEqual(decode({ ...pre("x", "c"), transcript_path: null }).name, "PreToolUse")
    const stop = decode(base("Stop", { stop_hook_active: false, last_assistant_message: "Done" }))
    assert.strictEqual(stop.name, "Other")
    const sub = decode(pre("ls", "c2", { agent_id: "01a249aa-0000-7000-8000-000000000002", agent_type: "default" }))
    assert.deepStrictEqual(Hook.agentOf(sub.input), {
      agent_id: "01a249aa-0000-7000-8000-000000000002",
      delegation_depth: 1
    })
  })

  it("refuses hostile input with a reason each, naming the event when it can be read", () => {
    assert.strictEqual(reasonOf(new Uint8Array([0x7b, 0xff, 0x7d])), "NotUtf8")
    assert.strictEqual(reasonOf(encoder.encode("[".repeat(10_000) + "]".repeat(10_000))), "TooDeep")
    assert.strictEqual(reasonOf(encoder.encode("{not json")), "NotJson")
    assert.strictEqual(reasonOf(encoder.encode("[1]")), "Invalid")
    assert.strictEqual(reasonOf(new Uint8Array(101), { maxBytes: 100 }), "TooLarge")
    assert.strictEqual(reasonOf(encoder.encode(`{"session_id":"\\ud800","cwd":"/","hook_event_name":"X"}`)), "Invalid")
    for (
      const broken of [
        { ...pre("x", "c"), tool_input: "echo hi" },
        { ...pre("x", "c"), tool_use_id: "" },
        { ...pre("x", "c"), session_id: 7 },
        { ...pre("x", "c"), transcript_path: 1 },
        { ...pre("x", "c"), turn_id: undefined },
        { ...pre("x", "c"), cwd: "" }
      ]
    ) {
      const r = Hook.decode(encoder.encode(JSON.stringify(broken)))
      assert.isTrue(Result.isFailure(r) && r.failure.reason === "Invalid" && r.failure.event === "PreToolUse")
    }
  })

  it("never throws, and any bytes decode or fail with a reason (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const r = Hook.decode(bytes)
        return Result.isSuccess(r) ||
          ["TooLarge", "NotUtf8", "TooDeep", "NotJson", "Invalid"].includes(r.failure.reason)
      }),
      { numRuns: 500 }
    )
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), fc.string(), (junk, key) => {
        const r = Hook.decode(encoder.encode(JSON.stringify({ ...pre("x", "c"), [key]: junk })))
        return Result.isSuccess(r) || r.failure.reason === "Invalid"
      }),
      { numRuns: 300 }
    )
  })
})

describe("Hook.sessionId", () => {
  it("is the thread id when it is safe, a hash otherwise, always a valid session id (property)", () => {
    assert.strictEqual(Hook.sessionId(SID), `codex-${SID}`)
    assert.strictEqual(Hook.rolloutSessionId(SID), `codex-rollout-${SID}`)
    assert.match(Hook.sessionId("../../etc/passwd"), /^codex-_[0-9a-f]{40}$/)
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 200 }),
        (s) =>
          Result.isSuccess(Entry.validateSessionId(Hook.sessionId(s))) &&
          Result.isSuccess(Entry.validateSessionId(Hook.rolloutSessionId(s))) &&
          Hook.sessionId(s) === Hook.sessionId(s)
      ),
      { numRuns: 500 }
    )
  })
})

describe("Hook.handle", () => {
  it.effect("records a PostToolUse as a tool.outcome with the bytes the model got", () =>
    Effect.gen(function*() {
      const post = decode(
        base("PostToolUse", {
          tool_name: "Bash",
          tool_input: { command: "x" },
          tool_response: "héllo\n",
          tool_use_id: "c"
        })
      )
      const answer = yield* Hook.handle(post, { policy: null })
      assert.deepStrictEqual(answer.output, {})
      const journal = yield* SessionJournal.SessionJournal
      const entries = yield* Stream.runCollect(journal.entries(Hook.sessionId(SID)))
      const outcome = entries.find((e) => e.kind === Entry.OUTCOME_KIND)
      assert.isDefined(outcome)
      assert.strictEqual((outcome as unknown as { payload: { bytes_read: number } }).payload.bytes_read, 7)
      const state = yield* journal.state(Hook.sessionId(SID))
      assert.deepStrictEqual(state.meta?.labels, ["codex", "hooked"])
      assert.strictEqual(
        (state.meta?.data as { custody_session?: string } | undefined)?.custody_session,
        `codex-rollout-${SID}`
      )
    }).pipe(Effect.provide(memory)))

  it.effect("denies in the reasoned form Codex obeys, with the decision beside the call", () =>
    Effect.gen(function*() {
      const policy = { denyList: ["Bash"] } as const
      const answer = yield* Hook.handle(decode(pre("rm -rf /", "c1")), {
        policy: Policy.toGuard(policy),
        policyName: Policy.format(policy)
      })
      const out = answer.output["hookSpecificOutput"] as Record<string, string>
      assert.strictEqual(out["hookEventName"], "PreToolUse")
      assert.strictEqual(out["permissionDecision"], "deny")
      assert.isTrue(out["permissionDecisionReason"]!.length > 0)
      const journal = yield* SessionJournal.SessionJournal
      const entries = yield* Stream.runCollect(journal.entries(Hook.sessionId(SID)))
      const tool = entries.find((e) => e.kind === "tool") as Entry.ToolEntry
      assert.strictEqual(tool.allowed, false)
      assert.strictEqual(tool.server_id, "codex")
      const decision = entries.find((e) => e.kind === Hook.DECISION_KIND) as { payload: Record<string, unknown> }
      assert.strictEqual(decision.payload["verdict"], "deny")
      assert.strictEqual(decision.payload["guard"], "denyList([\"Bash\"])")
      assert.strictEqual(decision.payload["tool_sequence"], tool.sequence)
      assert.strictEqual(decision.payload["tool_use_id"], "c1")
      assert.strictEqual(decision.payload["cwd"], pre("x", "c").cwd)
    }).pipe(Effect.provide(memory)))

  it.effect("patterns see the call as Codex sends it: Bash(rm *) denies rm, not ls; an ask is a denial", () =>
    Effect.gen(function*() {
      const policy = Policy.decode({ all: [{ deny: ["Bash(rm *)"] }, { ask: ["apply_patch"] }] })
      if (Result.isFailure(policy)) throw new Error(policy.failure.message)
      const options = { policy: Policy.toGuard(policy.success), policyName: Policy.format(policy.success) }
      const ls = yield* Hook.handle(decode(pre("ls -la", "p1")), options)
      assert.strictEqual(ls.verdict?._tag, "Allow")
      const rm = yield* Hook.handle(decode(pre("cd /tmp && rm -rf x", "p2")), options)
      assert.strictEqual(rm.verdict?._tag, "Deny")
      const patch = yield* Hook.handle(
        decode(
          base("PreToolUse", {
            tool_name: "apply_patch",
            tool_input: { command: "*** Begin Patch" },
            tool_use_id: "p3"
          })
        ),
        options
      )
      assert.strictEqual(patch.verdict?._tag, "Deny")
      assert.strictEqual((patch.output["hookSpecificOutput"] as Record<string, string>)["permissionDecision"], "deny")
    }).pipe(Effect.provide(memory)))

  it("an empty reason is never given: Codex would run the call", () => {
    const out = Hook.denyOutput("  ")["hookSpecificOutput"] as Record<string, string>
    assert.isTrue(out["permissionDecisionReason"]!.trim().length > 0)
    const refused = Hook.refusal("PreToolUse", "journal unwritable")
    assert.strictEqual(refused.exitCode, 0)
    assert.strictEqual(
      (refused.output?.["hookSpecificOutput"] as Record<string, string> | undefined)?.["permissionDecisionReason"],
      "session-journal: journal unwritable"
    )
    assert.strictEqual(Hook.refusal(null, "bad input").exitCode, 2)
  })

  it.live("eight parallel calls under maxInvocations(5) on one session: exactly five allowed", () =>
    Effect.gen(function*() {
      const root = fs.mkdtempSync(path.join(os.tmpdir(), "sj-codex-hook-"))
      // Eight writers, each with its own journal service on one directory, as eight hook processes are.
      const one = (i: number) =>
        Hook.handle(decode(pre(`echo ${i}`, `call_${i}`)), {
          policy: Policy.toGuard({ maxInvocations: 5 }),
          policyName: "maxInvocations(5)"
        }).pipe(
          Effect.provide(
            SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root, lockWait: "20 seconds" })))
          )
        )
      const answers = yield* Effect.all(Array.from({ length: 8 }, (_, i) => one(i)), { concurrency: "unbounded" })
      fs.rmSync(root, { recursive: true, force: true })
      assert.strictEqual(answers.filter((a) => a.verdict?._tag === "Allow").length, 5)
      assert.strictEqual(answers.filter((a) => a.verdict?._tag === "Deny").length, 3)
    }))
})
