/**
 * `session-journal claude-code install` on a settings file that has other hooks
 * and settings: it keeps them, writes a backup, changes nothing the second time,
 * and `--uninstall` gives back the file's own settings; a file that is not
 * settings is left alone.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { EVENTS, isOurs } from "../src/Install.ts"
import { cleanup, run, tempDir } from "./Run.ts"

afterAll(cleanup)

const theirs = {
  model: "claude-opus-5-5",
  permissions: { allow: ["Bash(ls:*)"] },
  hooks: {
    PreToolUse: [{ matcher: "Bash", hooks: [{ type: "command", command: "/usr/local/bin/audit-bash", timeout: 5 }] }],
    Notification: [{ matcher: "", hooks: [{ type: "command", command: "notify-send hi" }] }]
  }
}

const read = (file: string) => JSON.parse(fs.readFileSync(file, "utf8"))

describe("claude-code install", () => {
  it("merges, keeps the rest, backs up, is idempotent; --uninstall removes only ours", async () => {
    const dir = tempDir()
    const project = path.join(dir, "proj")
    const file = path.join(project, ".claude", "settings.json")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    const original = JSON.stringify(theirs, null, 4)
    fs.writeFileSync(file, original, { mode: 0o600 })
    const policy = path.join(dir, "policy.json")
    fs.writeFileSync(policy, JSON.stringify([{ maxStreak: 3 }]))

    // Relative paths, run from elsewhere: the hooks name both by absolute path.
    const installed = await run(["--dir", "journal", "claude-code", "install", "--project", "proj", "--policy", "policy.json"], { cwd: dir })
    assert.strictEqual(installed.code, 0, installed.stderr)
    assert.include(installed.stdout, "installed hooks for 11 events")
    const after = read(file)
    assert.strictEqual(after.model, theirs.model)
    assert.deepStrictEqual(after.permissions, theirs.permissions)
    assert.deepStrictEqual(after.hooks.Notification, theirs.hooks.Notification)
    assert.deepStrictEqual(after.hooks.PreToolUse[0], theirs.hooks.PreToolUse[0])
    assert.deepStrictEqual(Object.keys(after.hooks).sort(), [...EVENTS, "Notification"].sort())
    for (const event of EVENTS) {
      const ours = after.hooks[event].at(-1)
      assert.strictEqual(ours.matcher, "")
      assert.isTrue(isOurs(ours.hooks[0]))
      assert.include(ours.hooks[0].command, ` claude-code hook --root ${path.join(dir, "journal")} --policy ${policy}`)
      assert.strictEqual(ours.hooks[0].timeout, 60)
    }
    assert.strictEqual(fs.readFileSync(file + ".session-journal.bak", "utf8"), original)
    assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
    assert.strictEqual(fs.statSync(file + ".session-journal.bak").mode & 0o777, 0o600)

    // Twice: nothing changes, not even the backup.
    const text = fs.readFileSync(file, "utf8")
    fs.rmSync(file + ".session-journal.bak")
    const again = await run(["--dir", "journal", "claude-code", "install", "--project", "proj", "--policy", "policy.json"], { cwd: dir })
    assert.strictEqual(again.code, 0, again.stderr)
    assert.include(again.stdout, "unchanged")
    assert.strictEqual(fs.readFileSync(file, "utf8"), text)
    assert.isFalse(fs.existsSync(file + ".session-journal.bak"))

    const removed = await run(["claude-code", "install", "--project", project, "--uninstall"])
    assert.strictEqual(removed.code, 0, removed.stderr)
    assert.deepStrictEqual(read(file), theirs)
    assert.strictEqual(fs.readFileSync(file + ".session-journal.bak", "utf8"), text)
    const twice = await run(["claude-code", "install", "--project", project, "--uninstall"])
    assert.include(twice.stdout, "unchanged")
  })

  it("refuses a file that is not settings, and a policy that does not decode, changing nothing", async () => {
    const dir = tempDir()
    const file = path.join(dir, ".claude", "settings.json")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, "[1, 2")
    const r = await run(["claude-code", "install", "--project", dir])
    assert.strictEqual(r.code, 2)
    assert.match(r.stderr, /cannot use it as Claude Code settings \(left unchanged\)/)
    assert.strictEqual(fs.readFileSync(file, "utf8"), "[1, 2")

    fs.writeFileSync(file, "{}")
    fs.writeFileSync(path.join(dir, "p.json"), "{\"maxStreak\":\"3\"}")
    const p = await run(["claude-code", "install", "--project", dir, "--policy", path.join(dir, "p.json")])
    assert.strictEqual(p.code, 2)
    assert.match(p.stderr, /\$\.maxStreak/)
    assert.strictEqual(fs.readFileSync(file, "utf8"), "{}")
  })

  it("--user writes $CLAUDE_CONFIG_DIR/settings.json; a new file gets no backup", async () => {
    const dir = tempDir()
    const r = await run(["--dir", path.join(dir, "j"), "claude-code", "install", "--user"], { env: { CLAUDE_CONFIG_DIR: dir } })
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(Object.keys(read(path.join(dir, "settings.json")).hooks).length, EVENTS.length)
    assert.isFalse(fs.existsSync(path.join(dir, "settings.json.session-journal.bak")))
  })
})
