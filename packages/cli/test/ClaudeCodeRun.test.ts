/**
 * `session-journal claude-code run` against the real Claude Code CLI 2.1.328,
 * offline (the fake Messages API of `@session-journal/claude-code`'s tests):
 * prompts from the arguments with a policy that denies Bash (the command never
 * runs, the conversation and the final line are printed, every line and the
 * denied call are on the journal); prompts from stdin with `--json`; Ctrl-C sent
 * to the command's process group as a terminal sends it (the CLI is in a group of
 * its own, so only the command gets it): the first interrupts the turn the CLI is
 * in the middle of requesting, the next prompt still runs, and the exit is 1
 * because a turn ended in error; a second Ctrl-C during a turn ends the session
 * with 130 and no CLI process left; a CLI that cannot start is exit 70.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as ClaudeRun from "./claudeRun.ts"
import { common } from "./claudeRun.ts"
import { alive, BIN, exited, hasNodeAdapter, runProcess as run, waitForLine } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()

afterAll(Claude.cleanup)

const setup = (script: Fake.Script) => ClaudeRun.setup(script, "sj-ccrun-")

describe.skipIf(Claude.CLAUDE_BIN === null || !nodeAdapter)("claude-code run against the real CLI", () => {
  it("prompts from arguments with a policy denying Bash: the conversation, the final line, exit 0, all journaled", async () => {
    let work = ""
    // One conversation: the second prompt's request carries the first turn.
    const s = await setup((r) =>
      [
        Fake.tools(Fake.bash(`echo ran > ${path.join(work, "ran.txt")}`)),
        Fake.text("the first answer"),
        Fake.text("the second answer")
      ][r.index]
    )
    work = s.work
    try {
      const policy = path.join(s.root, "policy.json")
      fs.writeFileSync(policy, JSON.stringify({ denyList: ["Bash"] }))
      const r = await run(
        [...common(s), "--session", "cc-run", "--policy", policy, "--tools", "Bash", "first prompt", "second prompt"],
        { env: s.env }
      )
      assert.strictEqual(r.code, 0, r.stderr)
      const out = r.stdout.split("\n")
      assert.isTrue(out.some((l) => l.startsWith("> Bash ") && l.includes("echo ran")), r.stdout)
      assert.include(r.stdout, "the first answer\n")
      assert.include(r.stdout, "the second answer\n", r.stdout)
      assert.isBelow(r.stdout.indexOf("the first answer"), r.stdout.indexOf("the second answer"))
      assert.match(
        out.at(-2)!,
        /^result: success, 2 turns, \$\d+\.\d{4}, Claude Code session [0-9a-f-]{36}, journal session cc-run$/
      )
      assert.isFalse(fs.existsSync(path.join(s.work, "ran.txt")), "the denied command ran")
      const told = s.api.requests.flatMap((q) => q.toolResults).map((b) => JSON.stringify(b))
      assert.isTrue(told.some((t) => t.includes("Bash is on the deny list")), told.join("\n"))
      const shown = await run(["--dir", s.journal, "--json", "show", "cc-run"])
      assert.strictEqual(shown.code, 0, shown.stderr)
      const entries = shown.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>)
      const tools = entries.filter((e) => e["type"] === "tool" || "tool_name" in e)
      assert.strictEqual(tools.length, 1, shown.stdout.slice(0, 2000))
      assert.strictEqual(tools[0]!["allowed"], false)
      const lines = entries.filter((e) => e["kind"] === "claude-code.session.line")
      assert.isAtLeast(lines.length, 8)
      const verified = await run(["--dir", s.journal, "verify", "cc-run"])
      assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
    } finally {
      await s.api.close()
    }
  })

  it("prompts from stdin with --json: every message as a JSON line, then the summary", async () => {
    const s = await setup(Fake.inOrder([Fake.text("from stdin")]))
    try {
      const r = await run([...common(s).slice(0, 2), "--json", ...common(s).slice(2)], {
        env: s.env,
        input: "\n  \nhello there\n"
      })
      assert.strictEqual(r.code, 0, r.stderr)
      const lines = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, any>)
      // The prompt comes first, after at most the CLI's answer to the hooks' initialize.
      const prompt = lines.findIndex((l) => l["from"] === "driver")
      assert.strictEqual(lines[prompt]!["message"]["type"], "user")
      assert.isTrue(
        lines.slice(0, prompt).every((l) => l["from"] === "cli" && l["message"]["type"] === "control_response"),
        JSON.stringify(lines.slice(0, prompt + 1))
      )
      assert.isAtMost(prompt, 1)
      assert.isTrue(lines.some((l) => l["message"]?.["type"] === "assistant"))
      const summary = lines.at(-1)!
      assert.deepStrictEqual(
        { type: summary["type"], ended: summary["ended"], turns: summary["turns"], errors: summary["errors"] },
        { type: "summary", ended: "success", turns: 1, errors: 0 }
      )
      // One prompt: the blank lines were skipped.
      assert.strictEqual(lines.filter((l) => l["from"] === "driver" && l["message"]["type"] === "user").length, 1)
    } finally {
      await s.api.close()
    }
  })

  it(
    "Ctrl-C mid-request interrupts the turn through the protocol, the next prompt runs, exit 1; a second Ctrl-C ends it with 130",
    async () => {
      const first = Fake.hold()
      const third = Fake.hold()
      const s = await setup(Fake.inOrder([first, Fake.text("after the interrupt"), third]))
      try {
        // Detached: a process group of its own, as a shell gives a foreground job.
        const child = spawn(process.execPath, [BIN, ...common(s)], {
          env: s.env,
          detached: true,
          stdio: ["pipe", "pipe", "pipe"]
        })
        let stderr = ""
        child.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
        const ctrlC = () => process.kill(-child.pid!, "SIGINT")
        child.stdin.write("one\n")
        await first.started
        ctrlC()
        await waitForLine(child, (l) => l.startsWith("[turn ended: error_during_execution"))
        assert.strictEqual(await first.ended, "closed")
        assert.include(stderr, "interrupting the turn")
        const claudePid = Number(fs.readFileSync(s.pidFile, "utf8").trim())
        assert.isTrue(alive(claudePid), "the first Ctrl-C ended the CLI")
        child.stdin.write("two\n")
        await waitForLine(child, (l) => l === "after the interrupt")
        child.stdin.write("three\n")
        await third.started
        ctrlC()
        await new Promise((r) => setTimeout(r, 300))
        ctrlC()
        const code = await exited(child)
        assert.strictEqual(code, 130, stderr)
        assert.isFalse(alive(claudePid), "the CLI outlived the command")
        // The journal holds the whole session, interrupt included, and verifies.
        const shown = await run(["--dir", s.journal, "list"])
        assert.strictEqual(shown.code, 0, shown.stderr)
        const id = /claude-code-run-[A-Za-z0-9-]+/.exec(shown.stdout)?.[0]
        assert.isDefined(id, shown.stdout)
        const verified = await run(["--dir", s.journal, "verify", id!])
        assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
      } finally {
        await s.api.close()
      }
      // Three turns of the real CLI and two interrupts: on a loaded machine a minute is not enough.
    },
    180_000
  )

  it("a turn ended by Ctrl-C makes the exit 1 once the prompts are done", async () => {
    const first = Fake.hold()
    const s = await setup(Fake.inOrder([first, Fake.text("second")]))
    try {
      const child = spawn(process.execPath, [BIN, ...common(s), "one", "two"], {
        env: s.env,
        detached: true,
        stdio: ["pipe", "pipe", "pipe"]
      })
      let stdout = ""
      let stderr = ""
      child.stdout.on("data", (b: Buffer) => (stdout += b.toString("utf8")))
      child.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
      await first.started
      process.kill(-child.pid!, "SIGINT")
      const code = await exited(child)
      assert.strictEqual(code, 1, stdout + stderr)
      assert.match(stdout, /^result: error, 2 turns \(1 ended in error\)/m)
      assert.include(stderr, "1 of 2 turns ended with an error result")
    } finally {
      await s.api.close()
    }
  })
})

describe.skipIf(!nodeAdapter)("claude-code run without a CLI", () => {
  it("a CLI that cannot start is exit 70, one sentence, no stack", async () => {
    const root = Claude.tempDir("sj-ccrun-")
    const r = await run([
      "--dir",
      path.join(root, "journal"),
      "claude-code",
      "run",
      "--claude",
      path.join(root, "nope"),
      "hi"
    ])
    assert.strictEqual(r.code, 70, r.stderr)
    assert.match(r.stderr, /^session-journal: the Claude Code CLI ended .*could not start the CLI/)
    assert.notInclude(r.stderr, "a bug")
    assert.notInclude(r.stderr, "    at ")
  })
})
