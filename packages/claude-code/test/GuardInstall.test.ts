/**
 * `GuardInstall`: the settings fragment of the resident guard's installed form.
 * Every event gets the forwarder as a `command` hook (never an `http` hook, which
 * fails open), the token never appears in the settings, the command line survives
 * the shell whatever the paths hold (run through `sh -c`, as Claude Code runs
 * hooks), guard URLs off loopback are refused, and `isGuardHook` tells our hooks
 * from anyone else's.
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "vitest"
import { GuardInstall } from "../src/index.ts"

const URL = "http://127.0.0.1:18787/hook"

describe("GuardInstall", () => {
  it("hooks every event with the forwarder, a command hook with a timeout beyond the forwarder's wait", () => {
    const fragment = GuardInstall.hooks(URL, GuardInstall.fromEnv(), [
      "/usr/bin/node",
      "/opt/sj/bin/session-journal.js"
    ])
    expect(Object.keys(fragment.hooks)).toEqual([...GuardInstall.EVENTS])
    for (const event of GuardInstall.EVENTS) {
      const groups = fragment.hooks[event]!
      expect(groups).toHaveLength(1)
      expect(groups[0]!.matcher).toBe("")
      expect(groups[0]!.hooks).toEqual([{
        type: "command",
        command: `/usr/bin/node /opt/sj/bin/session-journal.js claude-code forward --url ${URL} --timeout-ms 10000`,
        timeout: 30
      }])
    }
    expect(GuardInstall.HOOK_TIMEOUT_SECONDS * 1000).toBeGreaterThan(GuardInstall.FORWARD_TIMEOUT_MS)
    expect(GuardInstall.isGuardHook(fragment.hooks["PreToolUse"]![0]!.hooks[0])).toBe(true)
  })

  it("names the token's source, never the token", () => {
    const env = GuardInstall.forwardCommand(URL, GuardInstall.fromEnv("MY_GUARD_TOKEN"), ["sj"])
    expect(env).toBe(`sj claude-code forward --url ${URL} --token-env MY_GUARD_TOKEN --timeout-ms 10000`)
    const file = GuardInstall.forwardCommand(URL, GuardInstall.fromFile("/home/me/.config/sj token"), ["sj"])
    expect(file).toBe(`sj claude-code forward --url ${URL} --token-file '/home/me/.config/sj token' --timeout-ms 10000`)
    const http = GuardInstall.httpHooks(URL)
    expect(http.hooks["PreToolUse"]![0]!.hooks[0]).toEqual({
      type: "http",
      url: URL,
      headers: { Authorization: "Bearer $SESSION_JOURNAL_GUARD_TOKEN" },
      allowedEnvVars: ["SESSION_JOURNAL_GUARD_TOKEN"],
      timeout: 30
    })
    expect(GuardInstall.isGuardHook(http.hooks["Stop"]![0]!.hooks[0])).toBe(true)
  })

  it("quotes every argument so that sh -c gives it back exactly", () => {
    const awkward = ["/tmp/it's here/bin dir/sj.js", "/p/$HOME/`x`/\"q\"/a\\b", "ünï 😀;|&<>*?"]
    const command = GuardInstall.forwardCommand(URL, GuardInstall.fromFile(awkward[2]!), [
      process.execPath,
      "-e",
      "process.stdout.write(JSON.stringify(process.argv.slice(1)))",
      awkward[0]!,
      awkward[1]!
    ])
    const out = execFileSync("/bin/sh", ["-c", command], { encoding: "utf8" })
    expect(JSON.parse(out)).toEqual([
      awkward[0],
      awkward[1],
      "claude-code",
      "forward",
      "--url",
      URL,
      "--token-file",
      awkward[2],
      "--timeout-ms",
      "10000"
    ])
  })

  it("refuses guard URLs the guard does not answer", () => {
    expect(GuardInstall.urlProblem(URL)).toBeNull()
    expect(GuardInstall.urlProblem("http://localhost:9/hook")).toBeNull()
    expect(GuardInstall.urlProblem("http://[::1]:9/hook")).toBeNull()
    for (
      const bad of [
        "https://127.0.0.1:1/hook",
        "http://10.0.0.2:1/hook",
        "http://127.0.0.1.nip.io:1/hook",
        "http://127.0.0.1:1/",
        "http://u:p@127.0.0.1:1/hook",
        "http://127.0.0.1:1/hook?x=1",
        "not a url"
      ]
    ) {
      expect(GuardInstall.urlProblem(bad), bad).not.toBeNull()
    }
  })

  it("tells the guard's hooks from others", () => {
    expect(GuardInstall.isGuardHook({ type: "command", command: "echo hi" })).toBe(false)
    expect(GuardInstall.isGuardHook({ type: "command", command: "sj claude-code hook" })).toBe(false)
    expect(GuardInstall.isGuardHook({ type: "http", url: "https://example.com/hook" })).toBe(false)
    expect(GuardInstall.isGuardHook({ type: "http", url: URL })).toBe(false)
    expect(GuardInstall.isGuardHook(null)).toBe(false)
  })

  it("is pure: no node:* imports", () => {
    const text = fs.readFileSync(path.join(import.meta.dirname, "..", "src", "GuardInstall.ts"), "utf8")
    expect(text).not.toMatch(/from "node:/)
  })
})
