/**
 * Policies that see calls (docs/DESIGN.md §16): the new keys decode, misplaced and
 * repeated keys are refused with their JSON path, deny and ask patterns judge what a
 * call does (adversarial commands and paths included), scoped and windowed limits
 * count in the policy's state, a flow rule taints the session, a token budget fails
 * closed; a policy of the old keys decides and writes exactly as before; no decision
 * throws.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Result from "effect/Result"
import * as Stream from "effect/Stream"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { Entry, Guard, JournalState, Persistence, Policy, SessionJournal } from "../src/index.ts"
import { duplicateKeys } from "../src/internal/duplicateKeys.ts"
import * as A from "./arbitraries.ts"
import { built, decoded } from "./policies.ts"

const problems = (text: string): Array<string> => {
  const r = Policy.decodeText(text)
  if (Result.isSuccess(r)) assert.fail(`decoded: ${text}`)
  return r.failure.issues.map((i) => `${i.path}: ${i.message}`)
}

const journalLayer = SessionJournal.layer().pipe(Layer.provide(Persistence.layerMemory()))

const where = { cwd: "/home/u/repo", projectDir: "/home/u/repo", home: "/home/u" }
const params = (tool_name: string, extra: Partial<Entry.ValidToolParams> = {}): Entry.ValidToolParams =>
  A.call(tool_name, extra)

// A session driven by a compiled policy in memory: each call decided with its input
// at a time, the state folded as `decide` would.
const driver = (json: unknown, canAsk = true) => {
  const compiled = Policy.compile(decoded(json))
  let state = JournalState.empty("p")
  return {
    compiled,
    state: () => state,
    call: (tool: string, input: Record<string, unknown>, nowMillis = 0, tokens: bigint | null = null) => {
      const p = params(tool)
      const v = compiled.guard(JournalState.snapshot(state), p, {
        call: { tool_name: tool, tool_input: input, cwd: where.cwd },
        where,
        nowMillis,
        tokens,
        canAsk,
        state: state.guard_state
      })
      state = JournalState.fold(state, JournalState.nextTool(state, 1, { ...p, allowed: v._tag !== "Deny" }))
      if (v.state !== undefined) {
        state = JournalState.fold(state, JournalState.nextOther(state, 1, Guard.STATE_KIND, v.state))
      }
      return v
    }
  }
}

const tags = (vs: ReadonlyArray<Guard.Verdict>) => vs.map((v) => v._tag)

describe("Policy: the new keys", () => {
  it("decode, and format writes each rule readably", () => {
    const p = decoded([
      { deny: ["Bash(rm -rf *)", "Bash(git push --force *)"], reason: "destructive" },
      { ask: "Bash(git push *)" },
      { maxInvocations: 5, of: "Bash(npm test*)", per: "1m" },
      { maxStreak: 3, of: ["Read"] },
      { after: "Read(**/.env*)", deny: ["WebFetch", "Bash(curl:*)"] },
      { maxTokens: 2000000 },
      { maxStreak: 4 }
    ])
    assert.strictEqual(
      Policy.format(p),
      "all(deny([\"Bash(rm -rf *)\",\"Bash(git push --force *)\"], reason: \"destructive\"), " +
        "ask([\"Bash(git push *)\"]), maxInvocations(5, of: [\"Bash(npm test*)\"], per: \"1m\"), " +
        "maxStreak(3, of: [\"Read\"]), after([\"Read(**/.env*)\"], deny: [\"WebFetch\",\"Bash(curl *)\"]), " +
        "maxTokens(2000000), maxStreak(4))"
    )
    assert.strictEqual(Policy.size(p), 7)
    assert.deepStrictEqual(decoded(Policy.encode(p)), p)
    assert.deepStrictEqual(Policy.compile(p).stateKeys, [
      "maxInvocations(5, of: [\"Bash(npm test*)\"], per: \"1m\")",
      "maxStreak(3, of: [\"Read\"])",
      "after([\"Read(**/.env*)\"], deny: [\"WebFetch\",\"Bash(curl *)\"])"
    ])
  })

  it("a bad pattern, a misplaced modifier, a missing list and a bad duration name their JSON path", () => {
    const bad = problems(`[{"deny":["Bash","Bash(rm"]}]`)
    assert.strictEqual(bad.length, 1)
    assert.match(bad[0]!, /^\$\[0\]\.deny\[1\]: expected a pattern: Parenthesis at \d+: /)
    assert.match(problems(`{"deny":"Bash(rm"}`)[0]!, /^\$\.deny: expected a pattern: Parenthesis at \d+: /)
    assert.deepStrictEqual(problems(`{"all":[{"deny":"Bash","of":"Read"}]}`), [
      "$.all[0].of: \"of\" does not go with \"deny\"; it modifies maxInvocations, maxStreak, maxBytesRead, maxBytesWritten"
    ])
    assert.deepStrictEqual(problems(`{"maxStreak":1,"reason":"x"}`), [
      "$.reason: \"reason\" does not go with \"maxStreak\"; it modifies deny, ask, after"
    ])
    assert.deepStrictEqual(problems(`{"after":"Read"}`), [
      "$: expected \"after\" with exactly one of \"deny\" or \"ask\""
    ])
    assert.deepStrictEqual(problems(`{"after":"Read","deny":"WebFetch","per":"1m"}`), [
      "$.per: \"per\" does not go with \"after\" (it takes \"deny\" or \"ask\" and \"reason\")"
    ])
    assert.match(problems(`{"maxInvocations":1,"per":"90 s"}`)[0]!, /^\$\.per: expected a duration/)
    assert.match(problems(`{"maxInvocations":1,"per":"0s"}`)[0]!, /^\$\.per: expected a duration/)
    assert.match(problems(`{"deny":3}`)[0]!, /^\$\.deny: expected a pattern or an array of patterns/)
  })

  it("check refuses repeated keys and warns on tool names no agent uses in that spelling", () => {
    const dup = Policy.check(`{"all":[{"maxStreak":1,"maxStreak":100}]}`)
    assert.isNull(dup.policy)
    assert.deepStrictEqual(dup.issues.map((i) => i.path), ["$.all[0].maxStreak"])
    const warned = Policy.check(`{"all":[{"denyList":["bash","mcp__github","read_file"]},{"deny":"bash"}]}`)
    assert.isNotNull(warned.policy)
    assert.deepStrictEqual(warned.issues, [])
    assert.deepStrictEqual(warned.warnings.map((w) => w.path), [
      "$.all[0].denyList[0]",
      "$.all[0].denyList[1]",
      "$.all[1].deny"
    ])
    assert.include(warned.warnings[0]!.message, "\"Bash\"")
    assert.include(warned.warnings[1]!.message, "mcp__github__*")
    assert.deepStrictEqual(Policy.check(`[{"deny":"mcp__github"},{"allowList":["Bash"]}]`).warnings, [])
    const top = Policy.check(`[{"a":1,"a":2}]`)
    assert.deepStrictEqual(top.issues.map((i) => i.path).slice(0, 1), ["$[0].a"])
  })

  it("warns on a pattern or a wildcard in a list of exact names, and on an MCP server name no tool name can hold", () => {
    const warned = Policy.check(
      `[{"denyList":["mcp__github__*","Bash(rm -rf *)"]},{"deny":["mcp__my.server__x","mcp__my.server__*"]},` +
        `{"allowList":["mcp__a@b__c"]},{"deny":["mcp__my-server_1__*","mcp__github"]}]`
    )
    assert.deepStrictEqual(warned.issues, [])
    assert.deepStrictEqual(warned.warnings.map((w) => w.path), [
      "$[0].denyList[0]",
      "$[0].denyList[1]",
      "$[1].deny[0]",
      "$[1].deny[1]",
      "$[2].allowList[0]"
    ])
    assert.include(warned.warnings[0]!.message, "is compared exactly here")
    assert.include(warned.warnings[2]!.message, "has only letters, digits, _ and -")
  })

  it("a tool misspelled in case, whose specifier then does not parse, is named in the issue", () => {
    assert.deepStrictEqual(problems(`{"maxInvocations":3,"of":"bash(npm test*)"}`), [
      "$.of: expected a pattern: Specifier at 5: expected name:value for bash (Claude Code's tool is \"Bash\")"
    ])
  })

  it("repeated keys are found by their path, past strings, escapes and nesting; JSON text has none", () => {
    const text = `{"a":"}{\\"a\\":1,","b":[{"c":1},{"c":2,"c":3}],"\\u0062":1,"d":{"e":[[{"f":0,"f":1}]]}}`
    assert.deepStrictEqual(duplicateKeys(text), [
      { path: ["b", 1], key: "c" },
      { path: [], key: "b" },
      { path: ["d", "e", 0, 0], key: "f" }
    ])
    fc.assert(fc.property(fc.jsonValue(), (v) => assert.deepStrictEqual(duplicateKeys(JSON.stringify(v)), [])), {
      numRuns: A.runs(200)
    })
  })

  it("a policy whose state could pass the bound is refused", () => {
    const long = "Bash(" + "x".repeat(4000) + ")"
    const rules = Array.from({ length: 20 }, (_, i) => ({ maxInvocations: i, of: long }))
    assert.match(problems(JSON.stringify(rules))[0]!, /^\$: the policy's state could take \d+ bytes/)
  })
})

