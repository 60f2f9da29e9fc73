/**
 * The pattern lists of a policy judged together (docs/DESIGN.md §16): every distinct
 * pattern compiled once and filed by the tools it can match, a Bash command pattern
 * also by the first word of what it matches (`Bash(git push *)` under `git`). A call
 * meets only the patterns filed under its tool (and, for Bash, under the first words of
 * its command and its parts), each at most once, whatever the number of lists; a list's
 * answer is its first pattern that matched, as `Pattern.matches` in deny mode gives it.
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
  /** Bash command patterns by their first word (`Judge.commandKey`). */
  readonly byKey: ReadonlyMap<string, ReadonlyArray<number>>
  /** Bash command patterns with no first word: judged for every Bash call. */
  readonly unkeyed: ReadonlyArray<number>
  /** Every Bash command pattern: a command that cannot be read matches them all. */
  readonly commands: ReadonlyArray<number>
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
  const byKey = new Map<string, Array<number>>()
  const anyTool: Array<number> = []
  const unkeyed: Array<number> = []
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
          case "Command": {
            commands.push(id)
            const key = Judge.commandKey(c)
            if (key === undefined) unkeyed.push(id)
            else push(byKey, key, id)
            break
          }
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
  return { lists: lists.length, compiled, holders, byTool, anyTool, byKey, unkeyed, commands }
}

const NONE: ReadonlyArray<number> = []

/** What every list answers a call: its first pattern that matched, by list (undefined where none did), and the lists that matched. */
export interface Answers {
  readonly matches: ReadonlyArray<Match | undefined>
  readonly hits: ReadonlyArray<number>
}

/**
 * The answer of every list to a call, in deny mode. Undefined when the call's tool
 * is not a string: each list then judges it alone (`Pattern.matches`). May throw on
 * a fault, as the judging of one pattern may; the caller then judges each list alone.
 */
export const judgeAll = (index: Index, call: Call, context: Context): Answers | undefined => {
  const tool = typeof call === "object" && call !== null ? call.tool_name : undefined
  if (typeof tool !== "string") return undefined
  const answers = new Array<Match | undefined>(index.lists)
  const hits: Array<number> = []
  if (index.compiled.length === 0) return { matches: answers, hits }
  const positions: Array<number> = new Array(index.lists)
  const view = new Judge.View(tool, call, context)
  const meet = (ids: ReadonlyArray<number>): void => {
    for (let k = 0; k < ids.length; k++) {
      const id = ids[k]!
      const m = Judge.matchOne(index.compiled[id]!, view, "deny")
      if (m === undefined) continue
      const held = index.holders[id]!
      for (let h = 0; h < held.length; h += 2) {
        const list = held[h]!
        const position = held[h + 1]!
        const before = positions[list]
        if (before === undefined) hits.push(list)
        if (before === undefined || position < before) {
          positions[list] = position
          answers[list] = m
        }
      }
    }
  }
  meet(index.anyTool)
  meet(index.byTool.get(tool) ?? NONE)
  if (tool === "Bash" && index.commands.length > 0) {
    const analysis = view.analysis()
    if (analysis.exceeded) meet(index.commands)
    else {
      for (const key of Judge.keysOf(analysis)) {
        const ids = index.byKey.get(key)
        if (ids !== undefined) meet(ids)
      }
      meet(index.unkeyed)
    }
  }
  return { matches: answers, hits }
}
