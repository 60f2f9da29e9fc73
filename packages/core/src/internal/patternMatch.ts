/**
 * How one compiled pattern judges one call (docs/DESIGN.md §15), and what a call
 * shows the patterns: `View` reads a call once (its input, the split of its command,
 * the path it touches, the host of its URL, the directories patterns are anchored
 * at), so that any number of patterns judge it without reading it again.
 * `Pattern.matches` judges a list with it; `patternIndex.ts` judges the lists of a
 * whole policy with it, meeting each pattern at most once.
 */
import type { Call, Context, Match, Mode, Pattern } from "../Pattern.ts"
import * as Paths from "./callPaths.ts"
import * as Hosts from "./hosts.ts"
import * as Shell from "./shellSplit.ts"
import * as Wild from "./wildcard.ts"

/** Longest Bash command, parameter value or URL judged. */
export const MAX_TEXT_LENGTH = 100_000

/** The tools whose specifier is a path, and the tools a pattern of each one covers. */
export const pathTools: { readonly [tool: string]: ReadonlyArray<string> } = {
  Read: ["Read", "Glob", "Grep", "LS"],
  Edit: ["Edit", "Write", "MultiEdit", "NotebookEdit"],
  Write: ["Write"],
  MultiEdit: ["MultiEdit"],
  NotebookEdit: ["NotebookEdit"],
  Glob: ["Glob"],
  Grep: ["Grep"],
  LS: ["LS"]
}

/**
 * On tools with their own specifier syntax, the fields a `name:value` pattern may
 * name; in allow mode such a pattern on these tools allows nothing.
 */
export const otherFields: { readonly [tool: string]: ReadonlyArray<string> } = {
  Bash: ["description", "timeout", "run_in_background", "dangerouslyDisableSandbox"],
  Read: ["offset", "limit", "pages"],
  Edit: ["old_string", "new_string", "replace_all"],
  Write: ["content"],
  MultiEdit: [],
  NotebookEdit: ["cell_id", "new_source", "cell_type", "edit_mode"],
  Glob: [],
  Grep: ["pattern", "glob", "type", "output_mode", "multiline", "head_limit"],
  LS: ["ignore"],
  WebFetch: ["prompt"]
}

type Input = { readonly [k: string]: unknown }

const inputOf = (call: Call): Input | undefined => {
  const input = call.tool_input
  return typeof input === "object" && input !== null && !Array.isArray(input) ? input as Input : undefined
}

const field = (input: Input | undefined, name: string): unknown =>
  input !== undefined && Object.hasOwn(input, name) ? input[name] : undefined

/** One pattern, compiled. */
export type Compiled =
  | {
    readonly _tag: "Tool"
    readonly text: string
    readonly pieces: ReadonlyArray<string>
    readonly server: boolean
    readonly anchored: boolean
  }
  | { readonly _tag: "Command"; readonly text: string; readonly alternatives: ReadonlyArray<ReadonlyArray<string>> }
  | {
    readonly _tag: "Path"
    readonly text: string
    readonly tools: ReadonlyArray<string>
    readonly glob: Paths.PathGlob
  }
  | { readonly _tag: "Domain"; readonly text: string; readonly glob: Hosts.DomainGlob }
  | {
    readonly _tag: "Param"
    readonly text: string
    readonly tool: string
    readonly param: string
    readonly pieces: ReadonlyArray<string>
  }

/** Compiles one pattern whose canonical text is `text`. */
export const compileOne = (pattern: Pattern, text: string): Compiled => {
  switch (pattern._tag) {
    case "Tool": {
      const t = pattern.tool
      return {
        _tag: "Tool",
        text,
        pieces: Wild.starPieces(t),
        server: !t.includes("*") && t.startsWith("mcp__") && !t.slice(5).includes("__"),
        anchored: !t.includes("*") || /^mcp__[^*]+?__/.test(t)
      }
    }
    case "Command": {
      const c = pattern.command
      // A trailing ` *` is a word boundary: the prefix alone, or the prefix, a space, anything.
      const boundary = c.endsWith(" *") && !c.endsWith("\\ *")
      const alternatives = boundary
        ? [Wild.starPieces(c.slice(0, -2)), Wild.starPieces(c)]
        : [Wild.starPieces(c)]
      return { _tag: "Command", text, alternatives }
    }
    case "Path": {
      const glob = Paths.pathGlob(pattern.path)
      return {
        _tag: "Path",
        text,
        tools: pathTools[pattern.tool] ?? [pattern.tool],
        // `parse` refused the patterns `pathGlob` refuses; a hand-built one matches nothing.
        glob: typeof glob === "string" ? { anchor: "root", up: 0, segments: [Wild.literalSegment("\u0000")] } : glob
      }
    }
    case "Domain":
      return { _tag: "Domain", text, glob: Hosts.domainGlob(pattern.domain) }
    case "Param":
      return { _tag: "Param", text, tool: pattern.tool, param: pattern.param, pieces: Wild.starPieces(pattern.value) }
  }
}