describe("Policy: deny and ask see what a call does", () => {
  const bash = (command: string) => ({ command })
  const deny = (command: string) =>
    driver({ deny: ["Bash(rm -rf *)", "Bash(git push --force *)"] }).call("Bash", bash(command))

  it("a denied command hidden in a compound, a substitution, a shell or quotes is found", () => {
    for (
      const c of [
        "rm -rf /",
        "ls && rm -rf /",
        "ls; rm -rf /",
        "echo x | rm -rf /",
        "ls\nrm -rf /",
        "echo $(rm -rf /)",
        "echo `rm -rf /`",
        "sh -c 'rm -rf /'",
        "bash -lc \"ls && rm -rf /tmp/x\"",
        "  rm   -rf   / ",
        "\"rm\" -rf /",
        "'rm' '-rf' /",
        "git push --force origin main",
        "cd x && git  push  --force"
      ]
    ) {
      const v = deny(c)
      assert.strictEqual(v._tag, "Deny", c)
      assert.match(v._tag === "Deny" ? v.guard : "", /^deny\("Bash\((rm -rf|git push --force) \*\)"\)$/, c)
    }
    for (const c of ["ls -la", "rm -r x", "echo 'rm -rf /' > note", "git push origin"]) {
      assert.strictEqual(deny(c)._tag, "Allow", c)
    }
  })

  it("the reason names the part that matched, or is the policy's own", () => {
    const v = deny("ls && rm -rf /")
    assert.deepStrictEqual(v, {
      _tag: "Deny",
      reason: "the command \"rm -rf /\" of Bash matches deny pattern Bash(rm -rf *)",
      guard: "deny(\"Bash(rm -rf *)\")"
    })
    const own = driver({ deny: "Bash(rm -rf *)", reason: "never" }).call("Bash", bash("rm -rf /"))
    assert.strictEqual(own._tag === "Deny" ? own.reason : "", "never")
  })

  it("paths reached through .., //, ~ or another cwd are judged where they land", () => {
    const d = driver({ deny: ["Read(~/.ssh/**)", "Edit(//etc/**)", "Read(/secrets/**)"] })
    const denied: Array<readonly [string, Record<string, unknown>]> = [
      ["Read", { file_path: "/home/u/.ssh/id_rsa" }],
      ["Read", { file_path: "/home/u/repo/../.ssh/id_rsa" }],
      ["Read", { file_path: "//home/u/.ssh/id_rsa" }],
      ["Read", { file_path: "../.ssh/id_rsa" }],
      ["Grep", { pattern: "x", path: "/home/u/.ssh" }],
      ["Write", { file_path: "/etc/passwd", content: "" }],
      ["Edit", { file_path: "/tmp/../etc/hosts", old_string: "a", new_string: "b" }],
      ["Read", { file_path: "secrets/key" }],
      ["Read", { file_path: "./a/../secrets/key" }],
      ["Read", {}]
    ]
    for (const [tool, input] of denied) assert.strictEqual(d.call(tool, input)._tag, "Deny", JSON.stringify(input))
    for (
      const [tool, input] of [["Read", { file_path: "/home/u/repo/README.md" }], ["Write", {
        file_path: "/tmp/x"
      }]] as const
    ) {
      assert.strictEqual(d.call(tool, input)._tag, "Allow", JSON.stringify(input))
    }
  })

  it("ask asks where someone can be asked and denies, saying so, where no one can", () => {
    const p = { ask: "Bash(git push *)" }
    assert.deepStrictEqual(driver(p).call("Bash", bash("git push origin")), {
      _tag: "Ask",
      reason: "the command \"git push origin\" of Bash matches ask pattern Bash(git push *)",
      guard: "ask(\"Bash(git push *)\")"
    })
    const v = driver(p, false).call("Bash", bash("git push origin"))
    assert.strictEqual(v._tag, "Deny")
    assert.match(v._tag === "Deny" ? v.reason : "", /^approval was needed \(.*\) and no one could be asked$/)
    // A denial beats an ask in `all`; in `any` an allow beats both.
    assert.strictEqual(driver([p, { deny: "Bash" }]).call("Bash", bash("git push"))._tag, "Deny")
    assert.strictEqual(driver({ any: [p, { allowList: ["Bash"] }] }).call("Bash", bash("git push"))._tag, "Allow")
  })

  it("without the call's input a pattern on it fails closed; a bare tool pattern still judges the name", () => {
    const g = Policy.toGuard(decoded([{ deny: "Bash(rm *)" }, { deny: "WebFetch" }]))
    const s = JournalState.snapshot(JournalState.empty("n"))
    assert.strictEqual(g(s, params("Bash"))._tag, "Deny")
    assert.strictEqual(g(s, params("Read"))._tag, "Allow")
    assert.strictEqual(g(s, params("WebFetch"))._tag, "Deny")
  })
})

