/**
 * `claude-code guard`, the resident guard, through the real binary in a child
 * process: requests an attacker or a broken client sends (raw sockets, so every
 * header is exactly what is written) each get a 4xx and record nothing; sixteen
 * concurrent PreToolUse on one session under `maxInvocations(5)` allow exactly
 * five (STRESS=1: 512 under `maxInvocations(100)`); SIGTERM with a request in flight answers and stores it, refuses new
 * connections and exits 0; the `sj1` proof (a replayed, stale, forged or
 * malformed one is refused; the answer is signed) and `GET /policy`; and the
 * forwarder (`claude-code forward`) trusts nothing but the guard: it denies by
 * itself, in each event's refusal form, when the guard cannot be reached or
 * refuses it, when another program on the port answers (garbage, a
 * well-formed answer without the guard's MAC, the guard's answer altered on the
 * way, an answer too large) — which never sees the token — and when an answer
 * trickles in past its deadline. A policy that sees calls judges the call's
 * input, an ask is answered `ask`, and `maxTokens` reads the session's
 * transcripts, a sub-agent's too.
 */
import { assert, describe, it } from "@effect/vitest"
import * as GuardAuth from "@session-journal/claude-code/GuardAuth"
import { Entry, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { ChildProcess } from "node:child_process"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, exited, hasNodeAdapter, killAll, run, start, tempDir, waitForLine } from "./Run.ts"
import { newKey, record } from "./TreeFixtures.ts"

const nodeAdapter = await hasNodeAdapter()
const TOKEN = "guard-test-token-0123456789abcdef"
const MAX_BODY_BYTES = 4 * 1024 * 1024
const started: Array<ChildProcess> = []
// STRESS=1: 512 concurrent calls against maxInvocations 100.
const STRESS = process.env["STRESS"] === "1"
const CALLS = STRESS ? 512 : 16
const ALLOWED = STRESS ? 100 : 5

afterAll(async () => {
  await killAll(started)
  cleanup()
})

interface Guard {
  readonly child: ChildProcess
  readonly port: number
  readonly url: string
  readonly dir: string
  readonly stdout: () => string
  readonly stderr: () => string
}

const guard = async (
  options: {
    readonly policy?: unknown
    readonly env?: NodeJS.ProcessEnv
    readonly dir?: string
    readonly args?: ReadonlyArray<string>
  } = {}
): Promise<Guard> => {
  const root = tempDir()
  const dir = options.dir ?? path.join(root, "journal")
  // These tests post as Claude Code's own http hooks do, with the token as a bearer token.
  const args = ["claude-code", "guard", "--port", "0", "--root", dir, "--accept-bearer", ...(options.args ?? [])]
  if (options.policy !== undefined) {
    fs.writeFileSync(path.join(root, "policy.json"), JSON.stringify(options.policy))
    args.push("--policy", path.join(root, "policy.json"))
  }
  const child = start(args, { env: options.env ?? { SESSION_JOURNAL_GUARD_TOKEN: TOKEN } })
  started.push(child)
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (b: Buffer) => (stdout += b.toString("utf8")))
  child.stderr!.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
  const line = await waitForLine(child, (l) => l.includes("listening at "))
  const url = line.slice(line.indexOf("http://"), line.indexOf(","))
  return { child, port: Number(new URL(url).port), url, dir, stdout: () => stdout, stderr: () => stderr }
}

// One request written byte for byte; resolves with the status and the body.
const raw = (port: number, head: string, body: Uint8Array | string = "") =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    socket.on("data", (b: Buffer) => chunks.push(b))
    socket.on("error", reject)
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      const status = Number(/^HTTP\/1\.[01] ([0-9]{3})/.exec(text)?.[1] ?? 0)
      resolve({ status, body: text.slice(text.indexOf("\r\n\r\n") + 4) })
    })
    // Not half-closed: the server answers `Connection: close` and closes (a client
    // that ends its side first may be taken for one that went away).
    socket.write(head)
    socket.write(body)
  })

const request = (
  port: number,
  body: string | Uint8Array,
  headers: Record<string, string | null> = {},
  method = "POST",
  target = "/hook"
) => {
  const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body
  const all: Record<string, string | null> = {
    Host: `127.0.0.1:${port}`,
    Authorization: `Bearer ${TOKEN}`,
    "Content-Type": "application/json",
    "Content-Length": String(bytes.length),
    Connection: "close",
    ...headers
  }
  const head = `${method} ${target} HTTP/1.1\r\n` +
    Object.entries(all).filter(([, v]) => v !== null).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "\r\n"
  return raw(port, head, bytes)
}

// One request with the given headers (null drops a default); resolves with the
// status, the headers (lower-case) and the body.
const rawWithHeaders = (
  port: number,
  body: string | Uint8Array,
  headers: Record<string, string | null>,
  method = "POST",
  target = "/hook"
) =>
  new Promise<{ status: number; headers: Record<string, string>; body: string }>((resolve, reject) => {
    const bytes = typeof body === "string" ? Buffer.from(body, "utf8") : body
    const all: Record<string, string | null> = {
      Host: `127.0.0.1:${port}`,
      "Content-Type": "application/json",
      "Content-Length": String(bytes.length),
      Connection: "close",
      ...headers
    }
    const socket = net.connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    socket.on("data", (b: Buffer) => chunks.push(b))
    socket.on("error", reject)
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      const head = text.slice(0, text.indexOf("\r\n\r\n"))
      const lines = head.split("\r\n")
      const status = Number(/^HTTP\/1\.[01] ([0-9]{3})/.exec(lines[0] ?? "")?.[1] ?? 0)
      const parsed: Record<string, string> = {}
      for (const line of lines.slice(1)) {
        const colon = line.indexOf(":")
        parsed[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
      }
      resolve({ status, headers: parsed, body: text.slice(text.indexOf("\r\n\r\n") + 4) })
    })
    socket.write(
      `${method} ${target} HTTP/1.1\r\n` +
        Object.entries(all).filter(([, v]) => v !== null).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "\r\n"
    )
    socket.write(bytes)
  })

