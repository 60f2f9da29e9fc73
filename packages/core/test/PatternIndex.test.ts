/**
 * The index a policy judges its pattern lists with (internal/patternIndex.ts) gives
 * every list exactly the answer `Pattern.matches` gives it alone, in deny mode: the
 * same first pattern, the same part, the same fail-closed flag, on random lists of
 * commands, tools, paths, hosts and parameters and on random calls, unreadable and
 * over-long ones included.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Pattern } from "../src/index.ts"
import * as PatternIndex from "../src/internal/patternIndex.ts"
import * as Wild from "../src/internal/wildcard.ts"
import * as A from "./arbitraries.ts"

const words = ["git", "push", "rm", "-rf", "npm", "test", "ls", "curl", "a", "b", "origin", "3"]

const commandText = fc.tuple(
  fc.array(fc.constantFrom(...words, "*", "a*", "*b", "t*t"), { minLength: 1, maxLength: 4 }),
  fc.constantFrom("", " *", "*", ":*")
).map(([ws, end]) => `Bash(${ws.join(" ")}${end})`)

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
            answers!.matches[i] ?? { matched: false },
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

  it("a pattern in several lists, and twice in one, is judged once and answers each", () => {
    const p = (t: string) => parsed(t)!
    const index = PatternIndex.make([
      [p("Bash(git push *)"), p("Bash(rm *)")],
      [p("Bash(rm *)"), p("Bash(rm *)")],
      [p("Read(~/.ssh/**)")]
    ].map((list) => list.map((pattern) => ({ pattern, text: Pattern.format(pattern) }))))
    assert.strictEqual(index.compiled.length, 3)
    const answers = PatternIndex.judgeAll(index, {
      tool_name: "Bash",
      tool_input: { command: "ls; sudo rm -rf / && git push origin" }
    }, { cwd: "/w", projectDir: "/w", home: "/home/u" })!
    assert.deepStrictEqual(answers.matches[0], { matched: true, pattern: "Bash(git push *)", part: "git push origin" })
    assert.deepStrictEqual(answers.matches[1], { matched: true, pattern: "Bash(rm *)", part: "rm -rf /" })
    assert.isUndefined(answers.matches[2])
  })
})