describe("Policy: scoped and windowed limits, flows, budgets", () => {
  it("of counts only matching calls; a streak of matching calls is broken by another call", () => {
    const d = driver([{ maxInvocations: 2, of: "Bash(npm test*)" }, { maxStreak: 2, of: "Read" }])
    const t = () => d.call("Bash", { command: "npm test" })
    assert.deepStrictEqual(tags([t(), d.call("Bash", { command: "ls" }), t(), t(), t()]), [
      "Allow",
      "Allow",
      "Allow",
      "Deny",
      "Deny"
    ])
    const r = () => d.call("Read", { file_path: "/a" })
    assert.deepStrictEqual(tags([r(), r(), r(), d.call("Grep", { pattern: "x" }), r(), r(), r()]), [
      "Allow",
      "Allow",
      "Deny",
      "Allow",
      "Allow",
      "Allow",
      "Deny"
    ])
  })

  it("property: a window slides — a call at t is counted at t + per, and gone at t + per + per/60", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("30s", "1m", "1h", "1d"),
        fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (per, t, f) => {
          const perMs = { "30s": 30_000, "1m": 60_000, "1h": 3_600_000, "1d": 86_400_000 }[per]
          const d = driver({ maxInvocations: 1, per })
          assert.strictEqual(d.call("Bash", {}, t)._tag, "Allow")
          const within = t + Math.floor(f * perMs)
          assert.strictEqual(d.call("Bash", {}, within)._tag, "Deny")
          assert.strictEqual(d.call("Bash", {}, t + perMs)._tag, "Deny")
          assert.strictEqual(d.call("Bash", {}, t + perMs + perMs / 60 + perMs + perMs / 60)._tag, "Allow")
          const e = driver({ maxInvocations: 1, per })
          e.call("Bash", {}, t)
          assert.strictEqual(e.call("Bash", {}, t + perMs + perMs / 60)._tag, "Allow")
        }
      ),
      { numRuns: A.runs(100) }
    )
  })

  it("a window keeps only the slots that hold calls; a malformed slot reads as full", () => {
    const d = driver({ maxInvocations: 3, per: "1h" })
    for (let i = 0; i < 3; i++) d.call("Bash", {}, 1_000_000 + i)
    const key = "maxInvocations(3, per: \"1h\")"
    assert.deepStrictEqual(d.state().guard_state, { [key]: { s: 16, w: [[0, 3]] } })
    const g = d.compiled.guard
    const snap = JournalState.snapshot(d.state())
    const ctx = (state: Guard.GuardState) => ({
      call: null,
      where,
      nowMillis: 1_000_000,
      tokens: null,
      canAsk: true,
      state
    })
    for (const junk of [{ s: 16, w: [[61, 1]] }, { s: 16, w: [[0, -1]] }, { w: [] }, [], "x", { n: 0 }]) {
      assert.strictEqual(g(snap, params("Bash"), ctx({ [key]: junk as never }))._tag, "Deny", JSON.stringify(junk))
    }
    assert.strictEqual(g(snap, params("Bash"), ctx({ [key]: { s: 16, w: [[5, 2]] } }))._tag, "Allow")
  })

  it("a windowed streak counts the run of one tool in the window, and restarts with another tool", () => {
    const d = driver({ maxStreak: 2, per: "1m" })
    const at = (tool: string, t: number) => d.call(tool, {}, t)
    assert.deepStrictEqual(tags([at("Read", 0), at("Read", 1000), at("Read", 2000)]), ["Allow", "Allow", "Deny"])
    assert.deepStrictEqual(tags([at("Grep", 3000), at("Grep", 4000), at("Read", 5000)]), ["Allow", "Allow", "Allow"])
    // The run of Read restarted at 5 s; the window forgets calls older than a minute and a slot.
    assert.deepStrictEqual(tags([at("Read", 6000), at("Read", 7000), at("Read", 69_000)]), ["Allow", "Deny", "Allow"])
  })

  it.effect("observePlan stores the outcome and the observed state in one append, under the session's lock", () =>
    Effect.gen(function*() {
      const j = yield* SessionJournal.SessionJournal
      yield* TestClock.setTime(1_764_400_000_000)
      const compiled = Policy.compile(decoded({ maxBytesWritten: 10, of: "Write", per: "1h" }))
      const call = { tool_name: "Write", tool_input: { file_path: "/w/a", content: "x" }, cwd: "/w" }
      const first = yield* j.decide("obs", params("Write"), compiled.guard, undefined, { call, where })
      assert.strictEqual(first.verdict._tag, "Allow")
      const planned = yield* j.writeFrom(
        "obs",
        Policy.observePlan(compiled, { kind: Entry.OUTCOME_KIND, payload: { bytes_written: 10 } }, call, {
          read: 0,
          written: 10
        }, where)
      )
      assert.deepStrictEqual(planned.entries.map((e) => e.kind), [Entry.OUTCOME_KIND, Guard.STATE_KIND])
      const second = yield* j.decide("obs", params("Write", { bytes_written: 1 }), compiled.guard, undefined, {
        call,
        where
      })
      assert.strictEqual(second.verdict._tag, "Deny")
      // Another tool's outcome changes nothing: only the outcome is stored.
      const other = yield* j.writeFrom(
        "obs",
        Policy.observePlan(compiled, { kind: Entry.OUTCOME_KIND, payload: {} }, { tool_name: "Read" }, {
          read: 5,
          written: 5
        })
      )
      assert.deepStrictEqual(other.entries.map((e) => e.kind), [Entry.OUTCOME_KIND])
    }).pipe(Effect.provide(journalLayer)))

  it("windowed bytes count the call's own bytes and observed outcome bytes of matching calls", () => {
    const d = driver({ maxBytesRead: 100, of: "Read", per: "1m" })
    const call = { tool_name: "Read", tool_input: { file_path: "/a" } }
    assert.strictEqual(d.call("Read", { file_path: "/a" }, 1000)._tag, "Allow")
    const observed = Policy.observe(d.compiled, d.state().guard_state, call, { read: 100, written: 0 }, {
      where,
      nowMillis: 1000
    })
    assert.isNotNull(observed)
    assert.isNull(Policy.observe(d.compiled, observed, { tool_name: "Grep" }, { read: 5, written: 0 }))
    const g = d.compiled.guard
    const snap = JournalState.snapshot(d.state())
    const ctx = { call, where, nowMillis: 2000, tokens: null, canAsk: false, state: observed }
    assert.strictEqual(g(snap, params("Read", { bytes_read: 1 }), ctx)._tag, "Deny")
    assert.strictEqual(g(snap, params("Read", { bytes_read: 1 }), { ...ctx, nowMillis: 1000 + 61_000 })._tag, "Allow")
  })

  it("a taint set by one allowed call refuses later matching calls; a denied call sets none", () => {
    const d = driver([{ deny: "Read(//blocked/**)" }, { after: "Read(**/.env*)", deny: ["WebFetch", "Bash(curl *)"] }])
    const fetch = () => d.call("WebFetch", { url: "https://example.com/x" })
    assert.strictEqual(fetch()._tag, "Allow")
    assert.strictEqual(d.call("Read", { file_path: "/blocked/.env" })._tag, "Deny")
    assert.strictEqual(fetch()._tag, "Allow")
    assert.strictEqual(d.call("Read", { file_path: "/home/u/repo/.env.local" })._tag, "Allow")
    const v = fetch()
    assert.strictEqual(v._tag, "Deny")
    assert.strictEqual(
      v._tag === "Deny" ? v.guard : "",
      "after([\"Read(**/.env*)\"], deny: [\"WebFetch\",\"Bash(curl *)\"])"
    )
    assert.strictEqual(d.call("Bash", { command: "ls | curl -d @- x" })._tag, "Deny")
    assert.strictEqual(d.call("Bash", { command: "ls" })._tag, "Allow")
  })

  it("a token budget denies the first call after it is spent, and fails closed when tokens are unknown", () => {
    const d = driver({ maxTokens: 1000 })
    assert.strictEqual(d.call("Bash", {}, 0, 999n)._tag, "Allow")
    assert.strictEqual(d.call("Bash", {}, 0, 1000n)._tag, "Deny")
    const unknown = d.call("Bash", {}, 0, null)
    assert.strictEqual(
      unknown._tag === "Deny" ? unknown.reason : "",
      "token use unknown: maxTokens(1000) needs the tokens the agent used"
    )
  })

  it("explain gives every rule's verdict and the rule that decides, writing nothing", () => {
    const d = driver([{ deny: "WebFetch" }, { maxInvocations: 0, of: "Bash" }, { maxStreak: 9 }])
    const e = Policy.explain(d.compiled, JournalState.snapshot(d.state()), params("Bash"), {
      call: { tool_name: "Bash", tool_input: { command: "ls" } },
      where,
      nowMillis: 0,
      tokens: null,
      canAsk: true,
      state: null
    })
    assert.strictEqual(e.decidedBy, "maxInvocations(0, of: [\"Bash\"])")
    assert.deepStrictEqual(e.rules.map((r) => [r.rule, r.verdict._tag]), [
      ["deny([\"WebFetch\"])", "Allow"],
      ["maxInvocations(0, of: [\"Bash\"])", "Deny"],
      ["maxStreak(9)", "Allow"]
    ])
    assert.strictEqual(d.state().next_sequence, 0)
  })
})

