/**
 * A policy's state through `SessionJournal.decide`: the journal stores a frozen copy
 * of the state the guard gave (`takePayload` with `freeze`), and a compiled policy
 * recognises the copy of the state it made last (`copiedFrom`), so it does not read
 * its slots again. Whether it is handed its own state, the journal's frozen copy or
 * a plain clone (which it must read), it decides the same and makes the same states.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { Entry, Guard, JournalState, Persistence, Policy, SessionJournal } from "../src/index.ts"
import { canonicalize, copiedFrom } from "../src/internal/jcs.ts"
import { takePayload } from "../src/internal/validate.ts"
import * as A from "./arbitraries.ts"

const policy = (): Policy.Compiled => {
  const r = Policy.decode([
    { maxInvocations: 6, of: "Bash(npm test*)", per: "1m" },
    { maxBytesRead: 5_000, of: "Read", per: "30s" },
    { maxStreak: 4, of: ["Bash"] },
    { maxInvocations: 40 },
    { after: "Read(**/.env*)", deny: "WebFetch" }
  ])
  if (Result.isFailure(r)) throw new Error(r.failure.message)
  return Policy.compile(r.success)
}

const calls = [
  { tool_name: "Bash", tool_input: { command: "npm test -- --run" } },
  { tool_name: "Bash", tool_input: { command: "ls" } },
  { tool_name: "Read", tool_input: { file_path: "/w/src/a.ts" } },
  { tool_name: "Read", tool_input: { file_path: "/w/.env" } },
  { tool_name: "WebFetch", tool_input: { url: "https://example.com/x" } }
] as const

const params = (tool_name: string, bytes: number): Entry.ValidToolParams => ({
  tool_name,
  server_id: "s",
  agent_id: "a",
  bytes_read: bytes,
  bytes_written: 0,
  delegation_depth: 0,
  allowed: true
})

type Handing = "own" | "frozen" | "clone"

// Decides the calls in turn, folding each state as `decide` stores it under `handing`:
// the guard's own object, the journal's frozen copy, or a clone the policy must read.
const run = (handing: Handing, steps: ReadonlyArray<readonly [number, number, number]>) => {
  const compiled = policy()
  let state = JournalState.empty("copy")
  let now = 1_764_400_000_000
  const out: Array<string> = []
  for (const [c, bytes, wait] of steps) {
    now += wait
    const call = calls[c % calls.length]!
    const p = params(call.tool_name, bytes)
    const v = compiled.guard(JournalState.snapshot(state), p, {
      call,
      where: { cwd: "/w", projectDir: "/w" },
      nowMillis: now,
      tokens: null,
      canAsk: false,
      state: state.guard_state
    })
    const tool = JournalState.nextTool(state, 1, { ...p, allowed: v._tag !== "Deny" })
    state = JournalState.fold(state, tool)
    out.push(`${v._tag}:${v._tag === "Allow" ? "" : v.guard}`)
    if (v.state !== undefined && v.state !== state.guard_state) {
      const taken = takePayload(Guard.STATE_KIND, v.state, handing === "frozen")
      assert.isTrue(Result.isSuccess(taken))
      if (Result.isFailure(taken)) return out
      const payload = handing === "own" ? v.state : taken.success.value
      if (handing === "frozen") assert.strictEqual(copiedFrom(payload), v.state)
      out.push(canonicalize(payload))
      state = JournalState.fold(state, JournalState.nextOther(state, 1, Guard.STATE_KIND, payload))
    }
  }
  return out
}

describe("a policy's state through decide", () => {
  it("property: own state, the journal's frozen copy and a clone decide alike and make the same states", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat({ max: 9 }), fc.nat({ max: 2_000 }), fc.constantFrom(0, 250, 2_000, 31_000)), {
          maxLength: 60
        }),
        (steps) => {
          const own = run("own", steps)
          assert.deepStrictEqual(run("frozen", steps), own)
          assert.deepStrictEqual(run("clone", steps), own)
        }
      ),
      {
        numRuns: A.runs(100),
        reporter: (details) => {
          if (details.failed) {
            throw new Error(
              `property failed (seed ${details.seed}, path ${details.counterexamplePath}): ${details.errorInstance}`
            )
          }
        }
      }
    )
  })

  it.effect("decide stores the state frozen, and the guard gets back the copy of what it gave", () =>
    Effect.gen(function*() {
      const journal = yield* SessionJournal.SessionJournal
      yield* TestClock.setTime(1_764_400_000_000)
      const compiled = policy()
      const given: Array<Guard.GuardState> = []
      const seen: Array<Guard.GuardState | null> = []
      const guard: Guard.Guard = (s, p, c) => {
        seen.push(c?.state ?? null)
        const v = compiled.guard(s, p, c)
        if (v.state !== undefined) given.push(v.state)
        return v
      }
      const call = params("Bash", 0)
      for (let i = 0; i < 3; i++) yield* journal.decide("frozen", call, guard, undefined, { call: calls[0] })
      const state = (yield* journal.state("frozen")).guard_state
      assert.isTrue(state !== null && Object.isFrozen(state))
      assert.strictEqual(copiedFrom(state), given[given.length - 1])
      assert.strictEqual(seen[0], null)
      assert.strictEqual(copiedFrom(seen[1]), given[0])
      assert.strictEqual(copiedFrom(seen[2]), given[1])
      assert.deepStrictEqual(seen[2], given[1])
    }).pipe(Effect.provide(SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory())))))
})
