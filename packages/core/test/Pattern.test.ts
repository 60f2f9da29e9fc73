/**
 * Patterns: compiled matching agrees with a slow regex reference (PatternReference.ts)
 * on random commands and paths; a compound command matches in deny mode iff a part
 * does (or the whole text does), and in allow mode iff every part does; parse and
 * format round-trip; parse and matches never throw on hostile input; and the ways a
 * denied call could hide are each a named case.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { Pattern } from "../src/index.ts"
import * as Wild from "../src/internal/wildcard.ts"
import * as A from "./arbitraries.ts"
import * as Ref from "./PatternReference.ts"

const where: Pattern.Context = { cwd: "/work/proj/sub", projectDir: "/work/proj", home: "/home/u" }

const parsed = (text: string): Pattern.Pattern => {
  const r = Pattern.parse(text)
  if (Result.isFailure(r)) return assert.fail(`did not parse ${text}: ${r.failure.message}`)
  return r.success
}

const matcher = (...texts: Array<string>): Pattern.Matcher => Pattern.compile(texts.map(parsed))

const bash = (command: unknown, cwd = where.cwd): Pattern.Call => ({
  tool_name: "Bash",
  tool_input: { command },
  cwd
})

const judge = (m: Pattern.Matcher, call: Pattern.Call, mode: Pattern.Mode = "deny"): boolean =>
  Pattern.matches(m, call, where, mode).matched

// ---------------------------------------------------------------------------
// Random commands built from known parts

// Words that are not shell keywords, wrappers, shells or assignments, so each part's
// words are exactly what the splitter must find.
const reservedWords = new Set([
  "if",
  "then",
  "else",
  "elif",
  "fi",
  "do",
  "done",
  "while",
  "until",
  "time",
  "exec",
  "command",
  "builtin",
  "nohup",
  "nice",
  "timeout",
  "stdbuf",
  "env",
  "sudo",
  "doas",
  "xargs",
  "setsid",
  "ionice",
  "eval",
  "sh",
  "bash",
  "zsh",
  "dash",
  "ksh",
  "mksh",
  "ash",
  "busybox"
])

const wordChar = fc.constantFrom(
  ..."abcdehilmnorstx-./:_0123456789".split(""),
  "é",
  "ß",
  "😀",
  " ",
  "'",
  "\"",
  "$",
  "&",
  ";",
  "|",
  "*",
  "\\",
  "(",
  ")",
  "#",
  "\n"
)

const plainWord = fc.string({
  unit: fc.constantFrom(..."abcdehilmnorstx-./_019".split(""), "é", "😀"),
  minLength: 1,
  maxLength: 6
})
  .filter((w) => !reservedWords.has(w) && !w.startsWith("#") && !w.startsWith("-"))

const anyWord = fc.string({ unit: wordChar, minLength: 1, maxLength: 6 })

const word = fc.oneof({ arbitrary: plainWord, weight: 3 }, { arbitrary: anyWord, weight: 1 }).filter((w) =>
  !reservedWords.has(w)
)

// A word written so the shell reads it back as itself.
const quote = (w: string, style: number): string => {
  const safe = /^[A-Za-z0-9éß😀_./:-]+$/u.test(w)
  if (safe && style === 0) return w
  if (style === 1 && !w.includes("'")) return `'${w}'`
  if (style === 2) return `"${w.replace(/["\\$`]/g, "\\$&")}"`
  return Array.from(w, (c) => (c === "\n" ? "'\n'" : /[A-Za-z0-9]/.test(c) ? c : `\\${c}`)).join("")
}

interface Built {
  readonly command: string
  readonly parts: ReadonlyArray<string>
}

const space = fc.constantFrom(" ", "  ", "\t", " \t ")

const part = fc.record({
  words: fc.array(word, { minLength: 1, maxLength: 4 }).filter((ws) => !reservedWords.has(ws[0]!)),
  styles: fc.array(fc.nat(3), { minLength: 4, maxLength: 4 }),
  gap: space
})

const renderPart = (p: { words: ReadonlyArray<string>; styles: ReadonlyArray<number>; gap: string }): string =>
  p.words.map((w, i) => quote(w, p.styles[i]!)).join(p.gap)

const separator = fc.constantFrom("&&", "||", ";", "|", "|&", "&", "\n", " && ", " ; ", " | ")

const wrap = fc.constantFrom("plain", "subst", "backtick", "shc", "group")

const built: fc.Arbitrary<Built> = fc.tuple(
  fc.array(fc.tuple(part, separator, wrap), { minLength: 1, maxLength: 4 }),
  fc.constantFrom("", " ", "  ")
).map(([ps, pad]) => {
  const parts: Array<string> = []
  let command = pad
  ps.forEach(([p, sep, how], i) => {
    const text = renderPart(p)
    parts.push(p.words.join(" "))
    const ticked = `\`${text.replace(/[\\`$]/g, "\\$&")}\``
    const piece = how === "subst"
      ? `echo $(${text})`
      : how === "backtick"
      ? `echo ${ticked}`
      : how === "shc"
      ? `sh -c '${text.replace(/'/g, "'\\''")}'`
      : how === "group"
      ? `( ${text} )`
      : text
    if (how === "subst") parts.push(`echo $(${text})`)
    if (how === "backtick") parts.push(`echo ${ticked}`)
    if (how === "shc") parts.push(`sh -c ${text}`)
    command += (i > 0 ? sep : "") + piece
  })
  return { command: command + pad, parts }
})

// A command pattern made from the words of one of the parts, with wildcards.
const commandPattern = (b: Built): fc.Arbitrary<string> =>
  fc.tuple(fc.nat(b.parts.length - 1), fc.array(fc.nat(3), { minLength: 8, maxLength: 8 }), fc.nat(3)).map(
    ([k, choices, end]) => {
      const ws = b.parts[k]!.split(" ")
      const kept = ws.map((w, i) => (choices[i % 8] === 0 ? "*" : choices[i % 8] === 1 ? `${w.slice(0, 1)}*` : w))
      const text = kept.join(" ").replace(/\\/g, "\\\\")
      return end === 0 ? `${kept[0]!.replace(/\\/g, "\\\\")} *` : end === 1 ? `${text}:*` : text
    }
  ).filter((t) => t.trim().length > 0 && !t.includes("(") && !t.includes(")") && t.trim() !== "*")

describe("Pattern: Bash against the reference", () => {
  it("compiled matching agrees with the regex reference on every part and the whole", () => {
    fc.assert(
      fc.property(built.chain((b) => fc.tuple(fc.constant(b), commandPattern(b))), ([b, spec]) => {
        const m = Pattern.compile([parsed(`Bash(${spec})`)])
        const re = Ref.commandRegex(spec)
        const whole = b.command.trim().replace(/\s+/g, " ")
        const expected = re.test(whole) || b.parts.some((p) => re.test(p))
        assert.strictEqual(judge(m, bash(b.command)), expected, `${spec} on ${JSON.stringify(b.command)}`)
      }),
      { numRuns: A.runs(400) }
    )
  })

  it("a compound command matches in deny mode iff some part (or the whole text) matches", () => {
    fc.assert(
      fc.property(built.chain((b) => fc.tuple(fc.constant(b), commandPattern(b))), ([b, spec]) => {
        const m = Pattern.compile([parsed(`Bash(${spec})`)])
        const re = Ref.commandRegex(spec)
        const anyPart = b.parts.some((p) => re.test(p))
        const whole = re.test(b.command.trim().replace(/\s+/g, " "))
        assert.strictEqual(judge(m, bash(b.command)), anyPart || whole)
        // In allow mode every part must match.
        assert.strictEqual(judge(m, bash(b.command), "allow"), b.parts.every((p) => re.test(p)))
      }),
      { numRuns: A.runs(300) }
    )
  })
})

// ---------------------------------------------------------------------------
// Random paths

const name = fc.constantFrom("a", "b", "ab", ".env", "x y", "é", "😀", "secrets", "id_rsa", ".ssh", "sub", "proj")
const callPath: fc.Arbitrary<string> = fc.tuple(
  fc.constantFrom("/", "~/", "", "./", "../", "//", "/work/proj/", "/home/u/"),
  fc.array(fc.oneof({ arbitrary: name, weight: 4 }, { arbitrary: fc.constantFrom(".", "..", ""), weight: 1 }), {
    minLength: 0,
    maxLength: 5
  })
).map(([start, segs]) => start + segs.join("/")).filter((p) => p.length > 0)

const globSegment = fc.oneof(
  { arbitrary: name, weight: 4 },
  { arbitrary: fc.constantFrom("*", "**", "?", "*.env", "[ab]", "[!a]*", "a*", "?b", "[a-c]", "*😀"), weight: 3 }
)

const pathPattern: fc.Arbitrary<string> = fc.tuple(
  fc.constantFrom("//", "~/", "/", "./", "", "../"),
  fc.array(globSegment, { minLength: 1, maxLength: 4 }),
  fc.boolean()
).map(([start, segs, dir]) => start + segs.join("/") + (dir ? "/" : ""))

describe("Pattern: paths against the reference", () => {
  it("compiled path globs agree with the regex reference on resolved paths", () => {
    fc.assert(
      fc.property(pathPattern, callPath, fc.constantFrom(where.cwd, "/work", "/", "/home/u"), (spec, path, cwd) => {
        const m = Pattern.compile([{ _tag: "Path", tool: "Read", path: spec }])
        const call = { tool_name: "Read", tool_input: { file_path: path }, cwd }
        const absolute = Ref.resolveCallPath(path, { ...where, cwd })
        const expected = Ref.pathMatches(spec, absolute, { ...where, cwd })
        for (const mode of ["deny", "allow"] as const) {
          assert.strictEqual(judge(m, call, mode), expected, `${spec} on ${path} (${absolute}) from ${cwd}`)
        }
      }),
      { numRuns: A.runs(600) }
    )
  })
})

describe("Pattern: wildcards on a small alphabet", () => {
  const small = (units: Array<string>, max: number) => fc.string({ unit: fc.constantFrom(...units), maxLength: max })

  it("a value wildcard agrees with the regex reference (stars next to repeated pieces)", () => {
    fc.assert(
      fc.property(small(["a", "b", "*"], 7), small(["a", "b"], 8), (value, text) => {
        const m = matcher(`mcp__s__t(v:${value})`)
        const re = new RegExp(`^${value.replace(/\*/g, "[\\s\\S]*")}$`)
        assert.strictEqual(
          judge(m, { tool_name: "mcp__s__t", tool_input: { v: text } }),
          re.test(text),
          `${value} on ${text}`
        )
      }),
      { numRuns: A.runs(800) }
    )
  })

  it("a segment glob agrees with the regex reference", () => {
    fc.assert(
      fc.property(
        small(["a", "b", "*", "?", "é"], 6).filter((g) => g.length > 0 && g !== "**"),
        small(["a", "b", "é"], 7),
        (glob, name) => {
          fc.pre(name.length > 0)
          const m = matcher(`Read(//x/${glob})`)
          const expected = Ref.pathMatches(`//x/${glob}`, `/x/${name}`, where)
          assert.strictEqual(
            judge(m, { tool_name: "Read", tool_input: { file_path: `/x/${name}` } }),
            expected,
            `${glob} on ${name}`
          )
        }
      ),
      { numRuns: A.runs(800) }
    )
  })
})

