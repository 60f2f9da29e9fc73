/**
 * The `sj1` proofs between the forwarder and the guard (`guardAuth.ts`) and the
 * forwarder's check of the guard's answers (`Forward.isAnswer`), as pure code:
 * a proof verifies only for its own token, method, path, time, nonce and body;
 * an answer's MAC only for its own nonce, status and body; the header parser
 * takes exactly the form it writes; the replay memory refuses every nonce twice,
 * every time outside its window and stays within its bound; and the answer check
 * takes exactly the outputs the guard gives for an event, nothing else (a
 * property over arbitrary JSON, and the guard's own refusals for every event).
 */
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import * as Forward from "../src/Forwarder.ts"
import * as Hook from "../src/Hook.ts"
import * as GuardAuth from "../src/internal/guardAuth.ts"
import * as Refusal from "../src/Refusal.ts"

const TOKEN = "guard-auth-test-token-0123456789"
const bytes = (s: string) => new TextEncoder().encode(s)

describe("sj1 proofs", () => {
  it("a request's proof verifies for its own token, method, path, time, nonce and body only", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 256 }),
        fc.uint8Array({ maxLength: 256 }),
        fc.nat({ max: 2 ** 45 }),
        fc.string({ minLength: 16, maxLength: 40 }),
        (body, other, time, token) => {
          const request = { method: "POST", path: "/hook", time }
          const { header, nonce } = GuardAuth.sign(token, request, body)
          const proof = GuardAuth.parse(header)
          expect(proof).toEqual({ time, nonce, mac: header.split(" ")[3] })
          expect(GuardAuth.verifyRequest(token, proof!, request, body)).toBe(true)
          const same = Buffer.from(body).equals(Buffer.from(other))
          expect(GuardAuth.verifyRequest(token, proof!, request, other)).toBe(same)
          expect(GuardAuth.verifyRequest(token + "x", proof!, request, body)).toBe(false)
          expect(GuardAuth.verifyRequest(token, proof!, { ...request, method: "GET" }, body)).toBe(false)
          expect(GuardAuth.verifyRequest(token, proof!, { ...request, path: "/policy" }, body)).toBe(false)
          expect(GuardAuth.verifyRequest(token, { ...proof!, time: time + 1 }, request, body)).toBe(false)
          expect(GuardAuth.verifyRequest(token, { ...proof!, nonce: GuardAuth.makeNonce() }, request, body)).toBe(
            false
          )
        }
      )
    )
  })

  it("an answer's MAC verifies for its own nonce, status and body only", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 256 }), fc.uint8Array({ maxLength: 256 }), (body, other) => {
        const nonce = GuardAuth.makeNonce()
        const header = GuardAuth.answerHeader(TOKEN, nonce, 200, body)
        expect(GuardAuth.verifyAnswer(TOKEN, nonce, header, 200, body)).toBe(true)
        expect(GuardAuth.verifyAnswer(TOKEN, nonce, header, 200, other)).toBe(
          Buffer.from(body).equals(Buffer.from(other))
        )
        expect(GuardAuth.verifyAnswer(TOKEN, nonce, header, 401, body)).toBe(false)
        expect(GuardAuth.verifyAnswer(TOKEN, GuardAuth.makeNonce(), header, 200, body)).toBe(false)
        expect(GuardAuth.verifyAnswer(TOKEN + "x", nonce, header, 200, body)).toBe(false)
        expect(GuardAuth.verifyAnswer(TOKEN, nonce, undefined, 200, body)).toBe(false)
        expect(GuardAuth.verifyAnswer(TOKEN, nonce, header + " ", 200, body)).toBe(false)
        expect(GuardAuth.verifyAnswer(TOKEN, nonce, header.toUpperCase(), 200, body)).toBe(
          header === header.toUpperCase()
        )
      })
    )
  })

  it("the header parser takes exactly the form the forwarder writes", () => {
    const { header } = GuardAuth.sign(TOKEN, { method: "POST", path: "/hook", time: 1_700_000_000_000 }, bytes("{}"))
    expect(GuardAuth.parse(header)).not.toBeNull()
    for (
      const bad of [
        undefined,
        "",
        "sj1",
        header.replace("sj1", "sj2"),
        header + " ",
        " " + header,
        header.replace(/ /g, "  "),
        header.replace("1700000000000", "01700000000000"),
        header.replace("1700000000000", "-1"),
        header.replace("1700000000000", "1e12"),
        header.replace("1700000000000", "99999999999999999"),
        header.slice(0, -1),
        header + "A"
      ]
    ) {
      expect(GuardAuth.parse(bad), String(bad)).toBeNull()
    }
    fc.assert(
      fc.property(fc.string({ maxLength: 120 }), (s) => {
        const p = GuardAuth.parse(s)
        if (p !== null) expect(`sj1 ${p.time} ${p.nonce} ${p.mac}`).toBe(s)
      })
    )
  })

  it("macEquals is equality", () => {
    fc.assert(fc.property(fc.string(), fc.string(), (a, b) => {
      expect(GuardAuth.macEquals(a, b)).toBe(a === b)
    }))
  })
})

