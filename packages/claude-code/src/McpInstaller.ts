/**
 * `session-journal claude-code install --mcp [--project DIR] [--policy FILE]
 * [--root DIR] [--uninstall | --check]`: puts every MCP server of a project's
 * `.mcp.json` through the gateway (`session-journal mcp proxy`), so each
 * `tools/call` Claude Code (or any client reading that file) makes to it is
 * decided by the policy and journaled before it reaches the server.
 *
 * A stdio server's command moves behind the gateway's: `{"command": "npx",
 * "args": ["-y", "pkg"]}` becomes `{"command": "session-journal", "args": ["mcp",
 * "proxy", "--name", NAME, "--policy", FILE, "--", "npx", "-y", "pkg"]}`; an HTTP
 * server (`"type": "http"`, `url`, `headers`) becomes a stdio server running
 * the gateway with `--url URL` and `--header "NAME: VALUE"` (its `url` and
 * `headers` stay, unused; the header values, which Claude Code expands from
 * `${VAR}`, are then on the gateway's command line). NAME is the server's key, so the tool names the
 * policy sees are Claude Code's own, `mcp__NAME__tool`. A server of another
 * type (`sse`) is left direct and reported. `--mcp-server NAME -- COMMAND
 * [ARGS…]` (or `--url URL`) first adds a server to the file (creating it), then
 * puts it through the gateway with the others; `--uninstall` takes it out of
 * the gateway and leaves it registered, direct.
 *
 * `.mcp.json` is committed and shared, so nothing of one machine is written:
 * the gateway is `session-journal` from PATH, and the policy (and a journal
 * directory, when one is named) must lie inside the project and are named
 * relative to it. Claude Code starts a project's servers in the directory it
 * was started in (`CLAUDE_PROJECT_DIR`, observed with Claude Code 2.1.328), so
 * those paths hold when it is started at the project's root; started anywhere
 * else, the gateway cannot read the policy and denies every call, saying so.
 * Claude Code passes its environment to the servers it starts, so without a
 * journal directory the gateway journals where the hooks do (`$SESSION_JOURNAL_DIR`,
 * else the user's state directory).
 *
 * The file is edited as text (`internal/mcpServers.ts` on `internal/jsonText.ts`)
 * and written as every installer here writes (`Installer.editFile`: through a
 * symbolic link to its target, a new backup per change, an exclusively created
 * temporary file renamed over it): only the `command`, `args` and `type` of the
 * servers change, every other byte stays, installing twice changes nothing, and
 * `--uninstall` gives back the file as it was.
 *
 * @since 0.1.0
 */
import * as Effect from "effect/Effect"
import * as path from "node:path"
import type { SettingsRefused } from "./Errors.ts"
import { editFile } from "./Installer.ts"
import {
  addServerText,
  type NewServer,
  servers,
  type ServerState,
  unwrapText,
  wrapText
} from "./internal/mcpServers.ts"

export {
  addServerText,
  GATEWAY_COMMAND,
  McpConfigTextError,
  type NewServer,
  servers,
  type ServerState,
  unwrapText,
  wrapText
} from "./internal/mcpServers.ts"

/**
 * The project's MCP configuration: `DIR/.mcp.json`.
 *
 * @since 0.1.0
 */
export const mcpFile = (project: string | undefined): string => path.join(path.resolve(project ?? "."), ".mcp.json")

/**
 * The gateway's arguments before a server's own (`wrapText`'s `head`): the
 * journal directory when one is named (the global `--dir`), then `mcp proxy
 * --name NAME` and `--policy FILE` when one is named. Paths are written as given
 * (relative to the project for a shared file).
 *
 * @since 0.1.0
 */
export const gatewayHead = (options: {
  readonly root?: string | undefined
  readonly policy?: string | undefined
}) =>
(name: string): ReadonlyArray<string> => [
  ...(options.root === undefined ? [] : ["--dir", options.root]),
  "mcp",
  "proxy",
  "--name",
  name,
  ...(options.policy === undefined ? [] : ["--policy", options.policy])
]

/**
 * What `install --mcp` did to a `.mcp.json` file, and where each server stands
 * after it.
 *
 * @since 0.1.0
 */
export interface Report {
  readonly file: string
  readonly status: "installed" | "uninstalled" | "unchanged"
  /** The backup of the previous content, when the file changed. */
  readonly backup: string | null
  /** Where the file leads when it is a symbolic link (the file changed there); null otherwise. */
  readonly target: string | null
  readonly servers: ReadonlyArray<ServerState>
}

/**
 * A server `apply` adds before it puts every server through the gateway
 * (`--mcp-server NAME -- COMMAND…`, `--mcp-server NAME --url URL`).
 *
 * @since 0.1.0
 */
export interface Add {
  readonly name: string
  readonly server: NewServer
}

/**
 * Puts every server of `file` through the gateway with `head` (`gatewayHead`),
 * after adding `add` (`addServerText`; the file is created when missing), or,
 * with null, takes every one out of it (a server added before stays, direct); a
 * missing file is otherwise left missing.
 *
 * @since 0.1.0
 */
export const apply = (
  file: string,
  head: ((name: string) => ReadonlyArray<string>) | null,
  add?: Add | undefined
): Effect.Effect<Report, SettingsRefused> =>
  Effect.gen(function*() {
    let after = ""
    const edited = yield* editFile(file, (text) => {
      if (head === null) {
        if (text === null) return null
        after = unwrapText(text)
      } else {
        if (text === null && add === undefined) return null
        after = wrapText(add === undefined ? text! : addServerText(text ?? "", add.name, add.server), head)
      }
      return after
    })
    return {
      file,
      status: !edited.changed ? "unchanged" : head === null ? "uninstalled" : "installed",
      backup: edited.backup,
      target: edited.target,
      servers: after === "" ? [] : servers(after)
    }
  })

/**
 * Where each server of `file` stands (none when the file does not exist); reads
 * it as `apply` does and writes nothing.
 *
 * @since 0.1.0
 */
export const status = (file: string): Effect.Effect<ReadonlyArray<ServerState>, SettingsRefused> =>
  Effect.suspend(() => {
    let found: ReadonlyArray<ServerState> = []
    return Effect.map(
      editFile(file, (text) => {
        if (text !== null) found = servers(text)
        return null
      }),
      () => found
    )
  })
