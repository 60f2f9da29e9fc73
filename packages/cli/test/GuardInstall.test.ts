/**
 * `GuardInstall`: the settings fragment of the resident guard's installed form.
 * Every event `install` hooks gets the forwarder as a `command` hook (never an
 * `http` hook, which fails open), the token never appears in the settings, the
 * command line survives the shell whatever the paths hold (run through `sh -c`,
 * as Claude Code runs hooks), and `install --uninstall` recognizes both forms as
 * ours. The forwarder's bound is the guard's.
 */
import { Hook } from "@session-journal/claude-code"
import { execFileSync } from "node:child_process"
import { describe, expect, it } from "vitest"
import * as Forward from "../src/commands/Forward.ts"
import * as GuardInstall from "../src/commands/GuardInstall.ts"
import * as GuardServer from "../src/commands/GuardServer.ts"
import * as Install from "../src/commands/Install.ts"

const URL = "http://127.0.0.1:18787/hook"

describe("GuardInstall", () => {
  it("hooks every event with the forwarder, a command hook whose timeout is beyond the forwarder's wait", () => {
    const fragment = GuardInstall.hooks(URL, GuardInstall.fromEnv(), [
      "/usr/bin/node",
      "/opt/sj/bin/session-journal.js"
    ])
    expect(Object.keys(fragment.hooks)).toEqual([...Install.EVENTS])
    for (const event of Install.EVENTS) {
      const groups = fragment.hooks[event]!
      expect(groups).toHaveLength(1)
      expect(groups[0]!.matcher).toBe("")
      expect(groups[0]!.hooks).toEqual([{
        type: "command",
        command: `/usr/bin/node /opt/sj/bin/session-journal.js claude-code forward --url ${URL} --timeout-ms 10000`,
        timeout: Install.HOOK_TIMEOUT_SECONDS
      }])
      expect(Install.isOurs(groups[0]!.hooks[0])).toBe(true)
    }
    // The same hook `install --guard` writes.
    expect(fragment.hooks["PreToolUse"]![0]!.hooks[0]!).toMatchObject({
      command: Install.forwardCommand(["/usr/bin/node", "/opt/sj/bin/session-journal.js"], URL)
    })
    expect(Install.HOOK_TIMEOUT_SECONDS * 1000).toBeGreaterThan(GuardInstall.FORWARD_TIMEOUT_MS)
  })

  it("names the token's source, never the token", () => {
    const env = GuardInstall.command(URL, GuardInstall.fromEnv("MY_GUARD_TOKEN"), ["session-journal"])
    expect(env).toBe(`session-journal claude-code forward --url ${URL} --timeout-ms 10000 --token-env MY_GUARD_TOKEN`)
    const file = GuardInstall.command(URL, GuardInstall.fromFile("/home/me/.config/sj token"), ["session-journal"])
    expect(file).toBe(
      `session-journal claude-code forward --url ${URL} --timeout-ms 10000 --token-file '/home/me/.config/sj token'`
    )
    const http = GuardInstall.httpHooks(URL)
    expect(http.hooks["PreToolUse"]![0]!.hooks[0]).toEqual({
      type: "http",
      url: URL,
      headers: { Authorization: "Bearer $SESSION_JOURNAL_GUARD_TOKEN" },
      allowedEnvVars: ["SESSION_JOURNAL_GUARD_TOKEN"],
      timeout: Install.HOOK_TIMEOUT_SECONDS
    })
    expect(Install.isOurs(http.hooks["Stop"]![0]!.hooks[0])).toBe(true)
  })

  it("quotes every argument so that sh -c gives it back exactly", () => {
    const awkward = ["/tmp/it's here/bin dir/session-journal.js", "/p/$HOME/`x`/\"q\"/a\\b", "ünï 😀;|&<>*?"]
    const line = GuardInstall.command(URL, GuardInstall.fromFile(awkward[2]!), [
      process.execPath,
      "-e",
      "process.stdout.write(JSON.stringify(process.argv.slice(1)))",
      awkward[0]!,
      awkward[1]!
    ])
    const out = execFileSync("/bin/sh", ["-c", line], { encoding: "utf8" })
    expect(JSON.parse(out)).toEqual([
      awkward[0],
      awkward[1],
      "claude-code",
      "forward",
      "--url",
      URL,
      "--timeout-ms",
      "10000",
      "--token-file",
      awkward[2]
    ])
    expect(Forward.parseArgs(JSON.parse(out).slice(4))).toEqual({
      url: URL,
      tokenEnv: undefined,
      tokenFile: awkward[2],
      timeoutMs: 10000
    })
  })

  it("the forwarder, the guard and the hook input share one bound and one token variable", () => {
    expect(Forward.MAX_EVENT_BYTES).toBe(Hook.MAX_INPUT_BYTES)
    expect(GuardServer.MAX_BODY_BYTES).toBe(Hook.MAX_INPUT_BYTES)
    expect(Forward.TOKEN_VAR).toBe(GuardServer.TOKEN_VAR)
  })
})
