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
  | { readonly _tag: "Known"; readonly depth: number }
  | { readonly _tag: "Unknown"; readonly reason: string }

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
  const depth = typeof meta === "object" && meta !== null ? (meta as Record<string, unknown>)["spawnDepth"] : undefined
  return typeof depth === "number" && Number.isSafeInteger(depth) && depth >= 1 && depth <= 0xffffffff
    ? { _tag: "Known", depth }
    : unknown("its meta file has no spawnDepth")
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
