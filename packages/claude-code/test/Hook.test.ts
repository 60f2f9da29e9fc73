/**
 * The hook module on its own: decoding of hostile and well-formed inputs, the
 * session id of a Claude Code session, and what `handle` puts on the chain
 * (in-memory storage).
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Guard, Persistence, Policy, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import * as AgentDepth from "../src/AgentDepth.ts"
import * as Hook from "../src/Hook.ts"
import { decode, inputsOf } from "./hookInputs.ts"

const encoder = new TextEncoder()
const SID = "0b5c9da4-61e6-438c-8641-7d35b2b57c17"
const { base, pre } = inputsOf(SID)

const reasonOf = (bytes: Uint8Array, limits?: Hook.Limits): string => {
  const r = Hook.decode(bytes, limits)
  return Result.isFailure(r) ? r.failure.reason : "ok"
}

const layer = SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory()))

describe("Hook.decode", () => {
  it("refuses hostile input with a reason each", () => {
    assert.strictEqual(reasonOf(new Uint8Array([0x7b, 0xff, 0x7d])), "NotUtf8")
    assert.strictEqual(reasonOf(encoder.encode("[".repeat(10_000) + "]".repeat(10_000))), "TooDeep")
    assert.strictEqual(reasonOf(encoder.encode(JSON.stringify(base("PreToolUse", { tool_input: {} })))), "Invalid")
    assert.strictEqual(reasonOf(encoder.encode("{not json")), "NotJson")
    assert.strictEqual(reasonOf(encoder.encode("[1]")), "Invalid")
    assert.strictEqual(reasonOf(new Uint8Array(101), { maxBytes: 100 }), "TooLarge")
    // A lone surrogate cannot be journaled (its hash would not be injective).
    assert.strictEqual(reasonOf(encoder.encode(`{"session_id":"\\ud800","cwd":"/","hook_event_name":"X"}`)), "Invalid")
    const bad = Hook.decode(encoder.encode(JSON.stringify(base("PreToolUse", { tool_name: "Bash", tool_input: {} }))))
    assert.isTrue(Result.isFailure(bad) && bad.failure.event === "PreToolUse")
  })

  it("keeps an unknown event as Unknown, with its raw input", () => {
    const e = decode(base("BrandNewEvent", { x: [1, 2] }))
    assert.strictEqual(e.name, "Unknown")
    assert.deepStrictEqual(Hook.entryOf(e as Exclude<Hook.HookEvent, { name: "PreToolUse" }>), {
      kind: Hook.UNKNOWN_KIND,
      payload: base("BrandNewEvent", { x: [1, 2] }) as never
    })
  })

  it("is total over any bytes (property)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        const r = Hook.decode(bytes)
        return Result.isSuccess(r) || r.failure._tag === "HookError"
      }),
      { seed: Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31), verbose: true }
    )
  })
})

describe("Hook.sessionId", () => {
  it("is cch-<P>-<session>, P shared with custody's id of the transcript", () => {
    const e = decode(base("Stop"))
    const id = Hook.sessionId(e.input)
    assert.match(id, new RegExp(`^cch-[0-9a-f]{8}-${SID}$`))
    assert.strictEqual(Hook.custodySessionId(e.input), `cc-${id.slice(4)}`)
  })

  it("a forged session_id with path characters stays a plain id", () => {
    for (const forged of ["../../etc/passwd", "a/b", "..", "x".repeat(300), "CON", "é"]) {
      const id = Hook.sessionId(decode({ ...base("Stop"), session_id: forged }).input)
      assert.isTrue(Entry.isSessionId(id), id)
      assert.match(id, /^cch-[0-9a-f]{8}-(_[0-9a-f]{40}|CON)$/)
    }
  })

  it("falls back to the encoded cwd when the transcript path does not name the session", () => {
    const a = Hook.sessionId(decode({ ...base("Stop"), transcript_path: "/elsewhere/other.jsonl" }).input)
    const b = Hook.sessionId(decode({ ...base("Stop"), transcript_path: undefined }).input)
    assert.strictEqual(a, b)
    assert.strictEqual(a, Hook.sessionId(decode(base("Stop")).input))
  })
})

describe("Hook.handle", () => {
  it.effect("journals a call, its decision beside it, its outcome's bytes in the counters", () =>
    Effect.gen(function*() {
      const policy = Policy.toGuard({ all: [{ maxInvocations: 2 }, { denyList: ["Write"] }] })
      const options = { policy, policyName: "p" }
      const started = yield* Hook.handle(decode(base("SessionStart", { source: "startup" })), options)
      const read = yield* Hook.handle(decode(pre("Read", { file_path: "/a" }, "t1")), options)
      assert.deepStrictEqual(read.output, {})
      yield* Hook.handle(
        decode(base("PostToolUse", {
          tool_name: "Read",
          tool_input: { file_path: "/a" },
          tool_use_id: "t1",
          tool_response: { type: "text", file: { content: "alpha" } },
          duration_ms: 3
        })),
        options
      )
      const write = yield* Hook.handle(decode(pre("Write", { file_path: "/b", content: "x" }, "t2")), options)
      assert.deepStrictEqual(write.output, Hook.denyOutput("Write is on the deny list [denyList([\"Write\"])]"))
      const sub = yield* Hook.handle(
        decode(pre("mcp__files__read", {}, "t3", { agent_id: "a1b2", agent_type: "general-purpose" })),
        options
      )
      assert.strictEqual(sub.verdict?._tag, "Deny")
      assert.strictEqual(started.session, read.session)

      const journal = yield* SessionJournal.SessionJournal
      const entries = yield* Stream.runCollect(journal.entries(read.session))
      assert.deepStrictEqual(entries.map((e) => e.kind), [
        "claude-code.SessionStart",
        "tool",
        Hook.DECISION_KIND,
        Entry.OUTCOME_KIND,
        "tool",
        Hook.DECISION_KIND,
        "tool",
        Hook.DECISION_KIND
      ])
      const tools = entries.filter(Entry.isTool)
      assert.deepStrictEqual(tools.map((t) => [t.tool_name, t.server_id, t.agent_id, t.delegation_depth, t.allowed]), [
        ["Read", "claude-code", "main", 0, true],
        ["Write", "claude-code", "main", 0, false],
        ["mcp__files__read", "files", "a1b2", 1, false]
      ])
      const decision = entries[5] as Entry.OtherEntry
      assert.deepInclude(decision.payload as object, {
        tool_use_id: "t2",
        verdict: "deny",
        guard: "denyList([\"Write\"])",
        tool_sequence: tools[1]!.sequence
      })
      const state = yield* journal.state(read.session)
      // A Read's outcome counts the content it returned.
      assert.strictEqual(state.data_flow.total_bytes_read, BigInt("alpha".length))
      assert.strictEqual(state.data_flow.total_invocations, 3n)
      assert.strictEqual(
        (state.meta?.data as { custody_session?: string } | undefined)?.custody_session,
        `cc-${read.session.slice(4)}`
      )
      const verified = yield* journal.verify(read.session)
      assert.strictEqual(verified.entriesChecked, 8)
    }).pipe(Effect.provide(layer)))

  it.effect("maxBytesRead sees the outcome of an earlier Read", () =>
    Effect.gen(function*() {
      const options = { policy: Guard.maxBytesRead(10) }
      const first = yield* Hook.handle(decode(pre("Read", {}, "r1")), options)
      assert.strictEqual(first.verdict?._tag, "Allow")
      yield* Hook.handle(
        decode(
          base("PostToolUse", { tool_name: "Read", tool_input: {}, tool_use_id: "r1", tool_response: "x".repeat(20) })
        ),
        options
      )
      const second = yield* Hook.handle(decode(pre("Read", {}, "r2")), options)
      assert.strictEqual(second.verdict?._tag, "Deny")
    }).pipe(Effect.provide(layer)))
})

describe("Hook.handle and a sub-agent's depth", () => {
  it.effect("records the real depth; an unknown one denies what a guard would deny deeper, saying why", () =>
    Effect.gen(function*() {
      const policy = Policy.toGuard({ maxDelegationDepth: 1 })
      const sub = { agent_id: "a1b2", agent_type: "general-purpose" }
      const known = yield* Hook.handle(decode(pre("Bash", { command: "ls" }, "d1", sub)), {
        policy,
        depth: { _tag: "Known", depth: 2 }
      })
      assert.strictEqual(known.verdict?._tag, "Deny")
      // Other agents: a depth recorded for one is a floor for it (the test below).
      const shallow = yield* Hook.handle(decode(pre("Bash", { command: "ls" }, "d2", { ...sub, agent_id: "b1" })), {
        policy,
        depth: { _tag: "Known", depth: 1 }
      })
      assert.strictEqual(shallow.verdict?._tag, "Allow")
      const unknown = yield* Hook.handle(decode(pre("Bash", { command: "ls" }, "d3", { ...sub, agent_id: "c1" })), {
        policy,
        depth: { _tag: "Unknown", reason: "its meta file cannot be opened (ENOENT)" }
      })
      const v = unknown.verdict
      assert.strictEqual(v?._tag, "Deny")
      assert.match(v?._tag === "Deny" ? v.reason : "", /cannot be known \(its meta file cannot be opened/)
      assert.strictEqual(v?._tag === "Deny" ? v.guard : "", "maxDelegationDepth(1)")
      // Without a guard on depth, an unknown depth decides nothing.
      const free = yield* Hook.handle(decode(pre("Bash", { command: "ls" }, "d4", { ...sub, agent_id: "d1" })), {
        policy: Policy.toGuard({ maxInvocations: 10 }),
        depth: { _tag: "Unknown", reason: "x" }
      })
      assert.strictEqual(free.verdict?._tag, "Allow")
      const journal = yield* SessionJournal.SessionJournal
      const tools = (yield* Stream.runCollect(journal.entries(known.session))).filter(Entry.isTool)
      assert.deepStrictEqual(tools.map((t) => t.delegation_depth), [2, 1, 1, 1])
    }).pipe(Effect.provide(layer)))

  it.effect("never lowers a depth it recorded for an agent; a sub-agent is deeper than its recorded parent", () =>
    Effect.gen(function*() {
      const policy = Policy.toGuard({ maxDelegationDepth: 1 })
      const sub = { agent_id: "a1b2", agent_type: "general-purpose" }
      const call = (id: string, depth: AgentDepth.Depth, agent = sub) =>
        Hook.handle(decode(pre("Bash", { command: "ls" }, id, agent)), { policy, depth })
      assert.strictEqual((yield* call("m1", { _tag: "Known", depth: 2 })).verdict?._tag, "Deny")
      // The agent rewrote its meta file: depth 1 is a claim below what was recorded.
      const lowered = yield* call("m2", { _tag: "Known", depth: 1 })
      const v = lowered.verdict
      assert.strictEqual(v?._tag, "Deny")
      assert.strictEqual(v?._tag === "Deny" ? v.guard : "", "maxDelegationDepth(1)")
      // Unknown (the meta file removed): still at least the recorded depth.
      assert.strictEqual((yield* call("m3", { _tag: "Unknown", reason: "gone" })).verdict?._tag, "Deny")
      // A sub-agent of a recorded agent is at least one deeper, whatever its own file says.
      const child = { agent_id: "c3d4", agent_type: "general-purpose" }
      const deeper = yield* call("m4", { _tag: "Known", depth: 1, parent: "a1b2" }, child)
      assert.strictEqual(deeper.verdict?._tag, "Deny")
      // Another agent is not raised by them.
      const other = yield* call("m5", { _tag: "Known", depth: 1 }, { agent_id: "e5f6", agent_type: "x" })
      assert.strictEqual(other.verdict?._tag, "Allow")
      const journal = yield* SessionJournal.SessionJournal
      const entries = yield* Stream.runCollect(journal.entries(lowered.session))
      const tools = entries.filter(Entry.isTool)
      assert.deepStrictEqual(tools.map((t) => t.delegation_depth), [2, 2, 2, 3, 1])
      const claimed = entries.flatMap((e) =>
        Entry.isTool(e) || e.kind !== Hook.DECISION_KIND
          ? []
          : [(e.payload as Record<string, unknown>)["delegation_depth_claimed"]]
      )
      assert.deepStrictEqual(claimed, [undefined, 1, undefined, 1, undefined])
    }).pipe(Effect.provide(layer)))

  it("AgentDepth.atLeast over any claims: an agent's depth never goes down, a child is below its parent", () => {
    const claim = fc.record({
      agent: fc.constantFrom("a", "b", "c"),
      depth: fc.oneof(
        fc.record({ _tag: fc.constant("Known" as const), depth: fc.integer({ min: 1, max: 6 }) }),
        fc.record({
          _tag: fc.constant("Known" as const),
          depth: fc.integer({ min: 1, max: 6 }),
          parent: fc.constantFrom("a", "b", "c")
        }),
        fc.record({ _tag: fc.constant("Unknown" as const), reason: fc.constant("gone") })
      )
    })
    fc.assert(
      fc.property(fc.array(claim, { maxLength: 30 }), (claims) => {
        let recorded: AgentDepth.Recorded = {}
        for (const claimed of claims) {
          const agent = claimed.agent
          const depth: AgentDepth.Depth = claimed.depth
          const judged = AgentDepth.atLeast(depth, recorded, agent)
          const d = AgentDepth.recordedDepth(judged)
          assert.isAtLeast(d, recorded[agent] ?? 1)
          assert.isAtLeast(d, AgentDepth.recordedDepth(depth))
          if (depth._tag === "Known" && depth.parent !== undefined && recorded[depth.parent] !== undefined) {
            assert.isAbove(d, recorded[depth.parent]!)
          }
          recorded = AgentDepth.recordDepth(recorded, agent, judged) ?? recorded
          assert.strictEqual(recorded[agent], Math.max(d, recorded[agent] ?? 0))
        }
      }),
      { seed: Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31), verbose: true }
    )
  })

  it("AgentDepth.parse and metaFile: spawnDepth or why not; ids never make a path", () => {
    assert.deepStrictEqual(AgentDepth.parse("{\"spawnDepth\":2,\"parentAgentId\":\"a\"}"), {
      _tag: "Known",
      depth: 2,
      parent: "a"
    })
    assert.deepStrictEqual(AgentDepth.parse("{\"spawnDepth\":2,\"parentAgentId\":\"../a\"}"), {
      _tag: "Known",
      depth: 2
    })
    assert.strictEqual(AgentDepth.parse("{\"spawnDepth\":0}")._tag, "Unknown")
    assert.strictEqual(AgentDepth.parse("{\"spawnDepth\":\"2\"}")._tag, "Unknown")
    assert.strictEqual(AgentDepth.parse("nope")._tag, "Unknown")
    assert.strictEqual(
      AgentDepth.metaFile({ session_id: SID, transcript_path: `/p/-w/${SID}.jsonl`, agent_id: "a1b2" }),
      `/p/-w/${SID}/subagents/agent-a1b2.meta.json`
    )
    assert.isNull(AgentDepth.metaFile({ session_id: SID, transcript_path: `/p/${SID}.jsonl`, agent_id: "../x" }))
    assert.isNull(AgentDepth.metaFile({ session_id: "a/b", transcript_path: "/p/t.jsonl", agent_id: "a" }))
    assert.isNull(AgentDepth.metaFile({ session_id: SID, transcript_path: "rel/t.jsonl", agent_id: "a" }))
  })
})

describe("Hook.responseBytes", () => {
  it("counts what the call returned to the agent", () => {
    assert.strictEqual(Hook.responseBytes("Read", { type: "text", file: { filePath: "/a", content: "é\n" } }), 3)
    assert.strictEqual(Hook.responseBytes("Bash", { stdout: "hi", stderr: "no", interrupted: false }), 4)
    assert.strictEqual(Hook.responseBytes("Write", { type: "create", filePath: "/a", content: "x".repeat(100) }), 0)
    assert.strictEqual(Hook.responseBytes("Edit", { filePath: "/a", oldString: "a", newString: "b" }), 0)
    assert.strictEqual(Hook.responseBytes("Glob", { filenames: ["a"] }), JSON.stringify({ filenames: ["a"] }).length)
    assert.strictEqual(Hook.responseBytes("mcp__x__y", "text"), 4)
  })
})

describe("Hook.refusal", () => {
  it("denies a PreToolUse, exits 2 for the rest", () => {
    const p = Hook.refusal("PreToolUse", "storage failed")
    assert.strictEqual(p.exitCode, 0)
    assert.deepStrictEqual(p.output, Hook.denyOutput("session-journal: storage failed"))
    const other = Hook.refusal("Stop", "storage failed")
    assert.strictEqual(other.exitCode, 2)
    assert.isNull(other.output)
    assert.strictEqual(Hook.refusal(null, "x").exitCode, 2)
    // A Stop kept going once is not kept going again.
    assert.strictEqual(Hook.refusal("Stop", "x", { stopHookActive: true }).exitCode, 1)
    assert.strictEqual(Hook.refusal("PostToolUse", "x", { stopHookActive: true }).exitCode, 2)
  })
})