describe("Pattern: a segment glob of stars alone", () => {
  it("property: matched as a wildcard of pieces, it agrees with the walk over code points", () => {
    const text = (max: number) =>
      fc.array(fc.constantFrom("a", "b", "*", "\\*", "😀", "\uD83D", "\uDE00", "é"), { maxLength: max }).map((
        us
      ) => us.join(""))
    fc.assert(
      fc.property(text(6).filter((g) => g.length > 0 && g !== "**"), text(7), (glob, name) => {
        const seg = Wild.segment(glob)
        const walked = seg.k === "glob" ? { ...seg, pieces: undefined } : seg
        assert.strictEqual(Wild.segmentMatch(seg, name), Wild.segmentMatch(walked, name), `${glob} on ${name}`)
      }),
      { numRuns: A.runs(2000) }
    )
  })
})

// ---------------------------------------------------------------------------
// Parse and format

const patternArb: fc.Arbitrary<Pattern.Pattern> = fc.oneof(
  fc.constantFrom("Bash", "Read", "mcp__github__*", "mcp__github", "*", "Agent").map((tool) =>
    ({ _tag: "Tool", tool }) as const
  ),
  built.chain(commandPattern).map((c) =>
    ({ _tag: "Command", tool: "Bash", command: c.trim().replace(/\s+/g, " ") }) as const
  )
    .map((p) => parsed(Pattern.format(p))),
  fc.tuple(fc.constantFrom("Read", "Edit", "Write", "Glob"), pathPattern).map(([tool, path]) =>
    ({ _tag: "Path", tool, path }) as const
  ),
  fc.constantFrom("example.com", "*.example.com", "api.*.com").map((domain) =>
    ({ _tag: "Domain", tool: "WebFetch", domain }) as const
  ),
  fc.tuple(
    fc.constantFrom("Agent", "mcp__github__create_issue"),
    fc.constantFrom("model", "repo"),
    fc.string({ maxLength: 8 })
  )
    .filter(([, , v]) => !v.endsWith(")") || true)
    .map(([tool, param, value]) => ({ _tag: "Param", tool, param, value: value.replace(/^\s+/, "") }) as const)
)

