/**
 * The real Claude Code CLI (offline, against the fake Messages API of
 * `@session-journal/claude-code`'s tests) using an MCP server through
 * `session-journal mcp proxy`, registered with `--mcp-config`, under a policy
 * that denies one of the server's tools: the model's call of that tool gets the
 * gateway's denial as its tool result and never reaches the server; the other
 * tool runs; the journal holds both decisions. Then the same through the
 * project's own `.mcp.json` as `claude-code install --mcp` leaves it (given to
 * Claude Code as its `--mcp-config`, started in the project): the server
 * registered there goes through the gateway (`session-journal` from PATH, the
 * policy named relative to the project), and `--uninstall` gives the file back
 * byte for byte.
 */
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import { findCache, FIXTURE_SERVER, fixtureEnv } from "@session-journal/mcp/test/mcpCache"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { BIN, run } from "./Run.ts"

const cache = findCache()

afterAll(Claude.cleanup)

const resultText = (block: Record<string, unknown>): string => {
  const content = block["content"]
  return typeof content === "string"
    ? content
    : Array.isArray(content)
    ? content.map((c) => String((c as { readonly text?: unknown }).text ?? "")).join("")
    : ""
}

// The model calls the allowed tool with `text`, then the denied one, then ends.
const script = (text: string) =>
  Fake.inOrder([
    Fake.tools({ name: "mcp__test__echo", input: { text } }),
    Fake.tools({ name: "mcp__test__write", input: { path: "/etc/hosts", text: "x" } }),
    Fake.text("done")
  ])

// What the model got back (`text` echoed, then the gateway's denial), what reached the server
// (the allowed call only), and the journal's one session with both decisions; its entries.
const deniedAtTheGateway = async (api: Fake.FakeApi, text: string, calls: string, journal: string) => {
  expect(api.connects).toEqual([])
  const results = api.requests.flatMap((q) => q.toolResults)
  expect(results).toHaveLength(2)
  expect(resultText(results[0]!)).toContain(text)
  expect(resultText(results[1]!)).toContain("session-journal denied mcp__test__write [denyList")
  expect(results[1]!["is_error"]).toBe(true)
  expect(fs.readFileSync(calls, "utf8").split("\n").filter((l) => l !== "")).toEqual(["echo"])
  const listed = await run(["--dir", journal, "--json", "list"])
  const sessions = (JSON.parse(listed.stdout) as { sessions: Array<{ id: string }> }).sessions
  expect(sessions).toHaveLength(1)
  const shown = await run(["--dir", journal, "--json", "show", sessions[0]!.id])
  const entries = shown.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>)
  const decisions = entries.filter((e) => e["kind"] === "mcp.decision").map((e) =>
    e["payload"] as Record<string, unknown>
  )
  expect(decisions.map((d) => [d["tool_name"], d["verdict"]])).toEqual([
    ["mcp__test__echo", "allow"],
    ["mcp__test__write", "deny"]
  ])
  return entries
}

