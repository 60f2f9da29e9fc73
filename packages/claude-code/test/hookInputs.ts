/**
 * Hook inputs as Claude Code sends them, for the tests of `Hook`: the common
 * fields of one session in `/tmp/x/work`, a PreToolUse, and their decoding.
 */
import * as Result from "effect/Result"
import * as Hook from "../src/Hook.ts"

/** The working directory of the inputs. */
export const W = "/tmp/x/work"

/** The inputs of the session `sid`. */
export const inputsOf = (sid: string) => {
  const base = (name: string, extra: Record<string, unknown> = {}) => ({
    session_id: sid,
    transcript_path: `/home/u/.claude/projects/-tmp-x-work/${sid}.jsonl`,
    cwd: W,
    hook_event_name: name,
    ...extra
  })
  const pre = (tool: string, input: Record<string, unknown>, id: string, extra: Record<string, unknown> = {}) =>
    base("PreToolUse", { tool_name: tool, tool_input: input, tool_use_id: id, ...extra })
  return { base, pre }
}

/** An input decoded by `Hook.decode` (which must succeed). */
export const decode = (value: unknown): Hook.HookEvent => {
  const r = Hook.decode(new TextEncoder().encode(JSON.stringify(value)))
  if (Result.isFailure(r)) throw new Error(r.failure.message)
  return r.success
}