describe("Pattern: parse and format", () => {
  it("parse ∘ format is the identity on patterns", () => {
    fc.assert(
      fc.property(patternArb, (p) => {
        assert.deepStrictEqual(parsed(Pattern.format(p)), p)
      }),
      { numRuns: A.runs(400) }
    )
  })

  it("format ∘ parse is a fixed point on every text that parses", () => {
    const texts = fc.oneof(
      fc.string(),
      fc.tuple(
        fc.constantFrom("Bash(", "Read(", "WebFetch(", "Agent(", "mcp__x__y("),
        fc.string(),
        fc.constantFrom(")", "")
      )
        .map(([a, b, c]) => a + b + c)
    )
    fc.assert(
      fc.property(texts, (t) => {
        const r = Pattern.parse(t)
        if (Result.isFailure(r)) return
        const again = parsed(Pattern.format(r.success))
        assert.deepStrictEqual(again, r.success)
      }),
      { numRuns: A.runs(600) }
    )
  })

  it("parse never throws, on any string (lone surrogates and huge ones included)", () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: "binary", maxLength: 60 }),
          fc.tuple(fc.constantFrom("Bash(", "Read(", "WebFetch(domain:", "mcp__a__b("), fc.string({ unit: "binary" }))
            .map(([a, b]) => `${a}${b})`)
        ),
        (t) => {
          const r = Pattern.parse(t)
          if (Result.isFailure(r)) assert.isString(r.failure.message)
        }
      ),
      { numRuns: A.runs(500) }
    )
    assert.isTrue(Result.isFailure(Pattern.parse(`Bash(${"a".repeat(1_000_000)})`)))
  })

  it("refuses what is not a pattern, naming the reason and where", () => {
    const reason = (t: string) => {
      const r = Pattern.parse(t)
      return Result.isFailure(r) ? [r.failure.reason, r.failure.at] : "parsed"
    }
    assert.deepStrictEqual(reason(""), ["Empty", 0])
    assert.deepStrictEqual(reason("Ba sh"), ["ToolName", 2])
    assert.deepStrictEqual(reason("Bash(ls"), ["Parenthesis", 7])
    assert.deepStrictEqual(reason("Bash()"), ["EmptySpecifier", 5])
    assert.deepStrictEqual(reason("mcp__*(x:y)"), ["GlobWithSpecifier", 6])
    assert.deepStrictEqual(reason("Bash(command:rm *)"), ["OwnField", 5])
    assert.deepStrictEqual(reason("Read(file_path:/x)"), ["OwnField", 5])
    assert.deepStrictEqual(reason("WebFetch(example.com)"), ["Specifier", 9])
    assert.deepStrictEqual(reason("Agent(Explore)"), ["Specifier", 6])
    assert.deepStrictEqual(reason("WebFetch(domain:example.com/x)"), ["Specifier", 9])
    assert.deepStrictEqual(reason("WebFetch(domain:)"), ["Specifier", 9])
    assert.deepStrictEqual(reason("Read(a/*/../b)"), ["Specifier", 5])
    assert.deepStrictEqual(reason(`Bash(${"x".repeat(5000)})`), ["TooLong", Pattern.MAX_PATTERN_LENGTH])
  })

  it("reads the equivalent forms as one pattern", () => {
    assert.deepStrictEqual(parsed("Bash(npm:*)"), parsed("Bash(npm *)"))
    assert.deepStrictEqual(parsed("Bash(  git   push  *)"), parsed("Bash(git push *)"))
    assert.deepStrictEqual(parsed("Bash(*)"), parsed("Bash"))
    assert.deepStrictEqual(parsed("WebFetch(domain:*)"), parsed("WebFetch"))
    assert.deepStrictEqual(parsed("Bash(timeout:*)"), { _tag: "Command", tool: "Bash", command: "timeout *" })
    assert.deepStrictEqual(parsed("Bash(command:*)"), { _tag: "Command", tool: "Bash", command: "command *" })
    assert.deepStrictEqual(parsed("Bash(run_in_background : true)"), {
      _tag: "Param",
      tool: "Bash",
      param: "run_in_background",
      value: "true"
    })
    assert.strictEqual(Pattern.format(parsed("Bash(npm:*)")), "Bash(npm *)")
  })
})

