/**
 * `session-journal mcp proxy` driven by the MCP TypeScript SDK's own client
 * (`StdioClientTransport` starts the built bin), in front of the reference
 * servers `server-everything` (stdio and Streamable HTTP) and `server-filesystem`, and the SDK-built test
 * server: tools listed, calls allowed and denied by a policy file, an unreadable
 * policy denying everything, a client that goes away leaving no server behind,
 * and the connection in `list` and `stats`.
 */
import {
  everything,
  filesystem,
  findCache,
  FIXTURE_SERVER,
  fixtureEnv,
  loadSdk,
  SCRIPTED_SERVER,
  type SdkClient,
  type SdkStdioTransport
} from "@session-journal/mcp/test/mcpCache"
import { spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { defaultName } from "../src/commands/Mcp.ts"
import { baseEnv, BIN, cleanup, exited, run, start, tempDir } from "./Run.ts"

const cache = findCache()

afterAll(cleanup)

const connect = async (
  args: ReadonlyArray<string>,
  env: Record<string, string> = {}
): Promise<
  { readonly client: SdkClient; readonly pid: () => number | null; readonly transport: SdkStdioTransport }
> => {
  const sdk = await loadSdk(cache!)
  const transport = new sdk.StdioClientTransport({
    command: process.execPath,
    args: [BIN, ...args],
    env: { ...(baseEnv() as Record<string, string>), ...fixtureEnv(cache!), ...env },
    stderr: "pipe"
  })
  const client = new sdk.Client({ name: "sdk-test-client", version: "1.2.3" })
  await client.connect(transport)
  return { client, pid: () => transport.pid, transport }
}

// `mcp proxy` under a policy denying `denied` (or the policy given), journaling into `dir`, then `server`
// (after -- or --url); the policy is the file `policy.json` of `dir`.
const proxyArgs = (
  dir: string,
  name: string,
  denied: string | { readonly policy: unknown },
  server: ReadonlyArray<string>
): Array<string> => {
  const policy = path.join(dir, "policy.json")
  fs.writeFileSync(policy, JSON.stringify(typeof denied === "string" ? { denyList: [denied] } : denied.policy))
  return ["--dir", dir, "mcp", "proxy", "--policy", policy, "--name", name, ...server]
}

const textOf = (result: { readonly content: ReadonlyArray<{ readonly text?: string }> }) =>
  result.content.map((c) => c.text ?? "").join("")

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

// Waits for an event (a process gone), not for a time: the test's own timeout bounds it.
const until = async (done: () => boolean): Promise<void> => {
  while (!done()) await new Promise((r) => setTimeout(r, 20))
}

const listJson = async (dir: string) => {
  const listed = await run(["--dir", dir, "--json", "list"])
  expect(listed.code, listed.stderr).toBe(0)
  return JSON.parse(listed.stdout) as { readonly sessions: ReadonlyArray<{ readonly id: string }> }
}

describe("mcp proxy's default name", () => {
  it("is the server's package or command name, or the URL's host", () => {
    expect(defaultName(["npx", "-y", "@modelcontextprotocol/server-github"], undefined)).toBe("github")
    expect(defaultName(["npx", "-y", "@acme/mcp-server-tickets@1.2.3"], undefined)).toBe("tickets")
    expect(defaultName(["/usr/local/bin/mcp-server-git", "--repo", "."], undefined)).toBe("git")
    expect(defaultName(["node", "dist/index.js"], undefined)).toBe("index")
    expect(defaultName([], "https://mcp.example.com/mcp")).toBe("mcp.example.com")
  })
})

// Real servers and clients, started per case: on a busy machine a case takes long, and its
// outcome must not depend on how long.
describe.skipIf(cache === null)("mcp proxy with the SDK's client", { timeout: 600_000 }, () => {
  it("lists and calls server-everything's tools; the policy denies one, named with its guard", async () => {
    const dir = tempDir()
    const { client, transport } = await connect(
      proxyArgs(dir, "everything", "mcp__everything__get-sum", ["--", process.execPath, everything(cache!), "stdio"])
    )
    const tools = (await client.listTools()).tools.map((t) => t.name)
    expect(tools).toContain("echo")
    expect(tools).toContain("get-sum")
    const echoed = await client.callTool({ name: "echo", arguments: { message: "through the gateway" } })
    expect(textOf(echoed)).toContain("through the gateway")
    expect(echoed.isError ?? false).toBe(false)
    // Progress notifications come back through the gateway to the caller: both the
    // server sends before its result reach the client, counted as its transport reads
    // them. (The SDK's client itself drops one that comes in the same read as the
    // result, which a busy machine makes likely: test/Progress.test.ts in the mcp package.)
    let progress = 0
    const handle = transport.onmessage!
    transport.onmessage = (message, extra) => {
      if ((message as { readonly method?: unknown }).method === "notifications/progress") progress++
      handle(message, extra)
    }
    await client.callTool(
      { name: "trigger-long-running-operation", arguments: { duration: 0.2, steps: 2 } },
      undefined,
      { onprogress: () => undefined }
    )
    expect(progress).toBe(2)
    const denied = await client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } })
    expect(denied.isError).toBe(true)
    expect(textOf(denied)).toContain("mcp__everything__get-sum")
    expect(textOf(denied)).toContain("denyList")
    await client.close()

    const { sessions } = await listJson(dir)
    expect(sessions).toHaveLength(1)
    const id = sessions[0]!.id
    expect(id).toMatch(/^mcp-[0-9a-f]{32}$/)
    const stats = await run(["--dir", dir, "--json", "stats", id])
    expect(stats.code, stats.stderr).toBe(0)
    expect(stats.stdout).toContain("mcp__everything__echo")
    expect(stats.stdout).toContain("mcp__everything__get-sum")
    const exported = await run(["--dir", dir, "export", id])
    expect(exported.stdout).toContain("\"client_info\":{\"name\":\"sdk-test-client\",\"version\":\"1.2.3\"}")
    const verified = await run(["--dir", dir, "verify", id])
    expect(verified.code, verified.stdout + verified.stderr).toBe(0)
  })

  it("--publish: the connection's session is published as tiles that verify", async () => {
    const dir = tempDir()
    const key = path.join(dir, "gateway.key")
    const generated = await run(["key", "generate", "gateway.example/mcp", "--out", key])
    expect(generated.code, generated.stderr).toBe(0)
    const out = path.join(dir, "published")
    const { client } = await connect([
      ...proxyArgs(dir, "everything", "mcp__everything__get-sum", []),
      "--publish",
      out,
      "--sign",
      key,
      "--publish-every",
      "50ms",
      "--",
      process.execPath,
      everything(cache!),
      "stdio"
    ])
    await client.callTool({ name: "echo", arguments: { message: "published" } })
    await client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } })
    const published = () => (fs.existsSync(out) ? fs.readdirSync(out) : [])
    await until(() => published().some((id) => fs.existsSync(path.join(out, id, "checkpoint"))))
    await client.close()
    const [id] = published()
    const verified = await run(["--json", "verify-remote", path.join(out, id!), "--key", generated.stdout.trim()])
    expect(verified.code, verified.stdout + verified.stderr).toBe(0)
  })

  it("server-filesystem: a read is allowed, a denied write_file never writes the file", async () => {
    const dir = tempDir()
    const files = path.join(dir, "files")
    fs.mkdirSync(files)
    fs.writeFileSync(path.join(files, "notes.txt"), "kept as it is")
    const { client } = await connect(
      proxyArgs(dir, "fs", "mcp__fs__write_file", ["--", process.execPath, filesystem(cache!), files])
    )
    const read = await client.callTool({ name: "read_text_file", arguments: { path: path.join(files, "notes.txt") } })
    expect(textOf(read)).toContain("kept as it is")
    const write = await client.callTool({
      name: "write_file",
      arguments: { path: path.join(files, "notes.txt"), content: "overwritten" }
    })
    expect(write.isError).toBe(true)
    expect(textOf(write)).toContain("session-journal denied mcp__fs__write_file")
    await client.close()
    expect(fs.readFileSync(path.join(files, "notes.txt"), "utf8")).toBe("kept as it is")
    const { sessions } = await listJson(dir)
    const stats = await run(["--dir", dir, "--json", "stats", sessions[0]!.id])
    expect(stats.stdout).toContain("mcp__fs__read_text_file")
  })

  it("server-filesystem: what a scoped tool read counts in its byte limits, windowed too; other tools are not", async () => {
    const dir = tempDir()
    const files = path.join(dir, "files")
    fs.mkdirSync(files)
    const big = path.join(files, "big.txt")
    fs.writeFileSync(big, "x".repeat(1000))
    const policy = {
      policy: [
        { maxBytesRead: 300, of: "mcp__fs__read_text_file" },
        { maxBytesRead: 300, of: "mcp__fs__read_multiple_files", per: "1h" }
      ]
    }
    const { client } = await connect(proxyArgs(dir, "fs", policy, ["--", process.execPath, filesystem(cache!), files]))
    // Nothing read yet: the first read of each is allowed, and reads 1000 bytes.
    expect(textOf(await client.callTool({ name: "read_text_file", arguments: { path: big } }))).toContain("xxx")
    const again = await client.callTool({ name: "read_text_file", arguments: { path: big } })
    expect(again.isError).toBe(true)
    expect(textOf(again)).toContain("maxBytesRead(300, of: [\"mcp__fs__read_text_file\"])")
    // Another tool's reads are not in that limit, but in its own window.
    const multiple = { name: "read_multiple_files", arguments: { paths: [big] } }
    expect((await client.callTool(multiple)).isError ?? false).toBe(false)
    const windowed = await client.callTool(multiple)
    expect(windowed.isError).toBe(true)
    expect(textOf(windowed)).toContain("per: \"1h\"")
    // A tool no limit covers is allowed.
    expect(textOf(await client.callTool({ name: "list_directory", arguments: { path: files } }))).toContain("big.txt")
    await client.close()

    // The replay of the connection decides the same, from the recorded outcomes.
    const { sessions } = await listJson(dir)
    const replay = await run(["--dir", dir, "--json", "policy", "test", path.join(dir, "policy.json"), sessions[0]!.id])
    expect(replay.code, replay.stderr).toBe(5)
    const lines = replay.stdout.trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(lines.filter((l) => l["type"] === "denied").map((l) => [l["tool_name"], l["recorded_allowed"]])).toEqual([
      ["mcp__fs__read_text_file", false],
      ["mcp__fs__read_multiple_files", false]
    ])
    expect(lines.at(-1)).toMatchObject({ type: "summary", calls: 5, denied: 2, unjudged: 0 })
  })

  it("a policy file that cannot be read denies every call with the reason; tools are still listed", async () => {
    const dir = tempDir()
    const { client } = await connect([
      "--dir",
      dir,
      "mcp",
      "proxy",
      "--policy",
      path.join(dir, "missing.json"),
      "--",
      process.execPath,
      // A flag of the server's command after --: the server's, not ours.
      "--no-warnings",
      FIXTURE_SERVER
    ])
    expect((await client.listTools()).tools.map((t) => t.name)).toContain("echo")
    const denied = await client.callTool({ name: "echo", arguments: { text: "x" } })
    expect(denied.isError).toBe(true)
    expect(textOf(denied)).toContain("the policy cannot be read")
    await client.close()
  })

  it("an edited policy decides the next call; a policy removed denies every call", async () => {
    const dir = tempDir()
    const policy = path.join(dir, "policy.json")
    const { client } = await connect(
      proxyArgs(dir, "test", "mcp__test__write", ["--", process.execPath, FIXTURE_SERVER])
    )
    expect(textOf(await client.callTool({ name: "echo", arguments: { text: "one" } }))).toBe("one")
    fs.writeFileSync(policy, JSON.stringify({ denyList: ["mcp__test__echo", "mcp__test__write"] }))
    const denied = await client.callTool({ name: "echo", arguments: { text: "two" } })
    expect(denied.isError).toBe(true)
    expect(textOf(denied)).toContain("denyList")
    fs.rmSync(policy)
    const gone = await client.callTool({ name: "echo", arguments: { text: "three" } })
    expect(gone.isError).toBe(true)
    expect(textOf(gone)).toContain("the policy cannot be read")
    await client.close()
  })

  it("a journal directory that cannot be used stops the gateway before the server starts (exit 3)", async () => {
    const dir = tempDir()
    const notADir = path.join(dir, "journal")
    fs.writeFileSync(notADir, "a file")
    const pidFile = path.join(dir, "server.pid")
    const ran = await run(["--dir", notADir, "mcp", "proxy", "--", process.execPath, FIXTURE_SERVER], {
      process: true,
      env: { ...fixtureEnv(cache!), MCP_PID_FILE: pidFile }
    })
    expect(ran.code).toBe(3)
    expect(ran.stderr).toContain("not a directory")
    expect(fs.existsSync(pidFile)).toBe(false)
  })

  it("a client that goes away, with a call pending, leaves no server process behind", async () => {
    const dir = tempDir()
    const pidFile = path.join(dir, "server.pid")
    const { client, pid } = await connect(
      ["--dir", dir, "mcp", "proxy", "--name", "test", "--", process.execPath, FIXTURE_SERVER],
      // A server that outlives its stdin: only the gateway's signal ends it.
      { MCP_PID_FILE: pidFile, MCP_LINGER: "1" }
    )
    const server = Number(fs.readFileSync(pidFile, "utf8"))
    const gateway = pid()!
    expect(isAlive(server)).toBe(true)
    // A call that never answers is pending when the client leaves.
    const pending = client.callTool({ name: "wait", arguments: {} }).catch((e: unknown) => e)
    await client.close()
    await pending
    await until(() => !isAlive(gateway) && !isAlive(server))
    expect(isAlive(server)).toBe(false)
  })

  it("a server that dies mid-call: the call gets an error naming the exit, the gateway exits 70 saying why", async () => {
    const dir = tempDir()
    const gateway = start(["--dir", dir, "mcp", "proxy", "--name", "scripted", "--", process.execPath, SCRIPTED_SERVER])
    const out: Array<Buffer> = []
    const err: Array<Buffer> = []
    gateway.stdout!.on("data", (b: Buffer) => out.push(b))
    gateway.stderr!.on("data", (b: Buffer) => err.push(b))
    // The client stays connected (stdin open): the server, not the client, ends first.
    gateway.stdin!.write(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "die", arguments: {} } }) + "\n"
    )
    const code = await exited(gateway)
    gateway.stdin!.destroy()
    const stderr = Buffer.concat(err).toString("utf8")
    expect(code, stderr).toBe(70)
    expect(stderr).toContain("ended before the client (exit code 7), 1 request unanswered")
    const lines = Buffer.concat(out).toString("utf8").split("\n").filter((l) => l !== "")
    const answer = JSON.parse(lines[lines.length - 1]!) as { id: number; error: { message: string } }
    expect(answer.id).toBe(1)
    expect(answer.error.message).toBe("session-journal: the MCP server ended (exit code 7) before answering")
  })

  it("a gateway ended by SIGTERM ends its server first", async () => {
    const dir = tempDir()
    const pidFile = path.join(dir, "server.pid")
    const gateway = start(["--dir", dir, "mcp", "proxy", "--", process.execPath, FIXTURE_SERVER], {
      // A server that outlives its stdin: only the gateway's signal ends it.
      env: { ...fixtureEnv(cache!), MCP_PID_FILE: pidFile, MCP_LINGER: "1" }
    })
    await until(() => fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8") !== "")
    const server = Number(fs.readFileSync(pidFile, "utf8"))
    expect(isAlive(server)).toBe(true)
    gateway.kill("SIGTERM")
    await exited(gateway)
    await until(() => !isAlive(server))
    expect(isAlive(server)).toBe(false)
  })

  it("reaches a Streamable HTTP server with --url, and passes on what it sends on its own stream", async () => {
    const dir = tempDir()
    const port = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as net.AddressInfo).port
        s.close(() => resolve(p))
      })
    })
    const server = spawn(process.execPath, [everything(cache!), "streamableHttp"], {
      env: { ...baseEnv(), PORT: String(port) },
      stdio: ["ignore", "ignore", "pipe"]
    })
    try {
      await new Promise<void>((resolve, reject) => {
        let err = ""
        server.stderr!.on("data", (b: Buffer) => {
          err += b.toString()
          if (err.includes("listening on port")) resolve()
        })
        server.on("close", (code) => reject(new Error(`server-everything ended (${code}): ${err}`)))
      })
      const { client, transport } = await connect(
        proxyArgs(dir, "remote", "mcp__remote__get-sum", ["--url", `http://127.0.0.1:${port}/mcp`])
      )
      // Messages the server sends outside any answer come on its own stream (the GET).
      const logged = new Promise<void>((resolve) => {
        const handle = transport.onmessage!
        transport.onmessage = (message, extra) => {
          if ((message as { readonly method?: unknown }).method === "notifications/message") resolve()
          handle(message, extra)
        }
      })
      expect((await client.listTools()).tools.map((t) => t.name)).toContain("echo")
      expect(textOf(await client.callTool({ name: "echo", arguments: { message: "over http" } }))).toContain(
        "over http"
      )
      const denied = await client.callTool({ name: "get-sum", arguments: { a: 1, b: 2 } })
      expect(denied.isError).toBe(true)
      // server-everything logs on its own every 5 s once asked to: the first one comes through.
      await client.callTool({ name: "toggle-simulated-logging", arguments: {} })
      await logged
      await client.close()
      const { sessions } = await listJson(dir)
      const stats = await run(["--dir", dir, "--json", "stats", sessions[0]!.id])
      expect(stats.stdout).toContain("mcp__remote__echo")
    } finally {
      server.kill("SIGKILL")
    }
  })
})