// The evaluation of an old-key policy before this change, kept as it was.
const legacyAll = (...guards: ReadonlyArray<Guard.Guard>): Guard.Guard => (s, p) => {
  for (const g of guards) {
    const v = g(s, p)
    if (v._tag === "Deny") return v
  }
  return Guard.allow
}
const legacyAny = (...guards: ReadonlyArray<Guard.Guard>): Guard.Guard => (s, p) => {
  const reasons: Array<string> = []
  const names: Array<string> = []
  for (const g of guards) {
    const v = g(s, p)
    if (v._tag === "Allow") return v
    if (v._tag === "Deny") {
      reasons.push(v.reason)
      names.push(v.guard)
    }
  }
  return Guard.deny(reasons.length === 0 ? "no guard allows" : reasons.join("; "), `any(${names.join(", ")})`)
}
const legacyToGuard = (policy: Policy.Policy): Guard.Guard => {
  if ("all" in policy) return legacyAll(...policy.all.map(legacyToGuard))
  if ("any" in policy) return legacyAny(...policy.any.map(legacyToGuard))
  if ("maxBytesRead" in policy) return Guard.maxBytesRead(policy.maxBytesRead)
  if ("maxBytesWritten" in policy) return Guard.maxBytesWritten(policy.maxBytesWritten)
  if ("maxInvocations" in policy) return Guard.maxInvocations(policy.maxInvocations)
  if ("maxDelegationDepth" in policy) return Guard.maxDelegationDepth(policy.maxDelegationDepth)
  if ("maxStreak" in policy) return Guard.maxStreak(policy.maxStreak)
  if ("forbiddenTransitions" in policy) return Guard.forbiddenTransitions(policy.forbiddenTransitions)
  if ("requirePredecessors" in policy) return Guard.requirePredecessors(policy.requirePredecessors)
  if ("allowList" in policy) return Guard.allowList(policy.allowList)
  if ("denyList" in policy) return Guard.denyList(policy.denyList)
  throw new Error("not an old-key policy")
}