// ---------------------------------------------------------------------------
// Hostile calls

describe("Pattern: hostile input", () => {
  const all = matcher(
    "Bash(rm -rf *)",
    "Read(~/.ssh/**)",
    "Edit(/src/**)",
    "WebFetch(domain:*.example.com)",
    "Agent(model:opus)",
    "mcp__github__*"
  )

  it("matches never throws on arbitrary JSON calls", () => {
    const call = fc.record({
      tool_name: fc.oneof(fc.constantFrom("Bash", "Read", "Grep", "Glob", "WebFetch", "Agent", "Edit"), fc.jsonValue()),
      tool_input: fc.oneof(
        fc.jsonValue(),
        fc.record({ command: fc.string({ unit: "binary" }), file_path: fc.string({ unit: "binary" }) }),
        fc.dictionary(
          fc.constantFrom("command", "file_path", "path", "pattern", "url", "model", "__proto__"),
          fc.jsonValue()
        )
      ),
      cwd: fc.oneof(fc.jsonValue(), fc.string({ unit: "binary" }))
    }, { requiredKeys: [] })
    fc.assert(
      fc.property(call, fc.constantFrom("deny", "allow") as fc.Arbitrary<Pattern.Mode>, (c, mode) => {
        const r = Pattern.matches(all, c as Pattern.Call, where, mode)
        assert.isBoolean(r.matched)
      }),
      { numRuns: A.runs(500) }
    )
  })

  it("a command over the bound matches in deny mode and not in allow mode", () => {
    const huge = `echo ${"a".repeat(Pattern.MAX_TEXT_LENGTH)}`
    const r = Pattern.matches(matcher("Bash(ls *)"), bash(huge), where, "deny")
    assert.deepStrictEqual(r, { matched: true, pattern: "Bash(ls *)", failClosed: true })
    assert.isFalse(judge(matcher("Bash(echo *)"), bash(huge), "allow"))
  })

  it("nesting past the bound fails closed; thousands of parts too", () => {
    const deep = `${"$(".repeat(5000)}ls${")".repeat(5000)}`
    assert.isTrue(Pattern.matches(matcher("Bash(git push *)"), bash(deep), where, "deny").failClosed === true)
    assert.isFalse(judge(matcher("Bash(*ls*)"), bash(deep), "allow"))
    const many = Array.from({ length: 3000 }, () => "true").join(";")
    assert.isTrue(judge(matcher("Bash(git push *)"), bash(many)))
    assert.isFalse(judge(matcher("Bash(true)"), bash(many), "allow"))
  })

  it("a call without a readable tool name, command, path or URL matches deny patterns only", () => {
    const m = matcher("Bash(rm *)")
    assert.isTrue(judge(m, { tool_name: 42 }))
    assert.isFalse(judge(m, { tool_name: 42 }, "allow"))
    assert.isTrue(judge(m, bash(7)))
    assert.isFalse(judge(matcher("Bash(*7*)"), bash(7), "allow"))
    assert.isTrue(judge(matcher("Read(~/.ssh/**)"), { tool_name: "Read", tool_input: {} }))
    assert.isFalse(judge(matcher("Read(**)"), { tool_name: "Read", tool_input: {} }, "allow"))
    assert.isTrue(
      judge(matcher("WebFetch(domain:example.com)"), { tool_name: "WebFetch", tool_input: { url: "not a url" } })
    )
    assert.isFalse(
      judge(
        matcher("WebFetch(domain:example.com)"),
        { tool_name: "WebFetch", tool_input: { url: "not a url" } },
        "allow"
      )
    )
  })

  it("an unterminated quote is judged as a whole and by every part it could split", () => {
    const m = matcher("Bash(rm -rf *)")
    assert.isTrue(judge(m, bash("echo 'unclosed ; rm -rf /")))
    assert.isTrue(judge(m, bash("ls && rm -rf / && echo \"open")))
    assert.isTrue(judge(m, bash("sh -c \"echo 'open; rm -rf /\"")))
    assert.isFalse(
      judge(matcher("Bash(ls *)", "Bash(rm *)", "Bash(echo *)"), bash("ls && rm -rf / && echo \"open"), "allow")
    )
  })
})

