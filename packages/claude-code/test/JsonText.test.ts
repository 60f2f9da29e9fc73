/**
 * The text-preserving settings editor (`internal/jsonText.ts`, used by
 * `Install.installText` and `Install.removeText`), property-tested on random
 * settings files: odd number spellings (`12345678901234567890`, `1.50`, `-0`,
 * `1E+2`), escaped strings, comments, trailing commas, tabs and CRLF. Install then
 * uninstall gives back the same bytes; install only inserts (the original is
 * kept, byte for byte, around the inserted text); installing twice changes
 * nothing; the result reads as the expected settings.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Install from "../src/Installer.ts"
import * as JsonText from "../src/internal/jsonText.ts"

import { anyValue, array, type Doc, key, object, seed, string, trivia } from "./jsonDocs.ts"

const theirHook = fc.record({
  type: fc.constant("command"),
  command: fc.constantFrom("/usr/local/bin/audit-bash", "notify-send \"hi\"", "echo '$x'"),
  timeout: fc.constantFrom(5, 1.5)
}).map((h): Doc => ({
  text: `{"type": "command", "command": ${JSON.stringify(h.command)}, "timeout": ${h.timeout === 5 ? "5" : "1.50"}}`,
  value: h
}))
// Our hooks as earlier versions wrote them (unwrapped) and as this one does.
const ourHook = fc.constantFrom(
  "/usr/bin/node /opt/sj/bin/session-journal.js claude-code hook --root /j",
  "'/opt/my node/node' '/opt/sj/session-journal.js' claude-code forward --url http://127.0.0.1:18787/hook",
  Install.hookCommand(["session-journal"], { event: "Stop" })
).map((command): Doc => ({
  text: `{"type": "command", "command": ${JSON.stringify(command)}, "timeout": 60}`,
  value: { type: "command", command, timeout: 60 }
}))
const groupOf = (hook: fc.Arbitrary<Doc>) =>
  object(fc.tuple(string, array(hook)).map(([m, hs]) => [["matcher", m], ["hooks", hs]] as const))
const hooksObjectOf = (group: fc.Arbitrary<Doc>) =>
  object(
    fc.uniqueArray(fc.tuple(fc.constantFrom(...Install.EVENTS, "Notification", "PermissionRequest"), array(group)), {
      maxLength: 5,
      selector: ([k]) => k
    })
  )
const settingsOf = (hooksObject: fc.Arbitrary<Doc>): fc.Arbitrary<Doc> =>
  fc.tuple(
    fc.uniqueArray(fc.tuple(key, anyValue), { maxLength: 4, selector: ([k]) => k }),
    fc.option(hooksObject, { nil: undefined }),
    fc.nat(4),
    trivia,
    trivia
  ).chain(([members, hooks, at, before, after]) => {
    const all: Array<readonly [string, Doc]> = [...members]
    if (hooks !== undefined) all.splice(Math.min(at, all.length), 0, ["hooks", hooks])
    return object(fc.constant(all)).map((d) => ({ text: before + d.text + after, value: d.value }))
  })
const settings = settingsOf(hooksObjectOf(fc.oneof(groupOf(theirHook), anyValue)))
const settingsWithOurs = settingsOf(hooksObjectOf(fc.oneof(groupOf(fc.oneof(theirHook, ourHook)), anyValue)))

// An event whose list is empty says nothing, nor does an empty hooks object.
const normal = (x: Record<string, unknown>): unknown => {
  const hooks = x["hooks"]
  if (typeof hooks !== "object" || hooks === null || Array.isArray(hooks)) return x
  const kept = Object.fromEntries(Object.entries(hooks).filter(([, v]) => !(Array.isArray(v) && v.length === 0)))
  const { hooks: _, ...rest } = x
  return Object.keys(kept).length === 0 ? rest : { ...rest, hooks: kept }
}

const hookFor = (event: string) => ({
  type: "command",
  command: Install.hookCommand(["session-journal"], { policy: Install.projectPath("p.json"), event }),
  timeout: 60
})

const expected = (value: Record<string, unknown>): unknown => {
  const hooks = { ...(value["hooks"] as Record<string, ReadonlyArray<unknown>> | undefined) }
  for (const event of Install.EVENTS) hooks[event] = [...(hooks[event] ?? []), { matcher: "", hooks: [hookFor(event)] }]
  return { ...value, hooks }
}

const isSubsequence = (small: string, big: string): boolean => {
  let i = 0
  for (let j = 0; j < big.length && i < small.length; j++) if (big[j] === small[i]) i++
  return i === small.length
}

const plainJson = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

describe("the settings editor (property)", () => {
  it("parses what it generates to the generated value", () => {
    fc.assert(
      fc.property(settings, (doc) => {
        assert.deepStrictEqual(JsonText.toValue(JsonText.parse(doc.text)), doc.value)
        const plain = plainJson(doc.text)
        if (plain !== undefined) assert.deepStrictEqual(plain, doc.value)
      }),
      { seed, verbose: true, numRuns: Number(process.env["FC_RUNS"] ?? 100) }
    )
  })

  it("install only inserts, is idempotent, reads as expected; uninstall gives back the original bytes", () => {
    fc.assert(
      fc.property(settings, (doc) => {
        const installed = Install.installText(doc.text, hookFor)
        assert.isTrue(isSubsequence(doc.text, installed), "a byte of the original is gone")
        assert.strictEqual(Install.installText(installed, hookFor), installed)
        const want = expected(doc.value as Record<string, unknown>)
        assert.deepStrictEqual(Install.readText(installed), want)
        // Where the original is plain JSON, so is the result.
        if (plainJson(doc.text) !== undefined) assert.deepStrictEqual(JSON.parse(installed), want)
        assert.strictEqual(Install.removeText(installed), doc.text)
        assert.strictEqual(Install.removeText(doc.text), doc.text)
      }),
      { seed, verbose: true, numRuns: Number(process.env["FC_RUNS"] ?? 100) }
    )
  })
})

describe("the settings editor on files holding our hooks (property)", () => {
  it("uninstall takes out exactly ours, old forms too; install on top reads as expected", () => {
    fc.assert(
      fc.property(settingsWithOurs, (doc) => {
        const removed = Install.removeText(doc.text)
        const value = doc.value as Record<string, never>
        assert.deepStrictEqual(normal(Install.readText(removed)), normal(Install.remove(value)))
        assert.strictEqual(Install.removeText(removed), removed)
        const installed = Install.installText(doc.text, hookFor)
        assert.strictEqual(Install.installText(installed, hookFor), installed)
        assert.deepStrictEqual(
          normal(Install.readText(installed) as Record<string, unknown>),
          normal(Install.merge(value, hookFor) as Record<string, unknown>)
        )
      }),
      { seed, verbose: true, numRuns: Number(process.env["FC_RUNS"] ?? 100) }
    )
  })
})

describe("the settings editor (examples)", () => {
  const one = (event: string) => ({ type: "command", command: `session-journal claude-code hook # ${event}` })

  it("keeps numbers, comments, key order and indentation; inserts in the file's own style", () => {
    const text = [
      "{",
      "    // my settings",
      "    \"big\": 12345678901234567890,",
      "    \"price\": 1.50,",
      "    \"hooks\": {",
      "        \"Stop\": [",
      "            { \"matcher\": \"\", \"hooks\": [] }",
      "        ],",
      "        \"PreToolUse\": [],",
      "    },",
      "}",
      ""
    ].join("\n")
    const out = Install.installText(text, one, ["Stop", "PreToolUse", "SessionEnd"])
    assert.strictEqual(
      out,
      [
        "{",
        "    // my settings",
        "    \"big\": 12345678901234567890,",
        "    \"price\": 1.50,",
        "    \"hooks\": {",
        "        \"Stop\": [",
        "            { \"matcher\": \"\", \"hooks\": [] },",
        "            {",
        "                \"matcher\": \"\",",
        "                \"hooks\": [",
        "                    {",
        "                        \"type\": \"command\",",
        "                        \"command\": \"session-journal claude-code hook # Stop\"",
        "                    }",
        "                ]",
        "            }",
        "        ],",
        "        \"PreToolUse\": [{",
        "            \"matcher\": \"\",",
        "            \"hooks\": [",
        "                {",
        "                    \"type\": \"command\",",
        "                    \"command\": \"session-journal claude-code hook # PreToolUse\"",
        "                }",
        "            ]",
        "        }],",
        "        \"SessionEnd\": [",
        "            {",
        "                \"matcher\": \"\",",
        "                \"hooks\": [",
        "                    {",
        "                        \"type\": \"command\",",
        "                        \"command\": \"session-journal claude-code hook # SessionEnd\"",
        "                    }",
        "                ]",
        "            }",
        "        ],",
        "    },",
        "}",
        ""
      ].join("\n")
    )
    assert.strictEqual(Install.removeText(out), text)
  })

  it("uses tabs and CRLF when the file does", () => {
    const text = "{\r\n\t\"model\": \"x\"\r\n}\r\n"
    const out = Install.installText(text, one, ["Stop"])
    assert.strictEqual(
      out,
      "{\r\n\t\"model\": \"x\",\r\n\t\"hooks\": {\r\n\t\t\"Stop\": [\r\n\t\t\t{\r\n\t\t\t\t\"matcher\": \"\",\r\n" +
        "\t\t\t\t\"hooks\": [\r\n\t\t\t\t\t{\r\n\t\t\t\t\t\t\"type\": \"command\",\r\n" +
        "\t\t\t\t\t\t\"command\": \"session-journal claude-code hook # Stop\"\r\n\t\t\t\t\t}\r\n\t\t\t\t]\r\n" +
        "\t\t\t}\r\n\t\t]\r\n\t}\r\n}\r\n"
    )
    assert.strictEqual(Install.removeText(out), text)
  })

  it("an empty or missing file gets a new document; uninstall leaves an empty object", () => {
    const out = Install.installText("", one, ["Stop"])
    assert.deepStrictEqual(JSON.parse(out), { hooks: { Stop: [{ matcher: "", hooks: [one("Stop")] }] } })
    assert.strictEqual(Install.removeText(out), "{}\n")
  })

  it("removes the earlier unwrapped forms too, and only ours from a group shared with other hooks", () => {
    const old = "/usr/bin/node /opt/sj/bin/session-journal.js claude-code hook --root /j"
    const text = JSON.stringify(
      {
        model: "m",
        hooks: {
          PreToolUse: [
            { matcher: "Bash", hooks: [{ type: "command", command: "audit" }] },
            { matcher: "", hooks: [{ type: "command", command: old, timeout: 60 }] }
          ],
          Stop: [{ matcher: "", hooks: [{ type: "command", command: old }, { type: "command", command: "mine" }] }],
          SessionEnd: [{ matcher: "", hooks: [{ type: "command", command: old }] }]
        }
      },
      null,
      2
    )
    assert.deepStrictEqual(JSON.parse(Install.removeText(text)), {
      model: "m",
      hooks: {
        PreToolUse: [{ matcher: "Bash", hooks: [{ type: "command", command: "audit" }] }],
        Stop: [{ matcher: "", hooks: [{ type: "command", command: "mine" }] }]
      }
    })
  })

  it("refuses what is not settings, saying why", () => {
    for (
      const [text, why] of [
        ["[1, 2]", /not a JSON object/],
        ["{\"hooks\": []}", /hooks is not an object/],
        ["{\"a\": 1,, }", /expected a key/],
        ["{\"a\": 01}", /expected ','/],
        ["{} x", /unexpected text/],
        ["{/* open", /unterminated comment/],
        ["{\"a\": \"\\x\"}", /invalid string/]
      ] as const
    ) {
      assert.throws(() => Install.installText(text, one), Install.SettingsTextError, why)
    }
    assert.throws(() => Install.installText("{\"hooks\": {\"Stop\": 1}}", one), /hooks\.Stop is not a list/)
  })
})
