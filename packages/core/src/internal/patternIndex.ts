/**
 * The pattern lists of a policy judged together (docs/DESIGN.md §16): every distinct
 * pattern compiled once and filed by the tools it can match, a Bash command pattern
 * in a tree of the literal text every command it matches starts with
 * (`Bash(git push *)` under `g`, `i`, `t`, ` `, `p`…). A call meets only the patterns
 * filed under its tool, and a Bash call only the command patterns whose literal start
 * begins one of the texts they judge (the command, its parts), each at most once
 * whatever the number of lists; a list's answer is its first pattern that matched, as
 * `Pattern.matches` in deny mode gives it.
 */
import type { Call, Context, Match, Pattern } from "../Pattern.ts"
import * as Judge from "./patternMatch.ts"

/** The lists of a policy, prepared. */
export interface Index {
  readonly lists: number
  readonly compiled: ReadonlyArray<Judge.Compiled>
  /** Per pattern: the lists holding it, with its position in each, as pairs. */
  readonly holders: ReadonlyArray<ReadonlyArray<number>>
  /** The patterns (not Bash commands) that can match only calls of one tool, by that tool. */
  readonly byTool: ReadonlyMap<string, ReadonlyArray<number>>
  /** Tool patterns with `*` or naming an MCP server: judged for every call. */
  readonly anyTool: ReadonlyArray<number>
  /** Bash command patterns by their literal start (`Judge.commandPrefix`). */
  readonly starts: Trie
  /** Every Bash command pattern: a command that cannot be read matches them all. */
  readonly commands: ReadonlyArray<number>
}

/** A tree of texts by their characters: at each node, the patterns whose text ends there. */
export interface Trie {
  readonly ids: Array<number>
  next: Map<number, Trie> | undefined
}

const trie = (): Trie => ({ ids: [], next: undefined })

const file = (root: Trie, text: string, id: number): void => {
  let node = root
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    node.next ??= new Map()
    let child = node.next.get(c)
    if (child === undefined) {
      child = trie()
      node.next.set(c, child)
    }
    node = child
  }
  node.ids.push(id)
}

const push = <K>(map: Map<K, Array<number>>, key: K, id: number): void => {
  const list = map.get(key)
  if (list === undefined) map.set(key, [id])
  else if (list[list.length - 1] !== id) list.push(id)
}

/** Prepares lists of patterns, each pattern given with its canonical text. */
export const make = (
  lists: ReadonlyArray<ReadonlyArray<{ readonly pattern: Pattern; readonly text: string }>>
): Index => {
  const ids = new Map<string, number>()
  const compiled: Array<Judge.Compiled> = []
  const holders: Array<Array<number>> = []
  const byTool = new Map<string, Array<number>>()
  const starts = trie()
  const anyTool: Array<number> = []
  const commands: Array<number> = []
  lists.forEach((list, l) =>
    list.forEach(({ pattern, text }, position) => {
      let id = ids.get(text)
      if (id === undefined) {
        id = compiled.length
        ids.set(text, id)
        const c = Judge.compileOne(pattern, text)
        compiled.push(c)
        holders.push([])
        switch (c._tag) {
          case "Tool":
            if (c.server || c.pieces.length > 1) anyTool.push(id)
            else push(byTool, c.pieces[0]!, id)
            break
          case "Command":
            commands.push(id)
            file(starts, Judge.commandPrefix(c), id)
            break
          case "Path":
            for (const t of c.tools) push(byTool, t, id)
            break
          case "Domain":
            push(byTool, "WebFetch", id)
            break
          case "Param":
            push(byTool, c.tool, id)
            break
        }
      }
      holders[id]!.push(l, position)
    })
  )
  return { lists: lists.length, compiled, holders, byTool, anyTool, starts, commands }
}

const NONE: ReadonlyArray<number> = []

/**
 * What the lists answer a call: the lists that matched (`hits`, each once), and for
 * each its first pattern that matched (`matches`, in the same order) with its
 * position in the list (`positions`). Few lists match a call: the answer of one is
 * found by a scan (`answerOf`).
 */
export interface Answers {
  readonly hits: ReadonlyArray<number>
  readonly matches: ReadonlyArray<Match>
  readonly positions: ReadonlyArray<number>
}

/** The answer of list `list`: its first pattern that matched, or undefined. */
export const answerOf = (answers: Answers, list: number): Match | undefined => {
  const i = answers.hits.indexOf(list)
  return i < 0 ? undefined : answers.matches[i]
}

// One call judged by every list: the answers so far.
class Judging implements Answers {
  readonly index: Index
  readonly view: Judge.View
  readonly hits: Array<number> = []
  readonly matches: Array<Match> = []
  readonly positions: Array<number> = []
  done: Set<number> | undefined

  constructor(index: Index, view: Judge.View) {
    this.index = index
    this.view = view
  }

  // Pattern `id` matched: each list holding it answers with it, unless it answered
  // with an earlier pattern of its own.
  answer(id: number, m: Match): void {
    const held = this.index.holders[id]!
    for (let h = 0; h < held.length; h += 2) {
      const list = held[h]!
      const position = held[h + 1]!
      const i = this.hits.indexOf(list)
      if (i < 0) {
        this.hits.push(list)
        this.matches.push(m)
        this.positions.push(position)
      } else if (position < this.positions[i]!) {
        this.matches[i] = m
        this.positions[i] = position
      }
    }
  }

  meet(ids: ReadonlyArray<number>): void {
    for (let k = 0; k < ids.length; k++) {
      const m = Judge.matchOne(this.index.compiled[ids[k]!]!, this.view, "deny")
      if (m !== undefined) this.answer(ids[k]!, m)
    }
  }

  // Each text, in the order a pattern judges them, meets the patterns whose literal
  // start begins it; a pattern answers with the first text it matches.
  commands(texts: ReadonlyArray<string>): void {
    for (const text of texts) {
      let node: Trie | undefined = this.index.starts
      for (let i = 0; node !== undefined; i++) {
        if (node.ids.length > 0) this.judge(node.ids, text)
        node = i < text.length ? node.next?.get(text.charCodeAt(i)) : undefined
      }
    }
  }

  judge(ids: ReadonlyArray<number>, text: string): void {
    for (let k = 0; k < ids.length; k++) {
      const id = ids[k]!
      const c = this.index.compiled[id] as Extract<Judge.Compiled, { _tag: "Command" }>
      if (this.done?.has(id) !== true && Judge.commandMatch(c, text)) {
        ;(this.done ??= new Set()).add(id)
        this.answer(id, { matched: true, pattern: c.text, part: text })
      }
    }
  }
}

/**
 * The answer of every list to a call, in deny mode. Undefined when the call's tool
 * is not a string: each list then judges it alone (`Pattern.matches`). May throw on
 * a fault, as the judging of one pattern may; the caller then judges each list alone.
 */
export const judgeAll = (index: Index, call: Call, context: Context): Answers | undefined => {
  const tool = typeof call === "object" && call !== null ? call.tool_name : undefined
  if (typeof tool !== "string") return undefined
  const run = new Judging(index, new Judge.View(tool, call, context))
  run.meet(index.anyTool)
  run.meet(index.byTool.get(tool) ?? NONE)
  if (tool === "Bash" && index.commands.length > 0) {
    const analysis = run.view.analysis()
    if (analysis.exceeded) run.meet(index.commands)
    else run.commands(Judge.textsOf(analysis))
  }
  return run
}