const SID = "4d1c3f0e-8a2b-4c5d-9e6f-7a8b9c0d1e2f"

const preToolUse = (n: number, sid = SID) =>
  JSON.stringify({
    session_id: sid,
    transcript_path: `/tmp/x/.claude/projects/-tmp-x/${sid}.jsonl`,
    cwd: "/tmp/x",
    prompt_id: "273744da-0000-4000-8000-000000000000",
    permission_mode: "default",
    effort: { level: "medium" },
    hook_event_name: "PreToolUse",
    tool_name: "Read",
    tool_input: { file_path: `/tmp/x/notes-${n}.txt` },
    tool_use_id: `toolu_guardtest${n.toString().padStart(4, "0")}`
  })

const isDeny = (body: string): boolean => {
  const parsed = JSON.parse(body) as { hookSpecificOutput?: { permissionDecision?: string } }
  return parsed.hookSpecificOutput?.permissionDecision === "deny"
}

// Every tool entry of every session in the journal, read in this process (after
// the guard stopped) and verified.
const toolEntries = (dir: string) =>
  Effect.runPromise(
    Effect.gen(function*() {
      if (!fs.existsSync(dir)) return []
      const journal = yield* SessionJournal.SessionJournal
      const out: Array<{ session: string; tool_name: string; allowed: boolean }> = []
      for (const s of yield* journal.list) {
        yield* journal.verify(s.id)
        const entries = yield* Stream.runCollect(journal.entries(s.id))
        for (const e of entries) {
          if (Entry.isTool(e)) out.push({ session: s.id, tool_name: e.tool_name, allowed: e.allowed })
        }
      }
      return out
    }).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: dir })))))
  )

const sessionsIn = (dir: string): Array<string> =>
  fs.existsSync(dir) ? fs.readdirSync(dir).filter((n) => !n.startsWith(".")) : []

const stop = async (g: Guard) => {
  g.child.kill("SIGTERM")
  const code = await exited(g.child)
  assert.strictEqual(code, 0, g.stderr())
}

