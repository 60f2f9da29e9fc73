/**
 * A server that dies in the middle of a call, in the middle of writing its
 * result: the pending call gets an error naming the exit, on a line of its own
 * (the dead server's unfinished line is ended first), its outcome is journaled
 * as an error, never as the unfinished result, and the connection fails with
 * `ServerEnded`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Entry } from "@session-journal/core"
import * as Effect from "effect/Effect"
import { ServerEnded } from "../src/Errors.ts"
import { connect, entriesOf, layer, payloadOf, type Received, scriptedServer, tempDir } from "./harness.ts"

const errorOf = (m: Received) => m["error"] as { readonly code: number; readonly message: string } | undefined

// A call to the scripted server's `die`: what the client reads (the server's
// unfinished line, then the call's answer) and how the connection fails.
const dieMidCall = (id: number, args: Record<string, unknown>, maxLineBytes?: number) =>
  Effect.gen(function*() {
    const c = yield* connect({ name: "scripted", server: scriptedServer("lines"), guard: null, maxLineBytes })
    yield* c.initialize
    yield* c.sendLine({ jsonrpc: "2.0", id, method: "tools/call", params: { name: "die", arguments: args } })
    const broken = yield* c.next
    const answer = yield* c.next
    const failed = yield* Effect.flip(c.summary)
    assert.instanceOf(failed, ServerEnded)
    return { broken, answer, failed: failed as ServerEnded }
  })

describe("Gateway: a server that dies mid-call", { timeout: 120_000 }, () => {
  for (
    const [label, bytes, maxLineBytes] of [
      ["a short line", 10, undefined],
      ["a line past the bound, handed on in parts", 8192, 1024]
    ] as const
  ) {
    it.live(`the pending call gets an error naming the exit; the connection fails (${label})`, () =>
      Effect.gen(function*() {
        const { broken, answer, failed } = yield* dieMidCall(9, { bytes }, maxLineBytes)
        // The unfinished line as the server wrote it, ended by the gateway: not JSON.
        assert.isString(broken["unparsed"])
        assert.isTrue(String(broken["unparsed"]).startsWith("{\"jsonrpc\":\"2.0\",\"id\":9,\"result\""))
        assert.strictEqual(answer["id"], 9)
        assert.strictEqual(errorOf(answer)!.code, -32000)
        assert.strictEqual(
          errorOf(answer)!.message,
          "session-journal: the MCP server ended (exit code 7) before answering"
        )
        assert.strictEqual(failed.code, 7)
        assert.strictEqual(failed.signal, null)
        assert.strictEqual(failed.unanswered, 1)
        assert.strictEqual(failed.calls, 1)
        assert.include(failed.message, "ended before the client (exit code 7), 1 request unanswered")
        const outcomes = (yield* entriesOf(failed.session!)).filter((e) => e.kind === Entry.OUTCOME_KIND).map(
          payloadOf
        )
        assert.deepStrictEqual(outcomes.map((o) => [o["jsonrpc_id"], o["is_error"], o["error"]]), [
          [9, true, "the MCP server ended (exit code 7) before answering"]
        ])
      }).pipe(Effect.scoped, Effect.provide(layer(tempDir()))))
  }

  it.live("a server killed by a signal: the call's error and the failure name the signal", () =>
    Effect.gen(function*() {
      const { answer, failed } = yield* dieMidCall(10, { signal: "SIGKILL" })
      assert.strictEqual(answer["id"], 10)
      assert.strictEqual(
        errorOf(answer)!.message,
        "session-journal: the MCP server ended (killed by SIGKILL) before answering"
      )
      assert.strictEqual(failed.code, null)
      assert.strictEqual(failed.signal, "SIGKILL")
      assert.include(failed.message, "(killed by SIGKILL), 1 request unanswered")
    }).pipe(Effect.scoped, Effect.provide(layer(tempDir()))))
})
