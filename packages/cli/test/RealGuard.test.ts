/**
 * The resident guard in the loop of the real Claude Code CLI (offline, against
 * the fake Messages API): the hooks installed in the guard's form
 * (`GuardInstall.hooks`: the forwarder as a command hook for every event), a
 * session where the guard decides (a Bash over the policy is denied and never
 * runs), then the guard killed with SIGKILL mid-session: the next call is denied
 * with the reason and does not run, and every event the guard acknowledged before
 * it died is in the journal, which verifies. And once the guard is killed and
 * another program takes its port, answering `200 <html>ok</html>` or a
 * well-formed `{}`, no Bash call runs: the forwarder takes only answers that
 * carry the guard's MAC, and that program never sees the token.
 */
import { assert, describe, it } from "@effect/vitest"
import { Hook } from "@session-journal/claude-code"
import * as GuardInstall from "@session-journal/claude-code/GuardInstaller"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import { Entry } from "@session-journal/core"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll } from "vitest"
import { awaitDeath, BIN, hasNodeAdapter, run, start, waitForLine } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()
const TOKEN = "real-guard-test-token-5f0c1a2b3c4d"

afterAll(Claude.cleanup)

// What holds a port, for a failure's message.
const ssOf = (port: number): string => {
  try {
    return execFileSync("ss", ["-tanp", `( sport = :${port} )`], { encoding: "utf8" })
  } catch {
    return "(ss not available)"
  }
}

