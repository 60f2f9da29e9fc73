/**
 * The real delegation depth of a sub-agent, as Claude Code records it. Hook
 * inputs name a sub-agent (`agent_id`, `agent_type`) but not how deep it is: a
 * sub-agent may start its own. Claude Code writes, next to the sub-agent's
 * transcript and before the sub-agent's first tool call, a meta file
 * `<project>/<session_id>/subagents/agent-<agent_id>.meta.json` whose
 * `spawnDepth` is 1 for a sub-agent of the main agent, 2 for one of its
 * sub-agents, and so on (with `parentAgentId` from depth 2). `of` reads it through
 * the transcripts' file-access module (no link followed, a regular file of at
 * most 64 KiB, opened without blocking); ids that are not plain (`[A-Za-z0-9_-]`)
 * are never made into a path.
 *
 * The file is a claim: the agent runs as the same user and can rewrite it. So a
 * depth the journal recorded is a floor (`atLeast`, `recordDepth`; `Hook.handle`
 * keeps the deepest depth recorded per agent in the session's metadata): an agent
 * is never judged shallower than it was judged before, nor than one more than its
 * recorded parent.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import * as Source from "./internal/source.ts"

/**
 * The depth of an event's agent: known, or unknown with the reason (a guard on
 * depth then fails closed).
 *
 * @since 0.1.0
 */
export type Depth =
  | {
    readonly _tag: "Known"
    readonly depth: number
    /** The parent agent its meta file names (`parentAgentId`), when it is a plain id. */
    readonly parent?: string | undefined
    /** What its meta file said, when that was below the depth recorded before (`atLeast`). */
    readonly claimed?: number | undefined
  }
  | {
    readonly _tag: "Unknown"
    readonly reason: string
    /** The least depth it can have (default 1): the depth recorded before for it (`atLeast`). */
    readonly least?: number | undefined
  }

const PLAIN = /^[A-Za-z0-9_-]{1,128}$/
const MAX_META_BYTES = 64 * 1024

const unknown = (reason: string): Depth => ({ _tag: "Unknown", reason })

/**
 * The meta file of a sub-agent, or null when the ids or the transcript path
 * cannot name one.
 *
 * @since 0.1.0
 */
export const metaFile = (input: {
  readonly session_id: string
  readonly transcript_path?: string | undefined
  readonly agent_id?: string | undefined
}): string | null => {
  const t = input.transcript_path
  if (t === undefined || !path.isAbsolute(t) || input.agent_id === undefined) return null
  if (!PLAIN.test(input.session_id) || !PLAIN.test(input.agent_id)) return null
  return path.join(path.dirname(t), input.session_id, "subagents", `agent-${input.agent_id}.meta.json`)
}

/**
 * The `spawnDepth` of a meta file's text, or the reason it has none.
 *
 * @since 0.1.0
 */
export const parse = (text: string): Depth => {
  let meta: unknown
  try {
    meta = JSON.parse(text)
  } catch {
    return unknown("its meta file is not JSON")
  }
  const fields = typeof meta === "object" && meta !== null ? (meta as Record<string, unknown>) : {}
  const depth = fields["spawnDepth"]
  const parent = fields["parentAgentId"]
  return typeof depth === "number" && isDepth(depth)
    ? { _tag: "Known", depth, ...(typeof parent === "string" && PLAIN.test(parent) ? { parent } : {}) }
    : unknown("its meta file has no spawnDepth")
}

const isDepth = (n: unknown): n is number =>
  typeof n === "number" && Number.isSafeInteger(n) && n >= 1 && n <= 0xffffffff

/**
 * The deepest depth recorded per agent id in one session (`Hook.handle` keeps it
 * in the session's metadata, `data.agent_depths`).
 *
 * @since 0.1.0
 */
export type Recorded = { readonly [agent: string]: number }

/**
 * Most agents whose depth one session keeps (1,024); an agent past them is judged
 * by its meta file and its recorded parent alone.
 *
 * @since 0.1.0
 */
export const MAX_RECORDED = 1024

/**
 * The agents' depths kept in a session's metadata data (`data.agent_depths`),
 * those that are depths (1 to 2^32 − 1); empty without.
 *
 * @since 0.1.0
 */
export const recordedOf = (data: unknown): Recorded => {
  const kept = typeof data === "object" && data !== null && !Array.isArray(data)
    ? (data as Record<string, unknown>)["agent_depths"]
    : undefined
  if (typeof kept !== "object" || kept === null || Array.isArray(kept)) return {}
  const out: Record<string, number> = {}
  for (const [agent, depth] of Object.entries(kept)) if (isDepth(depth)) out[agent] = depth
  return out
}

/**
 * The depth `agent` is judged at: what its meta file says (`depth`), but never
 * less than the depth recorded for it before, nor than one more than the depth
 * recorded for the parent its meta file names. A claim below that floor is kept
 * as `claimed`; an unknown depth keeps the floor as the least it can be. Pure.
 *
 * @since 0.1.0
 */
export const atLeast = (depth: Depth, recorded: Recorded, agent: string): Depth => {
  const parent = depth._tag === "Known" && depth.parent !== undefined ? recorded[depth.parent] : undefined
  const floor = Math.max(recorded[agent] ?? 0, parent === undefined ? 0 : parent + 1)
  if (depth._tag === "Unknown") return floor > (depth.least ?? 1) ? { ...depth, least: floor } : depth
  return floor > depth.depth ? { ...depth, depth: floor, claimed: depth.claimed ?? depth.depth } : depth
}

/**
 * The depth an agent is recorded at: a known depth, or the least an unknown one
 * can be (1 by default).
 *
 * @since 0.1.0
 */
export const recordedDepth = (depth: Depth): number => depth._tag === "Known" ? depth.depth : depth.least ?? 1

/**
 * `recorded` with `agent` at `depth` when that is deeper than what it holds (and
 * there is room: `MAX_RECORDED`), else null (nothing to record). Pure.
 *
 * @since 0.1.0
 */
export const recordDepth = (recorded: Recorded, agent: string, depth: Depth): Recorded | null => {
  const d = recordedDepth(depth)
  const before = recorded[agent]
  if (before !== undefined ? before >= d : Object.keys(recorded).length >= MAX_RECORDED) return null
  return { ...recorded, [agent]: d }
}

// Read through the transcripts' one file-access module: every directory from the
// project's down held open, no link followed, a regular file of at most 64 KiB.
const readMeta = (file: string): Effect.Effect<Depth> => {
  const loc = Source.locate(path.dirname(path.dirname(path.dirname(file))), file)
  if (loc === null) return Effect.succeed(unknown(`its meta file ${file} is not under its project`))
  return Effect.scoped(Effect.flatMap(Source.open(loc), (f) => Source.readAll(f, MAX_META_BYTES))).pipe(
    Effect.map((bytes) => parse(new TextDecoder().decode(bytes))),
    Effect.catch((e) => Effect.succeed(unknown(`its meta file cannot be read (${e.message})`)))
  )
}

/**
 * The depth of an event's agent: 0 for the main agent (no `agent_id`), else its
 * meta file's `spawnDepth`, or `Unknown` with why. Never fails.
 *
 * @since 0.1.0
 */
export const of = (input: {
  readonly session_id: string
  readonly transcript_path?: string | undefined
  readonly agent_id?: string | undefined
}): Effect.Effect<Depth> => {
  if (input.agent_id === undefined) return Effect.succeed({ _tag: "Known", depth: 0 })
  const file = metaFile(input)
  if (file === null) {
    return Effect.succeed(unknown("its transcript path or ids cannot name its meta file"))
  }
  return readMeta(file)
}
