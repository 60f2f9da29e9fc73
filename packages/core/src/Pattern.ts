/**
 * Patterns in Claude Code's permission-rule syntax, and whether a tool call matches
 * one: `Bash`, `Bash(git push *)`, `Read(~/.ssh/**)`, `WebFetch(domain:*.example.com)`,
 * `mcp__github__*`, `Agent(model:opus)`. Pure string and path logic; the exact
 * semantics, and where they differ from Claude Code's, are docs/DESIGN.md §15.
 *
 * `parse` reads one pattern (a `PatternError` says what is wrong and where), `format`
 * writes it back in canonical form, `compile` prepares a list once, and `matches`
 * judges a call in one of two modes: `"deny"` (also for ask) matches when any part of
 * what the call does matches, and fails closed (a call it cannot read or that is over
 * a bound matches); `"allow"` matches only when everything the call does is covered,
 * and never matches what it cannot read. `matches` never throws.
 *
 * @since 0.1.0
 */
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as Paths from "./internal/callPaths.ts"
import * as Judge from "./internal/patternMatch.ts"

// ---------------------------------------------------------------------------
// The data

/**
 * A parsed pattern. `Tool` is every call of a tool (`tool` may hold `*` wildcards,
 * or name an MCP server: `mcp__github`); `Command` a Bash command; `Path` a path glob
 * of a file tool; `Domain` a WebFetch host; `Param` one top-level input field.
 *
 * @since 0.1.0
 */
export type Pattern =
  | { readonly _tag: "Tool"; readonly tool: string }
  | { readonly _tag: "Command"; readonly tool: string; readonly command: string }
  | { readonly _tag: "Path"; readonly tool: string; readonly path: string }
  | { readonly _tag: "Domain"; readonly tool: string; readonly domain: string }
  | { readonly _tag: "Param"; readonly tool: string; readonly param: string; readonly value: string }

/**
 * What a pattern is checked against: the tool's name and input as Claude Code sends
 * them, and the directory the call runs in. Anything else in the object is ignored;
 * the fields are checked, not trusted (a `tool_name` that is not a string is a call
 * that cannot be read).
 *
 * @since 0.1.0
 */
export interface Call {
  readonly tool_name: unknown
  readonly tool_input?: unknown
  readonly cwd?: unknown
}

/**
 * Where relative patterns and paths are anchored: `projectDir` for `/path`, `home`
 * for `~/path`, and `cwd` for a call that does not carry its own. Absolute paths.
 *
 * @since 0.1.0
 */
export interface Context {
  readonly cwd: string
  readonly projectDir: string
  readonly home: string
}

/**
 * `"deny"` (also used for ask) matches when anything the call does matches and fails
 * closed; `"allow"` matches only when everything it does is covered.
 *
 * @since 0.1.0
 */
export type Mode = "deny" | "allow"

/**
 * The verdict of `matches`: the canonical text of the pattern that matched and the
 * part of the call it matched (a simple command, a resolved path, a host, a value).
 * `failClosed` says the call could not be read or was over a bound, and matched because
 * deny fails closed.
 *
 * @since 0.1.0
 */
export interface Match {
  readonly matched: boolean
  readonly pattern?: string
  readonly part?: string
  readonly failClosed?: boolean
}

/**
 * Longest pattern text `parse` accepts.
 *
 * @since 0.1.0
 */
export const MAX_PATTERN_LENGTH = 4096

/**
 * Longest Bash command, parameter value or URL judged; a longer one matches every
 * deny pattern that applies to it and no allow pattern.
 *
 * @since 0.1.0
 */
export const MAX_TEXT_LENGTH: number = Judge.MAX_TEXT_LENGTH

/**
 * Longest path judged (before resolution); a longer one is treated like an unreadable path.
 *
 * @since 0.1.0
 */
export const MAX_PATH_LENGTH: number = Paths.MAX_PATH_LENGTH

/**
 * The tools whose specifier is a path, and the tools a pattern of each one covers:
 * `Edit(…)` every tool that writes files, `Read(…)` every tool that reads or lists them.
 *
 * @since 0.1.0
 */
export const pathTools: { readonly [tool: string]: ReadonlyArray<string> } = Judge.pathTools

// The fields a tool's own specifier already covers: a `Tool(field:value)` pattern on one
// of them would miss what that specifier normalises (compound commands, `..`), so it is refused.
const ownFields: { readonly [tool: string]: ReadonlyArray<string> } = {
  Bash: ["command"],
  Read: ["file_path"],
  Edit: ["file_path"],
  Write: ["file_path"],
  MultiEdit: ["file_path"],
  NotebookEdit: ["notebook_path"],
  Glob: ["path", "pattern"],
  Grep: ["path"],
  LS: ["path"],
  WebFetch: ["url"]
}

