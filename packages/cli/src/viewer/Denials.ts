/**
 * The denials of a session, read in one pass over its entries with bounded
 * memory: every tool entry with `allowed: false` is a denied call; a decision
 * entry beside it names the guard that denied it and why. A decision entry is
 * any non-tool entry whose payload is an object with `verdict` `"allow"`,
 * `"ask"` (a person was asked; the call is not denied by the policy) or `"deny"`,
 * and optionally `guard` and `reason` (strings or null) and
 * `tool_sequence`, the sequence of the tool entry it decided (as the hooks of
 * `@session-journal/claude-code` write `claude-code.decision` beside the call,
 * in the same append). A deny decision without `tool_sequence` belongs to the
 * denied call just before it. Used by `stats`, `report` and `serve` alike.
 *
 * @since 0.1.0
 */
import { Entry } from "@session-journal/core"

/**
 * What a decision entry says.
 *
 * @since 0.1.0
 */
export interface Decision {
  readonly verdict: "allow" | "ask" | "deny"
  /** The guard that denied, as denials name it (`maxStreak(3)`); null when none is recorded. */
  readonly guard: string | null
  readonly reason: string | null
  /** The sequence of the tool entry decided, when the entry says. */
  readonly toolSequence: number | null
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const strOrNull = (v: unknown): string | null => (typeof v === "string" ? v : null)

/**
 * The decision an entry records, or null when it records none (tool entries
 * never do: their verdict is `allowed`).
 *
 * @since 0.1.0
 */
export const decisionOf = (entry: Entry.Entry): Decision | null => {
  if (Entry.isTool(entry) || !isRecord(entry.payload)) return null
  const p = entry.payload
  const verdict = p["verdict"]
  if (verdict !== "allow" && verdict !== "ask" && verdict !== "deny") return null
  const seq = p["tool_sequence"]
  return {
    verdict,
    guard: strOrNull(p["guard"]),
    reason: strOrNull(p["reason"]),
    toolSequence: typeof seq === "number" && Number.isSafeInteger(seq) && seq >= 0 ? seq : null
  }
}

/**
 * The longest call id `callKey` takes (the agents' ids are tens of characters):
 * a longer one names no call, so what readers keep to pair calls does not grow
 * with a payload's size.
 *
 * @since 0.1.0
 */
export const MAX_CALL_ID_CHARS = 256

/**
 * What pairs a call's decision with its outcome, read from either's payload:
 * the agent's own call id (`tool_use_id`) where the writer names one (Claude
 * Code's and Codex's hooks), else the sequence of the call's tool entry
 * (`tool_sequence`, which a decision always records and the MCP gateway's
 * outcomes record too). Null when the payload names neither (an id longer than
 * `MAX_CALL_ID_CHARS` counts as none).
 *
 * @since 0.1.0
 */
export const callKey = (payload: unknown): string | null => {
  if (!isRecord(payload)) return null
  const id = payload["tool_use_id"]
  if (typeof id === "string" && id.length > 0 && id.length <= MAX_CALL_ID_CHARS) return `id:${id}`
  const seq = payload["tool_sequence"]
  return typeof seq === "number" && Number.isSafeInteger(seq) && seq >= 0 ? `seq:${seq}` : null
}

/**
 * One denied call: its tool entry and, when a decision entry names them, the
 * guard and the reason.
 *
 * @since 0.1.0
 */
export interface Denial {
  readonly sequence: number
  readonly tool_name: string
  readonly agent_id: string
  guard: string | null
  reason: string | null
}

/**
 * What a session's denials come to.
 *
 * @since 0.1.0
 */
export interface Result {
  /** Tool entries with `allowed: false`. */
  readonly denied: number
  /** Denied calls per guard, most first (at most `MAX_GUARDS` guards; the rest under `OTHER_GUARDS`). */
  readonly byGuard: ReadonlyArray<readonly [guard: string, count: number]>
  /** Denied calls no decision entry names a guard for (refused elsewhere, or recorded without one). */
  readonly unguarded: number
  /** The newest `MAX_RECENT` denials, oldest first. */
  readonly recent: ReadonlyArray<Denial>
}

/**
 * Distinct guards counted one by one; the rest are counted together.
 *
 * @since 0.1.0
 */
export const MAX_GUARDS = 64

/**
 * The name the guards past `MAX_GUARDS` are counted under.
 *
 * @since 0.1.0
 */
export const OTHER_GUARDS = "(other guards)"

/**
 * Denials kept with their details.
 *
 * @since 0.1.0
 */
export const MAX_RECENT = 100

// Denied calls still waiting for their decision entry (it follows in the same append).
const MAX_WAITING = 64

/**
 * A tally fed one entry at a time, in chain order.
 *
 * @since 0.1.0
 */
export interface Tally {
  readonly add: (entry: Entry.Entry) => void
  readonly result: () => Result
}

/**
 * A new, empty tally. Its memory is bounded (`MAX_GUARDS`, `MAX_RECENT`), whatever
 * the session's length.
 *
 * @since 0.1.0
 */
export const tally = (): Tally => {
  let denied = 0
  let guarded = 0
  const byGuard = new Map<string, number>()
  const recent: Array<Denial> = []
  const waiting = new Map<number, Denial>()
  const count = (guard: string) => {
    const key = byGuard.has(guard) || byGuard.size < MAX_GUARDS ? guard : OTHER_GUARDS
    byGuard.set(key, (byGuard.get(key) ?? 0) + 1)
  }
  return {
    add: (entry) => {
      if (Entry.isTool(entry)) {
        if (entry.allowed) return
        denied++
        const d: Denial = {
          sequence: entry.sequence,
          tool_name: entry.tool_name,
          agent_id: entry.agent_id,
          guard: null,
          reason: null
        }
        recent.push(d)
        if (recent.length > MAX_RECENT) recent.shift()
        waiting.set(entry.sequence, d)
        if (waiting.size > MAX_WAITING) waiting.delete(waiting.keys().next().value!)
        return
      }
      const decision = decisionOf(entry)
      if (decision === null || decision.verdict !== "deny") return
      let d: Denial | undefined
      if (decision.toolSequence !== null) d = waiting.get(decision.toolSequence)
      else {
        for (const w of waiting.values()) d = w
        d = d?.guard === null && d.reason === null && d.sequence === entry.sequence - 1 ? d : undefined
      }
      if (d === undefined) return
      waiting.delete(d.sequence)
      d.guard = decision.guard
      d.reason = decision.reason
      if (decision.guard !== null) {
        guarded++
        count(decision.guard)
      }
    },
    result: () => ({
      denied,
      byGuard: [...byGuard].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)),
      unguarded: denied - guarded,
      recent: recent.slice()
    })
  }
}
