/**
 * The tokens a Codex session used so far, read from its rollouts before the hook
 * decides a call (`Usage`): the main agent's rollout and the rollout of every
 * sub-agent its `spawn_agent` calls started, each read on from where the last
 * event left it, so the work per event does not grow with the session's length.
 * The scans are kept per journal session by a `Keeper` (claude-code's
 * `TranscriptScan`: a small file beside the user's state directory); a kept
 * scan is a claim, checked, and one that does not hold is dropped and the
 * rollouts read from their start.
 *
 * Where the rollouts are: an event of the main agent names its own
 * (`transcript_path`); a sub-agent's event names the sub-agent's, and the main
 * one is the kept one, else the file of the same directory ending in
 * `-<session_id>.jsonl` (Codex names a rollout by its thread id, and the main
 * thread's is the session's). A sub-agent's rollout is the file ending in
 * `-<agent id>.jsonl` among those already known, else in the main rollout's
 * directory (Codex 0.169.0 writes them under the same day's directory).
 *
 * The total is unknown (null), and a `maxTokens` rule then denies, when the
 * event names no rollout (`--ephemeral`), or a rollout that should be counted
 * cannot be found or read, or more sub-agents were started than are followed.
 * Nothing here fails.
 */
import * as TranscriptScan from "@session-journal/claude-code/TranscriptScan"
import * as fs from "node:fs"
import * as path from "node:path"
import * as Usage from "../Usage.ts"

/** Rollouts followed per session at most; past it, the tokens are unknown. */
const MAX_ROLLOUTS = Usage.MAX_AGENTS + 1

interface Kept {
  readonly main: string
  readonly rollouts: { readonly [file: string]: Usage.Scan }
}

const claimOf = (kept: unknown): Kept | null => {
  if (typeof kept !== "object" || kept === null) return null
  const k = kept as { readonly main?: unknown; readonly rollouts?: unknown }
  if (typeof k.main !== "string" || !path.isAbsolute(k.main)) return null
  if (typeof k.rollouts !== "object" || k.rollouts === null || Array.isArray(k.rollouts)) return null
  const rollouts: { [file: string]: Usage.Scan } = {}
  for (const [file, scan] of Object.entries(k.rollouts as object)) {
    if (path.isAbsolute(file) && Usage.isScan(scan)) rollouts[file] = scan
  }
  return { main: k.main, rollouts }
}

const suffixed = (id: string): string => `-${id}.jsonl`

// A rollout in `dir` ending in `-<id>.jsonl`, if there is one.
const findIn = async (dir: string, id: string): Promise<string | undefined> => {
  try {
    const name = (await fs.promises.readdir(dir)).find((n) => n.startsWith("rollout-") && n.endsWith(suffixed(id)))
    return name === undefined ? undefined : path.join(dir, name)
  } catch {
    return undefined
  }
}

/** The event a total is read for: its Codex session, the rollout it names, its agent (none: the main one). */
export interface Event {
  readonly session_id: string
  readonly transcript_path: string | null
  readonly agent_id?: string | undefined
}

/**
 * The tokens the session of `event` used, main agent and sub-agents together,
 * keeping the scans with `keeper` under the journal session `session`; null
 * when they cannot be known (the module header says when).
 */
export const totals = async (
  event: Event,
  keeper: TranscriptScan.Keeper,
  session: string
): Promise<bigint | null> => {
  const own = event.transcript_path
  if (own === null || !path.isAbsolute(own)) return null
  const kept = claimOf(await keeper.read(session))
  const main = event.agent_id === undefined
    ? own
    : kept?.main ?? await findIn(path.dirname(own), event.session_id)
  if (main === undefined) return null
  // A kept scan of another main rollout is not this session's story.
  const rollouts: { [file: string]: Usage.Scan } = kept !== null && kept.main === main ? { ...kept.rollouts } : {}
  let known = true
  // Written back only when a scan moved or a rollout was added: an event with nothing new writes nothing.
  let moved = kept === null || kept.main !== main
  const queue = [main, ...(own === main ? [] : [own]), ...Object.keys(rollouts)]
  const done = new Set<string>()
  let total = 0n
  while (queue.length > 0) {
    const file = queue.shift()!
    if (done.has(file)) continue
    if (done.size >= MAX_ROLLOUTS) {
      known = false
      break
    }
    done.add(file)
    const next = await TranscriptScan.usageScan(file, rollouts[file] ?? Usage.empty, Usage.extend)
    if (next === null) {
      known = false
      continue
    }
    if (rollouts[file]?.offset !== next.offset) moved = true
    rollouts[file] = next
    total += Usage.tokensOf(next)
    if (next.overflow) known = false
    for (const agent of next.agents) {
      const have = [...done, ...queue, ...Object.keys(rollouts)].find((f) => f.endsWith(suffixed(agent)))
      const found = have ?? await findIn(path.dirname(main), agent)
      if (found === undefined) known = false
      else queue.push(found)
    }
  }
  if (moved) await keeper.write(session, { main, rollouts })
  return known ? total : null
}
