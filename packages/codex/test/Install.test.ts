/**
 * Our block in Codex's config.toml as a text edit: every other byte kept,
 * idempotent, removed back to the bytes from before (also for a file without a
 * final newline), clashing settings refused; trust written in our block or in
 * place of a stale `trusted_hash` of our key. Properties over arbitrary texts
 * made of TOML-ish lines.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Install from "../src/Install.ts"

const block = Install.hooksBlock((event) => `/bin/sh -c 'x' session-journal-hook ${event} f node sj codex hook`)

const USER = `model = "gpt-5.5"

[model_providers.fake]
name = "fake" # a comment
base_url = "http://127.0.0.1:1/v1"
`

// Lines a config may hold (not our markers, nothing that sets hooks as a value).
const line = fc.oneof(
  fc.constantFrom("", "# comment", "[features]", "plugins = false", "[[hooks.Stop]]", "[hooks.state.\"k\"]", "x = 1\r"),
  fc.string({ maxLength: 20 }).filter((s) => !s.includes("\n") && !s.includes("session-journal") && !/hooks|=/.test(s))
)
const text = fc.tuple(fc.array(line, { maxLength: 12 }), fc.boolean()).map(([ls, nl]) =>
  ls.join("\n") + (nl && ls.length > 0 ? "\n" : "")
)

describe("Install text", () => {
  it("keeps every byte, is idempotent, and uninstalls back to the same bytes (property)", () => {
    fc.assert(
      fc.property(text, (t) => {
        const once = Install.installText(t, block)
        return once.startsWith(t.endsWith("\n") || t === "" ? t : `${t}\n`) &&
          Install.installText(once, block) === once &&
          Install.removeText(once) === t &&
          Install.removeText(Install.trustText(once, [{ key: "k:pre_tool_use:0:0", hash: "sha256:ab" }])) === t
      }),
      { numRuns: 500 }
    )
  })

  it("gives back a file that was one newline, or one line without its newline, after install and trust", () => {
    // Both were lost before: the block found at offset 0, the later block removed after the earlier one.
    for (const t of ["\n", " ", "a = 1", "a = 1\n"]) {
      const trusted = Install.trustText(Install.installText(t, block), [{ key: "k", hash: "sha256:0" }])
      assert.strictEqual(Install.removeText(trusted), t)
    }
  })

  it("replaces the block where it is when installed again with other commands", () => {
    const once = Install.installText(USER, block) + "[extra]\na = 1\n"
    const other = Install.hooksBlock(() => "other")
    const twice = Install.installText(once, other)
    assert.isTrue(twice.startsWith(USER))
    assert.isTrue(twice.endsWith("[extra]\na = 1\n"))
    assert.include(twice, `command = "other"`)
    assert.notInclude(twice, "session-journal-hook")
  })

  it("refuses a file that sets hooks or one of our events as a value", () => {
    for (
      const t of [
        `hooks = { PreToolUse = [] }\n`,
        `[hooks]\nPreToolUse = [{ hooks = [] }]\n`,
        `hooks.PostToolUse = []\n`,
        `[hooks.PreToolUse]\nmatcher = "x"\n`,
        `[ "hooks" . "PostToolUse" ]\n`,
        `[[hooks]]\nx = 1\n`
      ]
    ) {
      assert.throws(() => Install.installText(t, block), /cannot extend/)
    }
    // Tables of the same events are extended, not refused.
    assert.include(Install.installText(`[[hooks.PreToolUse]]\nmatcher = "x"\n`, block), "[[hooks.PreToolUse]]")
  })

  it("quotes commands as TOML basic strings", () => {
    const b = Install.hooksBlock(() => `a "b" \\ c\u007f`)
    assert.include(b, `command = "a \\"b\\" \\\\ c\\u007f"`)
  })

  it("writes trust in its block, or in place of a stale trusted_hash of the same key", () => {
    const key = "/h/.codex/config.toml:pre_tool_use:0:0"
    const fresh = Install.trustText(USER, [{ key, hash: "sha256:1" }])
    assert.isTrue(fresh.startsWith(USER))
    assert.include(fresh, `[hooks.state."${key}"]\ntrusted_hash = "sha256:1"\n`)
    const stale = `${USER}\n[hooks.state."${key}"]\ntrusted_hash = "sha256:old"\n`
    const updated = Install.trustText(stale, [{ key, hash: "sha256:2" }])
    assert.strictEqual(updated, `${USER}\n[hooks.state."${key}"]\ntrusted_hash = "sha256:2"\n`)
    // Trusting again replaces our block, never adds a second table of a key.
    const again = Install.trustText(fresh, [{ key, hash: "sha256:3" }])
    assert.strictEqual(again.split(`[hooks.state."${key}"]`).length, 2)
    assert.include(again, `"sha256:3"`)
  })

  it("says whether Codex will run a hook as Codex reports it", () => {
    const hook = {
      key: "k",
      eventName: "preToolUse",
      command: "c",
      sourcePath: "/f",
      enabled: true,
      isManaged: false,
      currentHash: "sha256:0",
      trustStatus: "trusted"
    }
    assert.isTrue(Install.willRun(hook))
    assert.isFalse(Install.willRun({ ...hook, trustStatus: "modified" }))
    assert.isFalse(Install.willRun({ ...hook, trustStatus: "untrusted" }))
    assert.isFalse(Install.willRun({ ...hook, enabled: false }))
    assert.deepStrictEqual(Install.ours({ hooks: [hook, { ...hook, command: "d" }], problems: [] }, ["c"]), [hook])
  })
})
