/**
 * The gateway in the test's process between the test (the client's lines) and
 * a real server child built on the MCP SDK's own `Server`: pass-through, calls
 * allowed and denied, fail closed, hostile JSON-RPC, a crashing server, a large
 * result in bounded memory, cancellation, the pending bound, many calls.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry, Guard, Policy } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as fs from "node:fs"
import * as path from "node:path"
import { ServerEnded } from "../src/Errors.ts"
import * as Journaling from "../src/Journaling.ts"
import { connect, entriesOf, fixtureServer, layer, payloadOf, type Received, tempDir, textOf } from "./harness.ts"
import { findCache } from "./mcpCache.ts"

const cache = findCache()
const STRESS = process.env["STRESS"] === "1"

const guardOf = (json: unknown) => {
  const decoded = Policy.decode(json)
  if (Result.isFailure(decoded)) throw new Error(decoded.failure.message)
  return Policy.toGuard(decoded.success)
}

const readLog = (file: string): Array<string> =>
  fs.existsSync(file) ? fs.readFileSync(file, "utf8").split("\n").filter((l) => l !== "") : []

const errorOf = (m: Received) => m["error"] as { readonly code: number; readonly message: string } | undefined

// Real servers and clients, started per case: on a busy machine a case takes long, and its
// outcome must not depend on how long.
describe.skipIf(cache === null)("Gateway with the SDK's server", { timeout: 600_000 }, () => {
  const root = () => tempDir()

  it.live("passes initialize and tools/list through, and journals an allowed call with its outcome", () => {
    const dir = root()
    return Effect.gen(function*() {
      const c = yield* connect({ name: "test", server: fixtureServer(cache!), guard: null })
      const init = yield* c.initialize
      assert.strictEqual((init["result"] as { serverInfo: { name: string } }).serverInfo.name, "sj-test-server")
      const list = yield* c.request("tools/list")
      const names = (list["result"] as { tools: Array<{ name: string }> }).tools.map((t) => t.name)
      assert.deepStrictEqual(names, ["echo", "write", "big", "crash", "wait"])
      const echoed = yield* c.call("echo", { text: "hello" })
      assert.strictEqual(textOf(echoed), "hello")
      yield* c.end
      const summary = yield* c.summary
      assert.strictEqual(summary.ended, "client")
      assert.strictEqual(summary.calls, 1)
      assert.isNotNull(summary.session)
      const entries = yield* entriesOf(summary.session!)
      assert.deepStrictEqual(entries.map((e) => e.kind), [
        Journaling.INITIALIZE_KIND,
        "tool",
        Journaling.DECISION_KIND,
        Entry.OUTCOME_KIND
      ])
      const tool = entries[1]!
      assert.isTrue(Entry.isTool(tool))
      if (Entry.isTool(tool)) {
        assert.strictEqual(tool.tool_name, "mcp__test__echo")
        assert.strictEqual(tool.server_id, "test")
        assert.strictEqual(tool.agent_id, "harness")
        assert.strictEqual(tool.bytes_written, JSON.stringify({ text: "hello" }).length)
        assert.isTrue(tool.allowed)
      }
      const decision = payloadOf(entries[2]!)
      assert.strictEqual(decision["verdict"], "allow")
      assert.deepStrictEqual(decision["tool_input"], { text: "hello" })
      assert.strictEqual(decision["jsonrpc_id"], 1002)
      assert.strictEqual(decision["tool_sequence"], tool.sequence)
      const outcome = payloadOf(entries[3]!)
      const line = JSON.stringify(echoed)
      assert.strictEqual(outcome["bytes_read"], new TextEncoder().encode(line).length)
      assert.strictEqual(outcome["is_error"], false)
      assert.strictEqual(outcome["jsonrpc_id"], 1002)
      assert.strictEqual(outcome["tool_name"], "mcp__test__echo")
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  it.live("a denied call never reaches the server; its client gets isError naming the guard and the reason", () => {
    const dir = root()
    const log = path.join(dir, "calls.log")
    return Effect.gen(function*() {
      const c = yield* connect({
        name: "test",
        server: fixtureServer(cache!, { MCP_CALL_LOG: log }),
        guard: guardOf({ denyList: ["mcp__test__write"] }),
        policyName: "policy.json"
      })
      yield* c.initialize
      const denied = yield* c.call("write", { path: "/etc/passwd", text: "x" })
      const result = denied["result"] as { isError: boolean }
      assert.isTrue(result.isError)
      assert.include(textOf(denied), "mcp__test__write")
      assert.include(textOf(denied), "denyList")
      assert.strictEqual(textOf(yield* c.call("echo", { text: "after" })), "after")
      yield* c.end
      const summary = yield* c.summary
      assert.strictEqual(summary.denied, 1)
      // The server saw only the allowed call.
      assert.deepStrictEqual(readLog(log), ["echo"])
      const entries = yield* entriesOf(summary.session!)
      const decisions = entries.filter((e) => e.kind === Journaling.DECISION_KIND).map(payloadOf)
      assert.deepStrictEqual(decisions.map((d) => [d["tool_name"], d["verdict"]]), [
        ["mcp__test__write", "deny"],
        ["mcp__test__echo", "allow"]
      ])
      assert.deepStrictEqual(decisions[0]!["tool_input"], { path: "/etc/passwd", text: "x" })
      assert.strictEqual(decisions[0]!["policy"], "policy.json")
      assert.include(String(decisions[0]!["guard"]), "denyList")
      // A denied call has no outcome.
      assert.strictEqual(entries.filter((e) => e.kind === Entry.OUTCOME_KIND).length, 1)
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  it.live("under a compiled policy a result's bytes count in the scoped byte limit whose of judges the arguments", () => {
    const dir = root()
    return Effect.gen(function*() {
      const c = yield* connect({
        name: "test",
        server: fixtureServer(cache!),
        guard: Policy.compile(Result.getOrThrow(Policy.decode({ maxBytesRead: 500, of: "mcp__test__big(bytes:1*)" }))),
        policyName: "policy.json"
      })
      yield* c.initialize
      assert.strictEqual(textOf(yield* c.call("big", { bytes: 1000 })).length, 1000)
      // Another call's arguments are not in the limit; a matching one is, once 1000 bytes were read.
      assert.strictEqual(textOf(yield* c.call("big", { bytes: 20 })).length, 20)
      const denied = yield* c.call("big", { bytes: 10 })
      assert.isTrue((denied["result"] as { isError: boolean }).isError)
      assert.include(textOf(denied), "maxBytesRead(500, of: [\"mcp__test__big(bytes:1*)\"])")
      yield* c.end
      const summary = yield* c.summary
      const entries = yield* entriesOf(summary.session!)
      // The first outcome and the state it gave, in one append: one after the other.
      const first = entries.findIndex((e) => e.kind === Entry.OUTCOME_KIND)
      assert.strictEqual(entries[first + 1]!.kind, Guard.STATE_KIND)
      assert.strictEqual(entries.filter((e) => e.kind === Guard.STATE_KIND).length, 1)
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  it.live("patterns judge a call's arguments; an ask is denied, since no one can be asked through the gateway", () => {
    const dir = root()
    const log = path.join(dir, "calls.log")
    return Effect.gen(function*() {
      const c = yield* connect({
        name: "test",
        server: fixtureServer(cache!, { MCP_CALL_LOG: log }),
        guard: guardOf([{ deny: "mcp__test__write(path:/etc/*)" }, { ask: "mcp__test__echo(text:secret*)" }]),
        policyName: "policy.json"
      })
      yield* c.initialize
      // Without its arguments the pattern could not judge this call, and would deny it.
      assert.strictEqual(textOf(yield* c.call("write", { path: "/tmp/ok", text: "x" })), "wrote 1 bytes")
      const denied = yield* c.call("write", { path: "/etc/passwd", text: "x" })
      assert.isTrue((denied["result"] as { isError: boolean }).isError)
      assert.include(textOf(denied), "deny(\"mcp__test__write(path:/etc/*)\")")
      const asked = yield* c.call("echo", { text: "secret-token" })
      assert.isTrue((asked["result"] as { isError: boolean }).isError)
      assert.include(textOf(asked), "approval was needed")
      assert.strictEqual(textOf(yield* c.call("echo", { text: "plain" })), "plain")
      yield* c.end
      assert.deepStrictEqual(readLog(log), ["write", "echo"])
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  it.live("a journal that cannot be written denies every call, saying why, and nothing reaches the server", () => {
    const dir = root()
    const log = path.join(dir, "calls.log")
    // Where the session's directory would be is a regular file: nothing can be stored there.
    const journalRoot = path.join(dir, "journal")
    fs.mkdirSync(journalRoot)
    fs.writeFileSync(path.join(journalRoot, "mcp-blocked"), "not a directory")
    return Effect.gen(function*() {
      const c = yield* connect({
        name: "test",
        server: fixtureServer(cache!, { MCP_CALL_LOG: log }),
        guard: null,
        session: "mcp-blocked"
      })
      yield* c.initialize
      const denied = yield* c.call("echo", { text: "x" })
      assert.isTrue((denied["result"] as { isError: boolean }).isError)
      assert.include(textOf(denied), "could not be journaled")
      yield* c.end
      const summary = yield* c.summary
      assert.strictEqual(summary.denied, 1)
      // Nothing could be journaled, and the summary says so.
      assert.isNull(summary.session)
      assert.deepStrictEqual(readLog(log), [])
    }).pipe(Effect.scoped, Effect.provide(layer(journalRoot)))
  })

  it.live("hostile lines: reused ids, batches, unknown methods, bytes that are not UTF-8 or not JSON", () => {
    const dir = root()
    const log = path.join(dir, "calls.log")
    return Effect.gen(function*() {
      const c = yield* connect({ name: "test", server: fixtureServer(cache!, { MCP_CALL_LOG: log }), guard: null })
      yield* c.initialize
      // A call that never answers holds id 7; a second request with id 7 is refused.
      yield* c.sendLine({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "wait", arguments: {} } })
      yield* c.sendLine({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "echo", arguments: {} } })
      const reused = yield* c.next
      assert.strictEqual(reused["id"], 7)
      assert.include(errorOf(reused)!.message, "already in use")
      // "7" is another id than 7.
      yield* c.sendLine({ jsonrpc: "2.0", id: "7", method: "ping" })
      assert.deepStrictEqual(yield* c.next, { result: {}, jsonrpc: "2.0", id: "7" })
      // A batch is refused as a whole, each request in it answered; none reaches the server.
      yield* c.sendLine([
        { jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "echo", arguments: {} } },
        { jsonrpc: "2.0", method: "notifications/initialized" },
        { jsonrpc: "2.0", id: 9, method: "ping" }
      ])
      const b1 = yield* c.next
      const b2 = yield* c.next
      assert.deepStrictEqual([b1["id"], b2["id"]], [8, 9])
      assert.include(errorOf(b1)!.message, "batches are not supported")
      // An unknown method passes through: the server answers it.
      const unknown = yield* c.request("no/such/method")
      assert.strictEqual(errorOf(unknown)!.code, -32601)
      // Bytes that are not UTF-8, then a line that is not JSON: parse errors, id null.
      yield* c.sendBytes(
        new Uint8Array([
          ...new TextEncoder().encode("{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"p"),
          0xff,
          0x22,
          0x7d,
          10
        ])
      )
      yield* c.sendLine({ jsonrpc: "2.0", id: 11, method: 5 })
      yield* c.sendText("{not json\n")
      const notUtf8 = yield* c.next
      const badMethod = yield* c.next
      const notJson = yield* c.next
      assert.strictEqual(errorOf(notUtf8)!.code, -32700)
      assert.deepStrictEqual([badMethod["id"], errorOf(badMethod)!.code], [11, -32600])
      assert.deepStrictEqual([notJson["id"], errorOf(notJson)!.code], [null, -32700])
      // The connection is still usable, and a final line without a newline is read.
      yield* c.sendText(
        JSON.stringify({
          jsonrpc: "2.0",
          id: 12,
          method: "tools/call",
          params: { name: "echo", arguments: { text: "last" } }
        })
      )
      yield* c.end
      const last = yield* c.next
      assert.strictEqual(last["id"], 12)
      assert.strictEqual(textOf(last), "last")
      yield* c.summary
      assert.deepStrictEqual(readLog(log), ["wait", "echo"])
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  it.live("a client line over the bound is refused with its id and the connection stays usable", () => {
    const dir = root()
    return Effect.gen(function*() {
      const c = yield* connect({ name: "test", server: fixtureServer(cache!), guard: null, maxLineBytes: 4096 })
      yield* c.initialize
      yield* c.sendLine({
        jsonrpc: "2.0",
        method: "tools/call",
        params: { name: "echo", arguments: { text: "y".repeat(100_000) } },
        id: 21
      })
      const refused = yield* c.next
      assert.strictEqual(refused["id"], 21)
      assert.include(errorOf(refused)!.message, "over the gateway's bound of 4096")
      assert.strictEqual(textOf(yield* c.call("echo", { text: "still here" })), "still here")
      yield* c.end
      const summary = yield* c.summary
      assert.isAtMost(summary.peakHeldBytes.client, 4096)
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  it.live("a server that crashes mid-call: every pending request gets an error, the journal records it, the connection fails", () => {
    const dir = root()
    return Effect.gen(function*() {
      const c = yield* connect({ name: "test", server: fixtureServer(cache!), guard: null })
      yield* c.initialize
      yield* c.sendLine({ jsonrpc: "2.0", id: 31, method: "tools/call", params: { name: "wait", arguments: {} } })
      yield* c.sendLine({ jsonrpc: "2.0", id: 32, method: "tools/call", params: { name: "crash", arguments: {} } })
      const a = yield* c.next
      const b = yield* c.next
      assert.deepStrictEqual([a["id"], b["id"]].sort(), [31, 32])
      assert.include(errorOf(a)!.message, "the MCP server ended (exit code 3)")
      // The connection fails, saying how the server ended.
      const failed = yield* Effect.flip(c.summary)
      assert.instanceOf(failed, ServerEnded)
      if (!(failed instanceof ServerEnded)) return
      assert.strictEqual(failed.code, 3)
      assert.strictEqual(failed.unanswered, 2)
      const outcomes = (yield* entriesOf(failed.session!)).filter((e) => e.kind === Entry.OUTCOME_KIND).map(
        payloadOf
      )
      assert.deepStrictEqual(outcomes.map((o) => [o["jsonrpc_id"], o["is_error"]]).sort(), [[31, true], [32, true]])
      assert.include(String(outcomes[0]!["error"]), "before answering")
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  it.live(`a ${STRESS ? "50" : "5"} MB result is handed on in parts, never held whole, and counted`, () => {
    const dir = root()
    const size = (STRESS ? 50 : 5) * 1024 * 1024
    const bound = 64 * 1024
    return Effect.gen(function*() {
      const c = yield* connect({ name: "test", server: fixtureServer(cache!), guard: null, maxLineBytes: bound })
      yield* c.initialize
      const before = c.outBytes()
      const big = yield* c.call("big", { bytes: size })
      assert.strictEqual(textOf(big).length, size)
      const lineBytes = c.outBytes() - before
      yield* c.end
      const summary = yield* c.summary
      assert.isAtMost(summary.peakHeldBytes.server, bound)
      const outcome = (yield* entriesOf(summary.session!)).filter((e) => e.kind === Entry.OUTCOME_KIND).map(
        payloadOf
      )[0]!
      // The line and its newline went out; the outcome counts the line.
      assert.strictEqual(outcome["bytes_read"], lineBytes - 1)
      assert.match(String(outcome["response_sha256"]), /^[0-9a-f]{64}$/)
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  }, 120_000)

  it.live("a cancelled call is forwarded, journaled as cancelled, and frees its pending slot", () => {
    const dir = root()
    return Effect.gen(function*() {
      const c = yield* connect({ name: "test", server: fixtureServer(cache!), guard: null, maxPending: 1 })
      yield* c.initialize
      yield* c.sendLine({ jsonrpc: "2.0", id: 41, method: "tools/call", params: { name: "wait", arguments: {} } })
      // The one pending slot is taken: another request is refused.
      yield* c.sendLine({ jsonrpc: "2.0", id: 42, method: "ping" })
      const full = yield* c.next
      assert.strictEqual(full["id"], 42)
      assert.include(errorOf(full)!.message, "too many pending requests")
      yield* c.sendLine({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: 41, reason: "test" }
      })
      // The slot is free again. (Not the same id: the SDK's server runs a cancellation
      // after the requests that came with it, so a new request reusing the id at once
      // would be the one it cancels: docs/mcp-PROTOCOL.md.)
      yield* c.sendLine({
        jsonrpc: "2.0",
        id: 43,
        method: "tools/call",
        params: { name: "echo", arguments: { text: "again" } }
      })
      const again = yield* c.next
      assert.strictEqual(again["id"], 43)
      assert.strictEqual(textOf(again), "again")
      yield* c.end
      const summary = yield* c.summary
      const outcomes = (yield* entriesOf(summary.session!)).filter((e) => e.kind === Entry.OUTCOME_KIND).map(
        payloadOf
      )
      assert.deepStrictEqual(outcomes.map((o) => o["error"]), ["cancelled by the client", null])
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  })

  const many = STRESS ? 10_000 : 300
  it.live(`${many} calls in a row, each decided, journaled and answered`, () => {
    const dir = root()
    return Effect.gen(function*() {
      const c = yield* connect({
        name: "test",
        server: fixtureServer(cache!),
        guard: guardOf({ denyList: ["mcp__test__write"] })
      })
      yield* c.initialize
      for (let i = 0; i < many; i++) {
        const name = i % 10 === 9 ? "write" : "echo"
        const answer = yield* c.call(name, { text: String(i) })
        if (name === "echo") assert.strictEqual(textOf(answer), String(i))
        else assert.isTrue((answer["result"] as { isError: boolean }).isError)
      }
      yield* c.end
      const summary = yield* c.summary
      assert.strictEqual(summary.calls, many)
      assert.strictEqual(summary.denied, many / 10)
      const entries = yield* entriesOf(summary.session!)
      const tools = entries.filter(Entry.isTool)
      assert.strictEqual(tools.length, many)
      assert.strictEqual(tools.filter((t) => !t.allowed).length, many / 10)
      assert.strictEqual(entries.filter((e) => e.kind === Entry.OUTCOME_KIND).length, many - many / 10)
    }).pipe(Effect.scoped, Effect.provide(layer(dir)))
  }, STRESS ? 600_000 : 120_000)
})
