/**
 * `Hook.selfProtection`, pure: a call whose input names a protected path (as a
 * path argument, resolved against its working directory, or spelled in any
 * string: absolute, relative, from the home directory) is denied with the guard
 * `selfProtection`; paths beside it are not.
 */
import * as fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Hook } from "../src/index.ts"

const cwd = "/home/u/work"
const targets: ReadonlyArray<Hook.Protected> = [
  { path: "/home/u/.local/state/session-journal", what: "the journal directory", directory: true },
  { path: "/home/u/work/policy.json", what: "the policy file", directory: false }
]
const pre = (tool_name: string, tool_input: Record<string, unknown>) =>
  Hook.Inputs.PreToolUse.make({
    session_id: "s",
    cwd,
    hook_event_name: "PreToolUse",
    tool_name,
    tool_input: tool_input as never,
    tool_use_id: "t"
  })
const verdict = (tool: string, input: Record<string, unknown>) =>
  Hook.selfProtection(pre(tool, input), targets, "/home/u")

describe("selfProtection", () => {
  it("denies every spelling of a protected path, in any string of the input", () => {
    for (
      const [tool, input] of [
        ["Bash", { command: "rm -rf /home/u/.local/state/session-journal" }],
        ["Bash", { command: "cat ~/.local/state/session-journal/x/segment" }],
        ["Bash", { command: "cp /dev/null $HOME/.local/state/session-journal/a" }],
        ["Write", { file_path: "policy.json", content: "{}" }],
        ["Write", { file_path: "./sub/../policy.json", content: "{}" }],
        ["Edit", { file_path: "/home/u/work//policy.json" }],
        ["mcp__fs__write", { args: [{ target: "/home/u/.local/state/session-journal" }] }]
      ] as const
    ) {
      const v = verdict(tool, input)
      expect(v._tag, JSON.stringify(input)).toBe("Deny")
      expect(v._tag === "Deny" ? v.guard : "").toBe(Hook.SELF_PROTECTION)
    }
  })

  it("allows paths beside the protected ones", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z]{1,8}(\/[a-z]{1,8}){0,3}$/), (rel) => {
        fc.pre(!rel.startsWith("policy"))
        expect(verdict("Write", { file_path: rel, content: "x" })._tag).toBe("Allow")
        expect(verdict("Bash", { command: `ls /home/u/.local/state/${rel}-other` })._tag).toBe("Allow")
      })
    )
    expect(verdict("Write", { file_path: "policy.json.bak", content: "" })._tag).toBe("Deny")
    expect(Hook.selfProtection(pre("Bash", { command: "rm -rf /" }), [], "/home/u")._tag).toBe("Allow")
  })

  it("denies removing, moving or changing a directory above a protected path, not naming one", () => {
    const settings: Hook.Protected = {
      path: "/home/u/work/.claude/settings.local.json",
      what: "the settings",
      directory: false
    }
    const v = (command: string) => Hook.selfProtection(pre("Bash", { command }), [...targets, settings], "/home/u")._tag
    for (
      const command of [
        "rm -rf ~/.local/state",
        "rm -rf $HOME/.local",
        "rm -rf /home/u/.local/state/",
        "rm -r .claude",
        "mv .claude /tmp/gone",
        "cd /tmp && rm -rf '/home/u/work/.claude'",
        "chmod 000 ~/.local/state/*"
      ]
    ) expect(v(command), command).toBe("Deny")
    for (
      const command of [
        "ls ~/.local/state",
        "rm -rf ~/.local/share/thing",
        "rm -rf ~/.local/state-other",
        "cat .claude/commands/x.md",
        "rm -rf node_modules"
      ]
    ) expect(v(command), command).toBe("Allow")
  })

  it("the text a file tool writes is data: a README that names the journal is no touch of it", () => {
    const doc = "Run rm -rf ~/.local/state/session-journal to reset; /home/u/work/policy.json holds the policy."
    expect(verdict("Write", { file_path: "README.md", content: doc })._tag).toBe("Allow")
    expect(verdict("Edit", { file_path: "README.md", old_string: "x", new_string: doc })._tag).toBe("Allow")
    expect(verdict("MultiEdit", { file_path: "README.md", edits: [{ old_string: "x", new_string: doc }] })._tag)
      .toBe("Allow")
    // Its path still counts, and any other tool's strings do.
    expect(verdict("Write", { file_path: "policy.json", content: "{}" })._tag).toBe("Deny")
    expect(verdict("mcp__fs__write", { path: "README.md", content: doc })._tag).toBe("Deny")
  })

  it("resolves path arguments under a protected directory", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z]{1,8}(\/[a-z]{1,8}){0,3}$/), (rel) => {
        expect(verdict("Read", { file_path: `~/.local/state/session-journal/${rel}` })._tag).toBe("Deny")
        expect(verdict("Read", { file_path: `../.local/state/session-journal/${rel}` })._tag).toBe("Deny")
      })
    )
  })
})