// ---------------------------------------------------------------------------
// Named adversarial cases

describe("Pattern: a denied command cannot hide", () => {
  const m = matcher("Bash(rm -rf *)")
  const cases: ReadonlyArray<readonly [string, string]> = [
    ["after &&", "cd /tmp && rm -rf /"],
    ["after ||", "false || rm -rf /"],
    ["after ;", "ls; rm -rf /"],
    ["after |", "echo y | rm -rf /"],
    ["after |&", "echo y |& rm -rf /"],
    ["after &", "sleep 1 & rm -rf /"],
    ["after a newline", "ls\nrm -rf /"],
    ["after a line continuation", "rm \\\n -rf /"],
    ["inside $(…)", "echo $(rm -rf /)"],
    ["inside nested $(…)", "echo $(echo $(rm -rf /))"],
    ["inside $(…) in double quotes", "echo \"$(rm -rf /)\""],
    ["inside backticks", "echo `rm -rf /`"],
    ["inside <(…)", "cat <(rm -rf /)"],
    ["inside a ( … ) group", "(cd /tmp; rm -rf /)"],
    ["inside { …; }", "{ rm -rf /; }"],
    ["inside sh -c '…'", "sh -c 'rm -rf /'"],
    ["inside bash -lc \"…\"", "bash -lc \"cd / && rm -rf /\""],
    ["inside /bin/sh -c in sh -c", "sh -c \"/bin/sh -c 'rm -rf /'\""],
    ["inside eval", "eval 'rm -rf /'"],
    ["inside sh -c whose script starts with -", "sh -c '-x; rm -rf /'"],
    ["in the arguments after sh -c's script", "bash -c 'eval \"$1\"' _ 'rm -rf /'"],
    ["with extra spaces", "rm    -rf    /"],
    ["with tabs", "rm\t-rf\t/"],
    ["with leading spaces", "   rm -rf /"],
    ["with the name quoted", "\"rm\" -rf /"],
    ["with the flag quoted", "rm '-rf' /"],
    ["with a backslash", "r\\m -rf /"],
    ["with a split quote", "r\"m\" -r'f' /"],
    ["behind an assignment", "FOO=1 rm -rf /"],
    ["behind sudo", "sudo -u root rm -rf /"],
    ["behind timeout", "timeout 5 rm -rf /"],
    ["behind nohup and nice", "nohup nice -n 5 rm -rf /"],
    ["behind xargs", "echo / | xargs rm -rf"],
    ["behind if", "if true; then rm -rf /; fi"],
    ["behind !", "! rm -rf /"],
    ["after a redirection with &", "ls 2>&1 && rm -rf /"]
  ]
  for (const [label, command] of cases) {
    it(`a denied command ${label}`, () => {
      const r = Pattern.matches(m, bash(command), where, "deny")
      assert.isTrue(r.matched, command)
      assert.strictEqual(r.pattern, "Bash(rm -rf *)")
    })
  }

  it("a redirection's & is not a separator, a comment is not a command", () => {
    assert.isFalse(judge(matcher("Bash(1)"), bash("ls 2>&1")))
    assert.isFalse(judge(matcher("Bash(rm -rf *)"), bash("ls # rm -rf /")))
    assert.isFalse(judge(matcher("Bash(rm -rf *)"), bash("git commit -m 'do not rm -rf /'")))
  })

  it("the legacy prefix:* and a trailing space-star stop at a word boundary", () => {
    for (const spec of ["Bash(ls:*)", "Bash(ls *)"]) {
      const ls = matcher(spec)
      assert.isTrue(judge(ls, bash("ls")), spec)
      assert.isTrue(judge(ls, bash("ls -la")), spec)
      assert.isFalse(judge(ls, bash("lsof")), spec)
    }
    assert.isTrue(judge(matcher("Bash(ls*)"), bash("lsof")))
    assert.isTrue(judge(matcher("Bash(git * main)"), bash("git push origin main")))
    assert.isFalse(judge(matcher("Bash(git:* push)"), bash("git push")))
  })

  it("allow mode needs every part allowed", () => {
    const allow = matcher("Bash(git status)", "Bash(npm test *)")
    assert.isTrue(judge(allow, bash("git status && npm test -- --watch"), "allow"))
    assert.isFalse(judge(allow, bash("git status && rm -rf /"), "allow"))
    assert.isFalse(judge(allow, bash("npm test $(rm -rf /)"), "allow"))
    assert.isFalse(judge(allow, bash("sh -c 'git status; rm -rf /'"), "allow"))
  })
})