describe("the guard's replay memory", () => {
  it("refuses every request twice and every time outside the window, and holds at most its capacity", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            nonce: fc.integer({ min: 0, max: 40 }),
            skew: fc.integer({ min: -150, max: 150 }),
            step: fc.nat(30),
            // Sent again: one of the requests taken so far, exactly as it was.
            replay: fc.option(fc.nat(), { nil: undefined })
          }),
          { maxLength: 200 }
        ),
        fc.integer({ min: 1, max: 16 }),
        (requests, capacity) => {
          const windowMs = 100
          const replays = GuardAuth.makeReplayGuard({ windowMs, capacity })
          const taken: Array<{ readonly time: number; readonly nonce: string }> = []
          let now = 1_000_000
          for (const r of requests) {
            now += r.step
            const proof = r.replay !== undefined && taken.length > 0
              ? taken[r.replay % taken.length]!
              : { time: now + r.skew, nonce: `n${r.nonce}`.padEnd(22, "x") }
            const again = taken.some((t) => t.time === proof.time && t.nonce === proof.nonce)
            const verdict = replays.check(proof, now)
            if (Math.abs(proof.time - now) > windowMs) expect(verdict).not.toBeNull()
            if (again) expect(verdict, `a replay of ${JSON.stringify(proof)} was taken`).not.toBeNull()
            if (verdict === null) taken.push(proof)
            expect(replays.size()).toBeLessThanOrEqual(capacity)
          }
        }
      )
    )
  })

  it("takes fresh nonces within the window", () => {
    const replays = GuardAuth.makeReplayGuard({ windowMs: 1000, capacity: 4 })
    for (let i = 0; i < 100; i++) {
      expect(replays.check({ time: 5000 + i * 10, nonce: `nonce-${i}`.padEnd(22, "x") }, 5000 + i * 10)).toBeNull()
    }
    expect(replays.size()).toBe(4)
  })
})

const preToolUse = (decision: string, reason: unknown = "why") => ({
  hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: decision, permissionDecisionReason: reason }
})

