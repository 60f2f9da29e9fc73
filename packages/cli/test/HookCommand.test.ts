/**
 * `session-journal claude-code hook` run directly, as Claude Code runs it (one
 * process per event, the input on stdin): hostile inputs each get a clear
 * refusal, the hook fails closed on storage it cannot use and on a corrupt
 * session, `--fail-open` opts out, and parallel hooks on one session all get
 * their answers under one policy (eight calls against maxInvocations 5: exactly
 * five allowed). STRESS=1 runs 32 parallel hooks.
 */
import { assert, describe, it } from "@effect/vitest"
import { Hook } from "@session-journal/claude-code"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { hookArgs } from "../src/internal/hookArgs.ts"
import { cleanup, hasNodeAdapter, run, start, tempDir } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()
const STRESS = process.env["STRESS"] === "1"

afterAll(cleanup)

const SID = "0b5c9da4-61e6-438c-8641-7d35b2b57c17"
const event = (name: string, extra: Record<string, unknown> = {}) => ({
  session_id: SID,
  transcript_path: `/home/u/.claude/projects/-w/${SID}.jsonl`,
  cwd: "/w",
  hook_event_name: name,
  ...extra
})
const pre = (tool: string, id: string, extra: Record<string, unknown> = {}) =>
  event("PreToolUse", { tool_name: tool, tool_input: { file_path: "/w/a" }, tool_use_id: id, ...extra })

const sessionOf = (e: Record<string, unknown>) => Hook.sessionId(e as never)

const hook = (root: string, input: string | Uint8Array, args: ReadonlyArray<string> = []) =>
  run(["claude-code", "hook", "--root", root, ...args], { input: input as string })

const denial = (stdout: string): string | null => {
  if (stdout === "") return null
  const o = JSON.parse(stdout) as {
    hookSpecificOutput?: { permissionDecision?: string; permissionDecisionReason?: string }
  }
  return o.hookSpecificOutput?.permissionDecision === "deny"
    ? o.hookSpecificOutput.permissionDecisionReason ?? ""
    : null
}

const show = async (root: string, id: string): Promise<Array<Record<string, unknown>>> => {
  const r = await run(["--dir", root, "--json", "show", id])
  assert.strictEqual(r.code, 0, r.stderr)
  return r.stdout.trim().split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
}

describe("the hook's arguments, recognized before the command tree", () => {
  it("takes exactly a hook invocation and leaves anything else to the command tree", () => {
    assert.deepStrictEqual(
      hookArgs(["--dir", "/j", "claude-code", "hook", "--policy=/p", "--wait", "2s", "--fail-open"]),
      {
        root: "/j",
        postgres: undefined,
        policy: "/p",
        failOpen: true,
        maxInputBytes: undefined,
        waitMillis: 2000,
        deadlineMillis: undefined
      }
    )
    assert.strictEqual(hookArgs(["claude-code", "hook", "--deadline", "1500ms"])?.deadlineMillis, 1500)
    assert.strictEqual(hookArgs(["claude-code", "hook", "--root", "/r", "--max-input-bytes", "10"])?.maxInputBytes, 10)
    for (
      const argv of [
        ["claude-code", "hook", "--help"],
        ["claude-code", "hook", "--policy"],
        ["claude-code", "hook", "--wait", "soon"],
        ["claude-code", "hook", "--root", "/a", "--dir", "/b"],
        ["claude-code", "hook", "extra"],
        ["claude-code", "archive"],
        ["hook"],
        ["claude-code", "hook", "--max-input-bytes", "0"],
        ["claude-code", "hook", "--deadline", "0"],
        ["claude-code", "hook", "--deadline", "later"]
      ]
    ) assert.isNull(hookArgs(argv), argv.join(" "))
  })
})