describe.skipIf(!nodeAdapter)("claude-code guard", () => {
  it("answers a request only with the token, a loopback Host, POST /hook, JSON within the bound; the rest records nothing", async () => {
    const g = await guard()
    const event = preToolUse(1)
    const refused: Array<[string, Promise<{ status: number; body: string }>, number]> = [
      ["no token", request(g.port, event, { Authorization: null }), 401],
      ["wrong token, same length", request(g.port, event, { Authorization: `Bearer ${TOKEN.slice(0, -1)}X` }), 401],
      ["wrong token, a prefix", request(g.port, event, { Authorization: `Bearer ${TOKEN.slice(0, 8)}` }), 401],
      ["token with another scheme", request(g.port, event, { Authorization: `Basic ${TOKEN}` }), 401],
      ["empty bearer", request(g.port, event, { Authorization: "Bearer " }), 401],
      ["a rebinding name", request(g.port, event, { Host: `127.0.0.1.nip.io:${g.port}` }), 403],
      ["another port", request(g.port, event, { Host: `127.0.0.1:${g.port + 1}` }), 403],
      ["a LAN address", request(g.port, event, { Host: `192.168.1.7:${g.port}` }), 403],
      ["GET", request(g.port, "", {}, "GET"), 405],
      ["another path", request(g.port, event, {}, "POST", "/hooks"), 404],
      ["text/plain", request(g.port, event, { "Content-Type": "text/plain" }), 415],
      ["no content type", request(g.port, event, { "Content-Type": null }), 415],
      ["declared over the bound", request(g.port, "", { "Content-Length": String(MAX_BODY_BYTES + 1) }), 413],
      ["not JSON", request(g.port, "{\"session_id\": "), 400],
      [
        "invalid UTF-8",
        request(
          g.port,
          Buffer.concat([Buffer.from("{\"session_id\":\""), Buffer.from([0xff, 0xfe]), Buffer.from("\"}")])
        ),
        400
      ],
      ["a JSON array", request(g.port, "[1,2,3]"), 400],
      ["a JSON string", request(g.port, "\"PreToolUse\""), 400],
      ["no event name", request(g.port, JSON.stringify({ session_id: SID, cwd: "/tmp/x" })), 400],
      ["10,000 levels deep", request(g.port, "[".repeat(10_000) + "]".repeat(10_000)), 400]
    ]
    for (const [what, answer, status] of refused) {
      const a = await answer
      assert.strictEqual(a.status, status, `${what}: ${a.body}`)
      assert.isString((JSON.parse(a.body) as { error: string }).error, what)
    }
    // A chunked body without a length, larger than the bound, is cut off while read.
    const chunked = await new Promise<number>((resolve, reject) => {
      const r = http.request({
        host: "127.0.0.1",
        port: g.port,
        method: "POST",
        path: "/hook",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }
      }, (res) => {
        res.resume()
        resolve(res.statusCode ?? 0)
      })
      r.on("error", (e) => (e.message.includes("EPIPE") || e.message.includes("ECONNRESET") ? resolve(413) : reject(e)))
      const piece = Buffer.alloc(1024 * 1024, 0x20)
      let sent = 0
      const more = () => {
        while (sent <= MAX_BODY_BYTES) {
          sent += piece.length
          if (!r.write(piece)) return void r.once("drain", more)
        }
        r.end()
      }
      more()
    })
    assert.strictEqual(chunked, 413)
    // A PreToolUse that is JSON but not a valid event is denied (a 4xx would let the
    // call run under an http hook), and recorded nowhere either.
    const { tool_use_id: _, ...incomplete } = JSON.parse(event) as Record<string, unknown>
    const invalid = await request(g.port, JSON.stringify(incomplete))
    assert.strictEqual(invalid.status, 200, invalid.body)
    assert.isTrue(isDeny(invalid.body), invalid.body)
    assert.include(invalid.body, "tool_use_id")
    assert.deepStrictEqual(sessionsIn(g.dir), [], "a refused request recorded something")

    // The same event, properly sent, is journaled: the refusals above were not vacuous.
    const ok = await request(g.port, event)
    assert.strictEqual(ok.status, 200, ok.body)
    assert.isFalse(isDeny(ok.body))
    await stop(g)
    const tools = await toolEntries(g.dir)
    assert.deepStrictEqual(tools.map((t) => [t.tool_name, t.allowed]), [["Read", true]])
  })

  it(`${CALLS} concurrent PreToolUse on one session under maxInvocations ${ALLOWED}: exactly ${ALLOWED} allowed`, async () => {
    const g = await guard({ policy: { maxInvocations: ALLOWED } })
    const agent = new http.Agent({ keepAlive: true, maxSockets: CALLS })
    const post = (body: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const r = http.request({
          host: "127.0.0.1",
          port: g.port,
          method: "POST",
          path: "/hook",
          agent,
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" }
        }, (res) => {
          const parts: Array<Buffer> = []
          res.on("data", (b: Buffer) => parts.push(b))
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts).toString("utf8") }))
        })
        r.on("error", reject)
        r.end(body)
      })
    const answers = await Promise.all(Array.from({ length: CALLS }, (_, i) => post(preToolUse(i))))
    agent.destroy()
    assert.deepStrictEqual(answers.map((a) => a.status), Array(CALLS).fill(200))
    const denied = answers.filter((a) => isDeny(a.body))
    assert.strictEqual(denied.length, CALLS - ALLOWED)
    for (const d of denied) assert.include(d.body, `maxInvocations(${ALLOWED})`)
    await stop(g)
    const tools = await toolEntries(g.dir)
    assert.strictEqual(tools.length, CALLS)
    assert.strictEqual(tools.filter((t) => t.allowed).length, ALLOWED)
    assert.strictEqual(new Set(tools.map((t) => t.session)).size, 1)
  })

  it("denies a call that touches its journal or its policy file by selfProtection, unless started with --no-self-protection", async () => {
    const touching = (dir: string, n: number) =>
      JSON.stringify({ ...JSON.parse(preToolUse(n)), tool_name: "Bash", tool_input: { command: `rm -rf ${dir}` } })
    const post = (g: Guard, body: string) =>
      fetch(`${g.url}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body
      }).then((r) => r.text())
    const g = await guard({ policy: { maxInvocations: 100 } })
    const denied = await post(g, touching(g.dir, 1))
    assert.isTrue(isDeny(denied), denied)
    assert.include(denied, "would touch the journal directory")
    assert.include(denied, "[selfProtection]")
    const allowed = await post(g, preToolUse(2))
    assert.isFalse(isDeny(allowed), allowed)
    await stop(g)
    const off = await guard({ args: ["--no-self-protection"] })
    assert.isFalse(isDeny(await post(off, touching(off.dir, 3))))
    await stop(off)
  })

  it("decides with the call, answers an ask with ask, and reads the tokens from the session's transcripts", async () => {
    const post = (g: Guard, body: string) =>
      fetch(`${g.url}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body
      }).then((r) => r.json() as Promise<{ hookSpecificOutput?: Record<string, string> }>)
    const root = tempDir()
    const sid = "7a1c0de0-0000-4000-8000-000000000001"
    const transcript = path.join(root, `${sid}.jsonl`)
    const usage = (id: string, n: number) =>
      JSON.stringify({ type: "assistant", message: { id, usage: { input_tokens: n, output_tokens: 0 } } }) + "\n"
    fs.writeFileSync(transcript, usage("m1", 400))
    const bash = (n: number, command: string) =>
      JSON.stringify({
        ...JSON.parse(preToolUse(n, sid)),
        transcript_path: transcript,
        tool_name: "Bash",
        tool_input: { command }
      })
    const g = await guard({
      policy: [{ deny: "Bash(rm -rf *)" }, { ask: "Bash(git push *)" }, { maxTokens: 1000 }]
    })
    assert.isUndefined((await post(g, bash(1, "ls"))).hookSpecificOutput)
    assert.strictEqual((await post(g, bash(2, "ls && rm -rf /"))).hookSpecificOutput?.["permissionDecision"], "deny")
    const asked = await post(g, bash(3, "git push origin main"))
    assert.strictEqual(asked.hookSpecificOutput?.["permissionDecision"], "ask")
    assert.include(asked.hookSpecificOutput?.["permissionDecisionReason"], "[ask(\"Bash(git push *)\")]")
    // A sub-agent's transcript crosses the budget: the next call is denied.
    fs.mkdirSync(path.join(root, sid, "subagents"), { recursive: true })
    fs.writeFileSync(path.join(root, sid, "subagents", "agent-a1.jsonl"), usage("s1", 700))
    const spent = await post(g, bash(4, "ls"))
    assert.strictEqual(spent.hookSpecificOutput?.["permissionDecision"], "deny")
    assert.include(spent.hookSpecificOutput?.["permissionDecisionReason"], "the agent used 1100 tokens")
    await stop(g)
  })

  it("takes a bearer token only with --accept-bearer; refuses a call naming its token file or variable", async () => {
    const root = tempDir()
    const tokenFile = path.join(root, "token")
    fs.writeFileSync(tokenFile, TOKEN + "\n", { mode: 0o600 })
    const child = start(
      ["claude-code", "guard", "--port", "0", "--root", path.join(root, "j"), "--token-file", tokenFile],
      { env: { SESSION_JOURNAL_GUARD_TOKEN: "" } }
    )
    started.push(child)
    const line = await waitForLine(child, (l) => l.includes("listening at "))
    const url = line.slice(line.indexOf("http://"), line.indexOf(","))
    const bearer = await fetch(url, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: preToolUse(1)
    })
    assert.strictEqual(bearer.status, 401)
    const ask = async (command: string) => {
      const r = await run(["claude-code", "forward", "--url", url, "--token-file", tokenFile], {
        input: JSON.stringify({ ...JSON.parse(preToolUse(2)), tool_name: "Bash", tool_input: { command } })
      })
      return r.stdout
    }
    assert.include(await ask(`cat ${tokenFile}`), "the guard's token file")
    assert.include(await ask("echo $SESSION_JOURNAL_GUARD_TOKEN"), "the guard's token variable")
    assert.isFalse(isDeny(await ask("ls")))
    child.kill("SIGTERM")
    assert.strictEqual(await exited(child), 0)
  })

  it("refuses a session that vanished or shrank while it was closed, instead of starting it afresh", async () => {
    const post = (g: Guard, body: string) =>
      fetch(`${g.url}`, {
        method: "POST",
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
        body
      }).then((r) => r.text())
    const g = await guard({ policy: { maxInvocations: 2 }, args: ["--idle-close", "100ms"] })
    const waitClosed = () => new Promise((resolve) => setTimeout(resolve, 600))
    assert.isFalse(isDeny(await post(g, preToolUse(1))))
    const [session] = sessionsIn(g.dir)
    // Deleted while the guard has it closed: the budget would start afresh.
    await waitClosed()
    fs.rmSync(path.join(g.dir, session!), { recursive: true })
    const vanished = await post(g, preToolUse(2))
    assert.isTrue(isDeny(vanished), vanished)
    assert.include(vanished, "holds 0 entries, fewer than the 2 the guard acknowledged")
    assert.isFalse(fs.existsSync(path.join(g.dir, session!)), "nothing was started afresh")
    await stop(g)

    // Whole lines cut off its tail (read as a torn tail) while it was closed.
    const h = await guard({ policy: { maxInvocations: 5 }, args: ["--idle-close", "100ms"] })
    assert.isFalse(isDeny(await post(h, preToolUse(3))))
    assert.isFalse(isDeny(await post(h, preToolUse(4))))
    await waitClosed()
    const dir = path.join(h.dir, sessionsIn(h.dir)[0]!)
    const segment = fs.readdirSync(dir).filter((n) => n.endsWith(".jsonl")).sort().at(-1)!
    const text = fs.readFileSync(path.join(dir, segment), "utf8").replace(/\0+$/, "")
    const lines = text.split("\n").filter((l) => l !== "")
    fs.writeFileSync(path.join(dir, segment), lines.slice(0, -2).join("\n") + "\n")
    const shrank = await post(h, preToolUse(5))
    assert.isTrue(isDeny(shrank), shrank)
    assert.include(shrank, "vanished or shrank")
    await stop(h)
  })

  it("SIGTERM answers and stores the request in flight, takes no new connection, and exits 0", async () => {
    const g = await guard()
    const body = Buffer.from(preToolUse(7), "utf8")
    const half = Math.floor(body.length / 2)
    const socket = net.connect(g.port, "127.0.0.1")
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()))
    const chunks: Array<Buffer> = []
    socket.on("data", (b: Buffer) => chunks.push(b))
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()))
    socket.write(
      `POST /hook HTTP/1.1\r\nHost: 127.0.0.1:${g.port}\r\nAuthorization: Bearer ${TOKEN}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`
    )
    socket.write(body.subarray(0, half))
    await new Promise((r) => setTimeout(r, 300))
    g.child.kill("SIGTERM")
    await new Promise((r) => setTimeout(r, 500))
    assert.isNull(g.child.exitCode, "the guard exited with a request in flight")
    // Stopped listening: a new connection is refused.
    const fresh = await new Promise<string>((resolve) => {
      const s = net.connect(g.port, "127.0.0.1")
      s.on("connect", () => {
        s.destroy()
        resolve("connected")
      })
      s.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? e.message))
    })
    assert.strictEqual(fresh, "ECONNREFUSED")
    socket.write(body.subarray(half))
    await closed
    const text = Buffer.concat(chunks).toString("utf8")
    assert.match(text, /^HTTP\/1\.1 200 /)
    assert.strictEqual(await exited(g.child), 0, g.stderr())
    const tools = await toolEntries(g.dir)
    assert.deepStrictEqual(tools.map((t) => t.tool_name), ["Read"])
  })

  it("writes a token it made to a new 0600 file in a 0700 directory and prints only its path; refuses a short one", async () => {
    const state = path.join(tempDir(), "state")
    const g = await guard({ env: { SESSION_JOURNAL_GUARD_TOKEN: "", XDG_STATE_HOME: state } })
    const dir = path.join(state, "session-journal")
    const files = fs.readdirSync(dir)
    assert.strictEqual(files.length, 1, g.stdout())
    const file = path.join(dir, files[0]!)
    assert.strictEqual(fs.statSync(dir).mode & 0o777, 0o700)
    assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
    const token = fs.readFileSync(file, "utf8").trim()
    assert.match(token, /^[A-Za-z0-9_-]{43}$/)
    assert.include(g.stdout(), file)
    assert.notInclude(g.stdout() + g.stderr(), token, "the token was printed")
    assert.strictEqual((await request(g.port, preToolUse(1))).status, 401)
    const ok = await request(g.port, preToolUse(1), { Authorization: `Bearer ${token}` })
    assert.strictEqual(ok.status, 200, ok.body)
    // The forwarder reads the same file.
    const forwarded = await forward(g.url, preToolUse(2), {}, ["--token-file", file])
    assert.strictEqual(forwarded.code, 0, forwarded.stderr)
    assert.deepStrictEqual(JSON.parse(forwarded.stdout), {})
    await stop(g)

    // --token-file FILE: read when it exists (the same token across restarts), refused when others may read it.
    const again = await guard({ env: { SESSION_JOURNAL_GUARD_TOKEN: "" }, args: ["--token-file", file] })
    assert.notInclude(again.stdout(), "made a token")
    assert.strictEqual((await request(again.port, preToolUse(3), { Authorization: `Bearer ${token}` })).status, 200)
    await stop(again)
    fs.chmodSync(file, 0o640)
    const exposed = await run([
      "claude-code",
      "guard",
      "--port",
      "0",
      "--root",
      path.join(state, "j"),
      "--token-file",
      file
    ], {
      env: { SESSION_JOURNAL_GUARD_TOKEN: "" }
    })
    assert.strictEqual(exposed.code, 2, exposed.stderr)
    assert.include(exposed.stderr, `the token file ${file} may be read by others (mode 640); chmod 600 ${file}`)

    const root = tempDir()
    const short = await run(["claude-code", "guard", "--port", "0", "--root", path.join(root, "j")], {
      env: { SESSION_JOURNAL_GUARD_TOKEN: "short" }
    })
    assert.strictEqual(short.code, 2, short.stderr)
    assert.include(short.stderr, "SESSION_JOURNAL_GUARD_TOKEN")
    const both = await run([
      "--dir",
      path.join(root, "a"),
      "claude-code",
      "guard",
      "--port",
      "0",
      "--root",
      path.join(root, "b")
    ], {
      env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN }
    })
    assert.strictEqual(both.code, 2, both.stderr)
    assert.include(both.stderr, "not both")
  })

  it("sj1: a proved request is answered with a MAC over its nonce; replayed, stale, forged and malformed proofs get 401", async () => {
    const g = await guard({ policy: { denyList: ["Bash"] } })
    const body = Buffer.from(preToolUse(1), "utf8")
    const signed = (time: number, b: Uint8Array = body, nonce?: string) =>
      GuardAuth.sign(TOKEN, { method: "POST", path: "/hook", time }, b, nonce)
    const first = signed(Date.now())
    const headers = { Authorization: null, [GuardAuth.AUTH_HEADER]: first.header }
    const answered = await rawWithHeaders(g.port, body, headers)
    assert.strictEqual(answered.status, 200, answered.body)
    assert.isTrue(
      GuardAuth.verifyAnswer(
        TOKEN,
        first.nonce,
        answered.headers[GuardAuth.ANSWER_HEADER],
        200,
        Buffer.from(answered.body, "utf8")
      ),
      "the answer's MAC does not verify"
    )
    assert.isFalse(
      GuardAuth.verifyAnswer(
        TOKEN,
        GuardAuth.makeNonce(),
        answered.headers[GuardAuth.ANSWER_HEADER],
        200,
        Buffer.from(answered.body, "utf8")
      )
    )
    const refusedWith = async (what: string, h: Record<string, string | null>, b: Uint8Array = body) => {
      const a = await rawWithHeaders(g.port, b, { Authorization: null, ...h })
      assert.strictEqual(a.status, 401, `${what}: ${a.body}`)
      assert.isUndefined(a.headers[GuardAuth.ANSWER_HEADER], `${what}: a refusal was signed`)
      return (JSON.parse(a.body) as { error: string }).error
    }
    assert.include(await refusedWith("replayed", headers), "replay")
    assert.include(
      await refusedWith("stale", { [GuardAuth.AUTH_HEADER]: signed(Date.now() - 5 * 60_000).header }),
      "from the guard's clock"
    )
    assert.include(
      await refusedWith("future", { [GuardAuth.AUTH_HEADER]: signed(Date.now() + 5 * 60_000).header }),
      "from the guard's clock"
    )
    const other = Buffer.from(preToolUse(2), "utf8")
    await refusedWith("another body", { [GuardAuth.AUTH_HEADER]: signed(Date.now(), body).header }, other)
    const wrongKey = GuardAuth.sign(
      "not-the-token-at-all-0000",
      { method: "POST", path: "/hook", time: Date.now() },
      body
    )
    await refusedWith("another key", { [GuardAuth.AUTH_HEADER]: wrongKey.header })
    await refusedWith("malformed", { [GuardAuth.AUTH_HEADER]: "sj1 1 2 3" })
    // A malformed proof is refused even beside a right bearer token.
    await refusedWith("malformed beside a bearer", { [GuardAuth.AUTH_HEADER]: "sj1", Authorization: `Bearer ${TOKEN}` })

    // GET /policy, proved either way, reports what the guard runs.
    const get = GuardAuth.sign(TOKEN, { method: "GET", path: "/policy", time: Date.now() }, new Uint8Array(0))
    const policy = await rawWithHeaders(
      g.port,
      "",
      { Authorization: null, [GuardAuth.AUTH_HEADER]: get.header, "Content-Type": null },
      "GET",
      "/policy"
    )
    assert.strictEqual(policy.status, 200, policy.body)
    assert.deepStrictEqual(JSON.parse(policy.body), {
      policy: JSON.stringify({ denyList: ["Bash"] }),
      sha256: crypto.createHash("sha256").update(JSON.stringify({ denyList: ["Bash"] })).digest("hex"),
      name: "denyList([\"Bash\"])"
    })
    assert.isTrue(
      GuardAuth.verifyAnswer(TOKEN, get.nonce, policy.headers[GuardAuth.ANSWER_HEADER], 200, Buffer.from(policy.body))
    )
    assert.strictEqual((await request(g.port, "", { "Content-Type": null }, "GET", "/policy")).status, 200)
    assert.strictEqual(
      (await request(g.port, "", { Authorization: null, "Content-Type": null }, "GET", "/policy")).status,
      401
    )
    assert.strictEqual((await request(g.port, preToolUse(9), {}, "POST", "/policy")).status, 405)
    await stop(g)
    const tools = await toolEntries(g.dir)
    assert.deepStrictEqual(tools.map((t) => [t.tool_name, t.allowed]), [["Read", true]])
  })

  it("refuses a Stop it cannot journal with stop_hook_active: blocked once, let through when a refusal already kept it going", async () => {
    const g = await guard()
    const stopWithout = (active: boolean) =>
      JSON.stringify({ hook_event_name: "Stop", stop_hook_active: active, cwd: "/tmp/x" })
    const blocked = await request(g.port, stopWithout(false))
    assert.strictEqual(blocked.status, 200, blocked.body)
    assert.strictEqual((JSON.parse(blocked.body) as { decision: string }).decision, "block")
    const through = await request(g.port, stopWithout(true))
    assert.strictEqual(through.status, 200, through.body)
    assert.deepStrictEqual(JSON.parse(through.body), {})
    await stop(g)
  })
})