describe("Pattern: a denied path cannot hide", () => {
  const m = matcher("Read(~/.ssh/**)")
  const read = (file_path: string, cwd = where.cwd) => ({ tool_name: "Read", tool_input: { file_path }, cwd })
  const cases: ReadonlyArray<readonly [string, Pattern.Call]> = [
    ["absolute", read("/home/u/.ssh/id_rsa")],
    ["through ..", read("/home/u/proj/../.ssh/id_rsa")],
    ["through .. past the root", read("/../../home/u/.ssh/id_rsa")],
    ["through //", read("//home//u///.ssh/id_rsa")],
    ["through /./", read("/home/./u/./.ssh/./id_rsa")],
    ["through ~", read("~/.ssh/id_rsa")],
    ["relative from another cwd", read(".ssh/id_rsa", "/home/u")],
    ["relative with .. from another cwd", read("../u/.ssh/config", "/home/other")],
    ["the directory itself", read("/home/u/.ssh")],
    ["by Grep over the directory", { tool_name: "Grep", tool_input: { pattern: "KEY", path: "/home/u/.ssh" } }],
    ["by Grep over home", { tool_name: "Grep", tool_input: { pattern: "KEY", path: "~" } }],
    ["by Grep from cwd home", { tool_name: "Grep", tool_input: { pattern: "KEY" }, cwd: "/home/u" }],
    ["by Grep above home", { tool_name: "Grep", tool_input: { pattern: "KEY", path: "/home" } }],
    ["by Grep over the root", { tool_name: "Grep", tool_input: { pattern: "KEY", path: "/" } }],
    ["by LS above home", { tool_name: "LS", tool_input: { path: "/home/./" } }],
    ["by Glob with a path in its pattern", { tool_name: "Glob", tool_input: { pattern: "/home/u/.ssh/*" } }],
    ["by Glob from home", { tool_name: "Glob", tool_input: { pattern: "**/*", path: "/home/u" } }],
    ["by LS", { tool_name: "LS", tool_input: { path: "/home/u/.ssh/" } }]
  ]
  for (const [label, call] of cases) {
    it(`a denied path ${label}`, () => {
      assert.isTrue(Pattern.matches(m, call, where, "deny").matched)
    })
  }

  it("a search elsewhere, or an allowed path, is not caught", () => {
    assert.isFalse(judge(m, { tool_name: "Grep", tool_input: { pattern: "x", path: "/work" } }))
    assert.isFalse(judge(m, { tool_name: "Grep", tool_input: { pattern: "x", path: "/home/v" } }))
    assert.isFalse(judge(m, read("/home")))
    assert.isFalse(judge(m, read("/home/u/.sshx/id_rsa")))
    // A search under home is not allowed by a rule for .ssh.
    assert.isFalse(judge(m, { tool_name: "Grep", tool_input: { pattern: "x", path: "/home/u" } }, "allow"))
  })

  it("the four anchors", () => {
    assert.isTrue(judge(matcher("Read(//etc/passwd)"), read("/etc/passwd")))
    assert.isTrue(
      judge(matcher("Edit(/src/**)"), { tool_name: "Write", tool_input: { file_path: "/work/proj/src/a.ts" } })
    )
    assert.isFalse(judge(matcher("Edit(/src/**)"), { tool_name: "Write", tool_input: { file_path: "/src/a.ts" } }))
    assert.isTrue(judge(matcher("Read(.env)"), read("/work/proj/sub/deep/.env")))
    assert.isFalse(judge(matcher("Read(.env)"), read("/work/proj/.env")))
    assert.isTrue(judge(matcher("Read(./.env)"), read("/work/proj/sub/.env")))
    assert.isFalse(judge(matcher("Read(./.env)"), read("/work/proj/sub/deep/.env")))
    assert.isTrue(judge(matcher("Read(../.env)"), read("/work/proj/.env")))
    assert.isTrue(judge(matcher("Read(//**/.env)"), read("/anywhere/x/.env")))
    assert.isTrue(judge(matcher("Read(src/*.[jt]s)"), read("src/a.ts")))
    assert.isFalse(judge(matcher("Read(src/*.[jt]s)"), read("src/a/b.ts")))
    assert.isTrue(judge(matcher("Read(src/**/?.ts)"), read("src/a/b/c.ts")))
  })
})

