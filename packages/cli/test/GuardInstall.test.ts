/**
 * `GuardInstall`: the settings fragment of the resident guard's installed form.
 * Every event `install` hooks gets the forwarder as a `command` hook (never an
 * `http` hook, which fails open), the token never appears in the settings, the
 * command line survives the shell whatever the paths hold (run through `sh -c`,
 * as Claude Code runs hooks), and `install --uninstall` recognizes both forms as
 * ours. The forwarder's bound is the guard's, and its deadline well under the
 * hook's timeout. `install --guard URL --policy FILE` puts no policy in the hooks,
 * so it asks the real guard which policy it runs (`GET /policy`, proved with the
 * token) and is refused (exit 2, nothing written) unless it is FILE's; without
 * `--policy` it says which one the guard runs.
 */
import { Hook } from "@session-journal/claude-code"
import * as Forward from "@session-journal/claude-code/Forwarder"
import * as GuardInstall from "@session-journal/claude-code/GuardInstaller"
import * as GuardServer from "@session-journal/claude-code/GuardServer"
import * as Install from "@session-journal/claude-code/Installer"
import { type ChildProcess, execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cleanup, exited, hasNodeAdapter, killAll, run, start, tempDir, waitForLine } from "./Run.ts"

const nodeAdapter = await hasNodeAdapter()
const TOKEN = "guard-install-test-token-0123456789"
const started: Array<ChildProcess> = []

afterAll(async () => {
  await killAll(started)
  cleanup()
})

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
      // The same hook `install --guard` writes: the forwarder behind the fail-closed wrapper of its event.
      expect(groups[0]!.hooks).toEqual([{
        type: "command",
        command: Install.forwardCommand(["/usr/bin/node", "/opt/sj/bin/session-journal.js"], URL, { event }),
        timeout: Install.HOOK_TIMEOUT_SECONDS
      }])
      expect(groups[0]!.hooks[0]!).toMatchObject({ command: expect.stringContaining(` ${event} `) })
      expect(groups[0]!.hooks[0]!).toMatchObject({
        command: expect.stringContaining(
          `/usr/bin/node /opt/sj/bin/session-journal.js claude-code forward --url ${URL} --timeout-ms 10000`
        )
      })
      expect(Install.isOurs(groups[0]!.hooks[0])).toBe(true)
    }
    // The forwarder's deadline covers the whole exchange and stays well under the hook's timeout, and the
    // guard's own deadline for an event under the forwarder's.
    expect(Install.HOOK_TIMEOUT_SECONDS * 1000).toBeGreaterThanOrEqual(5 * GuardInstall.FORWARD_TIMEOUT_MS)
    expect(GuardServer.DEFAULT_HANDLE_TIMEOUT_MS).toBeLessThan(GuardInstall.FORWARD_TIMEOUT_MS)
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

const startGuard = async (policy: unknown) => {
  const root = tempDir()
  const args = ["claude-code", "guard", "--port", "0", "--root", path.join(root, "journal")]
  if (policy !== undefined) {
    fs.writeFileSync(path.join(root, "guard-policy.json"), JSON.stringify(policy))
    args.push("--policy", path.join(root, "guard-policy.json"))
  }
  const child = start(args, { env: { SESSION_JOURNAL_GUARD_TOKEN: TOKEN } })
  started.push(child)
  const line = await waitForLine(child, (l) => l.includes("listening at "))
  return { child, url: line.slice(line.indexOf("http://"), line.indexOf(",")) }
}

describe.skipIf(!nodeAdapter)("install --guard URL --policy FILE", () => {
  it(
    "is refused unless the guard runs exactly FILE's policy; without --policy it says which one the guard runs",
    async () => {
      const work = tempDir()
      const settings = path.join(work, ".claude", "settings.local.json")
      const denyBash = path.join(work, "deny-bash.json")
      // The same policy as the guard's, written differently: the canonical text is compared.
      fs.writeFileSync(denyBash, `{\n  "denyList": [ "Bash" ]\n}\n`)
      const other = path.join(work, "other.json")
      fs.writeFileSync(other, JSON.stringify({ maxInvocations: 3 }))
      const install = (args: ReadonlyArray<string>, token: string | undefined = TOKEN) =>
        run(["claude-code", "install", "--project", work, ...args], {
          env: { SESSION_JOURNAL_GUARD_TOKEN: token ?? "" }
        })

      // A guard that records only: a policy given to install would not be in force.
      const recordOnly = await startGuard(undefined)
      const unenforced = await install(["--guard", recordOnly.url, "--policy", denyBash])
      expect(unenforced.code, unenforced.stderr).toBe(2)
      expect(unenforced.stderr).toContain(`the guard at ${recordOnly.url} runs no policy (it records only`)
      expect(unenforced.stderr).toContain("nothing was installed")
      expect(fs.existsSync(settings)).toBe(false)
      const says = await install(["--guard", recordOnly.url])
      expect(says.code, says.stderr).toBe(0)
      expect(says.stdout).toContain(`the guard at ${recordOnly.url} runs no policy`)
      fs.rmSync(path.join(work, ".claude"), { recursive: true })
      recordOnly.child.kill("SIGTERM")
      expect(await exited(recordOnly.child)).toBe(0)

      const g = await startGuard({ denyList: ["Bash"] })
      const mismatch = await install(["--guard", g.url, "--policy", other])
      expect(mismatch.code, mismatch.stderr).toBe(2)
      expect(mismatch.stderr).toContain("runs the policy denyList([\"Bash\"])")
      expect(mismatch.stderr).toContain("not " + other)
      expect(fs.existsSync(settings)).toBe(false)
      // Without the token it cannot ask: refused with --policy, only said without.
      const noToken = await install(["--guard", g.url, "--policy", denyBash], "")
      expect(noToken.code).toBe(2)
      expect(noToken.stderr).toContain("SESSION_JOURNAL_GUARD_TOKEN is not set")
      const wrongToken = await install(["--guard", g.url, "--policy", denyBash], "not-the-token-at-all-0000")
      expect(wrongToken.code).toBe(2)
      expect(wrongToken.stderr).toContain("without proof that it holds the token")
      expect(fs.existsSync(settings)).toBe(false)

      const same = await install(["--guard", g.url, "--policy", denyBash])
      expect(same.code, same.stderr).toBe(0)
      expect(same.stdout).toContain(`runs ${denyBash}'s policy denyList(["Bash"])`)
      const written = JSON.parse(fs.readFileSync(settings, "utf8")) as Install.Report & {
        hooks: Record<string, Array<{ hooks: Array<{ command: string }> }>>
      }
      expect(written.hooks["PreToolUse"]![0]!.hooks[0]!.command).toContain(`claude-code forward --url ${g.url}`)
      g.child.kill("SIGTERM")
      expect(await exited(g.child)).toBe(0)

      // The guard down: refused with --policy, installed (and said) without.
      const down = await install(["--guard", g.url, "--policy", denyBash])
      expect(down.code).toBe(2)
      expect(down.stderr).toContain("could not be asked which policy it runs")
      const downPlain = await install(["--guard", g.url])
      expect(downPlain.code, downPlain.stderr).toBe(0)
      expect(downPlain.stdout).toContain("could not be asked")
    },
    120_000
  )
})