// On tools with their own specifier syntax, `name:value` is a parameter pattern only for
// these names; anything else is that syntax (`Bash(git:*)` is a command prefix).
const otherFields = Judge.otherFields

// ---------------------------------------------------------------------------
// Errors

/**
 * Why a pattern text was refused.
 *
 * @since 0.1.0
 */
export type PatternErrorReason =
  | "Empty"
  | "TooLong"
  | "ToolName"
  | "Parenthesis"
  | "EmptySpecifier"
  | "GlobWithSpecifier"
  | "OwnField"
  | "Specifier"

/**
 * A pattern text that is not a pattern: `reason` says what is wrong, `at` the index
 * in `text` where it was found, `detail` how.
 *
 * @since 0.1.0
 */
export class PatternError extends Schema.TaggedError<PatternError>()("PatternError", {
  text: Schema.String,
  reason: Schema.Literals(
    ["Empty", "TooLong", "ToolName", "Parenthesis", "EmptySpecifier", "GlobWithSpecifier", "OwnField", "Specifier"]
  ),
  at: Schema.Number,
  detail: Schema.String
}) {
  override get message(): string {
    const shown = this.text.length > 60 ? `${this.text.slice(0, 60)}…` : this.text
    return `invalid pattern ${JSON.stringify(shown)} at ${this.at}: ${this.detail}`
  }
}

// ---------------------------------------------------------------------------
// Parsing and formatting

const TOOL_CHAR = /^[A-Za-z0-9_.*-]$/

const fail = (text: string, reason: PatternErrorReason, at: number, detail: string) =>
  Result.fail(new PatternError({ text, reason, at, detail }))

const FIELD = /^(\s*)([A-Za-z_][A-Za-z0-9_-]*)\s*:\s*/

// A Bash command pattern: whitespace runs become one space; the legacy `prefix:*` is `prefix *`.
const normaliseCommand = (spec: string): string => {
  const text = spec.trim().replace(/\s+/g, " ")
  if (text.length > 2 && text.endsWith(":*") && !text.endsWith("\\:*")) return `${text.slice(0, -2).trimEnd()} *`
  return text
}

const isStar = (text: string): boolean => text === "*"

/**
 * Reads one pattern. `Tool` or `Tool(specifier)`; the tool name is made of
 * `A-Z a-z 0-9 _ . -` and `*` (a name with `*` takes no specifier). The specifier is
 * read by the tool: a Bash command, a path for the file tools (`pathTools`),
 * `domain:host` for WebFetch, `name:value` for any tool. `Bash(*)`, `Tool(*)` and
 * `WebFetch(domain:*)` are the bare tool.
 *
 * @since 0.1.0
 */
