/**
 * The real Codex CLI (pinned, `scripts/codex.sh`) run offline against the fake
 * Responses API, with our hooks installed by `session-journal codex install`
 * (the built bin, so build first) and trusted the way Codex records trust:
 *
 * - a shell command the policy denies never runs (the file it would create is
 *   absent), the model is told why, and the journal holds the denial with its
 *   guard and reason;
 * - eight parallel calls under `maxInvocations(5)`: exactly five run;
 * - the rollout archived (`codex archive`) and exported (`codex export`) byte for
 *   byte, its session and the hooked one naming each other;
 * - a project's hooks (`--project`) run once Codex trusts the project, and
 *   install says how until then;
 * - a hook whose program cannot start denies the call (the wrapper's exit 2);
 * - `maxTokens`: the hook reads the tokens the session used from its rollout,
 *   records them on each decision, and once the budget is crossed the next call
 *   is denied; a run without a rollout (`--ephemeral`) is denied, saying why;
 * - `codex status` says whether Codex will run the hooks, as Codex says it.
 *
 * Skipped only when the binary is not installed and no cache holds it.
 */
import { CODEX_BIN, exec, type Home, rollouts, scratch, SKIP_REASON } from "@session-journal/codex/test/codexCli"
import * as Fake from "@session-journal/codex/test/fakeResponses"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { baseEnv, BIN } from "./Run.ts"

const codex = scratch(baseEnv())

const setup = async (script: Fake.Script) => {
  const { api, home } = await codex.start(script)
  return { api, home, journal: path.join(home.dir, "journal") }
}

// The built command, with the home's environment (Codex's CODEX_HOME, the binary).
const sj = (home: Home, args: ReadonlyArray<string>, options?: { readonly script?: string }) =>
  spawnSync(process.execPath, [options?.script ?? BIN, ...args], {
    cwd: home.work,
    env: { ...home.env, SESSION_JOURNAL_CODEX_BIN: CODEX_BIN ?? "" },
    encoding: "utf8"
  })

const sessions = (home: Home, journal: string): Array<{ id: string }> =>
  (JSON.parse(sj(home, ["--dir", journal, "--json", "list"]).stdout) as { sessions: Array<{ id: string }> }).sessions

const stats = (home: Home, journal: string, id: string) =>
  JSON.parse(sj(home, ["--dir", journal, "--json", "stats", id]).stdout) as {
    readonly hooked_session: string | null
    readonly custody_session: string | null
    readonly denials: { readonly denied: number; readonly by_guard: Array<{ guard: string; count: number }> } | null
  }

const entries = (home: Home, journal: string, id: string): Array<{ kind: string; payload?: Record<string, unknown> }> =>
  sj(home, ["--dir", journal, "--json", "show", id]).stdout.trim().split("\n").filter((l) => l !== "").map((l) =>
    JSON.parse(l) as { kind: string }
  )

// What the model got back for its calls, in the last request.
const toolOutputs = (api: Fake.FakeResponses): Array<string> =>
  (api.requests.at(-1)?.body.input ?? []).flatMap((item) => {
    const o = item as { readonly type?: unknown; readonly output?: unknown }
    return o.type === "function_call_output" && typeof o.output === "string" ? [o.output] : []
  })

const policy = (home: Home, p: unknown): string => {
  const file = path.join(home.dir, "policy.json")
  fs.writeFileSync(file, JSON.stringify(p))
  return file
}