describe("Policy: old keys decide and write as before; no decision throws", () => {
  it.effect("property: an old-key policy's decisions and chain are byte-identical to before", () =>
    Effect.promise(() =>
      fc.assert(
        fc.asyncProperty(built, fc.array(A.toolParams, { minLength: 1, maxLength: 12 }), async (b, calls) => {
          const policy = decoded(b.json)
          const run = (guard: Guard.Guard) =>
            Effect.runPromise(
              Effect.gen(function*() {
                yield* TestClock.setTime(1_764_400_000_000)
                const j = yield* SessionJournal.SessionJournal
                const verdicts: Array<Guard.Verdict> = []
                for (const c of calls) {
                  verdicts.push((yield* j.decide("old", c, guard, undefined, { canAsk: true, tokens: null })).verdict)
                }
                const entries = yield* Stream.runCollect(j.entries("old"))
                return { verdicts, hashes: entries.map((e) => e.entry_hash) }
              }).pipe(Effect.provide(journalLayer), Effect.provide(TestClock.layer()))
            )
          const now = await run(Policy.toGuard(policy))
          const before = await run(legacyToGuard(policy))
          assert.deepStrictEqual(now, before)
        }),
        { numRuns: A.runs(40) }
      )
    ))

  const patternText = fc.oneof(
    fc.constantFrom(
      "Bash",
      "Bash(rm -rf *)",
      "Read(~/.ssh/**)",
      "Edit(/src/**)",
      "WebFetch(domain:*.x.com)",
      "mcp__gh"
    ),
    fc.string({ maxLength: 12 })
  )
  const newRule = fc.oneof(
    fc.record({ deny: fc.array(patternText, { maxLength: 3 }) }),
    fc.record({ ask: patternText }),
    fc.record({ maxInvocations: fc.nat(3), of: patternText, per: fc.constantFrom("1s", "1m") }),
    fc.record({ maxStreak: fc.nat(3), per: fc.constantFrom("30s", "1h") }),
    fc.record({ maxBytesWritten: fc.nat(50), of: patternText }),
    fc.record({ after: patternText, deny: patternText }),
    fc.record({ maxTokens: fc.nat(100) })
  )
  const anyInput = fc.oneof(
    fc.anything(),
    fc.record({ command: fc.string() }),
    fc.record({ file_path: fc.oneof(fc.string(), fc.constantFrom("../..//x", "~/a", "/a/../../b")) }),
    fc.record({ url: fc.string() })
  )

  it("property: decide never throws, on any policy of the new keys and any call, context and state", () => {
    fc.assert(
      fc.property(
        fc.array(newRule, { maxLength: 5 }),
        fc.array(
          fc.record({
            tool: fc.constantFrom("Bash", "Read", "WebFetch", "Edit", "mcp__gh__x", ""),
            input: anyInput,
            cwd: fc.oneof(fc.constant(undefined), fc.string(), fc.constant("/w")),
            now: fc.oneof(fc.integer(), fc.double()),
            tokens: fc.oneof(fc.constant(null), fc.bigInt()),
            junk: fc.option(fc.dictionary(fc.string(), fc.jsonValue()))
          }),
          { maxLength: 8 }
        ),
        (rules, calls) => {
          const r = Policy.decode(rules)
          if (Result.isFailure(r)) return
          const compiled = Policy.compile(r.success)
          let state = JournalState.empty("t")
          for (const c of calls) {
            const v = compiled.guard(JournalState.snapshot(state), params(c.tool || "x"), {
              call: { tool_name: c.tool, tool_input: c.input, cwd: c.cwd },
              where: { cwd: "/w" },
              nowMillis: c.now,
              tokens: c.tokens,
              canAsk: c.tool !== "",
              state: (c.junk as Guard.GuardState | null) ?? state.guard_state
            })
            assert.oneOf(v._tag, ["Allow", "Deny", "Ask"])
            if (v.state !== undefined) {
              assert.isUndefined(Guard.stateProblem(v.state))
              state = JournalState.fold(state, JournalState.nextOther(state, 1, Guard.STATE_KIND, v.state))
            }
            Policy.explain(compiled, JournalState.snapshot(state), params("x"))
            Policy.observe(compiled, state.guard_state, { tool_name: c.tool, tool_input: c.input }, {
              read: 3,
              written: 4
            })
          }
        }
      ),
      { numRuns: A.runs(200) }
    )
  })
})