// Real servers and clients, started per case: on a busy machine a case takes long, and its
// outcome must not depend on how long.
describe.skipIf(Claude.CLAUDE_BIN === null || cache === null)(
  "Claude Code through mcp proxy",
  { timeout: 600_000 },
  () => {
    it("a policy denies one MCP tool: Claude Code gets the denial, the server never sees the call", async () => {
      const api = await Fake.start(script("hello from claude"))
      try {
        const root = Claude.tempDir()
        const journal = path.join(root, "journal")
        const calls = path.join(root, "calls.log")
        const policy = path.join(root, "policy.json")
        fs.writeFileSync(policy, JSON.stringify({ denyList: ["mcp__test__write"] }))
        const config = path.join(root, "mcp.json")
        fs.writeFileSync(
          config,
          JSON.stringify({
            mcpServers: {
              test: {
                command: process.execPath,
                args: [
                  BIN,
                  "--dir",
                  journal,
                  "mcp",
                  "proxy",
                  "--policy",
                  policy,
                  "--name",
                  "test",
                  "--",
                  process.execPath,
                  FIXTURE_SERVER
                ],
                env: { ...fixtureEnv(cache!), MCP_CALL_LOG: calls, ...Claude.sourcesEnv() }
              }
            }
          })
        )
        const r = await Claude.run({
          api,
          prompt: "Use the test server.",
          tools: ["mcp__test__echo", "mcp__test__write"],
          work: path.join(root, "work"),
          home: path.join(root, "home"),
          args: ["--mcp-config", config, "--strict-mcp-config"]
        })
        expect(r.code, r.stderr).toBe(0)
        const entries = await deniedAtTheGateway(api, "hello from claude", calls, journal)
        const init = entries.find((e) => e["kind"] === "mcp.initialize")?.["payload"] as Record<string, unknown>
        expect((init["client_info"] as { name: string }).name).toBe("claude-code")
      } finally {
        await api.close()
      }
    })

    it("install --mcp: a server of the project's .mcp.json goes through the gateway; a denied tool never reaches it", async () => {
      const api = await Fake.start(script("through the installed gateway"))
      try {
        const root = Claude.tempDir()
        const work = path.join(root, "work")
        const journal = path.join(root, "journal")
        const calls = path.join(root, "calls.log")
        fs.mkdirSync(work, { recursive: true })
        fs.writeFileSync(path.join(work, "policy.json"), JSON.stringify({ denyList: ["mcp__test__write"] }))
        const original = JSON.stringify(
          {
            mcpServers: {
              test: {
                command: process.execPath,
                args: [FIXTURE_SERVER],
                env: { ...fixtureEnv(cache!), MCP_CALL_LOG: calls, ...Claude.sourcesEnv() }
              }
            }
          },
          null,
          2
        ) + "\n"
        const mcpJson = path.join(work, ".mcp.json")
        fs.writeFileSync(mcpJson, original)
        const installed = await run([
          "claude-code",
          "install",
          "--mcp",
          "--project",
          work,
          "--policy",
          path.join(work, "policy.json")
        ])
        expect(installed.code, installed.stderr).toBe(0)
        // What is committed names nothing of this machine but what was there.
        const config = JSON.parse(fs.readFileSync(mcpJson, "utf8")) as {
          mcpServers: { test: { command: string; args: Array<string> } }
        }
        expect(config.mcpServers.test.command).toBe("session-journal")
        expect(config.mcpServers.test.args).toEqual([
          "mcp",
          "proxy",
          "--name",
          "test",
          "--policy",
          "policy.json",
          "--",
          process.execPath,
          FIXTURE_SERVER
        ])
        const checked = await run(["claude-code", "install", "--mcp", "--check", "--project", work])
        expect(checked.code, checked.stderr).toBe(0)
        expect(checked.stdout).toContain("test             through the gateway")
        // `session-journal` on PATH, as an installed package puts it.
        const bin = path.join(root, "bin")
        fs.mkdirSync(bin)
        fs.writeFileSync(
          path.join(bin, "session-journal"),
          `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"\n`,
          { mode: 0o755 }
        )
        const r = await Claude.run({
          api,
          prompt: "Use the test server.",
          tools: ["mcp__test__echo", "mcp__test__write"],
          work,
          home: path.join(root, "home"),
          // The installed file itself, given as --mcp-config: Claude Code connects those servers before its
          // first request, where it connects a project's approved ones beside it (on a busy machine, too late
          // for the first call). Claude Code passes its environment to them.
          args: ["--mcp-config", mcpJson, "--strict-mcp-config"],
          env: { PATH: `${bin}:${process.env["PATH"] ?? "/usr/bin:/bin"}`, SESSION_JOURNAL_DIR: journal }
        })
        expect(r.code, r.stderr).toBe(0)
        await deniedAtTheGateway(api, "through the installed gateway", calls, journal)
        const removed = await run(["claude-code", "install", "--mcp", "--uninstall", "--project", work])
        expect(removed.code, removed.stderr).toBe(0)
        expect(fs.readFileSync(mcpJson, "utf8")).toBe(original)
      } finally {
        await api.close()
      }
    })
  }
)