// A port nothing listens on: bound, then closed.
const closedPort = async (): Promise<number> => {
  const server = net.createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as net.AddressInfo).port
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

const forward = (
  url: string,
  input: string,
  env: NodeJS.ProcessEnv = { SESSION_JOURNAL_GUARD_TOKEN: TOKEN },
  extra: ReadonlyArray<string> = []
) => run(["claude-code", "forward", "--url", url, ...extra], { input, env })

describe.skipIf(!nodeAdapter)("claude-code forward", () => {
  it("an outcome over the bound reaches the guard as a marker (its size, its hash): its bytes still count", async () => {
    const g = await guard({ policy: { maxBytesRead: 1000 } })
    const allowed = await forward(g.url, preToolUse(1))
    assert.deepStrictEqual(JSON.parse(allowed.stdout), {}, allowed.stderr)
    // As Claude Code writes it, tool_use_id after the response: 5 MiB read by the call.
    const response = `{"stdout":"${"x".repeat(5 * 1024 * 1024)}","stderr":""}`
    const base = JSON.parse(preToolUse(1)) as Record<string, unknown>
    delete base["tool_use_id"]
    const post = JSON.stringify({ ...base, hook_event_name: "PostToolUse", tool_name: "Bash" }).slice(0, -1) +
      `,"tool_response":${response},"tool_use_id":"toolu_guardtest0001","duration_ms":5}`
    const posted = await forward(g.url, post)
    assert.strictEqual(posted.code, 0, posted.stderr)
    assert.deepStrictEqual(JSON.parse(posted.stdout), {}, posted.stderr)
    const next = await forward(g.url, preToolUse(2))
    assert.match(denial(next.stdout), /\[maxBytesRead\(1000\)\]/)
    // Any other event over the bound is refused unread (the command hook's rule).
    const prompt = await forward(
      g.url,
      JSON.stringify({
        session_id: SID,
        cwd: "/tmp/x",
        hook_event_name: "UserPromptSubmit",
        prompt: "y".repeat(MAX_BODY_BYTES)
      })
    )
    assert.strictEqual(prompt.code, 2)
    assert.include(prompt.stderr, "larger than")
    await stop(g)
    const outcomes = await Effect.runPromise(
      Effect.gen(function*() {
        const journal = yield* SessionJournal.SessionJournal
        const out: Array<Record<string, unknown>> = []
        for (const s of yield* journal.list) {
          for (const e of yield* Stream.runCollect(journal.entries(s.id))) {
            if (e.kind === Entry.OUTCOME_KIND) out.push(e.payload as Record<string, unknown>)
          }
        }
        return out
      }).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: g.dir })))))
    )
    assert.strictEqual(outcomes.length, 1, JSON.stringify(outcomes))
    const marker = outcomes[0]!
    // The response's size as written (its JSON text): what is known of it unread.
    assert.strictEqual(marker["bytes_read"], response.length)
    assert.strictEqual(marker["input_bytes"], Buffer.byteLength(post))
    assert.strictEqual(marker["input_sha256"], crypto.createHash("sha256").update(post).digest("hex"))
    assert.match(String(marker["not_recorded"]), /over the bound of 4 MiB/)
  })

  it("denies by itself when the guard is not reachable, per event", async () => {
    const url = `http://127.0.0.1:${await closedPort()}/hook`
    const pre = await forward(url, preToolUse(1))
    assert.strictEqual(pre.code, 0, pre.stderr)
    const out = JSON.parse(pre.stdout) as {
      hookSpecificOutput: { permissionDecision: string; permissionDecisionReason: string }
    }
    assert.strictEqual(out.hookSpecificOutput.permissionDecision, "deny")
    assert.include(
      out.hookSpecificOutput.permissionDecisionReason,
      `the session-journal guard at ${url} is not reachable`
    )
    assert.include(out.hookSpecificOutput.permissionDecisionReason, "ECONNREFUSED")

    const prompt = await forward(
      url,
      JSON.stringify({ session_id: SID, hook_event_name: "UserPromptSubmit", prompt: "hi" })
    )
    assert.strictEqual(prompt.code, 2)
    assert.include(prompt.stderr, "not reachable")
    // Every other event: exit 2 (Refusal.refusal, as the command hook), not 1, on
    // which Claude Code goes on as if nothing happened.
    for (const event of ["PostToolUse", "SessionStart", "PostToolUseFailure", "SubagentStart", "PreCompact"]) {
      const other = await forward(
        url,
        JSON.stringify({ session_id: SID, hook_event_name: event, tool_name: "Read" })
      )
      assert.strictEqual(other.code, 2, event)
      assert.include(other.stderr, "not reachable")
    }
    // A Stop is kept going once (exit 2), let through when a refusal already did (exit 1).
    for (const event of ["Stop", "SubagentStop"]) {
      const once = await forward(
        url,
        JSON.stringify({ session_id: SID, hook_event_name: event, stop_hook_active: false })
      )
      assert.strictEqual(once.code, 2, event)
      const again = await forward(
        url,
        JSON.stringify({ session_id: SID, hook_event_name: event, stop_hook_active: true })
      )
      assert.strictEqual(again.code, 1, event)
      assert.include(again.stderr, "not reachable")
    }
    const permission = await forward(
      url,
      JSON.stringify({ session_id: SID, cwd: "/tmp/x", hook_event_name: "PermissionRequest", tool_name: "Bash" })
    )
    assert.strictEqual(permission.code, 0)
    const decision = (JSON.parse(permission.stdout) as {
      hookSpecificOutput: { hookEventName: string; decision: { behavior: string } }
    }).hookSpecificOutput
    assert.strictEqual(decision.hookEventName, "PermissionRequest")
    assert.strictEqual(decision.decision.behavior, "deny")
    assert.include(permission.stdout, "not reachable")
    const garbage = await forward(url, "this is { not json")
    assert.strictEqual(garbage.code, 2)
    const noToken = await forward(url, preToolUse(1), { SESSION_JOURNAL_GUARD_TOKEN: "" })
    assert.include(noToken.stdout, "\"deny\"")
    assert.include(noToken.stdout, "SESSION_JOURNAL_GUARD_TOKEN is not set")
  })

  it("passes the guard's answer through, and denies when the guard refuses its token", async () => {
    const g = await guard({ policy: { denyList: ["Read"] } })
    const denied = await forward(g.url, preToolUse(1))
    assert.strictEqual(denied.code, 0, denied.stderr)
    assert.isTrue(isDeny(denied.stdout))
    assert.include(denied.stdout, "denyList([\\\"Read\\\"])")
    const recorded = await forward(
      g.url,
      JSON.stringify({ session_id: SID, cwd: "/tmp/x", hook_event_name: "Stop", stop_hook_active: false })
    )
    assert.strictEqual(recorded.code, 0, recorded.stderr)
    assert.deepStrictEqual(JSON.parse(recorded.stdout), {})

    const wrong = await forward(g.url, preToolUse(2), { SESSION_JOURNAL_GUARD_TOKEN: "not-the-token-at-all-0000" })
    assert.isTrue(isDeny(wrong.stdout))
    assert.include(wrong.stdout, "answered 401 without proof that it holds the token")
    const file = path.join(tempDir(), "token")
    fs.writeFileSync(path.join(file), TOKEN + "\n", { mode: 0o600 })
    const fromFile = await forward(g.url, preToolUse(3), {}, ["--token-file", file])
    assert.isTrue(isDeny(fromFile.stdout))
    assert.include(fromFile.stdout, "denyList")
    // A token file others may read is not used: the call is denied without asking.
    fs.chmodSync(file, 0o644)
    const readable = await forward(g.url, preToolUse(4), {}, ["--token-file", file])
    assert.isTrue(isDeny(readable.stdout))
    assert.include(readable.stdout, "may be read by others (mode 644)")
    await stop(g)
    const tools = await toolEntries(g.dir)
    // The call sent with a wrong token was not recorded.
    assert.deepStrictEqual(tools.map((t) => t.allowed), [false, false])
  })
})

