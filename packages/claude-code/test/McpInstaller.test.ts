/**
 * The MCP servers of a `.mcp.json` put through the gateway and taken out of it
 * (`McpInstaller`, `internal/mcpServers.ts`), property-tested on random files as
 * the settings editor is (`JsonText.test.ts`): stdio servers with and without
 * `args` (empty, spaced, commented), HTTP servers with headers, servers the
 * gateway cannot reach, other members and odd spellings everywhere. Install
 * reads as every reachable server wrapped and everything else as it was, is
 * idempotent, and uninstall gives back the original bytes; then the file on
 * disk: a link written through, a backup, status.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Effect from "effect/Effect"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as JsonText from "../src/internal/jsonText.ts"
import * as McpInstaller from "../src/McpInstaller.ts"
import { anyValue, array, type Doc, key, object, seed, string, trivia } from "./jsonDocs.ts"

const runs = Number(process.env["FC_RUNS"] ?? 100)

const words = fc.oneof(
  fc.constantFrom("npx", "-y", "@modelcontextprotocol/server-github", "${HOME}/bin/srv", "--", "mcp", "a b"),
  fc.string({ maxLength: 6 })
)
const wordDoc = fc.oneof(
  words.map((w): Doc => ({ text: JSON.stringify(w), value: w })),
  fc.constantFrom<Doc>({ text: "\"n\\u0070x\"", value: "npx" }, {
    text: "\"\\/usr\\/bin\\/node\"",
    value: "/usr/bin/node"
  })
)
const extra = (taken: ReadonlyArray<string>) =>
  fc.uniqueArray(fc.tuple(key.filter((k) => !taken.includes(k)), anyValue), { maxLength: 2, selector: ([k]) => k })

const shuffled = <A>(items: ReadonlyArray<A>) =>
  fc.shuffledSubarray([...items], { minLength: items.length, maxLength: items.length })

const stdio: fc.Arbitrary<Doc> = fc.tuple(
  wordDoc.filter((d) => d.value !== ""),
  fc.option(array(wordDoc, 3), { nil: undefined }),
  fc.option(fc.constantFrom<Doc>({ text: "\"stdio\"", value: "stdio" }), { nil: undefined }),
  extra(["command", "args", "type", "url"])
).chain(([command, args, type, others]) =>
  shuffled<readonly [string, Doc]>([
    ["command", command],
    ...(args === undefined ? [] : [["args", args] as const]),
    ...(type === undefined ? [] : [["type", type] as const]),
    ...others
  ]).chain((ms) => object(fc.constant(ms)))
)

const http: fc.Arbitrary<Doc> = fc.tuple(
  string,
  fc.option(
    object(fc.uniqueArray(fc.tuple(fc.constantFrom("Authorization", "X-Key"), wordDoc), {
      selector: ([k]) => k,
      maxLength: 2
    })),
    { nil: undefined }
  ),
  extra(["command", "args", "type", "url", "headers"])
).chain(([url, headers, others]) =>
  shuffled<readonly [string, Doc]>([
    ["type", { text: "\"http\"", value: "http" }],
    ["url", url],
    ...(headers === undefined ? [] : [["headers", headers] as const]),
    ...others
  ]).chain((ms) => object(fc.constant(ms)))
)

const unreachable: fc.Arbitrary<Doc> = fc.oneof(
  object(
    fc.constant(
      [["type", { text: "\"sse\"", value: "sse" }], ["url", {
        text: "\"https://x/sse\"",
        value: "https://x/sse"
      }]] as const
    )
  ),
  anyValue
)

const serverName = fc.oneof(fc.constantFrom("github", "fs", "my server", "é"), fc.string({ maxLength: 4 }))
  .filter((k) => k !== "__proto__")

const mcpJson: fc.Arbitrary<Doc> = fc.tuple(
  fc.uniqueArray(fc.tuple(key.filter((k) => k !== "mcpServers"), anyValue), { maxLength: 2, selector: ([k]) => k }),
  fc.option(
    object(
      fc.uniqueArray(fc.tuple(serverName, fc.oneof(stdio, stdio, http, unreachable)), {
        maxLength: 4,
        selector: ([k]) => k
      })
    ),
    { nil: undefined, freq: 8 }
  ),
  fc.nat(3),
  trivia,
  trivia
).chain(([members, servers, at, before, after]) => {
  const all: Array<readonly [string, Doc]> = [...members]
  if (servers !== undefined) all.splice(Math.min(at, all.length), 0, ["mcpServers", servers])
  return object(fc.constant(all)).map((d) => ({ text: before + d.text + after, value: d.value }))
})

const head = McpInstaller.gatewayHead({ policy: "policy.json" })

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const isStrings = (v: unknown): v is ReadonlyArray<string> => Array.isArray(v) && v.every((s) => typeof s === "string")

// What a JSON reader should get from the installed file.
const expected = (value: Record<string, unknown>): unknown => {
  const servers = value["mcpServers"]
  if (!isObject(servers)) return value
  const wrapped = Object.fromEntries(
    Object.entries(servers).map(([name, s]) => {
      if (!isObject(s)) return [name, s]
      const type = s["type"] ?? "stdio"
      if (
        type === "stdio" && typeof s["command"] === "string" && s["command"] !== "" &&
        (s["args"] === undefined || isStrings(s["args"]))
      ) {
        return [name, {
          ...s,
          command: "session-journal",
          args: [...head(name), "--", s["command"], ...(s["args"] as ReadonlyArray<string> ?? [])]
        }]
      }
      if (type === "http" && typeof s["url"] === "string" && s["command"] === undefined && s["args"] === undefined) {
        const headers = s["headers"] === undefined ? {} : s["headers"] as Record<string, string>
        return [name, {
          ...s,
          type: "stdio",
          command: "session-journal",
          args: [
            ...head(name),
            "--url",
            s["url"],
            ...Object.entries(headers).flatMap(([k, v]) => ["--header", `${k}: ${v}`])
          ]
        }]
      }
      return [name, s]
    })
  )
  return { ...value, mcpServers: wrapped }
}

// The value a JSON reader gets (comments and trailing commas allowed), as plain data.
const read = (text: string): unknown => JSON.parse(JSON.stringify(JsonText.toValue(JsonText.parse(text))))

describe("putting a .mcp.json's servers through the gateway (property)", () => {
  it("install reads as every reachable server wrapped, is idempotent; uninstall gives back the original bytes", () => {
    fc.assert(
      fc.property(mcpJson, (doc) => {
        const installed = McpInstaller.wrapText(doc.text, head)
        assert.strictEqual(McpInstaller.wrapText(installed, head), installed)
        assert.deepStrictEqual(
          read(installed),
          JSON.parse(JSON.stringify(expected(doc.value as Record<string, unknown>)))
        )
        assert.strictEqual(McpInstaller.unwrapText(installed), doc.text)
        assert.strictEqual(McpInstaller.unwrapText(doc.text), doc.text)
        for (const s of McpInstaller.servers(installed)) {
          const before = McpInstaller.servers(doc.text).find((b) => b.name === s.name)!
          assert.strictEqual(s.state, before.state === "direct" ? "gateway" : before.state)
        }
      }),
      { seed, verbose: true, numRuns: runs }
    )
  })
})

const isSubsequence = (small: string, big: string): boolean => {
  let i = 0
  for (let j = 0; j < big.length && i < small.length; j++) if (big[j] === small[i]) i++
  return i === small.length
}

describe("adding a server (property)", () => {
  it("only inserts, reads as the file with the server, and installs and uninstalls around it", () => {
    fc.assert(
      fc.property(
        mcpJson,
        fc.oneof(
          fc.tuple(words, fc.array(words, { maxLength: 3 })).map(([command, args]) => ({ command, args })),
          words.map((url) => ({ url }))
        ),
        (doc, server) => {
          const value = doc.value as Record<string, unknown>
          const servers = value["mcpServers"]
          const name = "added-server"
          const added = McpInstaller.addServerText(doc.text, name, server)
          assert.isTrue(isSubsequence(doc.text, added), "a byte of the original is gone")
          const entry = "url" in server ? { type: "http", url: server.url } : server
          assert.deepStrictEqual(
            read(added),
            JSON.parse(
              JSON.stringify({ ...value, mcpServers: { ...(isObject(servers) ? servers : {}), [name]: entry } })
            )
          )
          const installed = McpInstaller.wrapText(added, head)
          assert.strictEqual(McpInstaller.unwrapText(installed), added)
          assert.throws(() => McpInstaller.addServerText(added, name, server), McpInstaller.McpConfigTextError)
        }
      ),
      { seed, verbose: true, numRuns: runs }
    )
  })
})

describe("putting a .mcp.json's servers through the gateway (examples)", () => {
  it("keeps the file's layout: the command moves behind the gateway's, an HTTP server gets a stdio gateway", () => {
    const text = [
      "{",
      "  // servers of this project",
      "  \"mcpServers\": {",
      "    \"github\": { \"command\": \"npx\", \"args\": [\"-y\", \"@modelcontextprotocol/server-github\"], \"env\": { \"N\": 1.50 } },",
      "    \"plain\": { \"command\": \"/usr/bin/srv\" },",
      "    \"remote\": { \"type\": \"http\", \"url\": \"https://mcp.example/mcp\", \"headers\": { \"Authorization\": \"Bearer ${TOKEN}\" } },",
      "    \"old\": { \"type\": \"sse\", \"url\": \"https://mcp.example/sse\" },",
      "  }",
      "}",
      ""
    ].join("\n")
    const out = McpInstaller.wrapText(text, head)
    assert.strictEqual(
      out,
      [
        "{",
        "  // servers of this project",
        "  \"mcpServers\": {",
        "    \"github\": { \"command\": \"session-journal\", \"args\": [\"mcp\", \"proxy\", \"--name\", \"github\", \"--policy\", \"policy.json\", \"--\", \"npx\", \"-y\", \"@modelcontextprotocol/server-github\"], \"env\": { \"N\": 1.50 } },",
        "    \"plain\": { \"command\": \"session-journal\",",
        "      \"args\": [",
        "        \"mcp\",",
        "        \"proxy\",",
        "        \"--name\",",
        "        \"plain\",",
        "        \"--policy\",",
        "        \"policy.json\",",
        "        \"--\",",
        "        \"/usr/bin/srv\"",
        "      ] },",
        "    \"remote\": { \"type\": \"stdio\", \"url\": \"https://mcp.example/mcp\", \"headers\": { \"Authorization\": \"Bearer ${TOKEN}\" },",
        "      \"command\": \"session-journal\",",
        "      \"args\": [",
        "        \"mcp\",",
        "        \"proxy\",",
        "        \"--name\",",
        "        \"remote\",",
        "        \"--policy\",",
        "        \"policy.json\",",
        "        \"--url\",",
        "        \"https://mcp.example/mcp\",",
        "        \"--header\",",
        "        \"Authorization: Bearer ${TOKEN}\"",
        "      ] },",
        "    \"old\": { \"type\": \"sse\", \"url\": \"https://mcp.example/sse\" },",
        "  }",
        "}",
        ""
      ].join("\n")
    )
    assert.strictEqual(McpInstaller.unwrapText(out), text)
    assert.deepStrictEqual(McpInstaller.servers(out), [
      { name: "github", state: "gateway" },
      { name: "plain", state: "gateway" },
      { name: "remote", state: "gateway" },
      {
        name: "old",
        state: "unsupported",
        why: "its type is \"sse\": the gateway reaches stdio and Streamable HTTP (type \"http\") servers"
      }
    ])
  })

  it("refuses a file that is not a JSON object, or whose mcpServers is not one", () => {
    for (const text of ["[1]", "{\"mcpServers\": []}", "{\"mcpServers\": {"]) {
      assert.throws(() => McpInstaller.wrapText(text, head), McpInstaller.McpConfigTextError)
    }
  })
})

describe("install --mcp on disk", () => {
  const temp = () => fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), "sj-mcp-install-")))

  it.effect("writes through a link with a backup, reports each server; uninstall gives the bytes back", () =>
    Effect.gen(function*() {
      const dir = temp()
      const real = path.join(dir, "dotfiles.json")
      const original =
        "{\n  \"mcpServers\": {\n    \"fs\": {\"command\": \"npx\", \"args\": [\"-y\", \"srv\"]}\n  }\n}\n"
      fs.writeFileSync(real, original, { mode: 0o640 })
      const file = path.join(dir, ".mcp.json")
      fs.symlinkSync(real, file)
      const report = yield* McpInstaller.apply(file, head)
      assert.strictEqual(report.status, "installed")
      assert.strictEqual(report.target, real)
      assert.deepStrictEqual(report.servers, [{ name: "fs", state: "gateway" }])
      assert.isTrue(fs.lstatSync(file).isSymbolicLink())
      assert.strictEqual(fs.readFileSync(report.backup!, "utf8"), original)
      assert.strictEqual(fs.statSync(real).mode & 0o777, 0o640)
      assert.deepStrictEqual(yield* McpInstaller.status(file), [{ name: "fs", state: "gateway" }])
      assert.strictEqual((yield* McpInstaller.apply(file, head)).status, "unchanged")
      const removed = yield* McpInstaller.apply(file, null)
      assert.strictEqual(removed.status, "uninstalled")
      assert.strictEqual(fs.readFileSync(real, "utf8"), original)
      assert.deepStrictEqual(yield* McpInstaller.status(file), [{ name: "fs", state: "direct" }])
      fs.rmSync(dir, { recursive: true, force: true })
    }))

  it.effect("a missing file stays missing; a file it cannot read is refused unchanged", () =>
    Effect.gen(function*() {
      const dir = temp()
      const file = path.join(dir, ".mcp.json")
      assert.strictEqual((yield* McpInstaller.apply(file, head)).status, "unchanged")
      assert.isFalse(fs.existsSync(file))
      assert.deepStrictEqual(yield* McpInstaller.status(file), [])
      fs.writeFileSync(file, "{\"mcpServers\": 3}")
      const refused = yield* Effect.flip(McpInstaller.apply(file, head))
      assert.strictEqual(refused._tag, "SettingsRefused")
      assert.strictEqual(fs.readFileSync(file, "utf8"), "{\"mcpServers\": 3}")
      assert.deepStrictEqual(fs.readdirSync(dir), [".mcp.json"])
      fs.rmSync(dir, { recursive: true, force: true })
    }))
})
