/**
 * How many calls our hooks allowed in a Claude Code session, by Claude Code's own
 * account. Claude Code records every hook run in the session's transcript, as an
 * `attachment` line: `{"type":"hook_success","hookEvent":"PreToolUse",
 * "toolUseID":…,"stdout":"{}","exitCode":0,"command":"…"}`. A PreToolUse that our
 * hook (`claude-code hook`, or the guard's forwarder `claude-code forward`)
 * answered `{}` allowed a call that the hook had recorded on the chain before it
 * answered; so the journal of the session holds at least as many tool entries as
 * the transcript shows distinct calls allowed by our hooks (sub-agents' calls are
 * in the same journal and in their own transcripts, so the journal may hold more;
 * our hooks installed twice, in the user's and the project's settings, allow one
 * call twice, counted once). A journal with fewer vanished or shrank.
 *
 * `Scan` reads a transcript incrementally: only the bytes after the complete lines
 * already counted, so the work per event does not grow with the session's length;
 * a transcript shorter than what was scanned is scanned again from its start.
 * Pure: the caller brings the bytes.
 *
 * @since 0.1.0
 */

/** The commands of our hooks, as installed (directly, or behind the wrapper). */
const OURS = /claude-code (hook|forward)\b/

/**
 * Whether one transcript line records a PreToolUse that one of our hooks allowed.
 *
 * @since 0.1.0
 */
export const isAllowedByUs = (line: string): boolean => allowedCallOf(line) !== null

/**
 * The call (its `toolUseID`) one transcript line records one of our hooks
 * allowing, or null.
 *
 * @since 0.1.0
 */
export const allowedCallOf = (line: string): string | null => {
  // Cheap tests first: most lines are not hook attachments.
  if (!line.includes("\"hook_success\"") || !line.includes("PreToolUse")) return null
  let parsed: unknown
  try {
    parsed = JSON.parse(line)
  } catch {
    return null
  }
  if (typeof parsed !== "object" || parsed === null) return null
  const a = (parsed as Record<string, unknown>)["attachment"]
  if (typeof a !== "object" || a === null) return null
  const o = a as Record<string, unknown>
  const ours = o["type"] === "hook_success" && o["hookEvent"] === "PreToolUse" && o["exitCode"] === 0 &&
    typeof o["stdout"] === "string" && o["stdout"].trim() === "{}" &&
    typeof o["command"] === "string" && OURS.test(o["command"])
  return ours ? (typeof o["toolUseID"] === "string" ? o["toolUseID"] : "") : null
}

/** How many call ids a scan remembers to count each call once (our hooks may be installed twice). */
const RECENT = 64

/**
 * What was counted so far: the bytes of complete lines scanned and the calls our
 * hooks allowed in them.
 *
 * @since 0.1.0
 */
export interface Scan {
  readonly offset: number
  /** Distinct calls allowed (several of our hooks allowing one call count once). */
  readonly allowed: number
  /** The ids of the latest calls counted, for that. */
  readonly recent: ReadonlyArray<string>
}

/**
 * The scan of nothing.
 *
 * @since 0.1.0
 */
export const empty: Scan = { offset: 0, allowed: 0, recent: [] }

/**
 * The scan extended by `bytes`, the transcript's bytes from `scan.offset` on: its
 * complete lines are counted, a last line without its newline is left for later.
 *
 * @since 0.1.0
 */
export const extend = (scan: Scan, bytes: Uint8Array): Scan => {
  const end = bytes.lastIndexOf(0x0a)
  if (end < 0) return scan
  const decoder = new TextDecoder()
  let allowed = scan.allowed
  const recent = [...scan.recent]
  let start = 0
  while (start <= end) {
    const nl = bytes.indexOf(0x0a, start)
    const id = allowedCallOf(decoder.decode(bytes.subarray(start, nl)))
    // The attachments of one call's hooks are written together: an id seen among
    // the latest is the same call allowed by another of our hooks.
    if (id !== null && (id === "" || !recent.includes(id))) {
      allowed++
      if (id !== "") {
        recent.push(id)
        if (recent.length > RECENT) recent.shift()
      }
    }
    start = nl + 1
  }
  return { offset: scan.offset + end + 1, allowed, recent }
}
