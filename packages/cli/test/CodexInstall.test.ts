/**
 * `session-journal codex install` on real temp-dir files, without Codex (it
 * cannot be asked, so it says what to do and exits 1, having written the
 * hooks): a config that is a symbolic link is edited at its target and stays a
 * link, every change keeps a new numbered backup, a second install changes
 * nothing, `--uninstall` gives back the bytes from before, a config that sets
 * `hooks` as a value is refused and left as it was.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { cleanup, run, tempDir } from "./Run.ts"

afterAll(cleanup)

const ORIGINAL = `model = "gpt-5.5" # mine\n\n[features]\nplugins = false`

const install = (home: string, args: ReadonlyArray<string>) =>
  run(["codex", "install", "--codex", path.join(home, "no-codex-here"), ...args], {
    process: true,
    env: { CODEX_HOME: home, SESSION_JOURNAL_CODEX_BIN: "" }
  })

describe("codex install without Codex", () => {
  it("writes through a link with numbered backups, says what to do, and uninstalls to the same bytes", async () => {
    const dir = tempDir()
    const home = path.join(dir, ".codex")
    fs.mkdirSync(home)
    const target = path.join(dir, "dotfiles-config.toml")
    fs.writeFileSync(target, ORIGINAL)
    fs.symlinkSync(target, path.join(home, "config.toml"))

    const first = await install(home, ["--root", path.join(dir, "journal")])
    expect(first.code).toBe(1)
    expect(first.stdout).toContain(`(a link to ${target}): installed hooks for PreToolUse and PostToolUse`)
    expect(first.stdout).toContain("Codex was not asked about the hooks")
    expect(first.stdout).toContain("run this command again where Codex runs (or give --codex BIN)")
    expect(fs.lstatSync(path.join(home, "config.toml")).isSymbolicLink()).toBe(true)
    const installed = fs.readFileSync(target, "utf8")
    expect(installed.startsWith(`${ORIGINAL}\n`)).toBe(true)
    expect(installed).toContain("codex hook --root")

    const second = await install(home, ["--root", path.join(dir, "journal")])
    expect(second.stdout).toContain("unchanged (our hooks are already in it)")
    expect(fs.readFileSync(target, "utf8")).toBe(installed)

    const removed = await install(home, ["--uninstall"])
    expect(removed.code).toBe(0)
    expect(fs.readFileSync(target, "utf8")).toBe(ORIGINAL)
    const backups = fs.readdirSync(home).concat(fs.readdirSync(dir)).filter((n) => n.includes(".session-journal"))
    expect(backups.length).toBe(2)
  })

  it("refuses a config that sets hooks as a value, leaving it as it was", async () => {
    const dir = tempDir()
    const config = path.join(dir, "config.toml")
    const text = `hooks = { PreToolUse = [] }\n`
    fs.writeFileSync(config, text)
    const r = await install(dir, [])
    expect(r.code).toBe(2)
    expect(r.stderr).toContain("sets hooks in a form an array of tables cannot extend")
    expect(fs.readFileSync(config, "utf8")).toBe(text)
  })
})
