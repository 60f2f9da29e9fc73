/**
 * The index a policy judges its pattern lists with (internal/patternIndex.ts) gives
 * every list exactly the answer `Pattern.matches` gives it alone, in deny mode: the
 * same first pattern, the same part, the same fail-closed flag, on random lists of
 * commands, tools, paths, hosts and parameters and on random calls, unreadable and
 * over-long ones included. A compiled policy, which decides with the index and only
 * with the rules whose lists matched, decides every call of a session as it does
 * without (every list alone, every rule deciding and stepping): the same verdicts, the
 * same states.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Entry, Guard, JournalState, Pattern, Policy } from "../src/index.ts"
import * as PatternIndex from "../src/internal/patternIndex.ts"
import * as Wild from "../src/internal/wildcard.ts"
import * as A from "./arbitraries.ts"
import { decoded } from "./policies.ts"

const words = ["git", "push", "rm", "-rf", "npm", "test", "ls", "curl", "a", "b", "origin", "3"]

const commandText = fc.oneof(
  fc.tuple(
    fc.array(fc.constantFrom(...words, "*", "a*", "*b", "t*t"), { minLength: 1, maxLength: 4 }),
    fc.constantFrom("", " *", "*", ":*")
  ).map(([ws, end]) => `Bash(${ws.join(" ")}${end})`),
  // Patterns that start with a star: every text may be theirs.
  fc.constantFrom(...words).map((w) => `Bash(*${w}*)`),
  fc.constantFrom(...words).map((w) => `Bash(* ${w} *)`)
)

const toolText = fc.constantFrom(
  "Bash",
  "Read",
  "Grep",
  "WebFetch",
  "mcp__gh",
  "mcp__gh__*",
  "mcp__gh__x",
  "mcp__*",
  "*",
  "Re*",
  "Agent"
)

const pathText = fc.tuple(
  fc.constantFrom("Read", "Edit", "Write", "Grep", "Glob", "LS", "NotebookEdit"),
  fc.constantFrom("", "//", "~/", "/", "./", "../"),
  fc.array(fc.constantFrom(".env*", "src", "**", "*.ts", "a", "[ab]*", "proj", "work", "..", "u"), {
    minLength: 1,
    maxLength: 4
  }),
  fc.constantFrom("", "/")
).map(([tool, anchor, segs, end]) => `${tool}(${anchor}${segs.join("/")}${end})`)

const otherText = fc.constantFrom(
  "WebFetch(domain:*.example.com)",
  "WebFetch(domain:example.*)",
  "WebFetch(domain:docs.example.com)",
  "WebFetch(prompt:*x*)",
  "Bash(description:*x*)",
  "Bash(run_in_background:true)",
  "Agent(model:opus)",
  "mcp__gh__x(q:*a*)"
)

const patternText = fc.oneof(commandText, commandText, toolText, pathText, pathText, otherText)

const lists = fc.array(fc.array(patternText, { minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 6 })

const commandWords = fc.array(
  fc.constantFrom(...words, "sudo", "timeout 5", "FOO=1", "$(rm -rf /)", "'git push'", "\"a b\"", "x"),
  { minLength: 1, maxLength: 5 }
).map((ws) => ws.join(" "))

const command = fc.oneof(
  fc.array(fc.tuple(commandWords, fc.constantFrom(" && ", "; ", " | ", "\n", " || ")), { minLength: 1, maxLength: 4 })
    .map((ps) => ps.map(([w, sep], i) => (i === 0 ? w : `${sep}${w}`)).join("")),
  commandWords.map((w) => `sh -c '${w}'`),
  commandWords.map((w) => `echo '${w}`),
  fc.constantFrom(7, null, `echo ${"a".repeat(Pattern.MAX_TEXT_LENGTH)}`, "", "   ", "ls)(")
)

const path = fc.oneof(
  fc.array(fc.constantFrom("src", ".env1", "a.ts", "..", ".", "proj", "work", "u", "home", "ab"), { maxLength: 5 })
    .chain((segs) => fc.constantFrom("/", "~/", "", "./").map((start) => `${start}${segs.join("/")}`)),
  fc.constantFrom(5, null, "", "~", "/")
)

const input = fc.oneof(
  fc.record({ command, description: fc.constantFrom("x", "yxy", 3) }, { requiredKeys: ["command"] }),
  fc.record({ file_path: path }),
  fc.record({ path, pattern: fc.constantFrom("**/*.ts", "src/*.ts", "/etc/*", "~/x/*", 3) }, { requiredKeys: [] }),
  fc.record({ notebook_path: path }),
  fc.record({
    url: fc.constantFrom("https://docs.example.com/x", "http://a.example.com", "https://example.org", "x", 4),
    prompt: fc.constantFrom("x", "y")
  }),
  fc.record({ model: fc.constantFrom("opus", "sonnet"), q: fc.constantFrom("a", "b", 1) }),
  fc.constantFrom(undefined, null, 3, "text", [])
)

const call = fc.record({
  tool_name: fc.oneof(
    fc.constantFrom(
      "Bash",
      "Read",
      "Edit",
      "Write",
      "Grep",
      "Glob",
      "LS",
      "NotebookEdit",
      "WebFetch",
      "Agent",
      "mcp__gh__x",
      "mcp__ghx__y",
      "Rex"
    ),
    fc.constantFrom(42, null)
  ),
  tool_input: input,
  cwd: fc.constantFrom(undefined, "/work/proj/sub", "/w", "relative", 3)
}, { requiredKeys: ["tool_name"] })

const context = fc.constantFrom<Pattern.Context>(
  { cwd: "/work/proj/sub", projectDir: "/work/proj", home: "/home/u" },
  { cwd: "/", projectDir: "/", home: "/" },
  { cwd: "", projectDir: "relative", home: "" }
)

const parsed = (text: string): Pattern.Pattern | undefined => {
  const r = Pattern.parse(text)
  return Result.isSuccess(r) ? r.success : undefined
}

describe("PatternIndex", () => {
  it("property: every list's answer is the one Pattern.matches gives it alone, in deny mode", () => {
    fc.assert(
      fc.property(lists, call, context, (texts, c, where) => {
        const patterns = texts.map((list) => list.map(parsed).filter((p) => p !== undefined))
        const index = PatternIndex.make(
          patterns.map((list) => list.map((p) => ({ pattern: p, text: Pattern.format(p) })))
        )
        const answers = PatternIndex.judgeAll(index, c as Pattern.Call, where)
        if (typeof c.tool_name !== "string") {
          assert.isUndefined(answers)
          return
        }
        assert.isDefined(answers)
        patterns.forEach((list, i) => {
          const alone = Pattern.matches(Pattern.compile(list), c as Pattern.Call, where, "deny")
          assert.deepStrictEqual(
            PatternIndex.answerOf(answers!, i) ?? { matched: false },
            alone,
            `list ${i}: ${JSON.stringify(texts[i])}`
          )
          assert.strictEqual(answers!.hits.includes(i), alone.matched)
        })
        assert.strictEqual(new Set(answers!.hits).size, answers!.hits.length)
      }),
      { numRuns: A.runs(3000) }
    )
  })

  it("property: a glob under literal directories is matched as the glob of those directories then its own", () => {
    const name = fc.constantFrom("a", "b", "c")
    fc.assert(
      fc.property(
        fc.array(name, { maxLength: 4 }),
        fc.nat(5),
        fc.array(fc.constantFrom("a", "b", "*", "**", "[ab]"), { maxLength: 4 }),
        fc.array(name, { maxLength: 7 }),
        (base, up, glob, path) => {
          const n = Math.max(0, base.length - up)
          const segments = glob.map(Wild.segment)
          assert.deepStrictEqual(
            Wild.pathMatchUnder(base, n, segments, path),
            Wild.pathMatch([...base.slice(0, n).map(Wild.literalSegment), ...segments], path)
          )
        }
      ),
      { numRuns: A.runs(2000) }
    )
  })

  // An index of pattern texts, and what its lists answer a Bash command.
  const indexOfTexts = (lists: ReadonlyArray<ReadonlyArray<string>>) =>
    PatternIndex.make(lists.map((list) =>
      list.map((t) => {
        const pattern = parsed(t)!
        return { pattern, text: Pattern.format(pattern) }
      })
    ))
  const bash = (index: PatternIndex.Index, command: string) =>
    PatternIndex.judgeAll(index, { tool_name: "Bash", tool_input: { command } }, {
      cwd: "/w",
      projectDir: "/w",
      home: "/home/u"
    })!

  it("a pattern in several lists, and twice in one, is judged once and answers each", () => {
    const index = indexOfTexts([["Bash(git push *)", "Bash(rm *)"], ["Bash(rm *)", "Bash(rm *)"], ["Read(~/.ssh/**)"]])
    assert.strictEqual(index.compiled.length, 3)
    const answers = bash(index, "ls; sudo rm -rf / && git push origin")
    const rm = { matched: true, pattern: "Bash(rm *)", part: "rm -rf /" }
    assert.deepStrictEqual(PatternIndex.answerOf(answers, 0), {
      ...rm,
      pattern: "Bash(git push *)",
      part: "git push origin"
    })
    assert.deepStrictEqual(PatternIndex.answerOf(answers, 1), rm)
    assert.isUndefined(PatternIndex.answerOf(answers, 2))
    // A part is judged as it is before it is judged from its command name on.
    assert.deepStrictEqual(
      PatternIndex.answerOf(bash(indexOfTexts([["Bash(*rm -rf /)"]]), "ls && sudo rm -rf / && ls"), 0),
      { matched: true, pattern: "Bash(*rm -rf /)", part: "sudo rm -rf /" }
    )
  })
})

// ---------------------------------------------------------------------------
// Policies

const patterns = fc.oneof(patternText, fc.array(patternText, { minLength: 1, maxLength: 3 }))
const reason = fc.option(fc.constant("because"), { nil: undefined })

const scoped = fc.tuple(
  fc.constantFrom("maxInvocations", "maxStreak", "maxBytesRead", "maxBytesWritten"),
  fc.nat(4),
  fc.option(patterns, { nil: undefined }),
  fc.option(fc.constantFrom("1s", "1m", "1h"), { nil: undefined })
).map(([key, n, of, per]) => ({
  [key]: n,
  ...(of === undefined && per === undefined ? { of: "Bash" } : {}),
  ...(of === undefined ? {} : { of }),
  ...(per === undefined ? {} : { per })
}))

const leaf = fc.oneof(
  fc.record({ deny: patterns, reason }, { requiredKeys: ["deny"] }),
  fc.record({ ask: patterns, reason }, { requiredKeys: ["ask"] }),
  fc.record({ after: patterns, deny: patterns }),
  fc.record({ after: patterns, ask: patterns }),
  scoped,
  scoped,
  fc.record({ maxTokens: fc.nat(3000) }),
  fc.constantFrom(
    { maxStreak: 3 },
    { denyList: ["Edit"] },
    { forbiddenTransitions: [["Read", "Bash"]] },
    { requirePredecessors: { Edit: ["Read"] } },
    { maxDelegationDepth: 1 },
    { maxInvocations: 6 }
  )
)

const policyJson: fc.Arbitrary<unknown> = fc.letrec<{ node: unknown }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    leaf,
    fc.array(tie("node"), { maxLength: 4 }).map((all) => ({ all })),
    fc.array(tie("node"), { maxLength: 3 }).map((any) => ({ any }))
  )
})).node

const step = fc.record({
  call: fc.option(call, { freq: 8 }),
  where: context,
  elapsed: fc.constantFrom(0, 10, 700, 1500, 30_000, 70_000, 4_000_000),
  tokens: fc.option(fc.bigInt({ min: 0n, max: 4000n }), { freq: 4 }),
  canAsk: fc.boolean(),
  bytes: fc.nat(3),
  depth: fc.nat(2),
  tool: fc.constantFrom("Bash", "Read", "Edit", "Grep", "WebFetch", "mcp__gh__x")
})

describe("Policy with its index", () => {
  it("property: a session decides as it does with every list judged alone and every rule deciding", () => {
    fc.assert(
      fc.property(fc.array(leaf, { minLength: 1, maxLength: 30 }), policyJson, fc.array(step, { maxLength: 14 }), (
        flat,
        nested,
        steps
      ) => {
        for (const json of [flat, nested]) {
          const r = Policy.decode(json)
          if (Result.isFailure(r)) continue
          const compiled = Policy.compile(r.success)
          const unindexed = (compiled.root as { readonly unindexed: Guard.Guard }).unindexed
          let state = JournalState.empty("i")
          let now = 1_764_400_000_000
          for (const st of steps) {
            now += st.elapsed
            const tool = st.call !== null && typeof st.call.tool_name === "string" ? st.call.tool_name : st.tool
            const params: Entry.ValidToolParams = A.call(tool, {
              bytes_read: st.bytes,
              bytes_written: st.bytes,
              delegation_depth: st.depth
            })
            const ctx: Guard.GuardContext = {
              call: st.call as Pattern.Call | null,
              where: st.where,
              nowMillis: now,
              tokens: st.tokens,
              canAsk: st.canAsk,
              state: state.guard_state
            }
            const snapshot = JournalState.snapshot(state)
            const v = compiled.guard(snapshot, params, ctx)
            const u = unindexed(snapshot, params, ctx)
            assert.deepStrictEqual(v, u, JSON.stringify({ json, call: st.call }))
            // The same text, keys in the same order.
            assert.strictEqual(JSON.stringify(v), JSON.stringify(u))
            // A copy of the state, or one whose keys come in another order, decides the same.
            const given = state.guard_state
            if (given !== null) {
              for (const copy of [structuredClone(given), Object.fromEntries(Object.entries(given).reverse())]) {
                const w = compiled.guard(snapshot, params, { ...ctx, state: copy })
                assert.strictEqual(JSON.stringify(w), JSON.stringify(v))
              }
            }
            state = JournalState.fold(state, JournalState.nextTool(state, 1, { ...params, allowed: v._tag !== "Deny" }))
            if (v.state !== undefined) {
              state = JournalState.fold(state, JournalState.nextOther(state, 1, Guard.STATE_KIND, v.state))
            }
          }
        }
      }),
      { numRuns: A.runs(400) }
    )
  })

  it("a policy of many rules decides a call with the rules its lists name", () => {
    const compiled = Policy.compile(decoded([
      ...Array.from({ length: 20 }, (_, i) => ({ deny: `Bash(rm ${i} *)` })),
      { ask: "Bash(git push *)" },
      { maxInvocations: 1, of: "Bash(npm test*)", per: "1m" }
    ]))
    const decide = (command: string, state: Guard.GuardState | null = null) =>
      compiled.guard(JournalState.snapshot(JournalState.empty("m")), A.call("Bash"), {
        call: { tool_name: "Bash", tool_input: { command } },
        where: {},
        nowMillis: 60_000,
        tokens: null,
        canAsk: true,
        state
      })
    assert.deepStrictEqual(decide("ls && rm 7 -rf /"), {
      _tag: "Deny",
      reason: "the command \"rm 7 -rf /\" of Bash matches deny pattern Bash(rm 7 *)",
      guard: "deny(\"Bash(rm 7 *)\")"
    })
    const guardOf = (v: Guard.Verdict) => v._tag === "Allow" ? null : v.guard
    assert.strictEqual(guardOf(decide("git push origin && rm 3")), "deny(\"Bash(rm 3 *)\")")
    assert.strictEqual(guardOf(decide("git push origin")), "ask(\"Bash(git push *)\")")
    const first = decide("npm test")
    assert.strictEqual(first._tag, "Allow")
    assert.strictEqual(decide("npm test", first.state!)._tag, "Deny")
    assert.strictEqual(decide("ls", first.state!).state, undefined)
  })
})