// ---------------------------------------------------------------------------
// Commands

/** A Bash command as the patterns see it. */
export interface Analysis {
  readonly whole: string
  /** Per part: its words joined by one space, then the same from the command's name on. */
  readonly parts: ReadonlyArray<readonly [string, string]>
  readonly complete: boolean
  readonly exceeded: boolean
  /** The texts a command pattern judges (`textsOf`), computed when first asked. */
  texts: ReadonlyArray<string> | undefined
}

const EXCEEDED: Analysis = { whole: "", parts: [], complete: false, exceeded: true, texts: [] }

// The last command analysed, and its analysis: a call is judged by many patterns,
// often in several lists, each of which would split the same command again. An
// analysis is a function of the text alone.
let lastCommand: string | undefined
let lastAnalysis: Analysis | undefined

/** The analysis of a command (`exceeded` when it is no string or over the bound). */
export const analyse = (command: unknown): Analysis => {
  if (typeof command !== "string" || command.length > MAX_TEXT_LENGTH) return EXCEEDED
  if (command === lastCommand && lastAnalysis !== undefined) return lastAnalysis
  const split = Shell.split(command)
  lastAnalysis = {
    whole: command.trim().replace(/\s+/g, " "),
    parts: split.parts.map((p) => {
      const full = p.words.join(" ")
      const start = Shell.commandStart(p.words)
      return [full, start === 0 ? full : p.words.slice(start).join(" ")] as const
    }),
    complete: split.complete,
    exceeded: split.exceeded,
    texts: undefined
  }
  lastCommand = command
  return lastAnalysis
}

/**
 * The texts a command pattern judges in deny mode, in the order it judges them (the
 * whole command, then each part as it is and from its command name on), each once: a
 * pattern reports the first of them it matches.
 */
export const textsOf = (analysis: Analysis): ReadonlyArray<string> => {
  if (analysis.texts !== undefined) return analysis.texts
  const texts = new Set<string>([analysis.whole])
  for (const [full, stripped] of analysis.parts) {
    texts.add(full)
    texts.add(stripped)
  }
  analysis.texts = [...texts]
  return analysis.texts
}

/**
 * What every text a command pattern matches starts with: the longest start its
 * alternatives' literal beginnings share (a text an alternative matches begins with
 * that alternative's text before its first `*`, all of it when it has none).
 */
export const commandPrefix = (c: Extract<Compiled, { _tag: "Command" }>): string => {
  let prefix: string | undefined
  for (const pieces of c.alternatives) {
    const first = pieces[0] ?? ""
    if (prefix === undefined) prefix = first
    else {
      let n = 0
      while (n < prefix.length && n < first.length && prefix[n] === first[n]) n++
      prefix = prefix.slice(0, n)
    }
  }
  return prefix ?? ""
}

/** Whether a command pattern matches one text. */
export const commandMatch = (c: Extract<Compiled, { _tag: "Command" }>, text: string): boolean =>
  c.alternatives.some((pieces) => Wild.starMatch(pieces, text))

/** Whether every part of a command is matched by one of `commands`: the first that matched the first part, or undefined. */
export const allowCommands = (
  commands: ReadonlyArray<Extract<Compiled, { _tag: "Command" }>>,
  analysis: Analysis
): string | undefined => {
  if (!analysis.complete || analysis.exceeded || analysis.parts.length === 0) return undefined
  let first: string | undefined
  for (const [full] of analysis.parts) {
    const c = commands.find((c) => commandMatch(c, full))
    if (c === undefined) return undefined
    first ??= c.text
  }
  return first
}

const paramText = (v: unknown): string | undefined =>
  typeof v === "string"
    ? v.length > MAX_TEXT_LENGTH ? undefined : v
    : typeof v === "number" || typeof v === "boolean"
    ? String(v)
    : undefined

// ---------------------------------------------------------------------------
// A call as the patterns see it

/**
 * One call read for judging: its tool (a string; a call whose tool is none is judged
 * without a view) and what the patterns read of it, each read when first needed.
 */
export class View {
  readonly tool: string
  readonly call: Call
  readonly context: Context
  private input_: Input | undefined | null = null
  private analysis_: Analysis | undefined
  private anchored = false
  private cwd: ReadonlyArray<string> | undefined
  private home: ReadonlyArray<string> | undefined
  private project: ReadonlyArray<string> | undefined | null = null
  private target_: Paths.Target | undefined | null = null
  private host_: string | undefined | null = null

  constructor(tool: string, call: Call, context: Context) {
    this.tool = tool
    this.call = call
    this.context = context
  }

  input(): Input | undefined {
    if (this.input_ === null) this.input_ = inputOf(this.call)
    return this.input_
  }

  analysis(): Analysis {
    this.analysis_ ??= analyse(field(this.input(), "command"))
    return this.analysis_
  }

  private anchors(): void {
    if (this.anchored) return
    this.cwd = Paths.absoluteSegments(this.call.cwd) ?? Paths.absoluteSegments(this.context.cwd)
    this.home = Paths.absoluteSegments(this.context.home)
    this.anchored = true
  }

