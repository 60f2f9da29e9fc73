/**
 * `HookRuns`: the PreToolUse runs our hooks answered `{}`, counted from a
 * transcript's attachment lines, the same however the bytes arrive.
 */
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { HookRuns } from "../src/index.ts"

const attachment = (fields: Record<string, unknown>) =>
  JSON.stringify({
    type: "attachment",
    attachment: {
      type: "hook_success",
      hookName: "PreToolUse:Bash",
      toolUseID: "toolu_1",
      hookEvent: "PreToolUse",
      stdout: "{}",
      exitCode: 0,
      command: "/bin/sh -c '…' session-journal-hook PreToolUse x /usr/bin/node /opt/sj.js claude-code hook --root /j",
      ...fields
    }
  })

const ours = attachment({})
const others = [
  attachment({ command: "/usr/local/bin/other-hook" }),
  attachment({ stdout: JSON.stringify({ hookSpecificOutput: { permissionDecision: "deny" } }) }),
  attachment({ hookEvent: "PostToolUse" }),
  attachment({ type: "hook_non_blocking_error", exitCode: 1 }),
  JSON.stringify({ type: "assistant", message: { content: [{ type: "tool_use", id: "x" }] } }),
  "not json hook_success PreToolUse"
]

describe("HookRuns", () => {
  it("counts only the PreToolUse runs our hooks (command or forwarder) answered {}", () => {
    expect(HookRuns.isAllowedByUs(ours)).toBe(true)
    expect(HookRuns.isAllowedByUs(attachment({ command: "session-journal claude-code forward --url u" }))).toBe(true)
    for (const line of others) expect(HookRuns.isAllowedByUs(line), line).toBe(false)
  })

  it("counts a call allowed by two of our hooks (user and project settings) once", () => {
    const twice = [ours, ours, attachment({ toolUseID: "toolu_2" }), attachment({ toolUseID: "toolu_2" })]
    const scan = HookRuns.extend(HookRuns.empty, new TextEncoder().encode(twice.map((l) => l + "\n").join("")))
    expect(scan.allowed).toBe(2)
  })

  it("counts the same however the transcript is cut into reads, and leaves a last unfinished line for later", () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom("ours", ...others), { maxLength: 30 }).map((ls) =>
          ls.map((l, i) => (l === "ours" ? attachment({ toolUseID: `toolu_${i}` }) : l))
        ),
        fc.array(fc.nat(), { maxLength: 8 }),
        fc.boolean(),
        (lines, cuts, unfinished) => {
          const text = lines.map((l) => l + "\n").join("") + (unfinished ? ours : "")
          const bytes = new TextEncoder().encode(text)
          let scan = HookRuns.empty
          let carry = new Uint8Array(0)
          const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)
          let at = 0
          for (const p of [...points, bytes.length]) {
            const chunk = new Uint8Array([...carry, ...bytes.subarray(at, p)])
            const next = HookRuns.extend(scan, chunk)
            carry = chunk.subarray(next.offset - scan.offset)
            scan = next
            at = p
          }
          expect(scan.allowed).toBe(lines.filter((l) => HookRuns.isAllowedByUs(l)).length)
          expect(scan.offset).toBe(bytes.length - (unfinished ? new TextEncoder().encode(ours).length : 0))
        }
      )
    )
  })
})
