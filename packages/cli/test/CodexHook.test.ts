/**
 * `session-journal codex hook` through the command (in process): an allowed call
 * answered `{}`, a denied one in the reasoned deny form, and every path it
 * controls failing closed in that form (bad input, a policy that does not
 * decode, a journal that cannot be written, its own deadline); the fast-path
 * argument parser recognizes `codex hook` and nothing else.
 */
import { assert, describe, it } from "@effect/vitest"
import { Hook } from "@session-journal/codex"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as CodexHook from "../src/commands/CodexHook.ts"
import { hookArgs } from "../src/internal/hookArgs.ts"
import { cleanup, run, tempDir } from "./Run.ts"

afterAll(cleanup)

const SID = "01a248a4-0d7d-7593-af00-61f2370f3d89"
const pre = (command: string, id: string) => ({
  session_id: SID,
  turn_id: "t1",
  transcript_path: null,
  cwd: "/w",
  hook_event_name: "PreToolUse",
  model: "gpt-5.5",
  permission_mode: "bypassPermissions",
  tool_name: "Bash",
  tool_input: { command },
  tool_use_id: id
})

const hook = (root: string, input: string, args: ReadonlyArray<string> = []) =>
  run(["codex", "hook", "--root", root, ...args], { input })

const denial = (stdout: string): string | null => {
  if (stdout === "") return null
  const o = JSON.parse(stdout) as {
    hookSpecificOutput?: { hookEventName?: string; permissionDecision?: string; permissionDecisionReason?: string }
  }
  return o.hookSpecificOutput?.permissionDecision === "deny" && o.hookSpecificOutput.hookEventName === "PreToolUse"
    ? o.hookSpecificOutput.permissionDecisionReason ?? ""
    : null
}

