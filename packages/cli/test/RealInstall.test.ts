/**
 * `claude-code install` under the real Claude Code CLI (offline, against the fake
 * Messages API). A `--shared` install names nothing of this machine: it runs
 * `session-journal` from PATH and finds the project's policy through
 * `$CLAUDE_PROJECT_DIR`, and decides by it. Then the program is removed (as
 * `npm rm -g` does): the hooks fail closed. The prompt is refused with our one
 * line; with only the PreToolUse and Stop hooks, a Bash call that would create a
 * file does not run, the model sees our line, and the turn still ends (Stop
 * maps the failure to exit 1, which does not keep the turn going). And
 * `install --guard`: the forwarder, wrapped the same way, passes the guard's
 * answers through and still denies by itself once the guard is killed. Its first
 * call is a Read of a PDF, whose PostToolUse carries the file whole in base64
 * (docs/claude-code/PROTOCOL.md (a)), over the forwarder's 4 MiB bound: the forwarder sends the
 * guard its scan, the guard counts the response's bytes, and `maxBytesRead`
 * denies the next call.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Forwarder from "@session-journal/claude-code/Forwarder"
import { readText } from "@session-journal/claude-code/Installer"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import { Entry } from "@session-journal/core"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { awaitDeath, BIN, hasNodeAdapter, run, start, waitForLine } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()

afterAll(Claude.cleanup)

const SYSTEM_PATH = "/usr/bin:/bin"

const TOKEN = "real-install-test-token-8d1e2f3a4b5c"

// A PDF of one stream of `size` bytes: enough for the Read tool, which sends the
// file whole in base64 (a PDF of up to 20 MB).
const pdfOf = (size: number): Buffer =>
  Buffer.concat([
    Buffer.from(
      "%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n" +
        "2 0 obj\n<< /Type /Pages /Kids [] /Count 0 >>\nendobj\n" +
        `3 0 obj\n<< /Length ${size} >>\nstream\n`
    ),
    Buffer.alloc(size, 0x41),
    Buffer.from("\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n")
  ])

const toolResult = (api: Fake.FakeApi, id: string): Record<string, unknown> | undefined => {
  for (const req of api.requests) {
    const found = req.toolResults.find((b) => b["tool_use_id"] === id)
    if (found !== undefined) return found
  }
  return undefined
}

describe.skipIf(Claude.CLAUDE_BIN === null || !nodeAdapter)("install under the real Claude Code CLI", () => {
  it(
    "a --shared install works from PATH and $CLAUDE_PROJECT_DIR; once the program is gone every hook fails closed",
    async () => {
      for (const dir of SYSTEM_PATH.split(":")) {
        assert.isFalse(fs.existsSync(path.join(dir, "session-journal")), `${dir} has a session-journal`)
      }
      const root = Claude.tempDir()
      const work = path.join(root, "a project")
      const home = path.join(root, "home")
      fs.mkdirSync(work, { recursive: true })
      fs.writeFileSync(path.join(work, "policy.json"), JSON.stringify({ denyList: ["Bash"] }))
      // The installed program, as a global install puts it on PATH.
      const bin = path.join(root, "prefix", "bin")
      fs.mkdirSync(bin, { recursive: true })
      const program = path.join(bin, "session-journal")
      fs.writeFileSync(program, `#!/bin/sh\nexec '${process.execPath}' '${BIN}' "$@"\n`, { mode: 0o755 })

      const installed = await run([
        "claude-code",
        "install",
        "--shared",
        "--policy",
        "policy.json",
        "--root",
        ".journal"
      ], {
        cwd: work
      })
      assert.strictEqual(installed.code, 0, installed.stderr)
      const settingsText = fs.readFileSync(path.join(work, ".claude", "settings.json"), "utf8")
      assert.notInclude(settingsText, root)

      const env = { ...Claude.sourcesEnv(), PATH: `${bin}:${SYSTEM_PATH}` }
      const ran = path.join(work, "ran.txt")

      // 1. Installed: the policy inside the project decides (Bash is denied by it).
      {
        const api = await Fake.start(Fake.inOrder([Fake.tools(Fake.bash(`echo ran > '${ran}'`)), Fake.text("done")]))
        try {
          const r = await Claude.run({ api, prompt: "Run it.", tools: ["Bash"], work, home, env, timeoutMs: 90_000 })
          assert.isFalse(r.timedOut, r.stderr)
          assert.deepStrictEqual(api.connects, [])
          assert.isFalse(fs.existsSync(ran), "the call the policy denies ran")
          const id = api.answers[0]!.blocks[0]!.type === "tool_use" ? api.answers[0]!.blocks[0]!.id : ""
          const result = toolResult(api, id)
          assert.isTrue(result?.["is_error"], JSON.stringify(result))
          assert.include(JSON.stringify(result?.["content"]), "denyList")
          const verified = await run(["--dir", path.join(work, ".journal"), "verify"])
          assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
        } finally {
          await api.close()
        }
      }

      // 2. The program removed: the prompt never reaches the model, our line says why.
      fs.rmSync(program)
      {
        const api = await Fake.start(Fake.inOrder([Fake.tools(Fake.bash(`echo ran > '${ran}'`)), Fake.text("done")]))
        try {
          const r = await Claude.run({ api, prompt: "Run it.", tools: ["Bash"], work, home, env, timeoutMs: 90_000 })
          assert.isFalse(r.timedOut, r.stderr)
          assert.strictEqual(api.requests.length, 0, "the model was asked")
          assert.isFalse(fs.existsSync(ran))
          assert.match(
            String(r.result?.["result"]),
            /UserPromptSubmit operation blocked by hook[\s\S]*session-journal: the UserPromptSubmit hook cannot run: session-journal was not found \(.*not found\), so it is refused\. Reinstall session-journal, or remove its hooks from \.claude\/settings\.json/
          )
        } finally {
          await api.close()
        }
      }

      // 3. Only the PreToolUse and Stop hooks, program still gone: the call is refused
      // with our line, and the turn ends (a failed Stop is exit 1, not a loop).
      {
        const hooks = (readText(settingsText) as { hooks: Record<string, unknown> }).hooks
        const api = await Fake.start(Fake.inOrder([
          Fake.tools(Fake.bash(`echo ran > '${ran}'`)),
          Fake.text("done"),
          Fake.text("again")
        ]))
        try {
          const r = await Claude.run({
            api,
            prompt: "Run it.",
            tools: ["Bash"],
            work,
            home,
            env,
            settings: { hooks: { PreToolUse: hooks["PreToolUse"], Stop: hooks["Stop"] } },
            args: ["--include-hook-events"],
            timeoutMs: 90_000
          })
          assert.isFalse(r.timedOut, r.stderr)
          assert.isFalse(fs.existsSync(ran), "the call ran without its hook")
          const id = api.answers[0]!.blocks[0]!.type === "tool_use" ? api.answers[0]!.blocks[0]!.id : ""
          const result = toolResult(api, id)
          assert.isTrue(result?.["is_error"], JSON.stringify(result))
          const content = String(
            typeof result?.["content"] === "string" ? result["content"] : JSON.stringify(result?.["content"])
          )
          assert.match(
            content,
            /session-journal: the PreToolUse hook cannot run: session-journal was not found \(.*\), so it is refused\. Reinstall session-journal, or remove its hooks from \.claude\/settings\.json \(session-journal claude-code install --uninstall\)/
          )
          // Two requests: the call, then "done"; the failed Stop did not send the model back.
          assert.strictEqual(api.requests.length, 2)
          assert.strictEqual(r.result?.["subtype"], "success")
          const stops = r.lines.filter((l) => l["subtype"] === "hook_response" && l["hook_event"] === "Stop")
          assert.deepStrictEqual(stops.map((l) => l["exit_code"]), [1])
          assert.include(String(stops[0]?.["stderr"]), "session-journal: the Stop hook cannot run")
        } finally {
          await api.close()
        }
      }
    },
    240_000
  )

  it(
    "install --guard: the wrapped forwarder passes the guard's decisions through, counts a Read over 4 MiB, and denies once the guard is killed",
    async () => {
      const root = Claude.tempDir()
      const work = path.join(root, "work")
      const journal = path.join(root, "journal")
      fs.mkdirSync(work, { recursive: true })
      // 3.3 MB of PDF: its PostToolUse is about 4.4 MB (4/3 of it in base64), over the forwarder's 4 MiB bound.
      const pdf = pdfOf(3_300_000)
      const pdfPath = path.join(work, "doc.pdf")
      fs.writeFileSync(pdfPath, pdf)
      fs.writeFileSync(path.join(root, "policy.json"), JSON.stringify({ maxBytesRead: 1000 }))
      const guard = start([
        "claude-code",
        "guard",
        "--port",
        "0",
        "--root",
        journal,
        "--policy",
        path.join(root, "policy.json")
      ], { env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN } })
      try {
        const line = await waitForLine(guard, (l) => l.includes("listening at "))
        const url = line.slice(line.indexOf("http://"), line.indexOf(","))
        const installed = await run(["claude-code", "install", "--project", work, "--guard", url], { cwd: root })
        assert.strictEqual(installed.code, 0, installed.stderr)
        const settings = readText(fs.readFileSync(path.join(work, ".claude", "settings.local.json"), "utf8")) as {
          hooks: Record<string, Array<{ hooks: Array<{ command: string }> }>>
        }
        assert.match(settings.hooks["PreToolUse"]![0]!.hooks[0]!.command, /^\/bin\/sh -c .* claude-code forward --url /)

        let killed = false
        const turns = [
          Fake.tools({ name: "Read", input: { file_path: pdfPath } }),
          Fake.tools(Fake.bash(`echo two > '${work}/two.txt'`, "over the policy")),
          Fake.tools(Fake.bash(`echo three > '${work}/three.txt'`, "after the guard died")),
          Fake.text("done")
        ]
        const api = await Fake.start((r) => {
          if (r.turn === 2 && !killed) {
            killed = true
            guard.kill("SIGKILL")
            awaitDeath(guard.pid!)
          }
          return turns[r.turn]
        })
        let ids: Array<string> = []
        try {
          const r = await Claude.run({
            api,
            prompt: "Three calls.",
            tools: ["Bash", "Read"],
            work,
            home: path.join(root, "home"),
            env: { ...Claude.sourcesEnv(), SESSION_JOURNAL_GUARD_TOKEN: TOKEN },
            timeoutMs: 90_000
          })
          assert.isFalse(r.timedOut, r.stderr)
          assert.isTrue(killed, "the session never reached its third turn")
          ids = api.answers.slice(0, 3).map((a) => (a.blocks[0]!.type === "tool_use" ? a.blocks[0]!.id : ""))
          // The Read's bytes counted, though its PostToolUse was never sent whole: the next call is denied by them.
          assert.isFalse(fs.existsSync(path.join(work, "two.txt")), "the call the policy denied ran")
          assert.include(JSON.stringify(toolResult(api, ids[1]!)?.["content"]), "[maxBytesRead(1000)]")
          // The Read ran: the model was sent the PDF.
          assert.include(JSON.stringify(toolResult(api, ids[0]!)?.["content"]), pdf.toString("base64", 0, 300))
          assert.isFalse(fs.existsSync(path.join(work, "three.txt")), "a call ran while the guard was down")
          assert.include(
            JSON.stringify(toolResult(api, ids[2]!)?.["content"]),
            `the session-journal guard at ${url} is not reachable`
          )
        } finally {
          await api.close()
        }

        // The guard's journal verifies and holds the Read's outcome as a marker: the
        // response's size as Claude Code wrote it (its JSON text), the input's size and hash.
        const verified = await run(["--dir", journal, "verify"])
        assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
        const listed = JSON.parse((await run(["--dir", journal, "--json", "list"])).stdout) as {
          sessions: Array<{ id: string }>
        }
        assert.strictEqual(listed.sessions.length, 1)
        const shown = await run(["--dir", journal, "--json", "show", listed.sessions[0]!.id])
        const outcomes = shown.stdout.trim().split("\n").map((l) =>
          JSON.parse(l) as { kind: string; payload?: Record<string, unknown> }
        ).filter((e) => e.kind === Entry.OUTCOME_KIND)
        assert.deepStrictEqual(outcomes.map((e) => e.payload?.["tool_use_id"]), [ids[0]])
        const marker = outcomes[0]!.payload!
        const response = JSON.stringify({
          type: "pdf",
          file: { filePath: pdfPath, base64: pdf.toString("base64"), originalSize: pdf.length }
        })
        assert.strictEqual(marker["bytes_read"], response.length)
        assert.isAbove(Number(marker["input_bytes"]), Forwarder.MAX_EVENT_BYTES)
        assert.match(String(marker["input_sha256"]), /^[0-9a-f]{64}$/)
        assert.match(String(marker["not_recorded"]), /over the bound of 4 MiB/)
      } finally {
        if (guard.exitCode === null && guard.signalCode === null) guard.kill("SIGKILL")
      }
    },
    120_000
  )
})