describe.skipIf(Claude.CLAUDE_BIN === null || !nodeAdapter)("the resident guard under the real Claude Code CLI", () => {
  it(
    "decides by the policy, and once killed with SIGKILL the next call is denied; nothing acknowledged is lost",
    async () => {
      const root = Claude.tempDir()
      const work = path.join(root, "work")
      const journal = path.join(root, "journal")
      fs.writeFileSync(path.join(root, "policy.json"), JSON.stringify({ maxInvocations: 1 }))
      const guard = start([
        "claude-code",
        "guard",
        "--port",
        "0",
        "--root",
        journal,
        "--policy",
        path.join(root, "policy.json")
      ], {
        env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN }
      })
      let guardErr = ""
      guard.stderr!.on("data", (b: Buffer) => (guardErr += b.toString("utf8")))
      const line = await waitForLine(guard, (l) => l.includes("listening at "))
      const url = line.slice(line.indexOf("http://"), line.indexOf(","))

      let killedAt: number | null = null
      const turns = [
        Fake.tools(Fake.bash(`echo one > ${work}/one.txt`, "first")),
        Fake.tools(Fake.bash(`echo two > ${work}/two.txt`, "over the policy")),
        Fake.tools(Fake.bash(`echo three > ${work}/three.txt`, "after the guard died")),
        Fake.text("done")
      ]
      const api = await Fake.start((r) => {
        if (r.turn === 2 && killedAt === null) {
          killedAt = r.index
          guard.kill("SIGKILL")
          awaitDeath(guard.pid!)
        }
        return turns[r.turn]
      })
      try {
        const settings = GuardInstall.hooks(url, GuardInstall.fromEnv(), [process.execPath, BIN])
        const r = await Claude.run({
          api,
          prompt: "Three calls.",
          tools: ["Bash"],
          work,
          home: path.join(root, "home"),
          env: { ...Claude.sourcesEnv(), SESSION_JOURNAL_GUARD_TOKEN: TOKEN },
          settings,
          args: ["--include-hook-events"],
          timeoutMs: 90_000
        })
        assert.isFalse(r.timedOut)
        assert.deepStrictEqual(api.connects, [])
        assert.isNotNull(killedAt, "the session never reached its third turn")
        assert.strictEqual(guard.signalCode, "SIGKILL", guardErr)

        // The guard decided the first two calls: one ran, one was denied by the policy.
        assert.strictEqual(fs.readFileSync(path.join(work, "one.txt"), "utf8"), "one\n")
        assert.isFalse(fs.existsSync(path.join(work, "two.txt")), "the call the policy denied ran")
        // After SIGKILL the forwarder denied by itself: the call did not run either.
        assert.isFalse(fs.existsSync(path.join(work, "three.txt")), "a call ran while the guard was down")

        const ids = api.answers.slice(0, 3).map((a) => (a.blocks[0]!.type === "tool_use" ? a.blocks[0]!.id : ""))
        const resultOf = (id: string) => {
          for (const req of api.requests) {
            const found = req.toolResults.find((b) => b["tool_use_id"] === id)
            if (found !== undefined) return found
          }
          return undefined
        }
        const second = resultOf(ids[1]!)
        assert.isTrue(second?.["is_error"], JSON.stringify(second))
        assert.include(JSON.stringify(second?.["content"]), "maxInvocations(1)")
        const third = resultOf(ids[2]!)
        assert.isTrue(third?.["is_error"], JSON.stringify(third))
        assert.include(JSON.stringify(third?.["content"]), `the session-journal guard at ${url} is not reachable`)
        const denials = (r.result?.["permission_denials"] ?? []) as Array<{ tool_use_id: string }>
        assert.deepStrictEqual(denials.map((d) => d.tool_use_id).sort(), [ids[1], ids[2]].sort())

        // Every hook run the guard answered before it died (exit 0 with the guard's
        // answer, not the forwarder's own denial).
        const acknowledged = r.lines.filter((l) =>
          l["type"] === "system" && l["subtype"] === "hook_response" && l["exit_code"] === 0 &&
          !String(l["output"]).includes("is not reachable")
        )
        assert.deepStrictEqual(acknowledged.map((l) => l["hook_event"]), [
          "SessionStart",
          "UserPromptSubmit",
          "PreToolUse",
          "PostToolUse",
          "PreToolUse"
        ])

        const verified = await run(["--dir", journal, "--json", "verify"])
        assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
        const listed = JSON.parse((await run(["--dir", journal, "--json", "list"])).stdout) as {
          sessions: Array<{ id: string }>
        }
        assert.deepStrictEqual(listed.sessions.map((s) => s.id), [
          Hook.sessionId({ session_id: r.sessionId!, cwd: work, hook_event_name: "SessionStart" })
        ])
        const shown = await run(["--dir", journal, "--json", "show", listed.sessions[0]!.id])
        const entries = shown.stdout.trim().split("\n").map((l) =>
          JSON.parse(l) as { kind: string; allowed?: boolean; tool_name?: string; payload?: Record<string, unknown> }
        )
        // What each acknowledged event put on the chain, in order: the session's
        // start, the prompt, the first call (allowed) with its decision and outcome,
        // the second (denied by the policy) with its decision. The third call never
        // reached the guard.
        const story = entries.filter((e) => e.kind !== "meta").map((e) =>
          e.kind === "tool"
            ? `tool ${e.tool_name} ${e.allowed ? "allowed" : "denied"}`
            : e.kind === Hook.DECISION_KIND || e.kind === Entry.OUTCOME_KIND
            ? `${e.kind} ${String(e.payload?.["tool_use_id"])}`
            : e.kind
        )
        assert.deepStrictEqual(story, [
          Hook.kindOf("SessionStart"),
          "message",
          "tool Bash allowed",
          `${Hook.DECISION_KIND} ${ids[0]}`,
          `${Entry.OUTCOME_KIND} ${ids[0]}`,
          "tool Bash denied",
          `${Hook.DECISION_KIND} ${ids[1]}`
        ])
      } finally {
        await api.close()
        if (guard.exitCode === null && guard.signalCode === null) guard.kill("SIGKILL")
      }
    },
    120_000
  )

  it(
    "a program that takes the port of the killed guard and answers 200 (HTML, then {}) does not make a Bash call run",
    async () => {
      const root = Claude.tempDir()
      const work = path.join(root, "work")
      const journal = path.join(root, "journal")
      const guard = start(["claude-code", "guard", "--port", "0", "--root", journal], {
        env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN }
      })
      const line = await waitForLine(guard, (l) => l.includes("listening at "))
      const url = line.slice(line.indexOf("http://"), line.indexOf(","))
      const port = Number(new URL(url).port)

      // The squatter: every request kept, PreToolUse answered with HTML first, then {}.
      const seen: Array<string> = []
      let preToolUses = 0
      const squatter = http.createServer((req, res) => {
        const parts: Array<Buffer> = []
        req.on("data", (b: Buffer) => parts.push(b))
        req.on("end", () => {
          const body = Buffer.concat(parts).toString("utf8")
          seen.push(`${JSON.stringify(req.headers)}\n${body}`)
          const pre = body.includes("\"hook_event_name\":\"PreToolUse\"")
          if (pre && preToolUses++ === 0) {
            res.writeHead(200, { "content-type": "text/html" })
            res.end("<html>ok</html>")
          } else {
            res.writeHead(200, { "content-type": "application/json" })
            res.end("{}")
          }
        })
      })
      const squatterErrors: Array<string> = []
      const held = Fake.hold()
      const turns = [
        Fake.tools(Fake.bash(`echo one > ${work}/one.txt`, "while the guard runs")),
        held,
        Fake.tools(Fake.bash(`echo three > ${work}/three.txt`, "the squatter answers {}")),
        Fake.text("done")
      ]
      void held.started.then(async () => {
        guard.kill("SIGKILL")
        awaitDeath(guard.pid!)
        // The port is free once the guard is gone; a connection of the dead guard's
        // clients may hold it a moment longer.
        for (let attempt = 0;; attempt++) {
          const error = await new Promise<Error | null>((resolve) => {
            squatter.once("error", resolve)
            squatter.listen(port, "127.0.0.1", () => {
              squatter.off("error", resolve)
              resolve(null)
            })
          })
          if (error === null) break
          squatterErrors.push(`${error.message}: ${ssOf(port)}`)
          if (attempt === 50) return held.release(Fake.text("the squatter could not listen"))
          await new Promise((r) => setTimeout(r, 100))
        }
        held.release(Fake.tools(Fake.bash(`echo two > ${work}/two.txt`, "the squatter answers HTML")))
      })
      const api = await Fake.start((r) => turns[r.turn])
      try {
        const r = await Claude.run({
          api,
          prompt: "Three calls.",
          tools: ["Bash"],
          work,
          home: path.join(root, "home"),
          env: { ...Claude.sourcesEnv(), SESSION_JOURNAL_GUARD_TOKEN: TOKEN },
          settings: GuardInstall.hooks(url, GuardInstall.fromEnv(), [process.execPath, BIN]),
          timeoutMs: 90_000
        })
        assert.isFalse(r.timedOut)
        assert.deepStrictEqual(api.connects, [])
        assert.strictEqual(guard.signalCode, "SIGKILL")
        assert.isTrue(squatter.listening, squatterErrors.join("\n"))
        assert.strictEqual(fs.readFileSync(path.join(work, "one.txt"), "utf8"), "one\n")
        assert.isFalse(fs.existsSync(path.join(work, "two.txt")), "a call ran on the squatter's HTML")
        assert.isFalse(fs.existsSync(path.join(work, "three.txt")), "a call ran on the squatter's {}")
        assert.isAtLeast(preToolUses, 2, "the squatter was not asked")
        for (const request of seen) assert.notInclude(request, TOKEN, "the squatter was sent the token")
        const results = api.requests.flatMap((q) => q.toolResults)
        const denied = results.filter((b) =>
          JSON.stringify(b["content"]).includes("without proof that it holds the token")
        )
        assert.strictEqual(denied.length, 2, JSON.stringify(results))
        for (const d of denied) assert.isTrue(d["is_error"])
      } finally {
        await api.close()
        squatter.closeAllConnections()
        await new Promise<void>((resolve) => squatter.close(() => resolve()))
        if (guard.exitCode === null && guard.signalCode === null) guard.kill("SIGKILL")
      }
    },
    120_000
  )

  it(
    "the plain http form: Claude Code posts to the guard itself with the token from allowedEnvVars (SessionStart excepted)",
    async () => {
      const root = Claude.tempDir()
      const work = path.join(root, "work")
      const journal = path.join(root, "journal")
      fs.writeFileSync(path.join(root, "policy.json"), JSON.stringify({ denyList: ["Bash"] }))
      const guard = start([
        "claude-code",
        "guard",
        "--port",
        "0",
        "--root",
        journal,
        "--policy",
        path.join(root, "policy.json"),
        // Claude Code's own http hooks send the token as a bearer token.
        "--accept-bearer"
      ], {
        env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN }
      })
      try {
        const line = await waitForLine(guard, (l) => l.includes("listening at "))
        const url = line.slice(line.indexOf("http://"), line.indexOf(","))
        const api = await Fake.start(
          Fake.inOrder([Fake.tools(Fake.bash(`echo ran > ${work}/ran.txt`, "denied")), Fake.text("done")])
        )
        try {
          const r = await Claude.run({
            api,
            prompt: "One call.",
            tools: ["Bash"],
            work,
            home: path.join(root, "home"),
            env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN },
            settings: GuardInstall.httpHooks(url),
            timeoutMs: 90_000
          })
          assert.strictEqual(r.code, 0, r.stderr)
          assert.isFalse(fs.existsSync(path.join(work, "ran.txt")), "the call the guard denied ran")
          const denials = (r.result?.["permission_denials"] ?? []) as Array<{ tool_name: string }>
          assert.deepStrictEqual(denials.map((d) => d.tool_name), ["Bash"])
          const result = api.requests.flatMap((q) => q.toolResults)[0]
          assert.include(JSON.stringify(result?.["content"]), "denyList([\\\"Bash\\\"])")
        } finally {
          await api.close()
        }
        guard.kill("SIGTERM")
        await new Promise((resolve) => guard.once("close", resolve))
        assert.strictEqual(guard.exitCode, 0)
        const listed = await run(["--dir", journal, "--json", "list"])
        const sessions = (JSON.parse(listed.stdout) as { sessions: Array<{ id: string }> }).sessions
        assert.strictEqual(sessions.length, 1)
        const shown = await run(["--dir", journal, "--json", "show", sessions[0]!.id])
        const kinds = shown.stdout.trim().split("\n").map((l) => JSON.parse(l) as { kind: string; allowed?: boolean })
        // The prompt, the call recorded denied with its decision, Stop, SessionEnd: no
        // SessionStart, for which Claude Code runs no http hook (only command hooks).
        assert.deepStrictEqual(kinds.map((e) => e.kind), [
          "message",
          "tool",
          Hook.DECISION_KIND,
          Hook.kindOf("Stop"),
          Hook.kindOf("SessionEnd")
        ])
        assert.deepStrictEqual(kinds.filter((e) => e.kind === "tool").map((e) => e.allowed), [false])
      } finally {
        if (guard.exitCode === null && guard.signalCode === null) guard.kill("SIGKILL")
      }
    },
    120_000
  )
})
