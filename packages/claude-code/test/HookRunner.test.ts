/**
 * The command hook as a library (`HookRunner.run`), in process: the options the
 * command line gives as values (the policy file and how to read it, the journal
 * or why there is none), each failure a refusal in the event's form, and the
 * decision itself `Hook.handle`'s (an in-memory journal).
 */
import { Persistence, Policy } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { assert, describe, it } from "vitest"
import * as HookRunner from "../src/HookRunner.ts"

const SID = "5d0f3a6e-2b71-4c55-9a0e-7f1c2d3e4b5a"

const preToolUse = (tool: string) =>
  JSON.stringify({
    session_id: SID,
    transcript_path: `/nonexistent/.claude/projects/-w/${SID}.jsonl`,
    cwd: "/nonexistent/w",
    hook_event_name: "PreToolUse",
    tool_name: tool,
    tool_input: { command: "ls" },
    tool_use_id: "toolu_01"
  })

const memory: HookRunner.Journal = { layer: Persistence.layerMemory(), dir: null }

const runHook = async (input: string, options: Partial<HookRunner.Options> = {}) => {
  const out: Array<string> = []
  const err: Array<string> = []
  const outcome = await HookRunner.run({
    failOpen: false,
    noSelfProtection: true,
    policyFile: undefined,
    loadPolicy: () => Effect.die("no policy file was named"),
    journal: () => Promise.resolve(memory),
    stateDir: undefined,
    ...options
  }, {
    stdin: (async function*() {
      yield new TextEncoder().encode(input)
    })(),
    stdout: (text) => Promise.resolve(void out.push(text)),
    stderr: (text) => Promise.resolve(void err.push(text)),
    env: {}
  })
  return { outcome, stdout: out.join(""), stderr: err.join("") }
}

const policy = (text: string): Policy.Policy => Result.getOrThrow(Policy.decodeText(text))

describe("HookRunner.run", () => {
  it("records a call and answers {} without a policy", async () => {
    const r = await runHook(preToolUse("Bash"))
    assert.strictEqual(r.outcome.exitCode, 0)
    assert.isNull(r.outcome.refused)
    assert.deepStrictEqual(JSON.parse(r.stdout), {})
  })

  it("decides with the policy the caller reads, through Hook.handle", async () => {
    const read: Array<string> = []
    const r = await runHook(preToolUse("Bash"), {
      policyFile: "policy.json",
      loadPolicy: (file) => Effect.sync(() => (read.push(file), policy(`[{"denyList":["Bash"]}]`)))
    })
    assert.deepStrictEqual(read, ["policy.json"])
    assert.strictEqual(r.outcome.exitCode, 0)
    assert.isNull(r.outcome.refused)
    assert.match(r.stdout, /"permissionDecision":"deny"/)
    assert.match(r.stdout, /denyList/)
  })

  it("refuses (a PreToolUse denied) when the policy cannot be read or there is no journal", async () => {
    const unread = await runHook(preToolUse("Read"), {
      policyFile: "policy.json",
      loadPolicy: () => Effect.fail(new Error("invalid policy.json: not JSON"))
    })
    assert.strictEqual(unread.outcome.refused, "invalid policy.json: not JSON")
    assert.match(unread.stdout, /"permissionDecision":"deny"/)
    const nowhere = await runHook(preToolUse("Read"), { journal: () => Promise.resolve("no journal directory here") })
    assert.strictEqual(nowhere.outcome.refused, "no journal directory here")
    assert.match(nowhere.stdout, /no journal directory here/)
  })

  it("refuses an input over its bound, and fails open only when told to", async () => {
    const long = await runHook(preToolUse("Bash"), { maxInputBytes: 100 })
    assert.strictEqual(long.outcome.refused, "invalid hook input: longer than the bound of 100 bytes")
    const open = await runHook(preToolUse("Bash"), { maxInputBytes: 100, failOpen: true })
    assert.strictEqual(open.outcome.exitCode, 1)
    assert.strictEqual(open.stdout, "")
    assert.match(open.stderr, /failing open/)
  })
})