describe("Forward.isAnswer", () => {
  it("takes exactly {} and the outputs the guard gives, per event", () => {
    for (const d of ["deny", "ask", "allow"]) expect(Forward.isAnswer("PreToolUse", preToolUse(d))).toBe(true)
    expect(Forward.isAnswer("PreToolUse", {})).toBe(true)
    expect(Forward.isAnswer("PreToolUse", Hook.denyOutput("no"))).toBe(true)
    const rejected: Array<[string, unknown]> = [
      ["PreToolUse", preToolUse("Deny")],
      ["PreToolUse", preToolUse("defer")],
      ["PreToolUse", preToolUse("allow", 1)],
      ["PreToolUse", preToolUse("allow", null)],
      ["PreToolUse", { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "allow" } }],
      ["PreToolUse", { ...preToolUse("allow"), continue: true }],
      ["PreToolUse", { hookSpecificOutput: { ...preToolUse("allow").hookSpecificOutput, updatedInput: {} } }],
      ["PreToolUse", { hookSpecificOutput: { ...preToolUse("allow").hookSpecificOutput, hookEventName: "Stop" } }],
      ["PreToolUse", { decision: "approve" }],
      ["PreToolUse", { decision: "block", reason: "r" }],
      ["PreToolUse", []],
      ["PreToolUse", null],
      ["PreToolUse", "{}"],
      ["PostToolUse", preToolUse("deny")],
      ["PostToolUse", { decision: "block" }],
      ["PostToolUse", { decision: "approve", reason: "r" }],
      ["PostToolUse", { continue: false }],
      ["PermissionRequest", preToolUse("deny")],
      ["PermissionRequest", {
        hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "allow", message: "m" } }
      }],
      ["PermissionRequest", {
        hookSpecificOutput: { hookEventName: "PermissionRequest", decision: { behavior: "deny" } }
      }]
    ]
    for (const [event, output] of rejected) {
      expect(Forward.isAnswer(event, output), `${event} ${JSON.stringify(output)}`).toBe(false)
    }
  })

  it("takes every refusal the guard answers, for every event, with or without stop_hook_active", () => {
    const events = [
      "PreToolUse",
      "PermissionRequest",
      "PostToolUse",
      "Stop",
      "SubagentStop",
      "UserPromptSubmit",
      "SessionStart",
      "SomethingNew"
    ]
    for (const event of events) {
      for (const stopHookActive of [false, true]) {
        const output = Refusal.refusal(event, "the reason", { stopHookActive }).httpOutput
        expect(Forward.isAnswer(event, output), `${event} ${JSON.stringify(output)}`).toBe(true)
      }
    }
  })

  it("anything else, over arbitrary JSON: taken only when it is one of the accepted shapes", () => {
    const event = fc.constantFrom("PreToolUse", "PermissionRequest", "PostToolUse", "Stop")
    const shaped = fc.oneof(
      fc.jsonValue(),
      fc.record({
        hookSpecificOutput: fc.record({
          hookEventName: fc.constantFrom("PreToolUse", "PermissionRequest", "Stop"),
          permissionDecision: fc.oneof(fc.constantFrom("deny", "ask", "allow", "defer"), fc.jsonValue()),
          permissionDecisionReason: fc.oneof(fc.string(), fc.jsonValue())
        }, { requiredKeys: [] })
      }, { requiredKeys: [] }),
      fc.record({ decision: fc.constantFrom("block", "approve"), reason: fc.oneof(fc.string(), fc.jsonValue()) }, {
        requiredKeys: []
      })
    )
    fc.assert(fc.property(event, shaped, (name, output) => {
      const taken = Forward.isAnswer(name, output)
      const text = JSON.stringify(output)
      const accepted = text === "{}" ||
        (name === "PreToolUse" &&
          /^\{"hookSpecificOutput":\{"hookEventName":"PreToolUse","permissionDecision":"(deny|ask|allow)","permissionDecisionReason":"/
            .test(text) &&
          Object.keys((output as { hookSpecificOutput: object }).hookSpecificOutput).length === 3 &&
          Object.keys(output as object).length === 1) ||
        (name !== "PreToolUse" && name !== "PermissionRequest" &&
          text.startsWith("{\"decision\":\"block\",\"reason\":\"") &&
          Object.keys(output as object).length === 2)
      expect(taken, text).toBe(accepted)
      // What is taken prints back as the same JSON.
      if (taken) expect(JSON.stringify(Forward.checkAnswer(name, bytes(text)))).toBe(text)
    }))
  })

  it("checkAnswer refuses bytes that are no JSON object in strict UTF-8", () => {
    expect(Forward.checkAnswer("PreToolUse", bytes("<html>ok</html>"))).toBeTypeOf("string")
    expect(Forward.checkAnswer("PreToolUse", new Uint8Array([0x7b, 0xff, 0x7d]))).toBeTypeOf("string")
    expect(Forward.checkAnswer("PreToolUse", bytes(""))).toBeTypeOf("string")
    expect(Forward.checkAnswer("PreToolUse", bytes("{} {}"))).toBeTypeOf("string")
    expect(Forward.checkAnswer("PreToolUse", bytes(" {} "))).toEqual({})
  })
})
