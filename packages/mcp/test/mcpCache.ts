/**
 * The real MCP pieces the tests drive, from the cache `scripts/mcp.sh` installs:
 * `$SESSION_JOURNAL_MCP_CACHE`, else
 * `${XDG_CACHE_HOME:-~/.cache}/session-journal/mcp-<versions>` (the script's rule).
 * Tests skip only when neither holds the pinned SDK.
 */
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

/** The versions `scripts/mcp.sh` pins. */
export const SDK_VERSION = "1.32.2"
export const EVERYTHING_VERSION = "2026.8.31"
export const FILESYSTEM_VERSION = "2026.8.31"

/** The variable `.ci/run` sets to the cache directory. */
export const CACHE_VAR = "SESSION_JOURNAL_MCP_CACHE"

/** The cache directory holding the pinned SDK, or null when there is none. */
export const findCache = (): string | null => {
  const given = process.env[CACHE_VAR]
  const dir = given !== undefined && given !== ""
    ? given
    : path.join(
      process.env["XDG_CACHE_HOME"] ?? path.join(os.homedir(), ".cache"),
      "session-journal",
      `mcp-${SDK_VERSION}-${EVERYTHING_VERSION}-${FILESYSTEM_VERSION}`
    )
  try {
    const manifest = JSON.parse(
      fs.readFileSync(path.join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json"), "utf8")
    ) as { readonly version?: unknown }
    return manifest.version === SDK_VERSION ? dir : null
  } catch {
    return null
  }
}

/** The SDK's package directory in a cache. */
export const sdkDir = (cache: string): string => path.join(cache, "node_modules", "@modelcontextprotocol", "sdk")

/** The reference server `server-everything`'s entry point in a cache. */
export const everything = (cache: string): string =>
  path.join(cache, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")

/** The reference server `server-filesystem`'s entry point in a cache. */
export const filesystem = (cache: string): string =>
  path.join(cache, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")

/** The test server (`fixtures/server.mjs`): the SDK's own `Server` with tools for each case. */
export const FIXTURE_SERVER = fileURLToPath(new URL("./fixtures/server.mjs", import.meta.url))

/** The scripted server (`fixtures/scripted.mjs`): no SDK, its writes chosen by the test. */
export const SCRIPTED_SERVER = fileURLToPath(new URL("./fixtures/scripted.mjs", import.meta.url))

/** The environment the fixture server needs: where the SDK is. */
export const fixtureEnv = (cache: string): Record<string, string> => ({ MCP_SDK_DIR: sdkDir(cache) })

/** The parts of the SDK's client the tests use. */
export interface SdkClient {
  connect(transport: unknown): Promise<void>
  listTools(): Promise<{ readonly tools: ReadonlyArray<{ readonly name: string }> }>
  callTool(
    params: { readonly name: string; readonly arguments?: Record<string, unknown> },
    resultSchema?: unknown,
    options?: { readonly timeout?: number; readonly signal?: AbortSignal; readonly onprogress?: () => void }
  ): Promise<
    { readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }>; readonly isError?: boolean }
  >
  getServerVersion(): { readonly name: string } | undefined
  close(): Promise<void>
}

/** The SDK's stdio client transport, as the tests use it. */
export interface SdkStdioTransport {
  readonly pid: number | null
  onclose?: () => void
  /** Set by the client on `connect`: every message the transport read, before the client handles it. */
  onmessage?: (message: unknown, extra?: unknown) => void
  close(): Promise<void>
}

/** The SDK's client classes, loaded from the cache. */
export const loadSdk = async (cache: string): Promise<{
  readonly Client: new(info: { name: string; version: string }, options?: unknown) => SdkClient
  readonly StdioClientTransport: new(params: {
    command: string
    args?: Array<string>
    env?: Record<string, string>
    stderr?: "pipe" | "inherit" | "ignore"
    cwd?: string
  }) => SdkStdioTransport
  readonly StreamableHTTPClientTransport: new(url: URL) => unknown
}> => {
  const load = (p: string) => import(pathToFileURL(path.join(sdkDir(cache), "dist", "esm", p)).href)
  const client = await load("client/index.js")
  const stdio = await load("client/stdio.js")
  const http = await load("client/streamableHttp.js")
  return {
    Client: client.Client,
    StdioClientTransport: stdio.StdioClientTransport,
    StreamableHTTPClientTransport: http.StreamableHTTPClientTransport
  }
}

/**
 * What the README's example is fed on stdin in the tests: the handshake, then an
 * allowed call (`echo`) and one its policy denies (`get-env`), one message a line.
 */
export const EXAMPLE_INPUT: string = [
  {
    jsonrpc: "2.0",
    id: 0,
    method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "example", version: "1" } }
  },
  { jsonrpc: "2.0", method: "notifications/initialized" },
  { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: { text: "allowed" } } },
  { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "get-env", arguments: {} } }
].map((l) => JSON.stringify(l) + "\n").join("")