  /** The path a file tool's call touches, or undefined when it cannot be read. */
  target(): Paths.Target | undefined {
    if (this.target_ === null) {
      this.anchors()
      this.target_ = Paths.targetOf(this.tool, this.input(), this.cwd, this.home)
    }
    return this.target_
  }

  /** The directory a path pattern's anchor names, or undefined when it is no absolute path. */
  base(anchor: Paths.Anchor): ReadonlyArray<string> | undefined {
    switch (anchor) {
      case "root":
        return ROOT
      case "home":
        this.anchors()
        return this.home
      case "project":
        if (this.project === null) this.project = Paths.absoluteSegments(this.context.projectDir)
        return this.project
      case "cwd":
        this.anchors()
        return this.cwd
    }
  }

  host(): string | undefined {
    if (this.host_ === null) this.host_ = Hosts.hostOf(field(this.input(), "url"), MAX_TEXT_LENGTH)
    return this.host_
  }
}

const ROOT: ReadonlyArray<string> = []

const toolMatch = (c: Extract<Compiled, { _tag: "Tool" }>, tool: string, mode: Mode): boolean => {
  if (c.server && tool.startsWith(`${c.pieces[0]}__`)) return true
  if (mode === "allow" && !c.anchored) return false
  return Wild.starMatch(c.pieces, tool)
}

const failClosed = (c: Compiled): Match => ({ matched: true, pattern: c.text, failClosed: true })

/**
 * How one pattern judges a call, or undefined when it does not match. In `"deny"`
 * mode a call it cannot read matches (`failClosed`); in `"allow"` mode it does not.
 * A command pattern in allow mode judges only with the others (`allowCommands`):
 * here it does not match.
 */
export const matchOne = (c: Compiled, view: View, mode: Mode): Match | undefined => {
  const deny = mode === "deny"
  const tool = view.tool
  switch (c._tag) {
    case "Tool":
      return toolMatch(c, tool, mode) ? { matched: true, pattern: c.text } : undefined
    case "Command": {
      if (tool !== "Bash" || !deny) return undefined
      const analysis = view.analysis()
      if (analysis.exceeded) return failClosed(c)
      if (commandMatch(c, analysis.whole)) return { matched: true, pattern: c.text, part: analysis.whole }
      for (const [full, stripped] of analysis.parts) {
        if (commandMatch(c, full)) return { matched: true, pattern: c.text, part: full }
        if (stripped !== full && commandMatch(c, stripped)) return { matched: true, pattern: c.text, part: stripped }
      }
      return undefined
    }
    case "Path": {
      if (!c.tools.includes(tool)) return undefined
      const target = view.target()
      const base = view.base(c.glob.anchor)
      if (target === undefined || base === undefined) return deny ? failClosed(c) : undefined
      const m = Wild.pathMatchUnder(base, Math.max(0, base.length - c.glob.up), c.glob.segments, target.path)
      return m.full || (deny && target.search && m.below)
        ? { matched: true, pattern: c.text, part: `/${target.path.join("/")}` }
        : undefined
    }
    case "Domain": {
      if (tool !== "WebFetch") return undefined
      const host = view.host()
      if (host === undefined) return deny ? failClosed(c) : undefined
      return Hosts.domainMatch(c.glob, host) ? { matched: true, pattern: c.text, part: host } : undefined
    }
    case "Param": {
      // Another field's value proves nothing about the command, path or URL a tool's own
      // form judges, so on those tools it allows nothing.
      if (tool !== c.tool || (!deny && otherFields[tool] !== undefined)) return undefined
      const raw = field(view.input(), c.param)
      if (typeof raw === "string" && raw.length > MAX_TEXT_LENGTH) return deny ? failClosed(c) : undefined
      const value = paramText(raw)
      return value !== undefined && Wild.starMatch(c.pieces, value)
        ? { matched: true, pattern: c.text, part: value }
        : undefined
    }
  }
}

const NO: Match = { matched: false }

/** A list of patterns judging a call (`Pattern.matches` without its guard against faults). */
export const judge = (compiled: ReadonlyArray<Compiled>, call: Call, context: Context, mode: Mode): Match => {
  const tool = typeof call === "object" && call !== null ? call.tool_name : undefined
  if (typeof tool !== "string") {
    const first = compiled[0]
    return mode === "deny" && first !== undefined ? failClosed(first) : NO
  }
  const view = new View(tool, call, context)
  const commands: Array<Extract<Compiled, { _tag: "Command" }>> = []
  for (const c of compiled) {
    const m = matchOne(c, view, mode)
    if (m !== undefined) return m
    if (c._tag === "Command" && mode === "allow" && tool === "Bash") commands.push(c)
  }
  if (commands.length === 0) return NO
  // Allow: every simple command must be matched by some pattern, the split complete.
  const first = allowCommands(commands, view.analysis())
  return first === undefined ? NO : { matched: true, pattern: first }
}
