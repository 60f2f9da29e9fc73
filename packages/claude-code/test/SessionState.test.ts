/**
 * The fold: its counters equal independent counts over any sequence of inputs,
 * never go down, the cost is the latest running total the CLI reported, and a
 * dead session stays dead with its first exit.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { Message, SessionState } from "../src/index.ts"

const lines = [
  `{"type":"system","subtype":"init","cwd":"/w","session_id":"s1","tools":[],"model":"m1"}`,
  `{"type":"system","subtype":"init","cwd":"/w","session_id":"s2","tools":[],"model":"m2"}`,
  `{"type":"system","subtype":"notification","key":"k","text":"t"}`,
  `{"type":"system","subtype":"task_notification"}`,
  `{"type":"system","subtype":"hook_started"}`,
  `{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.25,"usage":{"input_tokens":3,"output_tokens":2}}`,
  `{"type":"result","subtype":"success","is_error":false,"total_cost_usd":0.75,"usage":{"input_tokens":3,"output_tokens":2}}`,
  `{"type":"result","subtype":"error_during_execution","is_error":true}`,
  `{"type":"mystery"}`,
  `not json`,
  `{"type":"keep_alive"}`
]

const input = fc.oneof(
  { weight: 9, arbitrary: fc.constantFrom(...lines).map(Message.decodeLine) },
  {
    weight: 1,
    arbitrary: fc.record({ code: fc.option(fc.integer()), stderr: fc.string() }).map((e) => ({
      _tag: "Exited" as const,
      exit: { code: e.code, signal: null, stderr: e.stderr }
    }))
  }
)

describe("SessionState", () => {
  it("property: the counters are exact and monotone; dead stays dead", () => {
    fc.assert(
      fc.property(fc.array(input, { maxLength: 60 }), (inputs) => {
        let s = SessionState.initial
        for (const i of inputs) {
          const next = SessionState.fold(s, i)
          assert.isTrue(next.resultsSeen >= s.resultsSeen && next.messagesSeen >= s.messagesSeen)
          if (SessionState.isDead(s)) assert.deepStrictEqual(next.status, s.status)
          s = next
        }
        const messages = inputs.filter((i): i is Message.Message => i._tag !== "Exited")
        const results = messages.filter((m) => m._tag === "Result")
        assert.strictEqual(s.messagesSeen, messages.length)
        assert.strictEqual(s.resultsSeen, results.length)
        assert.strictEqual(s.unknownSeen, messages.filter((m) => m._tag === "Unknown" || m._tag === "Garbled").length)
        assert.strictEqual(
          s.notificationsSeen,
          messages.filter((m) =>
            m._tag === "System" && (m.subtype === "notification" || m.subtype === "task_notification")
          ).length
        )
        const firstInit = messages.find((m) => m._tag === "SystemInit")
        assert.strictEqual(s.sessionId, firstInit?._tag === "SystemInit" ? firstInit.session_id : null)
        const costed = results.filter((r) => r.total_cost_usd !== undefined)
        assert.strictEqual(s.usage.input_tokens, costed.length * 3)
        // total_cost_usd is the CLI's running total: the latest one is the cost.
        assert.strictEqual(s.costUsd, costed.at(-1)?.total_cost_usd ?? 0)
        assert.deepStrictEqual(s.lastResult, results.at(-1) ?? null)
        const firstExit = inputs.find((i) => i._tag === "Exited")
        assert.deepStrictEqual(
          s.status,
          firstExit === undefined ? { _tag: "Alive" } : { _tag: "Dead", exit: firstExit.exit }
        )
      }),
      { numRuns: process.env["STRESS"] ? 5000 : 300 }
    )
  })
})
