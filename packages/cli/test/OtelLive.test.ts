/**
 * Live export (`--otlp URL`) from the long-lived doors, through the real binary,
 * decoded by a receiver that is not ours (`otlpReceiver.ts`): the resident guard
 * sends a call's span once the call ended, while it runs, the session's when the
 * session ends; nesting, names and ids are those `otel export` gives the same
 * session afterwards (the same trace id and span ids, so nothing is sent twice
 * differently); every span names its journal session, entry sequence and hash.
 * A collector that is down (connection refused) or never answers changes no
 * answer, no entry and no exit code, and the loss is said once plus a count.
 * Real processes, started per case: on a busy machine a case takes long, and its
 * outcome must not depend on how long.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import { SessionJournal } from "@session-journal/core"
import { everything, findCache, fixtureEnv, loadSdk } from "@session-journal/mcp/test/mcpCache"
import { NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Stream from "effect/Stream"
import { type ChildProcess, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll } from "vitest"
import * as Spans from "../src/otel/Spans.ts"
import * as ClaudeRun from "./claudeRun.ts"
import { EVENTS } from "./hookedSession.ts"
import { hookedTree, listen, load, type Receiver, type Span } from "./otlpReceiver.ts"
import {
  alive,
  baseEnv,
  BIN,
  cleanup,
  exited,
  hasNodeAdapter,
  killAll,
  run,
  start,
  tempDir,
  waitForLine
} from "./Run.ts"

const otlp = load()
const G = otlp.semconv
const nodeAdapter = await hasNodeAdapter()
const mcpCache = findCache()
const TOKEN = "otel-live-test-token-0123456789abcdef"
const started: Array<ChildProcess> = []
const receivers: Array<Receiver> = []

afterAll(async () => {
  await killAll(started)
  for (const r of receivers) await r.close()
  cleanup()
})

const receiver = async (mode: Parameters<typeof listen>[0]) => {
  const r = await listen(mode)
  receivers.push(r)
  return r
}

const spansOf = (r: Receiver): Array<Span> => r.requests.flatMap((q) => otlp.decode(new Uint8Array(q.body)))

// Polls until `check` holds; the test's own timeout bounds it (no assertion on time).
const until = async (check: () => boolean) => {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 25))
}

interface Guard {
  readonly child: ChildProcess
  readonly port: number
  readonly dir: string
  readonly stderr: () => string
}

// `node` (Node's own options, then a bin other than the shipped one) runs the guard another way.
const guard = async (
  args: ReadonlyArray<string>,
  env: NodeJS.ProcessEnv = {},
  node?: ReadonlyArray<string>
): Promise<Guard> => {
  const root = tempDir()
  const dir = path.join(root, "journal")
  fs.writeFileSync(path.join(root, "policy.json"), JSON.stringify({ denyList: ["Write"] }))
  const how = node === undefined
    ? start
    : (argv: ReadonlyArray<string>, options: { readonly env: NodeJS.ProcessEnv }) =>
      spawn(process.execPath, [...node, ...argv], {
        cwd: os.tmpdir(),
        env: { ...baseEnv(), ...options.env },
        stdio: ["pipe", "pipe", "pipe"]
      })
  const child = how(
    [
      "claude-code",
      "guard",
      "--port",
      "0",
      "--root",
      dir,
      "--accept-bearer",
      "--policy",
      path.join(root, "policy.json"),
      ...args
    ],
    { env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN, ...env } }
  )
  started.push(child)
  let stderr = ""
  child.stderr!.on("data", (b: Buffer) => (stderr += b.toString("utf8")))
  const line = await waitForLine(child, (l) => l.includes("listening at "))
  const url = line.slice(line.indexOf("http://"), line.indexOf(","))
  return { child, port: Number(new URL(url).port), dir, stderr: () => stderr }
}

const post = (port: number, body: unknown) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    const bytes = Buffer.from(JSON.stringify(body), "utf8")
    const req = http.request({
      host: "127.0.0.1",
      port,
      method: "POST",
      path: "/hook",
      headers: {
        Authorization: `Bearer ${TOKEN}`,
        "Content-Type": "application/json",
        "Content-Length": String(bytes.length)
      }
    }, (res) => {
      const chunks: Array<Buffer> = []
      res.on("data", (b: Buffer) => chunks.push(b))
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }))
    })
    req.on("error", reject)
    req.end(bytes)
  })

const stop = async (g: Guard) => {
  g.child.kill("SIGTERM")
  assert.strictEqual(await exited(g.child), 0, g.stderr())
}

// What the journal holds, without what differs between two runs (times, hashes).
const journalOf = (dir: string) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      const out: Array<unknown> = []
      for (const s of yield* journal.list) {
        yield* journal.verify(s.id)
        const entries = yield* Stream.runCollect(journal.entries(s.id))
        out.push({
          entries: entries.map((e) => ({
            sequence: e.sequence,
            kind: e.kind,
            ...("tool_name" in e ? { tool: e.tool_name, allowed: e.allowed } : {})
          }))
        })
      }
      return out
    }).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(NodePersistence.layer({ root: dir })))))
  )

const sessionOf = async (dir: string): Promise<string> => {
  const sessions = fs.readdirSync(dir).filter((n) => !n.startsWith("."))
  assert.strictEqual(sessions.length, 1, sessions.join(", "))
  return sessions[0]!
}

// The hooked session's events, posted one at a time; the answers.
const playAll = async (g: Guard) => {
  const answers: Array<string> = []
  for (const [, input] of EVENTS) {
    const r = await post(g.port, input)
    assert.strictEqual(r.status, 200, r.body)
    answers.push(r.body)
  }
  return answers
}

describe.skipIf(!nodeAdapter)("live export: the resident guard", { timeout: 600_000 }, () => {
  it("sends each span as it ends, in the structure and with the ids otel export gives", async () => {
    const live = await receiver({ _tag: "accept" })
    const g = await guard(["--otlp", live.url])
    // The Bash call: its span is sent once its outcome is journaled, while the guard runs.
    await post(g.port, EVENTS[0]![1])
    await post(g.port, EVENTS[1]![1])
    await post(g.port, EVENTS[2]![1])
    await until(() => spansOf(live).some((s) => s.name === "execute_tool Bash"))
    assert.isUndefined(spansOf(live).find((s) => s.name.startsWith("invoke_agent claude-code")))
    for (const [, input] of EVENTS.slice(3)) assert.strictEqual((await post(g.port, input)).status, 200)
    // SessionEnd: the session's span follows, with the guard still running.
    await until(() => spansOf(live).some((s) => s.name === "invoke_agent claude-code"))
    await stop(g)
    assert.notInclude(g.stderr(), "spans")

    const session = await sessionOf(g.dir)
    const spans = spansOf(live)
    const { bash, root, write } = hookedTree(spans)
    assert.strictEqual(write.status.code, 2)
    assert.include(write.status.message, "denied by")
    // Ids derived from the journal: the session's trace, each span's key.
    for (const s of spans) assert.strictEqual(s.traceId, Spans.traceIdOf(session))
    assert.strictEqual(root.spanId, Spans.spanIdOf(session, Spans.SESSION_KEY))
    const bashSeq = bash.attributes["session_journal.entry.sequence"] as number
    assert.strictEqual(bash.spanId, Spans.spanIdOf(session, `call:${bashSeq}`))
    // The conventions' names; every span points at its entry.
    assert.strictEqual(
      bash.attributes[G["ATTR_GEN_AI_OPERATION_NAME"] as string],
      G["GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL"]
    )
    assert.strictEqual(bash.attributes[G["ATTR_GEN_AI_TOOL_NAME"] as string], "Bash")
    assert.strictEqual(bash.attributes[G["ATTR_GEN_AI_TOOL_CALL_ID"] as string], "toolu_bash")
    for (const s of spans) {
      assert.strictEqual(s.attributes["session_journal.session.id"], session)
      assert.isNumber(s.attributes["session_journal.entry.sequence"])
      assert.match(String(s.attributes["session_journal.entry.hash"]), /^[0-9a-f]{64}$/)
    }

    // otel export of the same session afterwards: the same spans, by id, name and parent.
    const later = await receiver({ _tag: "accept" })
    const r = await run(["--dir", g.dir, "otel", "export", session, "--endpoint", later.url])
    assert.strictEqual(r.code, 0, r.stderr)
    const shape = (list: ReadonlyArray<Span>) =>
      list.map((s) => ({
        id: s.spanId,
        trace: s.traceId,
        parent: s.parentSpanId,
        name: s.name,
        start: s.start,
        end: s.end,
        attributes: s.attributes
      })).sort((a, b) => a.id.localeCompare(b.id))
    assert.deepStrictEqual(shape(spans), shape(spansOf(later)))
  })

  for (const kind of ["down", "hang"] as const) {
    it(`a collector that ${kind === "down" ? "is down" : "never answers"}: the same answers, entries and exit code`, async () => {
      let url: string
      if (kind === "down") {
        const gone = await listen({ _tag: "accept" })
        url = gone.url
        await gone.close() // nothing listens there now: connection refused
      } else url = (await receiver({ _tag: "hang" })).url
      const plain = await guard([])
      const plainAnswers = await playAll(plain)
      await stop(plain)
      const g = await guard(["--otlp", url], { OTEL_EXPORTER_OTLP_TIMEOUT: "500" })
      const answers = await playAll(g)
      await stop(g)
      assert.deepStrictEqual(answers, plainAnswers)
      assert.deepStrictEqual(await journalOf(g.dir), await journalOf(plain.dir))
      // Said once, then counted at the end.
      const lines = g.stderr().split("\n").filter((l) => l.includes("spans"))
      assert.isAtMost(lines.filter((l) => l.includes("are not reaching")).length, 1, g.stderr())
      assert.match(g.stderr(), /\d+ of \d+ spans were not delivered to /)
    })
  }

  it("a collector that has not answered by the door's end: the end's line says so (before: only that spans were not accepted)", async () => {
    const url = (await receiver({ _tag: "hang" })).url
    // Each request may wait 30 s; the door's end waits 2 s.
    const g = await guard(["--otlp", url], { OTEL_EXPORTER_OTLP_TIMEOUT: "30000" })
    await playAll(g)
    await stop(g)
    assert.match(
      g.stderr(),
      /\d+ of \d+ spans were not delivered to .*the collector had not answered within 2s of the door's end/
    )
  })

  // The sender's thread is a file of its own beside the command's entry, and a Worker
  // refuses some of Node's options. A thread that cannot start is a loss like any other.
  const withoutThread = async (name: string, g: Guard) => {
    const answers = await playAll(g)
    const plain = await guard([])
    assert.deepStrictEqual(answers, await playAll(plain))
    await stop(plain)
    await stop(g)
    assert.deepStrictEqual(await journalOf(g.dir), await journalOf(plain.dir))
    assert.match(g.stderr(), /spans are not reaching .*the sender's thread could not start/, name)
    assert.match(g.stderr(), /\d+ of \d+ spans were not delivered to /, name)
  }

  it("the sender's thread missing from the installed command: the same answers, entries and exit code, the loss said (failed before: the guard ended at its start)", async () => {
    const live = await receiver({ _tag: "accept" })
    // The shipped command, copied without the thread's file.
    const copy = path.join(tempDir(), "command")
    fs.cpSync(path.join(path.dirname(BIN), ".."), copy, { recursive: true })
    const bundled = path.join(copy, "dist", "bin")
    const thread = fs.readdirSync(bundled).filter((n) => n.startsWith("SenderWorker-"))
    assert.isAbove(thread.length, 0, "the bundle has the thread's file")
    for (const n of thread) fs.rmSync(path.join(bundled, n))
    await withoutThread(
      "bundled",
      await guard(["--otlp", live.url], {}, [path.join(copy, "bin", "session-journal.js")])
    )
    assert.strictEqual(live.requests.length, 0)
  })

  it("from the sources, with an option Node gives no thread: the same answers, entries and exit code, the loss said (failed before: the guard ended at its start)", async () => {
    const live = await receiver({ _tag: "accept" })
    // The package's bin runs the sources under the tests' NODE_OPTIONS (their condition);
    // from the sources, the thread is given the process's own options.
    const bin = fileURLToPath(new URL("../bin/session-journal.js", import.meta.url))
    const g = await guard(["--otlp", live.url], {}, ["--max-old-space-size=1024", bin])
    await withoutThread("sources", g)
    assert.strictEqual(live.requests.length, 0)
  })
})

// What every live span carries, and the tree under the session's span (every parent sent).
const checkTree = (spans: ReadonlyArray<Span>, session: string) => {
  const roots = spans.filter((s) => s.parentSpanId === null)
  assert.strictEqual(roots.length, 1, spans.map((s) => s.name).join(", "))
  const root = roots[0]!
  assert.strictEqual(root.spanId, Spans.spanIdOf(session, Spans.SESSION_KEY))
  assert.strictEqual(root.attributes[G["ATTR_GEN_AI_OPERATION_NAME"] as string], "invoke_agent")
  const ids = new Set(spans.map((s) => s.spanId))
  for (const s of spans) {
    assert.strictEqual(s.traceId, Spans.traceIdOf(session))
    assert.strictEqual(s.attributes["session_journal.session.id"], session)
    assert.isNumber(s.attributes["session_journal.entry.sequence"])
    assert.match(String(s.attributes["session_journal.entry.hash"]), /^[0-9a-f]{64}$/)
    if (s !== root) assert.isTrue(ids.has(s.parentSpanId!), `${s.name}'s parent was sent`)
  }
  return root
}

describe.skipIf(Claude.CLAUDE_BIN === null || !nodeAdapter)("live export: the driver (claude-code run)", {
  timeout: 600_000
}, () => {
  afterAll(Claude.cleanup)

  const drive = async (otlpUrl: string | null) => {
    let work = ""
    const s = await ClaudeRun.setup(
      (r) =>
        [
          Fake.tools(Fake.bash(`echo ran > ${path.join(work, "ran.txt")}`)),
          Fake.text("the answer")
        ][r.index],
      "sj-otel-run-"
    )
    work = s.work
    try {
      const policy = path.join(s.root, "policy.json")
      fs.writeFileSync(policy, JSON.stringify({ denyList: ["Bash"] }))
      const r = await run(
        [
          ...ClaudeRun.common(s),
          "--session",
          "cc-otel",
          "--policy",
          policy,
          "--tools",
          "Bash",
          ...(otlpUrl === null ? [] : ["--otlp", otlpUrl]),
          "the prompt"
        ],
        { env: { ...s.env, OTEL_EXPORTER_OTLP_TIMEOUT: "500" }, process: true }
      )
      // What the model was told, but the fake API's own ids.
      const told = s.api.requests.flatMap((q) => q.toolResults).map((b) => JSON.stringify({ ...b, tool_use_id: null }))
      return { r, s, told }
    } finally {
      await s.api.close()
    }
  }

  it("sends the denied call and the session, and a collector that is down changes nothing", async () => {
    const live = await receiver({ _tag: "accept" })
    const sent = await drive(live.url)
    assert.strictEqual(sent.r.code, 0, sent.r.stderr)
    assert.notInclude(sent.r.stderr, "spans")
    const spans = spansOf(live)
    checkTree(spans, "cc-otel")
    const bash = spans.filter((s) => s.name === "execute_tool Bash")
    assert.strictEqual(bash.length, 1, spans.map((s) => s.name).join(", "))
    assert.strictEqual(bash[0]!.status.code, 2)
    assert.include(bash[0]!.status.message, "denied by")
    assert.strictEqual(bash[0]!.attributes[G["ATTR_GEN_AI_TOOL_NAME"] as string], "Bash")
    assert.strictEqual(bash[0]!.parentSpanId, Spans.spanIdOf("cc-otel", Spans.SESSION_KEY))

    const gone = await listen({ _tag: "accept" })
    await gone.close() // connection refused
    const down = await drive(gone.url)
    assert.strictEqual(down.r.code, 0, down.r.stderr)
    assert.deepStrictEqual(down.told, sent.told)
    assert.match(down.r.stdout.split("\n").at(-2)!, /^result: success, 1 turn, .*journal session cc-otel$/)
    assert.match(down.r.stderr, /\d+ of \d+ spans were not delivered to /)
    const journal = (await journalOf(down.s.journal)) as Array<{ entries: Array<{ kind: string }> }>
    const kinds = journal.flatMap((x) => x.entries.map((e) => e.kind))
    assert.include(kinds, "tool")
  })
})

describe.skipIf(mcpCache === null || !nodeAdapter)(
  "live export: the MCP gateway (mcp proxy)",
  { timeout: 600_000 },
  () => {
    const ECHO = "execute_tool mcp__everything__echo"
    const connect = async (dir: string, otlpUrl: string) => {
      const sdk = await loadSdk(mcpCache!)
      const policy = path.join(dir, "policy.json")
      fs.writeFileSync(policy, JSON.stringify({ denyList: ["mcp__everything__get-sum"] }))
      const transport = new sdk.StdioClientTransport({
        command: process.execPath,
        args: [
          BIN,
          "--dir",
          dir,
          "mcp",
          "proxy",
          "--policy",
          policy,
          "--name",
          "everything",
          "--otlp",
          otlpUrl,
          "--",
          process.execPath,
          everything(mcpCache!),
          "stdio"
        ],
        env: { ...(baseEnv() as Record<string, string>), ...fixtureEnv(mcpCache!), OTEL_EXPORTER_OTLP_TIMEOUT: "500" },
        stderr: "pipe"
      })
      const client = new sdk.Client({ name: "otel-live-client", version: "1.0.0" })
      await client.connect(transport)
      return { client, transport }
    }

    const calls = async (dir: string, otlpUrl: string, afterEcho: () => Promise<void> = async () => {}) => {
      const c = await connect(dir, otlpUrl)
      const echoed = await c.client.callTool({ name: "echo", arguments: { message: "traced" } })
      await afterEcho()
      const denied = await c.client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } })
      const pid = c.transport.pid
      await c.client.close()
      if (pid !== null) await until(() => !alive(pid))
      return { echoed, denied }
    }

    it("sends each call as it ends, during the connection, and the session at its end; a collector that is down changes nothing", async () => {
      const live = await receiver({ _tag: "accept" })
      const dir = tempDir()
      // The echo's span arrives while the connection is open, ended by its outcome.
      const sent = await calls(dir, live.url, () => until(() => spansOf(live).some((s) => s.name === ECHO)))
      assert.isFalse(sent.echoed.isError ?? false)
      assert.isTrue(sent.denied.isError)
      const session = fs.readdirSync(dir).find((n) => n.startsWith("mcp-"))
      assert.isString(session)
      const spans = spansOf(live)
      checkTree(spans, session!)
      const names = spans.map((s) => s.name).sort()
      assert.deepStrictEqual(names.filter((n) => n.startsWith("execute_tool")), [
        "execute_tool mcp__everything__echo",
        "execute_tool mcp__everything__get-sum"
      ])
      const sum = spans.find((s) => s.name === "execute_tool mcp__everything__get-sum")!
      assert.strictEqual(sum.status.code, 2)
      // The echo's span holds its outcome (its sequence and bytes) and the request's JSON-RPC id.
      const echo = spans.find((s) => s.name === ECHO)!
      assert.strictEqual(echo.status.code, 1)
      assert.isNumber(echo.attributes["session_journal.outcome.sequence"])
      assert.isAbove(echo.attributes["session_journal.bytes_read"] as number, 0)
      assert.strictEqual(echo.attributes[G["ATTR_MCP_METHOD_NAME"] as string], "tools/call")
      assert.isString(echo.attributes[G["ATTR_JSONRPC_REQUEST_ID"] as string])
      assert.isUndefined(echo.attributes["session_journal.outcome"])

      const gone = await listen({ _tag: "accept" })
      await gone.close() // connection refused
      const other = tempDir()
      const slow = await calls(other, gone.url)
      assert.deepStrictEqual(slow.echoed, sent.echoed)
      assert.deepStrictEqual(slow.denied, sent.denied)
      const verified = await run(["--dir", other, "verify", fs.readdirSync(other).find((n) => n.startsWith("mcp-"))!])
      assert.strictEqual(verified.code, 0, verified.stdout + verified.stderr)
    })
  }
)

describe.skipIf(!nodeAdapter)("spans from the command hook (claude-code hook)", { timeout: 600_000 }, () => {
  // Every event of the hooked session through the hook, each its own run; the answers.
  const hooks = async (env: NodeJS.ProcessEnv) => {
    const root = tempDir()
    const dir = path.join(root, "journal")
    const policy = path.join(root, "policy.json")
    fs.writeFileSync(policy, JSON.stringify({ denyList: ["Write"] }))
    const answers: Array<{ code: number; stdout: string }> = []
    let stderr = ""
    for (const [, input] of EVENTS) {
      const r = await run(["claude-code", "hook", "--root", dir, "--policy", policy], {
        input: JSON.stringify(input),
        env
      })
      answers.push({ code: r.code ?? -1, stdout: r.stdout })
      stderr += r.stderr
    }
    return { dir, answers, stderr }
  }

  it("SessionEnd's hook sends the session once its answer is written; a collector that is down changes no answer", async () => {
    const live = await receiver({ _tag: "accept" })
    const sent = await hooks({ OTEL_EXPORTER_OTLP_ENDPOINT: live.url })
    assert.notInclude(sent.stderr, "spans")
    const session = await sessionOf(sent.dir)
    const spans = spansOf(live)
    assert.strictEqual(spans.length, 6, spans.map((s) => s.name).join(", "))
    checkTree(spans.filter((s) => s.name !== "execute_tool Read"), session)

    const gone = await listen({ _tag: "accept" })
    await gone.close() // connection refused
    const down = await hooks({ OTEL_EXPORTER_OTLP_ENDPOINT: gone.url })
    assert.deepStrictEqual(down.answers, sent.answers)
    assert.deepStrictEqual(await journalOf(down.dir), await journalOf(sent.dir))
    assert.match(down.stderr, /6 of 6 spans of session \S+ were not delivered to /)
    assert.strictEqual(down.stderr.match(/not delivered/g)?.length, 1)
  })
})
