/**
 * `session-journal claude-code install` on a settings file that has other hooks
 * and settings: it keeps them, writes a backup, changes nothing the second time,
 * and `--uninstall` gives back the file's own settings; a file that is not
 * settings is left alone.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
import { EVENTS, isOurs, merge, remove } from "../src/commands/Install.ts"
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
    const installed = await run([
      "--dir",
      "journal",
      "claude-code",
      "install",
      "--project",
      "proj",
      "--policy",
      "policy.json"
    ], { cwd: dir })
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
    const again = await run([
      "--dir",
      "journal",
      "claude-code",
      "install",
      "--project",
      "proj",
      "--policy",
      "policy.json"
    ], { cwd: dir })
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
    const r = await run(["--dir", path.join(dir, "j"), "claude-code", "install", "--user"], {
      env: { CLAUDE_CONFIG_DIR: dir }
    })
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(Object.keys(read(path.join(dir, "settings.json")).hooks).length, EVENTS.length)
    assert.isFalse(fs.existsSync(path.join(dir, "settings.json.session-journal.bak")))
  })
})

describe("Install.merge and Install.remove (property)", () => {
  const ours = { type: "command", command: "/n /x/session-journal.js claude-code hook --root /j", timeout: 60 }
  const hookObject = fc.oneof(
    fc.record({ type: fc.constant("command"), command: fc.string({ maxLength: 12 }) }),
    fc.constant(ours as Record<string, unknown>),
    fc.jsonValue({ maxDepth: 1 })
  )
  const group = fc.oneof(
    fc.record({ matcher: fc.string({ maxLength: 4 }), hooks: fc.array(hookObject, { maxLength: 3 }) }),
    fc.jsonValue({ maxDepth: 1 })
  )
  const settings = fc.record({
    hooks: fc.dictionary(fc.constantFrom(...EVENTS, "Notification", "x"), fc.array(group, { maxLength: 3 }), {
      maxKeys: 4
    }),
    other: fc.jsonValue({ maxDepth: 2 })
  }, { requiredKeys: [] })
  const seed = Number(process.env["FC_SEED"] ?? Date.now() % 2 ** 31)

  // An event whose list is empty says nothing; remove drops one it emptied.
  const normal = (x: Record<string, unknown>): unknown => {
    const hooks = x["hooks"]
    if (typeof hooks !== "object" || hooks === null || Array.isArray(hooks)) return x
    const kept = Object.fromEntries(Object.entries(hooks).filter(([, v]) => !(Array.isArray(v) && v.length === 0)))
    const { hooks: _, ...rest } = x
    return Object.keys(kept).length === 0 ? rest : { ...rest, hooks: kept }
  }

  it("merge is idempotent, keeps every hook not ours, and remove undoes it", () => {
    fc.assert(
      fc.property(settings, (raw) => {
        const s = JSON.parse(JSON.stringify(raw)) as Record<string, never>
        const once = merge(s, ours)
        assert.deepStrictEqual(merge(once, ours), once)
        assert.deepStrictEqual(normal(remove(once)), normal(remove(s)))
        assert.deepStrictEqual(remove(remove(s)), remove(s))
        const others = (x: Record<string, unknown>) => {
          const { hooks: _, ...rest } = x
          return JSON.stringify(rest)
        }
        assert.strictEqual(others(once), others(s))
        const hooks = once["hooks"] as unknown as Record<string, Array<{ hooks: Array<unknown> }>>
        for (const event of EVENTS) assert.isTrue(isOurs(hooks[event]!.at(-1)!.hooks[0]))
      }),
      { seed, verbose: true }
    )
  })
})