// Each case starts the real CLI several times (install, hooks, a session): on a busy
// machine that takes minutes, not seconds, and a test's outcome must not depend on it.
describe.skipIf(CODEX_BIN === null)(
  `the real Codex CLI with our hooks${CODEX_BIN === null ? ` (${SKIP_REASON})` : ""}`,
  { timeout: 600_000 },
  () => {
    // One run of the real CLI serves two cases: the denial (its hooks, its journal) and the
    // custody of its rollout (archive, export). Whichever case runs first starts it.
    let deniedRun: ReturnType<typeof startDeniedRun> | undefined
    const startDeniedRun = async () => {
      const { api, home, journal } = await setup(Fake.inOrder([
        { calls: [Fake.shell("echo ran > denied.txt")] },
        { text: "done" }
      ]))
      const before = fs.readFileSync(home.config, "utf8")
      const installed = sj(home, [
        "codex",
        "install",
        "--policy",
        policy(home, { denyList: ["Bash"] }),
        "--root",
        journal
      ])
      const config = fs.readFileSync(home.config, "utf8")
      const status = sj(home, ["codex", "status"])
      const run = installed.status === 0 ? await exec(home, "deny it") : undefined
      return { api, home, journal, before, installed, config, status, run }
    }
    const denied = () => (deniedRun ??= startDeniedRun())

    it("install trusts the hooks; a denied shell command never runs; the denial is journaled", async () => {
      const { api, home, journal, before, installed, config, status, run } = await denied()
      expect(installed.stderr).toBe("")
      expect(installed.status).toBe(0)
      expect(installed.stdout).toContain("will run")
      // Every byte that was there is still there, first.
      expect(config.startsWith(before)).toBe(true)

      expect(status.stdout).toContain("Codex will run our hooks")
      expect(status.status).toBe(0)

      expect(run).toBeDefined()
      expect(run!.timedOut).toBe(false)
      expect(run!.code).toBe(0)
      expect(fs.existsSync(path.join(home.work, "denied.txt"))).toBe(false)
      // The model was told why, in the form Codex gives a blocked command.
      expect(toolOutputs(api)).toEqual([
        `Command blocked by PreToolUse hook: Bash is on the deny list [denyList(["Bash"])]. Command: echo ran > denied.txt`
      ])
      expect(api.connects).toEqual([])

      const hooked = sessions(home, journal).find((s) =>
        s.id.startsWith("codex-") && !s.id.startsWith("codex-rollout-")
      )
      expect(hooked).toBeDefined()
      const decision = entries(home, journal, hooked!.id).find((e) => e.kind === "codex.decision")
      expect(decision?.payload).toMatchObject({ verdict: "deny", tool_name: "Bash", guard: "denyList([\"Bash\"])" })
      expect(stats(home, journal, hooked!.id).denials?.by_guard).toEqual([{ guard: "denyList([\"Bash\"])", count: 1 }])

      // Uninstall gives back the bytes from before.
      const removed = sj(home, ["codex", "install", "--uninstall"])
      expect(removed.status).toBe(0)
      expect(fs.readFileSync(home.config, "utf8")).toBe(before)
    })

    it("eight parallel calls under maxInvocations(5): exactly five run", async () => {
      const calls = Array.from({ length: 8 }, (_, i) => Fake.shell(`echo ${i} > call-${i}.txt`))
      const { api, home, journal } = await setup(Fake.inOrder([{ calls }, { text: "done" }]))
      const installed = sj(home, [
        "codex",
        "install",
        "--policy",
        policy(home, { maxInvocations: 5 }),
        "--root",
        journal
      ])
      expect(installed.status).toBe(0)
      const run = await exec(home, "eight at once")
      expect(run.code).toBe(0)
      const ran = calls.map((_, i) => fs.existsSync(path.join(home.work, `call-${i}.txt`))).filter(Boolean).length
      expect(ran).toBe(5)
      const hooked = sessions(home, journal).find((s) =>
        s.id.startsWith("codex-") && !s.id.startsWith("codex-rollout-")
      )
      const all = entries(home, journal, hooked!.id)
      const decisions = all.filter((e) => e.kind === "codex.decision")
      expect(decisions.length).toBe(8)
      expect(decisions.filter((d) => d.payload?.["verdict"] === "deny").length).toBe(3)
      expect(toolOutputs(api).filter((o) => o.startsWith("Command blocked by PreToolUse hook")).length).toBe(3)
    })

    it("the rollout is archived and exported byte for byte; its session and the hooked one name each other", async () => {
      // The rollout of the denial's run above: its hooks journaled the session this custody names.
      const { home, journal, installed, run } = await denied()
      expect(installed.status).toBe(0)
      expect(run?.code).toBe(0)
      const [file] = rollouts(home)
      expect(file).toBeDefined()
      const archived = sj(home, ["--dir", journal, "--json", "codex", "archive"])
      expect(archived.status).toBe(0)
      const report = JSON.parse(archived.stdout) as { files: Array<{ session: string; status: string }> }
      expect(report.files.map((f) => f.status)).toEqual(["created"])
      const custody = report.files[0]!.session
      const exported = spawnSync(process.execPath, [BIN, "--dir", journal, "codex", "export", custody], {
        env: home.env
      })
      expect(exported.status).toBe(0)
      expect(Buffer.compare(exported.stdout, fs.readFileSync(file!))).toBe(0)

      const hooked = sessions(home, journal).find((s) =>
        s.id.startsWith("codex-") && !s.id.startsWith("codex-rollout-")
      )!
      expect(stats(home, journal, hooked.id).custody_session).toBe(custody)
      expect(stats(home, journal, custody).hooked_session).toBe(hooked.id)
      // A second archive finds nothing new.
      const again = JSON.parse(sj(home, ["--dir", journal, "--json", "codex", "archive"]).stdout) as typeof report
      expect(again.files.map((f) => f.status)).toEqual(["unchanged"])
    })

    it("a project's hooks run once the project is trusted; until then install says what to do", async () => {
      const { home, journal } = await setup(
        Fake.inOrder([{ calls: [Fake.shell("echo ran > ran.txt")] }, { text: "done" }])
      )
      const args = [
        "codex",
        "install",
        "--project",
        home.work,
        "--policy",
        policy(home, { denyList: ["Bash"] }),
        "--root",
        journal
      ]
      const untrusted = sj(home, args)
      expect(untrusted.status).toBe(1)
      expect(untrusted.stdout).toContain(`add [projects."${home.work}"] trust_level = "trusted" to ${home.config}`)
      fs.appendFileSync(home.config, `\n[projects.${JSON.stringify(home.work)}]\ntrust_level = "trusted"\n`)
      const trusted = sj(home, args)
      expect(trusted.status).toBe(0)
      expect(trusted.stdout).toContain(`${home.config}: recorded Codex's trust of 2 hooks`)
      const run = await exec(home, "in the project")
      expect(run.code).toBe(0)
      expect(fs.existsSync(path.join(home.work, "ran.txt"))).toBe(false)
    })

    it("a hook whose program cannot start denies the call", async () => {
      const { home, journal } = await setup(Fake.inOrder([
        { calls: [Fake.shell("echo ran > ran.txt")] },
        { text: "done" }
      ]))
      // An installation of ours that goes away after install.
      const gone = path.join(home.dir, "gone.mjs")
      fs.writeFileSync(gone, `await import(${JSON.stringify(BIN)})\n`)
      const installed = sj(home, ["codex", "install", "--root", journal], { script: gone })
      expect(installed.status).toBe(0)
      fs.rmSync(gone)
      const run = await exec(home, "try it")
      expect(run.code).toBe(0)
      expect(fs.existsSync(path.join(home.work, "ran.txt"))).toBe(false)
      expect(run.stderr).toContain("hook cannot run")
      expect(run.stderr).toContain("(session-journal codex install --uninstall)")
    })

    it("maxTokens: the rollout's token records decide; a budget crossed denies the next call", async () => {
      // The second answer crosses the budget: the call of the third is denied whenever its hook runs.
      const { home, journal } = await setup(Fake.inOrder([
        { calls: [Fake.shell("echo 1 > one.txt")], tokens: 10 },
        { calls: [Fake.shell("echo 2 > two.txt")], tokens: 1000 },
        { calls: [Fake.shell("echo 3 > three.txt")], tokens: 10 },
        { text: "done" }
      ]))
      const installed = sj(home, ["codex", "install", "--policy", policy(home, { maxTokens: 500 }), "--root", journal])
      expect(installed.status).toBe(0)
      const run = await exec(home, "spend tokens")
      expect(run.code).toBe(0)
      expect(fs.existsSync(path.join(home.work, "one.txt"))).toBe(true)
      expect(fs.existsSync(path.join(home.work, "three.txt"))).toBe(false)
      const hooked = sessions(home, journal).find((s) =>
        s.id.startsWith("codex-") && !s.id.startsWith("codex-rollout-")
      )!
      const decisions = entries(home, journal, hooked.id).filter((e) => e.kind === "codex.decision").map((e) =>
        e.payload!
      )
      expect(decisions).toHaveLength(3)
      // Each decision records the total its hook read: the answers before its own, or its own too.
      const [first, second, third] = decisions as [
        Record<string, unknown>,
        Record<string, unknown>,
        Record<string, unknown>
      ]
      expect([0, 10]).toContain(first["tokens"])
      expect(first["verdict"]).toBe("allow")
      expect([10, 1010]).toContain(second["tokens"])
      expect(second["verdict"]).toBe(second["tokens"] === 10 ? "allow" : "deny")
      expect(fs.existsSync(path.join(home.work, "two.txt"))).toBe(second["verdict"] === "allow")
      expect([1010, 1020]).toContain(third["tokens"])
      expect(third).toMatchObject({ verdict: "deny", guard: "maxTokens(500)" })
      expect(third["reason"]).toBe(`the agent used ${String(third["tokens"])} tokens, the budget is 500`)

      // Without a rollout the total cannot be known: the call is denied, saying so.
      const ephemeral = await exec(home, "no rollout", { args: ["--ephemeral"] })
      expect(ephemeral.code).toBe(0)
      const unknown = sessions(home, journal).flatMap((s) =>
        s.id === hooked.id || s.id.startsWith("codex-rollout-") ? [] : entries(home, journal, s.id)
      ).filter((e) => e.kind === "codex.decision").map((e) => e.payload!)
      expect(unknown.length).toBeGreaterThan(0)
      for (const d of unknown) {
        expect(d).toMatchObject({ verdict: "deny", guard: "maxTokens(500)", tokens: null })
        expect(d["reason"]).toContain("token use unknown")
      }
    })
  }
)
