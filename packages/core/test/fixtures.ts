/**
 * Test fixtures shared by every package's tests: the parameters of a tool call
 * with small defaults, overridden where a test needs other values. Other packages
 * import this module as `@session-journal/core/test/fixtures`.
 */
import type { Entry, Guard } from "../src/index.ts"

/**
 * The parameters of one call of `tool_name` (default "read_file"): server "srv",
 * agent "agent", 1 byte read, none written, depth 0, each overridden by `extra`.
 */
export const toolParams = (tool_name = "read_file", extra: Partial<Entry.ToolParams> = {}): Entry.ToolParams => ({
  tool_name,
  server_id: "srv",
  agent_id: "agent",
  bytes_read: 1,
  bytes_written: 0,
  delegation_depth: 0,
  ...extra
})

/**
 * The `i`th call of a run that cycles through three tools: `tool-${i % 3}`, `i`
 * bytes read, 1 written, overridden by `extra`.
 */
export const nthToolParams = (i: number, extra: Partial<Entry.ToolParams> = {}): Entry.ToolParams =>
  toolParams(`tool-${i % 3}`, { bytes_read: i, bytes_written: 1, ...extra })

/**
 * A guard that allows every call and counts the calls in its state (`{ n }`), giving
 * a new state each time: each decision stores a `guard.state` entry.
 */
export const countingGuard: Guard.Guard = (_s, _p, c) => {
  const n = typeof c?.state?.["n"] === "number" ? c.state["n"] : 0
  return { _tag: "Allow", state: { n: n + 1 } }
}

/** The bytes of `parts`, one after another. */
export const concatBytes = (...parts: ReadonlyArray<Uint8Array>): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}
