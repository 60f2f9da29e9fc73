/**
 * `session-journal claude-code run` decides every tool call and keeps every line,
 * against the real Claude Code CLI 2.1.328 offline (the fake Messages API of
 * `@session-journal/claude-code`'s tests): a Read the CLI runs without asking
 * (`--allowed-tools Read`) that the policy denies never reaches the model, which
 * is told the guard in brackets, and the journal holds its tool entry with the
 * `claude-code.decision` entry naming the policy; SIGINT sent to the command
 * while a slow tool runs leaves the `interrupt` control request and the CLI's
 * answer to it on the chain, and the chain verifies; so does a second SIGINT
 * right after the first, which ends the run (130) only once the interrupt is on
 * the chain and answered.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import * as ClaudeRun from "./claudeRun.ts"
import { BIN, exited, hasNodeAdapter, runProcess as run, waitForLine } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()

afterAll(Claude.cleanup)

const setup = (script: Fake.Script) => ClaudeRun.setup(script, "sj-ccguard-")
const common = (s: ClaudeRun.Setup) => [...ClaudeRun.common(s), "--session", "cc-guard"]
type Setup = ClaudeRun.Setup

type Row = Record<string, any>

const entriesOf = async (s: Setup): Promise<Array<Row>> => {
  const shown = await run(["--dir", s.journal, "--json", "show", "cc-guard"])
  assert.strictEqual(shown.code, 0, shown.stderr)
  return shown.stdout.trim().split("\n").map((l) => JSON.parse(l) as Row)
}

/** The session's lines, parsed: `{ from, message }`. */
const linesOf = (entries: ReadonlyArray<Row>) =>
  entries.filter((e) => e["kind"] === "claude-code.session.line" && typeof e["payload"]?.["line"] === "string")
    .map((e) => ({ from: e["payload"]["from"] as string, message: JSON.parse(e["payload"]["line"]) as Row }))

describe.skipIf(Claude.CLAUDE_BIN === null || !nodeAdapter)("claude-code run decides every call", () => {
  it("a pre-allowed Read the policy denies never reaches the model; the decision is on the chain", async () => {
    let work = ""
    const secret = "secret-7c1e-content"
    const s = await setup((r) =>
      [
        Fake.tools({ name: "Read", input: { file_path: path.join(work, "secret.txt") } }),
        Fake.text("could not read it")
      ][r.turn]
    )
    work = s.work
    fs.writeFileSync(path.join(s.work, "secret.txt"), `${secret}\n`)
    try {
      const policy = path.join(s.root, "policy.json")
      fs.writeFileSync(policy, JSON.stringify({ denyList: ["Read"] }))
      const r = await run(
        [...common(s), "--policy", policy, "--tools", "Read", "--allowed-tools", "Read", "read the secret"],
        { env: s.env }
      )
      assert.strictEqual(r.code, 0, r.stderr)
      const told = JSON.stringify(s.api.requests.map((q) => q.messages))
      assert.notInclude(told, secret, "the model saw the denied file")
      assert.include(told, `Read is on the deny list [denyList([\\"Read\\"])]`)
      const entries = await entriesOf(s)
      const tool = entries.findIndex((e) => e["tool_name"] === "Read" && "allowed" in e)
      assert.isAtLeast(tool, 0)
      assert.strictEqual(entries[tool]!["allowed"], false)
      const decision = entries[tool + 1]!
      assert.strictEqual(decision["kind"], "claude-code.decision")
      assert.deepStrictEqual(
        [decision["payload"]["verdict"], decision["payload"]["guard"], decision["payload"]["policy"]],
        ["deny", `denyList(["Read"])`, `denyList(["Read"])`]
      )
      const verified = await run(["--dir", s.journal, "verify", "cc-guard"])
      assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
    } finally {
      await s.api.close()
    }
  })

  it("a call that touches the journal or the policy file is denied by selfProtection and never runs", async () => {
    let policy = ""
    const s = await setup((r) => [Fake.tools(Fake.bash(`echo '{}' > ${policy}`)), Fake.text("done")][r.turn])
    policy = path.join(s.root, "policy.json")
    fs.writeFileSync(policy, JSON.stringify({ maxInvocations: 10 }))
    try {
      const r = await run([...common(s), "--policy", policy, "--tools", "Bash", "--allowed-tools", "Bash", "edit it"], {
        env: s.env
      })
      assert.strictEqual(r.code, 0, r.stderr)
      assert.deepStrictEqual(JSON.parse(fs.readFileSync(policy, "utf8")), { maxInvocations: 10 })
      assert.include(JSON.stringify(s.api.requests.map((q) => q.messages)), "would touch the policy file")
    } finally {
      await s.api.close()
    }
  })

  const interrupted = async (signals: number) => {
    let work = ""
    const s = await setup((r) =>
      r.prompt.includes("slow")
        ? [
          Fake.tools(Fake.bash(`sleep 8; echo done > ${path.join(work, "slow-done.txt")}`)),
          Fake.text("after")
        ][r.turn]
        : undefined
    )
    work = s.work
    try {
      const child = spawn(process.execPath, [BIN, ...common(s), "--tools", "Bash", "--allowed-tools", "Bash", "slow"], {
        env: s.env,
        detached: true,
        stdio: ["pipe", "pipe", "pipe"]
      })
      let stderr = ""
      child.stderr.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
      // The tool call is shown once it is on the chain; the command then waits on it.
      await waitForLine(child, (l) => l.startsWith("> Bash "))
      // The command alone gets it, as from `kill -INT`; a second one as soon as the
      // first is taken (two sent at once would be delivered as one).
      process.kill(child.pid!, "SIGINT")
      if (signals === 2) {
        await new Promise<void>((resolve) => {
          const seen = () => {
            if (stderr.includes("interrupting the turn")) resolve()
            else child.stderr.once("data", () => setImmediate(seen))
          }
          seen()
        })
        process.kill(child.pid!, "SIGINT")
      }
      const code = await exited(child)
      assert.strictEqual(code, signals === 1 ? 1 : 130, stderr)
      assert.include(stderr, "interrupting the turn")
      assert.isFalse(fs.existsSync(path.join(s.work, "slow-done.txt")), "the interrupted command finished")
      const lines = linesOf(await entriesOf(s))
      const asked = lines.find((l) =>
        l.from === "driver" && l.message["type"] === "control_request" &&
        l.message["request"]["subtype"] === "interrupt"
      )
      assert.isDefined(asked, "no interrupt request on the chain")
      const answered = lines.find((l) =>
        l.from === "cli" && l.message["type"] === "control_response" &&
        l.message["response"]["request_id"] === asked!.message["request_id"]
      )
      assert.isDefined(answered, "no answer to the interrupt on the chain")
      const verified = await run(["--dir", s.journal, "verify", "cc-guard"])
      assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
    } finally {
      await s.api.close()
    }
  }

  it("SIGINT while a slow tool runs: the interrupt request and the CLI's answer are on the chain", () => interrupted(1))

  it("a second SIGINT right after the first ends the run, the interrupt and the CLI's answer on the chain first", () =>
    interrupted(2))
})