export const parse = (text: string): Result.Result<Pattern, PatternError> => {
  if (typeof text !== "string" || text.length === 0) return fail(String(text), "Empty", 0, "empty pattern")
  if (text.length > MAX_PATTERN_LENGTH) {
    return fail(text, "TooLong", MAX_PATTERN_LENGTH, `longer than ${MAX_PATTERN_LENGTH} characters`)
  }
  const open = text.indexOf("(")
  const tool = open < 0 ? text : text.slice(0, open)
  if (tool.length === 0) return fail(text, "ToolName", 0, "expected a tool name")
  for (let i = 0; i < tool.length; i++) {
    if (!TOOL_CHAR.test(tool[i]!)) {
      return fail(text, "ToolName", i, `unexpected ${JSON.stringify(tool[i])} in the tool name`)
    }
  }
  if (open < 0) return Result.succeed({ _tag: "Tool", tool })
  if (!text.endsWith(")")) return fail(text, "Parenthesis", text.length, "expected ) at the end")
  if (tool.includes("*")) return fail(text, "GlobWithSpecifier", open, "a tool name with * takes no specifier")
  const spec = text.slice(open + 1, -1)
  if (spec.trim().length === 0) return fail(text, "EmptySpecifier", open + 1, "empty specifier")
  const at = open + 1
  const field = FIELD.exec(spec)
  const name = field?.[2]
  const value = field === null ? "" : spec.slice(field[0].length)
  // A Bash specifier ending in `:*` is the legacy prefix form (`Bash(timeout:*)`), never a field.
  const legacy = tool === "Bash" && spec.endsWith(":*") && !/:\s+\*$/.test(spec)
  if (name !== undefined && !legacy && ownFields[tool]?.includes(name)) {
    return fail(text, "OwnField", at + field![1]!.length, `${tool}'s ${name} is matched by its own specifier`)
  }
  const param = (): Result.Result<Pattern, PatternError> => Result.succeed({ _tag: "Param", tool, param: name!, value })
  if (name !== undefined && !legacy && otherFields[tool]?.includes(name)) return param()
  if (tool === "Bash") {
    const command = normaliseCommand(spec)
    return Result.succeed(isStar(command) ? { _tag: "Tool", tool } : { _tag: "Command", tool, command })
  }
  if (tool === "WebFetch") {
    if (name === "domain") {
      const domain = value.trim()
      if (!/^[A-Za-z0-9.*_-]+$/.test(domain)) {
        return fail(text, "Specifier", at, "expected a host (letters, digits, -, _, dots and *) after domain:")
      }
      return Result.succeed(isStar(domain) ? { _tag: "Tool", tool } : { _tag: "Domain", tool, domain })
    }
    return fail(text, "Specifier", at, "expected domain:host or a parameter of WebFetch")
  }
  if (pathTools[tool] !== undefined) {
    const path = spec.trim()
    const problem = Paths.pathProblem(path)
    if (problem !== undefined) return fail(text, "Specifier", at, problem)
    return Result.succeed({ _tag: "Path", tool, path })
  }
  if (spec.trim() === "*") return Result.succeed({ _tag: "Tool", tool })
  if (name === undefined) return fail(text, "Specifier", at, `expected name:value for ${tool}`)
  return param()
}

/**
 * Writes a pattern in canonical form: `parse(format(p))` gives back `p`.
 *
 * @since 0.1.0
 */
export const format = (pattern: Pattern): string => {
  switch (pattern._tag) {
    case "Tool":
      return pattern.tool
    case "Command":
      return `${pattern.tool}(${pattern.command})`
    case "Path":
      return `${pattern.tool}(${pattern.path})`
    case "Domain":
      return `${pattern.tool}(domain:${pattern.domain})`
    case "Param":
      return `${pattern.tool}(${pattern.param}:${pattern.value})`
  }
}

// ---------------------------------------------------------------------------
// Compiling

/**
 * One pattern as `compile` prepares it (opaque: read it through `matches`).
 *
 * @since 0.1.0
 */
export type Compiled = Judge.Compiled

/**
 * A list of patterns prepared once by `compile`: wildcards split, path globs and
 * domains compiled.
 *
 * @since 0.1.0
 */
export interface Matcher {
  readonly patterns: ReadonlyArray<Pattern>
  readonly compiled: ReadonlyArray<Compiled>
}

/**
 * Prepares patterns for `matches`, once: the order is kept (the first match is reported).
 *
 * @since 0.1.0
 */
export const compile = (patterns: ReadonlyArray<Pattern>): Matcher => ({
  patterns,
  compiled: patterns.map((p) => Judge.compileOne(p, format(p)))
})

/**
 * Parses every text and compiles the patterns, or fails with the first text's error.
 *
 * @since 0.1.0
 */
export const compileTexts = (texts: ReadonlyArray<string>): Result.Result<Matcher, PatternError> => {
  const patterns: Array<Pattern> = []
  for (const t of texts) {
    const r = parse(t)
    if (Result.isFailure(r)) return Result.fail(r.failure)
    patterns.push(r.success)
  }
  return Result.succeed(compile(patterns))
}

// ---------------------------------------------------------------------------
// Matching

const NO: Match = { matched: false }

/**
 * Whether a call matches one of the matcher's patterns (docs/DESIGN.md §15). In
 * `"deny"` mode the first pattern that matches anything the call does is reported; a
 * call that cannot be read, or is over a bound, matches every pattern that applies
 * to its tool. In `"allow"` mode a Bash call matches only when every one of its simple
 * commands matches some pattern, and a call that cannot be read matches nothing.
 * Never throws.
 *
 * @since 0.1.0
 */
export const matches = (matcher: Matcher, call: Call, context: Context, mode: Mode): Match => {
  try {
    return Judge.judge(matcher.compiled, call, context, mode)
  } catch {
    // Unreachable by design; a bug here still fails closed.
    const first = matcher.patterns[0]
    return mode === "deny" && first !== undefined ? { matched: true, pattern: format(first), failClosed: true } : NO
  }
}
