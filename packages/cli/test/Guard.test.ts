/**
 * `claude-code guard`, the resident guard, through the real binary in a child
 * process: requests an attacker or a broken client sends (raw sockets, so every
 * header is exactly what is written) each get a 4xx and record nothing; sixteen
 * concurrent PreToolUse on one session under `maxInvocations(5)` allow exactly
 * five (STRESS=1: 512 under `maxInvocations(100)`); SIGTERM with a request in flight answers and stores it, refuses new
 * connections and exits 0; and the forwarder (`claude-code forward`) denies by
 * itself when the guard cannot be reached or refuses it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, SessionJournal } from "@session-journal/core"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import type { ChildProcess } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll } from "vitest"
import { cleanup, exited, hasNodeAdapter, run, start, tempDir, waitForLine } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()
const TOKEN = "guard-test-token-0123456789abcdef"
const MAX_BODY_BYTES = 4 * 1024 * 1024
const started: Array<ChildProcess> = []
// STRESS=1: 512 concurrent calls against maxInvocations 100.
const STRESS = process.env["STRESS"] === "1"
const CALLS = STRESS ? 512 : 16
const ALLOWED = STRESS ? 100 : 5

afterAll(async () => {
  for (const child of started) {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGKILL")
      await exited(child)
    }
  }
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
  options: { readonly policy?: unknown; readonly env?: NodeJS.ProcessEnv; readonly dir?: string } = {}
): Promise<Guard> => {
  const root = tempDir()
  const dir = options.dir ?? path.join(root, "journal")
  const args = ["claude-code", "guard", "--port", "0", "--root", dir]
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

  it("makes and prints a token when none is in its environment, and refuses a short one", async () => {
    const g = await guard({ env: { SESSION_JOURNAL_GUARD_TOKEN: "" } })
    const line = g.stdout().split("\n").find((l) => l.startsWith("SESSION_JOURNAL_GUARD_TOKEN="))
    assert.isDefined(line, g.stdout())
    const token = line!.slice("SESSION_JOURNAL_GUARD_TOKEN=".length)
    assert.match(token, /^[A-Za-z0-9_-]{43}$/)
    assert.strictEqual((await request(g.port, preToolUse(1))).status, 401)
    const ok = await request(g.port, preToolUse(1), { Authorization: `Bearer ${token}` })
    assert.strictEqual(ok.status, 200, ok.body)
    await stop(g)

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
    const post = await forward(
      url,
      JSON.stringify({ session_id: SID, hook_event_name: "PostToolUse", tool_name: "Read" })
    )
    assert.strictEqual(post.code, 1)
    assert.include(post.stderr, "not reachable")
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
    assert.include(wrong.stdout, "refused the event: 401")
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
