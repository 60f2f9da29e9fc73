/**
 * The tokens a Claude Code session used, as Claude Code reports them in its
 * transcripts: every `assistant` line carries its message's `usage`, and the
 * session used `input_tokens + output_tokens + cache_creation_input_tokens +
 * cache_read_input_tokens` of each message, main agent and sub-agents together
 * (each sub-agent has its own transcript, `<project>/<session_id>/subagents/
 * agent-<id>.jsonl`). Claude Code writes one line per content block, each with
 * the same `message.id` and the message's usage (docs/claude-code/PROTOCOL.md (e)): a message is
 * counted once, by its id, and a later line of it that reports more adds only
 * the difference (a usage that grows while the message streams is counted at its
 * largest).
 *
 * `Scan` reads a transcript incrementally, like `HookRuns`: only the bytes after
 * the complete lines already counted, so the work per event does not grow with
 * the session's length. Pure: the caller brings the bytes.
 *
 * @since 0.1.0
 */

/** How many message ids a scan remembers, to count each message once (its lines are written together). */
const RECENT = 32

/**
 * What was counted so far in one transcript: the bytes of complete lines scanned,
 * the tokens of the messages in them (a decimal string, as the scan is kept as
 * JSON), and the latest messages with what each was counted at.
 *
 * @since 0.1.0
 */
export interface Scan {
  readonly offset: number
  readonly tokens: string
  readonly recent: ReadonlyArray<readonly [id: string, counted: string]>
}

/**
 * The scan of nothing.
 *
 * @since 0.1.0
 */
export const empty: Scan = { offset: 0, tokens: "0", recent: [] }

const FIELDS = ["input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"] as const

/**
 * The message id and the tokens one transcript line (or stream-json message)
 * reports for an assistant message, or null when it reports none. Counts that are
 * not non-negative safe integers count 0.
 *
 * @since 0.1.0
 */
export const usageOf = (line: string): { readonly id: string; readonly tokens: bigint } | null => {
  // Cheap tests first: most lines are not assistant messages.
  if (!line.includes("\"assistant\"") || !line.includes("\"usage\"")) return null
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch {
    return null
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return null
  const o = parsed as Record<string, unknown>
  if (o["type"] !== "assistant") return null
  const message = o["message"]
  if (typeof message !== "object" || message === null || Array.isArray(message)) return null
  const m = message as Record<string, unknown>
  const usage = m["usage"]
  if (typeof usage !== "object" || usage === null || Array.isArray(usage)) return null
  let tokens = 0n
  for (const f of FIELDS) {
    const n = (usage as Record<string, unknown>)[f]
    if (typeof n === "number" && Number.isSafeInteger(n) && n > 0) tokens += BigInt(n)
  }
  return { id: typeof m["id"] === "string" ? m["id"] : "", tokens }
}

const parseCount = (text: string): bigint => {
  try {
    const n = BigInt(text)
    return n < 0n ? 0n : n
  } catch {
    return 0n
  }
}

/**
 * The scan extended by `bytes`, the transcript's bytes from `scan.offset` on: its
 * complete lines are counted, a last line without its newline is left for later.
 *
 * @since 0.1.0
 */
export const extend = (scan: Scan, bytes: Uint8Array): Scan => extendBy(usageOf)(scan, bytes)

/**
 * `extend` for another agent's lines: `usage` gives the id and the tokens a line
 * reports (null: none), and each id is counted once, at its largest, as
 * `extend` counts Claude Code's messages (Codex's rollouts report each model
 * response once, by its id).
 *
 * @since 0.1.0
 */
export const extendBy = (
  usage: (line: string) => { readonly id: string; readonly tokens: bigint } | null
) =>
(scan: Scan, bytes: Uint8Array): Scan => {
  const end = bytes.lastIndexOf(0x0a)
  if (end < 0) return scan
  const decoder = new TextDecoder()
  let tokens = parseCount(scan.tokens)
  const recent = scan.recent.map(([id, counted]) => [id, counted] as [string, string])
  let start = 0
  while (start <= end) {
    const nl = bytes.indexOf(0x0a, start)
    const used = usage(decoder.decode(bytes.subarray(start, nl)))
    if (used !== null) {
      const at = used.id === "" ? -1 : recent.findIndex(([id]) => id === used.id)
      if (at < 0) {
        tokens += used.tokens
        if (used.id !== "") {
          recent.push([used.id, used.tokens.toString()])
          if (recent.length > RECENT) recent.shift()
        }
      } else {
        const counted = parseCount(recent[at]![1])
        if (used.tokens > counted) {
          tokens += used.tokens - counted
          recent[at] = [used.id, used.tokens.toString()]
        }
      }
    }
    start = nl + 1
  }
  return { offset: scan.offset + end + 1, tokens: tokens.toString(), recent }
}

/**
 * Whether `u` is a scan as `extend` makes them (a kept one is a claim, checked
 * before it is used).
 *
 * @since 0.1.0
 */
export const isScan = (u: unknown): u is Scan => {
  if (typeof u !== "object" || u === null || Array.isArray(u)) return false
  const o = u as Record<string, unknown>
  return Number.isSafeInteger(o["offset"]) && (o["offset"] as number) >= 0 && typeof o["tokens"] === "string" &&
    /^[0-9]{1,30}$/.test(o["tokens"]) && Array.isArray(o["recent"]) && o["recent"].length <= RECENT &&
    o["recent"].every((r) =>
      Array.isArray(r) && r.length === 2 && typeof r[0] === "string" && typeof r[1] === "string" &&
      /^[0-9]{1,30}$/.test(r[1])
    )
}

/**
 * The tokens of a scan.
 *
 * @since 0.1.0
 */
export const tokensOf = (scan: Scan): bigint => parseCount(scan.tokens)