describe.skipIf(!nodeAdapter)("claude-code hook, run directly", () => {
  it("journals an event and answers {} without a policy", async () => {
    const root = path.join(tempDir(), "j")
    const r = await hook(root, JSON.stringify(pre("Read", "t1")))
    assert.strictEqual(r.code, 0, r.stderr)
    assert.deepStrictEqual(JSON.parse(r.stdout), {})
    const entries = await show(root, sessionOf(pre("Read", "t1")))
    assert.deepStrictEqual(entries.map((e) => e["kind"]), ["tool", "claude-code.decision"])
  })

  it("hostile input: each gets a clear refusal, and nothing is journaled", async () => {
    const root = path.join(tempDir(), "j")
    const cases: Array<[string, string | Uint8Array, RegExp]> = [
      ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0xc3, 0x28, 0x22, 0x7d]), /not valid UTF-8/],
      ["10,000-deep JSON", "[".repeat(10_000) + "]".repeat(10_000), /nested deeper than 128 levels/],
      ["not JSON", "{\"session_id\":", /not JSON/],
      [
        "a PreToolUse without tool_use_id",
        JSON.stringify(event("PreToolUse", { tool_name: "Bash", tool_input: {} })),
        /invalid/
      ]
    ]
    for (const [what, input, reason] of cases) {
      const r = await hook(root, input)
      // A PreToolUse is denied; an input whose event cannot be read is refused with exit 2.
      if (what.startsWith("a PreToolUse")) {
        assert.strictEqual(r.code, 0, what)
        assert.match(denial(r.stdout) ?? "", reason, what)
      } else {
        assert.strictEqual(r.code, 2, what)
        assert.strictEqual(r.stdout, "", what)
      }
      assert.match(r.stderr, reason, what)
    }
    assert.isFalse(fs.existsSync(root) && fs.readdirSync(root).some((n) => n.startsWith("cch-")))
  })

  it("100 MB on stdin is refused after at most the bound, without being read whole", async () => {
    const root = path.join(tempDir(), "j")
    const child = start(["claude-code", "hook", "--root", root, "--max-input-bytes", "1048576"])
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    child.stdout!.on("data", (b: Buffer) => out.push(b))
    child.stderr!.on("data", (b: Buffer) => err.push(b))
    const closed = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
    const chunk = Buffer.alloc(64 * 1024, 0x20)
    let written = 0
    let broken = false
    child.stdin!.on("error", () => {
      broken = true
    })
    while (!broken && written < 100 * 1024 * 1024 && child.exitCode === null) {
      const ok = child.stdin!.write(chunk)
      written += chunk.length
      if (!ok) {
        await new Promise<void>((resolve) => {
          const done = () => resolve()
          child.stdin!.once("drain", done)
          child.once("close", done)
          child.stdin!.once("error", done)
        })
      }
    }
    if (!broken) child.stdin!.end()
    const code = await closed
    assert.strictEqual(code, 2)
    assert.match(Buffer.concat(err).toString(), /longer than the bound of 1 MiB/)
    assert.strictEqual(Buffer.concat(out).toString(), "")
    assert.isBelow(written, 100 * 1024 * 1024, "the hook read all of it")
  })

  it("an unknown event is recorded as such; a forged session_id stays inside the journal", async () => {
    const dir = tempDir()
    const root = path.join(dir, "j")
    const unknown = event("SomethingNew", { detail: [1, { x: "y" }] })
    const r = await hook(root, JSON.stringify(unknown))
    assert.strictEqual(r.code, 0, r.stderr)
    const entries = await show(root, sessionOf(unknown))
    assert.deepStrictEqual(
      entries.map((e) => [e["kind"], (e["payload"] as Record<string, unknown>)["hook_event_name"]]),
      [
        ["claude-code.unknown", "SomethingNew"]
      ]
    )

    const forged = pre("Read", "t1", { session_id: "../../../escaped", transcript_path: "/x/../../../escaped.jsonl" })
    const f = await hook(root, JSON.stringify(forged))
    assert.strictEqual(f.code, 0, f.stderr)
    const id = sessionOf(forged)
    assert.match(id, /^cch-[0-9a-f]{8}-_[0-9a-f]{40}$/)
    assert.deepStrictEqual(fs.readdirSync(dir).sort(), ["j"])
    assert.include(fs.readdirSync(root), id)
    assert.strictEqual((await show(root, id)).length, 2)
  })

  it("fails closed when storage is unusable or the session corrupt; --fail-open lets the call run", async () => {
    const dir = tempDir()
    const file = path.join(dir, "not-a-dir")
    fs.writeFileSync(file, "x")
    const denied = await hook(file, JSON.stringify(pre("Bash", "t1")))
    assert.strictEqual(denied.code, 0)
    assert.match(denial(denied.stdout) ?? "", /^session-journal: cannot record PreToolUse/)
    const stop = await hook(file, JSON.stringify(event("Stop")))
    assert.strictEqual(stop.code, 2)
    assert.match(stop.stderr, /cannot record Stop/)
    const open = await hook(file, JSON.stringify(pre("Bash", "t1")), ["--fail-open"])
    assert.strictEqual(open.code, 1)
    assert.strictEqual(open.stdout, "")
    assert.match(open.stderr, /failing open/)

    // A session whose stored bytes were changed: the last entry (the decision, which
    // names the tool too), where the checkpoint the hook left ends and the next
    // hook's load starts (records before it are vouched for by the checkpoint and
    // checked by verify).
    const root = path.join(dir, "j")
    assert.strictEqual((await hook(root, JSON.stringify(pre("Read", "r1")))).code, 0)
    const sdir = path.join(root, sessionOf(pre("Read", "r1")))
    const segment = fs.readdirSync(sdir).find((n) => n.endsWith(".jsonl"))!
    const bytes = fs.readFileSync(path.join(sdir, segment), "utf8")
    const at = bytes.lastIndexOf("\"Read\"")
    fs.writeFileSync(path.join(sdir, segment), `${bytes.slice(0, at)}"Reed"${bytes.slice(at + 6)}`)
    const corrupt = await hook(root, JSON.stringify(pre("Read", "r2")))
    assert.strictEqual(corrupt.code, 0)
    assert.match(denial(corrupt.stdout) ?? "", /cannot record PreToolUse/)

    // A policy file that does not decode denies too, naming the path.
    const policy = path.join(dir, "bad.json")
    fs.writeFileSync(policy, "{\"maxStreak\":-1}")
    const bad = await hook(path.join(dir, "k"), JSON.stringify(pre("Read", "r3")), ["--policy", policy])
    assert.match(denial(bad.stdout) ?? "", /\$\.maxStreak: expected a non-negative integer/)
  })

  it("waits for a lock another writer holds; past --wait it denies, saying so", async () => {
    const root = path.join(tempDir(), "j")
    const id = sessionOf(pre("Read", "l1"))
    // `import` holds the session's lock while its stdin is open.
    const holder = start(["--dir", root, "import", id])
    holder.stdin!.write("{\"kind\":\"note\",\"payload\":{}}\n")
    const lock = path.join(root, id, "lock")
    while (!fs.existsSync(lock)) await new Promise((resolve) => setTimeout(resolve, 50))
    const timedOut = await hook(root, JSON.stringify(pre("Read", "l1")), ["--wait", "500ms"])
    assert.strictEqual(timedOut.code, 0)
    assert.match(
      denial(timedOut.stdout) ?? "",
      /is locked by another writer \(.*gave up after waiting [\d.]+ s for it\)/,
      timedOut.stdout
    )

    let done = false
    const waiting = hook(root, JSON.stringify(pre("Read", "l2")), ["--wait", "60s"]).finally(() => {
      done = true
    })
    // Long enough for the hook to have started and met the lock (a start from the sources takes seconds).
    await new Promise((resolve) => setTimeout(resolve, 6000))
    assert.isFalse(done, "the hook did not wait for the lock")
    holder.stdin!.end()
    const answered = await waiting
    assert.strictEqual(answered.code, 0, answered.stderr)
    assert.deepStrictEqual(JSON.parse(answered.stdout), {})
    const kinds = (await show(root, id)).map((e) => e["kind"])
    assert.deepStrictEqual(kinds, ["note", "tool", "claude-code.decision"])
  })

  it("an outcome that cannot be journaled as is still counts its bytes: over the bound, too deep, a lone surrogate", async () => {
    const dir = tempDir()
    const policy = path.join(dir, "p.json")
    fs.writeFileSync(policy, JSON.stringify({ maxBytesRead: 1000 }))
    const responses = [
      `{"stdout":"${"x".repeat(2 * 1024 * 1024)}","stderr":""}`,
      "[".repeat(1000) + "]".repeat(1000),
      `{"stdout":"\\ud800${"y".repeat(2000)}","stderr":""}`
    ]
    for (const [i, response] of responses.entries()) {
      const root = path.join(dir, `j${i}`)
      const allowed = await hook(root, JSON.stringify(pre("Bash", `b${i}`)), ["--policy", policy])
      assert.deepStrictEqual(JSON.parse(allowed.stdout), {}, allowed.stderr)
      // As Claude Code writes it, tool_use_id after the response.
      const input = JSON.stringify(event("PostToolUse", { tool_name: "Bash", tool_input: { command: "cat" } }))
        .slice(0, -1) + `,"tool_response":${response},"tool_use_id":"b${i}","duration_ms":5}`
      const posted = await hook(root, input, ["--policy", policy, "--max-input-bytes", "1048576"])
      assert.strictEqual(posted.code, 0, posted.stderr)
      const outcome = (await show(root, sessionOf(pre("Bash", "x")))).find((e) => e["kind"] === "tool.outcome")
      const payload = outcome?.["payload"] as Record<string, unknown> | undefined
      assert.isAbove(Number(payload?.["bytes_read"]), 1000, JSON.stringify(payload))
      assert.isString(payload?.["not_recorded"])
      const next = await hook(root, JSON.stringify(pre("Read", `n${i}`)), ["--policy", policy])
      assert.match(
        denial(next.stdout) ?? "",
        /\[maxBytesRead\(1000\)\]/,
        `case ${i}: ${JSON.stringify(payload)} ${next.stdout}`
      )
    }
  })

  it("the journal lives outside the project by default, and calls that touch it, the policy or the hooks' settings are denied", async () => {
    const home = tempDir()
    const work = path.join(home, "work")
    fs.mkdirSync(path.join(work, ".claude"), { recursive: true })
    const settings = path.join(work, ".claude", "settings.local.json")
    fs.writeFileSync(
      settings,
      JSON.stringify({ hooks: { PreToolUse: [{ hooks: [{ command: "session-journal claude-code hook" }] }] } })
    )
    fs.writeFileSync(path.join(work, ".claude", "settings.json"), "{}")
    const policy = path.join(work, "policy.json")
    fs.writeFileSync(policy, JSON.stringify({ maxInvocations: 100 }))
    const env = { HOME: home, SESSION_JOURNAL_DIR: "", XDG_STATE_HOME: "" }
    const state = path.join(home, ".local", "state", "session-journal")
    const call = (tool: string, input: Record<string, unknown>, id: string, extra: ReadonlyArray<string> = []) =>
      run(["claude-code", "hook", "--policy", policy, ...extra], {
        input: JSON.stringify({ ...pre(tool, id), cwd: work, tool_input: input }),
        env
      })
    const allowed = await call("Bash", { command: "ls" }, "p0")
    assert.deepStrictEqual(JSON.parse(allowed.stdout), {}, allowed.stderr)
    assert.isTrue(
      fs.readdirSync(state).some((n) => n.startsWith("cch-")),
      "the journal is in the user's state directory"
    )
    assert.isFalse(fs.existsSync(path.join(work, ".session-journal")))
    const touches: Array<[string, Record<string, unknown>, RegExp]> = [
      ["Bash", { command: "rm -rf ~/.local/state/session-journal" }, /the journal directory/],
      ["Bash", { command: `truncate -s 0 ${state}/cch-x/segment` }, /the journal directory/],
      ["Write", { file_path: "policy.json", content: "{}" }, /the policy file/],
      [
        "Edit",
        { file_path: `${work}/./.claude/../.claude/settings.local.json`, old_string: "a", new_string: "b" },
        /settings that hold the hooks/
      ],
      ["Bash", { command: "echo {} > .claude/settings.local.json" }, /settings that hold the hooks/]
    ]
    for (const [i, [tool, input, what]] of touches.entries()) {
      const denied = await call(tool, input, `p${i + 1}`)
      assert.match(denial(denied.stdout) ?? "", what, JSON.stringify(input))
      assert.match(denial(denied.stdout) ?? "", /\[selfProtection\]$/)
    }
    // User settings kept in a dotfiles repository through a link: protected where they lead too.
    fs.mkdirSync(path.join(home, "dotfiles"))
    fs.mkdirSync(path.join(home, ".claude"))
    fs.writeFileSync(path.join(home, "dotfiles", "claude.json"), fs.readFileSync(settings))
    fs.symlinkSync(path.join(home, "dotfiles", "claude.json"), path.join(home, ".claude", "settings.json"))
    const linked = await call("Write", { file_path: path.join(home, "dotfiles", "claude.json"), content: "{}" }, "p8")
    assert.match(denial(linked.stdout) ?? "", /settings that hold the hooks.*\[selfProtection\]$/)
    // A settings file without our hooks is the user's own business.
    const own = await call("Write", { file_path: ".claude/settings.json", content: "{}" }, "p9")
    assert.deepStrictEqual(JSON.parse(own.stdout), {})
    const off = await call("Write", { file_path: "policy.json", content: "{}" }, "p10", ["--no-self-protection"])
    assert.deepStrictEqual(JSON.parse(off.stdout), {})
    const stats = await run(["--dir", state, "stats", sessionOf({ ...pre("Bash", "p0"), cwd: work })])
    assert.match(stats.stdout, /selfProtection/)
  })

  it("answers within its deadline whatever holds it: a session locked by another writer, a policy that is a FIFO", async () => {
    const dir = tempDir()
    const root = path.join(dir, "j")
    const id = sessionOf(pre("Read", "d1"))
    const holder = start(["--dir", root, "import", id])
    holder.stdin!.write("{\"kind\":\"note\",\"payload\":{}}\n")
    const lock = path.join(root, id, "lock")
    while (!fs.existsSync(lock)) await new Promise((resolve) => setTimeout(resolve, 50))
    // The lock wait alone would last a minute: the deadline answers first, as a
    // process ends (a file operation stuck in the kernel would keep Node from exiting).
    const late = await run(
      ["claude-code", "hook", "--root", root, "--wait", "60s", "--deadline", "3s"],
      { input: JSON.stringify(pre("Read", "d1")), process: true }
    )
    assert.match(
      denial(late.stdout) ?? "",
      /no decision within the hook's deadline of 3000 ms \(still (recording PreToolUse in the journal|reading the hook input|starting)\)/,
      late.stdout + late.stderr
    )
    // Nothing was stuck in the kernel, so the process exited with the answer's code.
    assert.strictEqual(late.code, 0, late.stderr)
    holder.stdin!.end()

    // A policy path that is a FIFO (no writer ever opens it) is refused at once.
    const fifo = path.join(dir, "policy.fifo")
    execFileSync("mkfifo", [fifo])
    const refused = await hook(path.join(dir, "k"), JSON.stringify(pre("Read", "d2")), ["--policy", fifo])
    assert.strictEqual(refused.code, 0, refused.stderr)
    assert.match(denial(refused.stdout) ?? "", /not a regular file/)
  })

  it(`parallel hooks on one session: every one answered, maxInvocations holds (${STRESS ? 32 : 8} calls)`, async () => {
    const dir = tempDir()
    const root = path.join(dir, "j")
    const policy = path.join(dir, "p.json")
    fs.writeFileSync(policy, JSON.stringify({ maxInvocations: 5 }))
    const n = STRESS ? 32 : 8
    const results = await Promise.all(
      Array.from({ length: n }, (_, i) => hook(root, JSON.stringify(pre("Read", `t${i}`)), ["--policy", policy]))
    )
    for (const r of results) assert.strictEqual(r.code, 0, r.stderr)
    const reasons = results.map((r) => denial(r.stdout))
    assert.strictEqual(reasons.filter((d) => d === null).length, 5)
    for (const d of reasons.filter((d) => d !== null)) {
      assert.strictEqual(d, "invocations would exceed 5 [maxInvocations(5)]")
    }
    const entries = await show(root, sessionOf(pre("Read", "t0")))
    const tools = entries.filter((e) => e["kind"] === "tool")
    assert.strictEqual(tools.length, n)
    assert.deepStrictEqual(tools.map((t) => t["allowed"]), [...Array(5).fill(true), ...Array(n - 5).fill(false)])
    // Each decision right after its call.
    for (let i = 0; i < entries.length; i += 2) {
      assert.strictEqual(entries[i]!["kind"], "tool")
      assert.strictEqual(
        (entries[i + 1]!["payload"] as Record<string, unknown>)["tool_sequence"],
        entries[i]!["sequence"]
      )
    }
    const verified = await run(["--dir", root, "verify", sessionOf(pre("Read", "t0"))])
    assert.strictEqual(verified.code, 0, verified.stderr)
  }, STRESS ? 600_000 : 120_000)
})