describe("Pattern: tools, domains and parameters", () => {
  it("mcp__github__* and mcp__github cover the server's tools only", () => {
    for (const spec of ["mcp__github__*", "mcp__github"]) {
      const m = matcher(spec)
      assert.isTrue(judge(m, { tool_name: "mcp__github__create_issue" }), spec)
      assert.isTrue(judge(m, { tool_name: "mcp__github__create_issue" }, "allow"), spec)
      assert.isFalse(judge(m, { tool_name: "mcp__githubx__y" }), spec)
      assert.isFalse(judge(m, { tool_name: "mcp__githu__b" }), spec)
    }
    assert.isFalse(judge(matcher("mcp__github__*"), { tool_name: "mcp__github" }))
    assert.isTrue(judge(matcher("mcp__github__get_*"), { tool_name: "mcp__github__get_me" }))
  })

  it("tool names are exact; unanchored tool globs match only in deny mode", () => {
    assert.isFalse(judge(matcher("Bash"), { tool_name: "bash" }))
    assert.isTrue(judge(matcher("mcp__*"), { tool_name: "mcp__a__b" }))
    assert.isFalse(judge(matcher("mcp__*"), { tool_name: "mcp__a__b" }, "allow"))
    assert.isTrue(judge(matcher("*"), { tool_name: "Bash" }))
    assert.isFalse(judge(matcher("*"), { tool_name: "Bash" }, "allow"))
  })

  it("WebFetch domains: exact host, *. for subdomains only, * within a label", () => {
    const fetch = (url: unknown) => ({ tool_name: "WebFetch", tool_input: { url, prompt: "p" } })
    const exact = matcher("WebFetch(domain:example.com)")
    assert.isTrue(judge(exact, fetch("https://Example.COM./x"), "allow"))
    assert.isTrue(judge(exact, fetch("https://user@example.com:8443/"), "allow"))
    assert.isFalse(judge(exact, fetch("https://api.example.com/"), "allow"))
    assert.isFalse(judge(exact, fetch("https://example.com.evil.org/"), "allow"))
    assert.isFalse(judge(exact, fetch("https://example.com@evil.org/"), "allow"))
    assert.isFalse(judge(exact, fetch("https://evil.org\\@example.com/"), "allow"))
    assert.isFalse(judge(exact, fetch("https://evil.org#@example.com"), "allow"))
    const sub = matcher("WebFetch(domain:*.example.com)")
    assert.isTrue(judge(sub, fetch("https://a.b.example.com/"), "allow"))
    assert.isFalse(judge(sub, fetch("https://example.com/"), "allow"))
    const label = matcher("WebFetch(domain:example.*)")
    assert.isTrue(judge(label, fetch("https://example.org/"), "allow"))
    assert.isFalse(judge(label, fetch("https://example.evil.com/"), "allow"))
    assert.isTrue(judge(exact, fetch("https://exämple.com/")))
    assert.isFalse(judge(exact, fetch("https://exämple.com/"), "allow"))
  })

  it("Tool(param:value) matches one field's value, with wildcards", () => {
    const m = matcher("Agent(model:opus)", "mcp__github__create_issue(repo:acme/*)", "Bash(run_in_background:true)")
    assert.isTrue(judge(m, { tool_name: "Agent", tool_input: { model: "opus", prompt: "x" } }))
    assert.isFalse(judge(m, { tool_name: "Agent", tool_input: { model: "claude-opus-4" } }))
    assert.isFalse(judge(m, { tool_name: "Agent", tool_input: { prompt: "model:opus" } }))
    assert.isTrue(judge(m, { tool_name: "mcp__github__create_issue", tool_input: { repo: "acme/site" } }))
    assert.isFalse(judge(m, { tool_name: "mcp__github__create_issue", tool_input: { repo: "other/acme/x" } }))
    assert.isTrue(judge(m, { tool_name: "Bash", tool_input: { command: "sleep 9", run_in_background: true } }))
    assert.isFalse(judge(m, { tool_name: "Agent", tool_input: JSON.parse("{\"__proto__\":{\"model\":\"opus\"}}") }))
    // On a tool with its own form, another field allows nothing.
    assert.isFalse(
      judge(m, { tool_name: "Bash", tool_input: { command: "rm -rf /", run_in_background: true } }, "allow")
    )
    assert.isTrue(judge(m, { tool_name: "Agent", tool_input: { model: "opus" } }, "allow"))
  })
})

describe("Pattern: cost", () => {
  it("judges a long compound command against many patterns (a figure, not a limit)", () => {
    const m = Pattern.compile(
      Array.from({ length: 50 }, (_, i) => parsed(`Bash(tool${i} --flag * value${i})`))
    )
    const command = Array.from({ length: 200 }, (_, i) => `echo "part ${i}" | grep -v x${i}`).join(" && ")
    const start = performance.now()
    const rounds = 50
    for (let i = 0; i < rounds; i++) Pattern.matches(m, bash(command), where, "deny")
    const each = (performance.now() - start) / rounds
    console.log(`Pattern.matches: ${command.length}-char command, 400 parts, 50 patterns: ${each.toFixed(2)} ms`)
    assert.isFalse(Pattern.matches(m, bash(command), where, "deny").matched)
  })
})