describe("codex hook", () => {
  it("recognizes codex hook on the fast path, and only it", () => {
    assert.deepStrictEqual(hookArgs(["codex", "hook", "--policy", "/p"], "codex")?.policy, "/p")
    assert.isNull(hookArgs(["claude-code", "hook"], "codex"))
    assert.isNull(hookArgs(["codex", "hook"]))
    assert.isNull(hookArgs(["codex", "install"], "codex"))
  })

  it("allows with {} and denies in the reasoned form, journaling both", async () => {
    const dir = tempDir()
    const allowed = await hook(dir, JSON.stringify(pre("ls", "c1")))
    assert.strictEqual(allowed.code, 0, allowed.stderr)
    assert.strictEqual(allowed.stdout, "{}")
    const policy = path.join(dir, "p.json")
    fs.writeFileSync(policy, JSON.stringify({ maxInvocations: 1 }))
    const denied = await hook(dir, JSON.stringify(pre("rm x", "c2")), ["--policy", policy])
    assert.strictEqual(denied.code, 0)
    assert.include(denial(denied.stdout) ?? "", "[maxInvocations(1)]")
    const stats = await run(["--dir", dir, "--json", "stats", Hook.sessionId(SID)])
    const doc = JSON.parse(stats.stdout) as { denials: { denied: number }; custody_session: string }
    assert.strictEqual(doc.denials.denied, 1)
    assert.strictEqual(doc.custody_session, Hook.rolloutSessionId(SID))
    // The rollout's session is not there yet: stats says which command makes it.
    const text = await run(["--dir", dir, "stats", Hook.sessionId(SID)])
    assert.include(text.stdout, "(not archived yet: `session-journal codex archive` makes it)")
  })

  it("what a call read counts in the policy's scoped byte limits: the next matching call is denied, another not", async () => {
    const dir = tempDir()
    const policy = path.join(dir, "p.json")
    fs.writeFileSync(policy, JSON.stringify({ maxBytesRead: 300, of: "Bash(cat *)", per: "1h" }))
    const first = await hook(dir, JSON.stringify(pre("cat big.txt", "c1")), ["--policy", policy])
    assert.strictEqual(first.stdout, "{}", first.stderr)
    const post = {
      ...pre("cat big.txt", "c1"),
      hook_event_name: "PostToolUse",
      tool_response: "x".repeat(1000)
    }
    const posted = await hook(dir, JSON.stringify(post), ["--policy", policy])
    assert.strictEqual(posted.code, 0, posted.stderr)
    const again = await hook(dir, JSON.stringify(pre("cat other.txt", "c2")), ["--policy", policy])
    assert.include(denial(again.stdout) ?? "", `bytes read of ["Bash(cat *)"] per 1h would exceed 300`)
    const ls = await hook(dir, JSON.stringify(pre("ls", "c3")), ["--policy", policy])
    assert.strictEqual(ls.stdout, "{}", ls.stderr)
  })

  it("policy test replays its session: the calls judged with the input and cwd its decisions record", async () => {
    const dir = tempDir()
    for (const [command, id] of [["ls", "c1"], ["cd /tmp && rm -rf x", "c2"]] as const) {
      const hooked = await hook(dir, JSON.stringify(pre(command, id)))
      assert.strictEqual(hooked.code, 0, hooked.stderr)
    }
    const file = path.join(dir, "p.json")
    fs.writeFileSync(file, `{"deny":"Bash(rm -rf *)"}`)
    const r = await run(["--dir", dir, "policy", "test", file, Hook.sessionId(SID)])
    assert.strictEqual(r.code, 5, r.stderr)
    assert.match(
      r.stdout,
      /^#\d+ Bash \(agent main\): the command "rm -rf x" of Bash matches deny pattern Bash\(rm -rf \*\)/
    )
    assert.match(r.stdout, /: 1 of 2 calls would be denied/)
    assert.notInclude(r.stdout, "could not judge")
  })

  it("denies, saying why, whatever it cannot do", async () => {
    const dir = tempDir()
    // Input that is not an event.
    const bad = await hook(dir, "{\"hook_event_name\":\"PreToolUse\",\"session_id\":\"x\"}")
    assert.include(denial(bad.stdout) ?? "", "session-journal: hook input of PreToolUse is invalid")
    // A policy file that does not decode.
    const policy = path.join(dir, "bad.json")
    fs.writeFileSync(policy, "{\"maxStreak\":-1}")
    const badPolicy = await hook(dir, JSON.stringify(pre("ls", "c3")), ["--policy", policy])
    assert.include(denial(badPolicy.stdout) ?? "", "maxStreak")
    // A journal that cannot be written: its directory is a file.
    const file = path.join(dir, "not-a-dir")
    fs.writeFileSync(file, "")
    const unwritable = await hook(file, JSON.stringify(pre("ls", "c4")))
    assert.include(denial(unwritable.stdout) ?? "", "cannot record PreToolUse")
    // Unreadable input denies even without an event name: exit 2 with the reason, which Codex obeys.
    const junk = await hook(dir, "not json")
    assert.strictEqual(junk.code, 2)
    assert.include(junk.stderr, "session-journal: hook input is not JSON")
  })

  it("answers within its deadline, denying with what it was still doing", async () => {
    const never: AsyncIterable<Uint8Array> = {
      [Symbol.asyncIterator]: () => ({ next: () => new Promise<IteratorResult<Uint8Array>>(() => {}) })
    }
    let out = ""
    const outcome = await CodexHook.run(
      {
        root: tempDir(),
        postgres: undefined,
        policy: undefined,
        failOpen: false,
        maxInputBytes: undefined,
        waitMillis: undefined,
        deadlineMillis: 50
      },
      {
        stdin: never,
        stdout: async (t) => void (out += t),
        stderr: async () => {},
        env: {}
      }
    )
    assert.strictEqual(outcome.late, true)
    // The event is not known yet: exit 2 and the reason on stderr, a block for Codex.
    assert.strictEqual(outcome.exitCode, 2)
    assert.include(outcome.refused ?? "", "still reading the hook input")
    assert.strictEqual(out, "")
  })
})
