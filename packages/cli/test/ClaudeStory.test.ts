/**
 * One story per Claude Code session. The real Claude Code CLI (offline, against
 * the fake Messages API of `@session-journal/claude-code`'s tests) runs with our
 * hooks installed by `claude-code install` and a policy: a Write the policy
 * denies, a Bash that Claude Code's own permission rules refuse (not in
 * `--allowedTools`), a Read that runs. Then `claude-code archive` takes custody of
 * its transcript in the same journal. The two sessions name each other in their
 * metadata; custody records both refused calls `allowed: false`; `stats` says
 * which session counts the calls (the hooked one: custody's tool entries are
 * copies) and shows each session's denials with their guards; `report` and
 * `serve` show the same.
 *
 * The hooks run the command as it ships, one bundle (`scripts/bundle.ts`), as in
 * `ClaudeHook.test.ts`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Hook, ProjectDir, SessionIds } from "@session-journal/claude-code"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { afterAll, beforeAll } from "vitest"
import { baseEnv, BUNDLE, exited, hasNodeAdapter, run as runSources, waitForLine } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()

let bundle = ""
const started: Array<ChildProcess> = []

beforeAll(() => {
  if (Claude.CLAUDE_BIN === null || !nodeAdapter) return
  bundle = BUNDLE
})

afterAll(async () => {
  for (const child of started) {
    if (child.exitCode === null) {
      child.kill("SIGTERM")
      await exited(child)
    }
  }
  Claude.cleanup()
})

const run = (args: ReadonlyArray<string>) => runSources([bundle, ...args], { command: process.execPath })

const get = (port: number, target: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    http.get({ host: "127.0.0.1", port, path: target }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (b: Buffer) => chunks.push(b))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
    }).on("error", reject)
  })

type Json = Record<string, unknown>

describe.skipIf(Claude.CLAUDE_BIN === null || !nodeAdapter)("one story per Claude Code session", () => {
  it(
    "the hooked session and the custody of its transcript name each other, count the calls once and show the denials with their guards",
    async () => {
      const root = Claude.tempDir()
      const work = path.join(root, "work")
      const home = path.join(root, "home")
      fs.mkdirSync(work, { recursive: true })
      fs.writeFileSync(path.join(work, "notes.txt"), "alpha\n")
      const policyFile = path.join(root, "policy.json")
      fs.writeFileSync(policyFile, JSON.stringify({ denyList: ["Write"] }))
      const journal = path.join(root, "journal")
      const installed = await run([
        "--dir",
        journal,
        "claude-code",
        "install",
        "--project",
        work,
        "--policy",
        policyFile
      ])
      assert.strictEqual(installed.code, 0, installed.stderr)

      const api = await Fake.start(Fake.perConversation(() => [
        Fake.tools({ name: "Write", input: { file_path: path.join(work, "written.txt"), content: "no\n" } }),
        Fake.tools(Fake.bash("echo ran > ran.txt", "needs approval")),
        Fake.tools({ name: "Read", input: { file_path: path.join(work, "notes.txt") } }),
        Fake.text("Two refused, one read.")
      ]))
      let sid: string
      try {
        const r = await Claude.run({
          api,
          prompt: "Write, run, read.",
          tools: ["Bash", "Read", "Write"],
          allowedTools: ["Read", "Write"],
          work,
          home
        })
        assert.isFalse(r.timedOut, r.stderr)
        assert.strictEqual(r.code, 0, r.stderr)
        assert.deepStrictEqual(api.connects, [])
        assert.isFalse(fs.existsSync(path.join(work, "written.txt")), "the denied Write wrote")
        assert.isFalse(fs.existsSync(path.join(work, "ran.txt")), "the refused Bash ran")
        assert.deepStrictEqual(
          (r.result?.["permission_denials"] as Array<Json> | undefined ?? []).map((d) => d["tool_name"]),
          ["Write", "Bash"]
        )
        sid = r.sessionId!
      } finally {
        await api.close()
      }

      // Before custody is archived, stats names it and says it is not there yet.
      const hookedFirst = Hook.sessionId({ session_id: sid, cwd: work, hook_event_name: "x" })
      const early = await run(["--dir", journal, "stats", hookedFirst])
      assert.strictEqual(early.code, 0, early.stderr)
      assert.match(
        early.stdout,
        /\ncustody {10}cc-\S+ \(not archived yet: `session-journal claude-code archive` makes it\)\n/
      )
      assert.match(
        early.stdout,
        /\nbytes written {4}\d+ \(a Claude Code call's input counts as the JSON text of its tool_input\)\n/
      )

      const archived = await run([
        "--dir",
        journal,
        "--json",
        "claude-code",
        "archive",
        "--source",
        path.join(home, ".claude", "projects")
      ])
      assert.strictEqual(archived.code, 0, archived.stderr)
      const hooked = Hook.sessionId({ session_id: sid, cwd: work, hook_event_name: "x" })
      const custody = SessionIds.sessionId({ _tag: "Main", project: ProjectDir.encode(work), session: sid })
      const list = await run(["--dir", journal, "--json", "list"])
      assert.deepStrictEqual(
        (JSON.parse(list.stdout) as { sessions: Array<Json> }).sessions.map((s) => s["id"]).sort(),
        [custody, hooked].sort()
      )

      // They name each other.
      const statsOf = async (id: string) => {
        const s = await run(["--dir", journal, "--json", "stats", id])
        assert.strictEqual(s.code, 0, s.stderr)
        return JSON.parse(s.stdout) as Json
      }
      const [h, c] = [await statsOf(hooked), await statsOf(custody)]
      assert.strictEqual(((h["meta"] as Json)["data"] as Json)["custody_session"], custody)
      assert.strictEqual(((c["meta"] as Json)["data"] as Json)["hooked_session"], hooked)

      // Custody: both refusals allowed: false (no guard it could name), the Read allowed.
      const shown = await run(["--dir", journal, "--json", "show", custody])
      const tools = shown.stdout.trim().split("\n").map((l) => JSON.parse(l) as Json).filter((e) =>
        e["kind"] === "tool"
      )
      assert.deepStrictEqual(tools.map((t) => [t["tool_name"], t["allowed"]]), [["Write", false], ["Bash", false], [
        "Read",
        true
      ]])
      assert.deepStrictEqual(c["denials"], { denied: 2, by_guard: [], unguarded: 2 })
      // The hooked session decided: its guard denied the Write; the Bash it let through
      // was refused afterwards by Claude Code's own rules, which only custody sees.
      assert.deepStrictEqual(h["denials"], {
        denied: 1,
        by_guard: [{ guard: "denyList([\"Write\"])", count: 1 }],
        unguarded: 0
      })

      // Counted once: the hooked session counts; custody says its calls are copies.
      assert.strictEqual(h["counted_in"], null)
      assert.strictEqual(c["counted_in"], hooked)
      assert.strictEqual((c["data_flow"] as Json)["total_invocations"], 3)
      assert.strictEqual((h["data_flow"] as Json)["total_invocations"], 3)
      const text = await run(["--dir", journal, "stats", custody])
      assert.include(
        text.stdout,
        `counted in       ${hooked} (it decided these calls; the tool entries here are copies`
      )
      assert.include(text.stdout, "denied           2\ndenied by        (no guard recorded) 2\n")
      const hookedText = await run(["--dir", journal, "stats", hooked])
      assert.include(hookedText.stdout, "denied           1\ndenied by        denyList([\"Write\"]) 1\n")
      assert.include(hookedText.stdout, `custody          ${custody}\n`)
      assert.notInclude(hookedText.stdout, "counted in")
      // --no-denials: the snapshot alone, no pass over the history.
      const quick = await run(["--dir", journal, "--json", "stats", hooked, "--no-denials"])
      assert.strictEqual(quick.code, 0, quick.stderr)
      assert.isNull(JSON.parse(quick.stdout)["denials"])
      assert.strictEqual(JSON.parse(quick.stdout)["head_hash"], h["head_hash"])

      // report: the denials with their guards, the two sessions linked, custody's calls marked as copies.
      const page = path.join(root, "hooked.html")
      const rep = await run(["--dir", journal, "report", hooked, "--out", page])
      assert.strictEqual(rep.code, 0, rep.stderr)
      const html = fs.readFileSync(page, "utf8")
      assert.include(html, `<h3>Denials per guard</h3>`)
      assert.match(
        html,
        /<table class="tl" id="denials">.*<b>Write<\/b>.*<code>denyList\(\[&quot;Write&quot;\]\)<\/code>.*Write is on the deny list/s
      )
      assert.match(
        html,
        // The denied call, its decision folded in: one row with the guard that denied it.
        /data-tool="Write" [^>]*data-verdict="deny" class="call tool denied">.*<em>DENIED<\/em> <i>by<\/i> <code class="guard">denyList/
      )
      assert.include(html, `id="custody-session"><a href="${custody}.html">${custody}</a>`)
      const custodyPage = path.join(root, "custody.html")
      assert.strictEqual((await run(["--dir", journal, "report", custody, "--out", custodyPage])).code, 0)
      const chtml = fs.readFileSync(custodyPage, "utf8")
      assert.include(chtml, `<span class="muted" id="counted-in">copies, counted in ${hooked}</span>`)
      assert.include(
        chtml,
        `id="hooked-session"><a href="${hooked}.html">${hooked}</a> <span class="muted">(it decided and counted these calls`
      )
      assert.include(chtml, `<span class="badge bad">2 denied</span> no guard recorded 2`)

      // serve: the same header and denials.
      const child = spawn(process.execPath, [bundle, "--dir", journal, "serve", "--port", "0"], {
        env: baseEnv(),
        stdio: ["ignore", "pipe", "pipe"]
      })
      started.push(child)
      const line = await waitForLine(child, (l) => l.startsWith("serving "))
      const port = Number(new URL(line.slice(line.indexOf("http://"))).port)
      const served = await get(port, `/sessions/${hooked}`)
      assert.strictEqual(served.status, 200)
      assert.include(served.body, `<h3>Denials per guard</h3>`)
      assert.match(served.body, /<table class="tl" id="denials">.*<code>denyList\(\[&quot;Write&quot;\]\)<\/code>/s)
      assert.include(served.body, `<code class="guard">denyList`)
      const servedCustody = await get(port, `/sessions/${custody}`)
      assert.include(servedCustody.body, `copies, counted in ${hooked}`)
      child.kill("SIGTERM")
      await exited(child)
    },
    180_000
  )
})