// A program on the guard's port that is not the guard: it answers every request
// with `answer` and keeps what it was sent.
const squatter = async (
  answer: (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void
) => {
  const seen: Array<string> = []
  const timers = new Set<ReturnType<typeof setInterval>>()
  const server = http.createServer((req, res) => {
    const parts: Array<Buffer> = []
    req.on("data", (b: Buffer) => parts.push(b))
    req.on("end", () => {
      const body = Buffer.concat(parts)
      seen.push(JSON.stringify(req.headers) + "\n" + req.method + " " + req.url + "\n" + body.toString("utf8"))
      answer(req, res, body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()))
  const port = (server.address() as net.AddressInfo).port
  return {
    url: `http://127.0.0.1:${port}/hook`,
    seen,
    every: (ms: number, f: () => void) => {
      const t = setInterval(f, ms)
      timers.add(t)
      return t
    },
    close: async () => {
      for (const t of timers) clearInterval(t)
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

const denial = (stdout: string): string => {
  const out = JSON.parse(stdout) as {
    hookSpecificOutput: { hookEventName: string; permissionDecision: string; permissionDecisionReason: string }
  }
  assert.strictEqual(out.hookSpecificOutput.hookEventName, "PreToolUse")
  assert.strictEqual(out.hookSpecificOutput.permissionDecision, "deny")
  return out.hookSpecificOutput.permissionDecisionReason
}

describe.skipIf(!nodeAdapter)("claude-code forward trusts only the guard", () => {
  it("another program on the port answering 200 garbage, or a well-formed answer without the guard's MAC: denied; it never sees the token", async () => {
    const answers: Array<[string, (res: http.ServerResponse) => void]> = [
      ["html", (res) => {
        res.writeHead(200, { "content-type": "text/html" })
        res.end("<html>ok</html>")
      }],
      ["an allow without a MAC", (res) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(
          JSON.stringify({
            hookSpecificOutput: {
              hookEventName: "PreToolUse",
              permissionDecision: "allow",
              permissionDecisionReason: "ok"
            }
          })
        )
      }],
      ["{} with a made-up MAC", (res) => {
        res.writeHead(200, { "content-type": "application/json", [GuardAuth.ANSWER_HEADER]: `sj1 ${"A".repeat(43)}` })
        res.end("{}")
      }],
      ["an empty 200", (res) => {
        res.writeHead(200)
        res.end()
      }]
    ]
    for (const [what, answer] of answers) {
      const s = await squatter((_req, res) => answer(res))
      try {
        const r = await forward(s.url, preToolUse(1))
        assert.strictEqual(r.code, 0, `${what}: ${r.stderr}`)
        assert.include(denial(r.stdout), "without proof that it holds the token", what)
        assert.strictEqual(s.seen.length, 1, what)
        assert.notInclude(s.seen[0]!, TOKEN, `${what}: the token was sent`)
        // Nor anything the token could be read back from without the HMAC's key.
        assert.notInclude(s.seen[0]!.toLowerCase(), "authorization", what)
        // A Stop (exit 2) and a PostToolUse (exit 2) are refused too, not passed through.
        const post = await forward(s.url, JSON.stringify({ session_id: SID, hook_event_name: "PostToolUse" }))
        assert.strictEqual(post.code, 2, `${what}: ${post.stdout}`)
        assert.strictEqual(post.stdout, "")
      } finally {
        await s.close()
      }
    }
  })

  it("the guard's own answer altered on the way (allow for deny) is denied; an answer over the bound is denied", async () => {
    const g = await guard({ policy: { denyList: ["Read"] } })
    // A relay in front of the guard that turns its deny into an allow.
    const relay = await squatter((req, res, body) => {
      const upstream = http.request({
        host: "127.0.0.1",
        port: g.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: `127.0.0.1:${g.port}` }
      }, (up) => {
        const parts: Array<Buffer> = []
        up.on("data", (b: Buffer) => parts.push(b))
        up.on("end", () => {
          const text = Buffer.concat(parts).toString("utf8").replace("\"deny\"", "\"allow\"")
          res.writeHead(up.statusCode ?? 500, { ...up.headers, "content-length": Buffer.byteLength(text) })
          res.end(text)
        })
      })
      upstream.end(body)
    })
    const huge = await squatter((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({ reason: "x".repeat(2 * 1024 * 1024) }))
    })
    try {
      const altered = await forward(relay.url, preToolUse(1))
      assert.strictEqual(altered.code, 0, altered.stderr)
      assert.include(denial(altered.stdout), "without proof that it holds the token")
      const direct = await forward(g.url, preToolUse(2))
      assert.include(denial(direct.stdout), "denyList")
      const big = await forward(huge.url, preToolUse(3))
      assert.include(denial(big.stdout), `larger than ${1024 * 1024} bytes`)
    } finally {
      await relay.close()
      await huge.close()
      await stop(g)
    }
  })

  it("one deadline for the whole exchange: a program that trickles a byte a second is denied when it passes", {
    timeout: 60_000
  }, async () => {
    // Headers at once, then one byte of body a second: each byte resets an idle timeout, never a deadline.
    const body = await squatter((_req, res) => {
      res.writeHead(200, { "content-type": "application/json" })
      res.write("{")
      body.every(1000, () => res.write(" "))
    })
    // The status line, then one byte of a header a second.
    const head = await squatter((req, _res) => {
      const socket = req.socket
      socket.write("HTTP/1.1 200 OK\r\nX-Slow: ")
      head.every(1000, () => socket.write("a"))
    })
    try {
      for (const s of [body, head]) {
        const r = await forward(s.url, preToolUse(1), { SESSION_JOURNAL_GUARD_TOKEN: TOKEN }, ["--timeout-ms", "2500"])
        assert.strictEqual(r.code, 0, r.stderr)
        assert.include(denial(r.stdout), "did not answer within 2500 ms")
        const prompt = await forward(
          s.url,
          JSON.stringify({ session_id: SID, hook_event_name: "UserPromptSubmit", prompt: "hi" }),
          { SESSION_JOURNAL_GUARD_TOKEN: TOKEN },
          ["--timeout-ms", "1000"]
        )
        assert.strictEqual(prompt.code, 2)
        assert.include(prompt.stderr, "did not answer within 1000 ms")
      }
    } finally {
      await body.close()
      await head.close()
    }
  })
})

describe.skipIf(!nodeAdapter)("claude-code guard --publish", () => {
  it("publishes the sessions it writes as tiles that verify; a published log its journal does not extend stops it with exit 1", async () => {
    const root = tempDir()
    const key = await newKey(root, "guard.example/j")
    const out = path.join(root, "published")
    const publishing = ["--publish", out, "--sign", key.file, "--publish-every", "100ms"]
    const g = await guard({ args: publishing })
    for (const n of [1, 2, 3]) assert.strictEqual((await request(g.port, preToolUse(n))).status, 200)
    // Each run says what it published; the first line names the session.
    while (!/^\S+: published \d+ entr/m.test(g.stdout())) await new Promise((resolve) => setTimeout(resolve, 50))
    const id = /^(\S+): published /m.exec(g.stdout())![1]!
    const verified = await run(["--json", "verify-remote", path.join(out, id), "--key", key.vkey])
    assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
    await stop(g)

    // The session's published log replaced by another one under the same key (a fork).
    const other = path.join(root, "other")
    await record(other, id, 2, "forged")
    fs.rmSync(path.join(out, id), { recursive: true })
    const forged = await run(["--dir", other, "publish", id, "--out", path.join(out, id), "--sign", key.file])
    assert.strictEqual(forged.code, 0, forged.stderr)
    const again = await guard({ dir: g.dir, args: publishing })
    assert.strictEqual(await exited(again.child), 1, again.stderr())
    assert.include(again.stderr(), "does not extend the published checkpoint")
  })

  it("--sign, --witness and --publish-every only with --publish, and --publish only with --sign", async () => {
    const dir = tempDir()
    for (
      const [args, says] of [
        [["--sign", "k"], "--sign: only with --publish DIR"],
        [["--publish-every", "1s"], "--publish-every: only with --publish DIR"],
        [["--publish", "out"], "needs --sign FILE"]
      ] as const
    ) {
      const r = await run(["claude-code", "guard", "--port", "0", "--root", dir, ...args], {
        env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN }
      })
      assert.strictEqual(r.code, 2, r.stderr)
      assert.include(r.stderr, says)
    }
  })
})
