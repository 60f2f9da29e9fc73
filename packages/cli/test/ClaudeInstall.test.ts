/**
 * `session-journal claude-code install` on real files: it keeps every other byte
 * of the settings (numbers as spelled, comments, order), writes through a
 * symbolic link to its target, never writes through a link planted at a name it
 * creates, keeps every earlier backup, puts personal installs in
 * `.claude/settings.local.json` and `--shared` ones in `.claude/settings.json`
 * with no path of this machine, passes `--root` only when asked, changes nothing
 * the second time, and `--uninstall` finds ours in either project file and gives
 * back the file's own bytes; a file that is not settings is left alone.
 */
import { assert, describe, it } from "@effect/vitest"
import { EVENTS, isOurs, merge, readText, remove } from "@session-journal/claude-code/Installer"
import * as fc from "fast-check"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll } from "vitest"
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

// Numbers JSON.parse cannot give back, a comment, a trailing comma, four spaces.
const handWritten = `{
    // my own settings
    "model": "claude-opus-5-5",
    "cleanupPeriodDays": 12345678901234567890,
    "ratio": 1.50,
    "hooks": {
        "PreToolUse": [
            { "matcher": "Bash", "hooks": [{ "type": "command", "command": "/usr/local/bin/audit-bash", "timeout": 5 }] },
        ],
    },
}
`

const read = (file: string) => readText(fs.readFileSync(file, "utf8")) as Record<string, any>

const ourCommands = (file: string): Array<string> => {
  const hooks = read(file)["hooks"] ?? {}
  return Object.values(hooks as Record<string, Array<{ hooks: Array<{ command: string }> }>>).flatMap((groups) =>
    groups.flatMap((g) => g.hooks.filter((h) => isOurs(h)).map((h) => h.command))
  )
}

describe("claude-code install", () => {
  it("adds one wrapped hook per event to settings.local.json, keeps every other byte, backs up; --uninstall gives the bytes back", async () => {
    const dir = tempDir()
    const project = path.join(dir, "proj")
    const file = path.join(project, ".claude", "settings.local.json")
    fs.mkdirSync(path.dirname(file), { recursive: true })
    fs.writeFileSync(file, handWritten, { mode: 0o600 })
    const policy = path.join(dir, "policy.json")
    fs.writeFileSync(policy, JSON.stringify([{ maxStreak: 3 }]))

    // Relative paths, run from elsewhere: the hooks name both by absolute path.
    const args = ["--dir", "journal", "claude-code", "install", "--project", "proj", "--policy", "policy.json"]
    const installed = await run(args, { cwd: dir })
    assert.strictEqual(installed.code, 0, installed.stderr)
    assert.include(
      installed.stdout,
      `${file}: installed hooks for 11 events; the previous content is in ${file}.session-journal.bak`
    )
    assert.isFalse(fs.existsSync(path.join(project, ".claude", "settings.json")), "the shared file was written")
    const text = fs.readFileSync(file, "utf8")
    assert.isTrue(text.startsWith(handWritten.slice(0, handWritten.indexOf("        ],"))), text)
    assert.include(text, "\"cleanupPeriodDays\": 12345678901234567890,\n    \"ratio\": 1.50,")
    const after = read(file)
    assert.deepStrictEqual(Object.keys(after["hooks"]), ["PreToolUse", ...EVENTS.filter((e) => e !== "PreToolUse")])
    for (const event of EVENTS) {
      const ours = after["hooks"][event].at(-1)
      assert.strictEqual(ours.matcher, "")
      assert.isTrue(isOurs(ours.hooks[0]))
      assert.match(
        ours.hooks[0].command,
        new RegExp(`^/bin/sh -c '.*' session-journal-hook ${event} \\.claude/settings\\.local\\.json `)
      )
      assert.include(ours.hooks[0].command, ` claude-code hook --root ${path.join(dir, "journal")} --policy ${policy}`)
      assert.strictEqual(ours.hooks[0].timeout, 60)
    }
    assert.strictEqual(fs.readFileSync(file + ".session-journal.bak", "utf8"), handWritten)
    assert.strictEqual(fs.statSync(file).mode & 0o777, 0o600)
    assert.strictEqual(fs.statSync(file + ".session-journal.bak").mode & 0o777, 0o600)

    // Twice: nothing changes, no new backup.
    const again = await run(args, { cwd: dir })
    assert.strictEqual(again.code, 0, again.stderr)
    assert.include(again.stdout, "unchanged")
    assert.strictEqual(fs.readFileSync(file, "utf8"), text)
    assert.deepStrictEqual(fs.readdirSync(path.dirname(file)).sort(), [
      "settings.local.json",
      "settings.local.json.session-journal.bak"
    ])

    const removed = await run(["claude-code", "install", "--project", project, "--uninstall"])
    assert.strictEqual(removed.code, 0, removed.stderr)
    assert.strictEqual(fs.readFileSync(file, "utf8"), handWritten)
    assert.include(removed.stdout, `the previous content is in ${file}.session-journal.1.bak`)
    assert.strictEqual(fs.readFileSync(file + ".session-journal.1.bak", "utf8"), text)
    assert.strictEqual(fs.readFileSync(file + ".session-journal.bak", "utf8"), handWritten)
    const twice = await run(["claude-code", "install", "--project", project, "--uninstall"])
    assert.include(twice.stdout, `${file}: unchanged`)
  })

  it("passes --root only when --dir or --root is given", async () => {
    const dir = tempDir()
    const plain = await run(["claude-code", "install", "--project", dir], {
      env: { SESSION_JOURNAL_DIR: "/elsewhere" }
    })
    assert.strictEqual(plain.code, 0, plain.stderr)
    const file = path.join(dir, ".claude", "settings.local.json")
    for (const c of ourCommands(file)) {
      assert.isTrue(c.endsWith(" claude-code hook"), c)
    }
    const root = await run(["claude-code", "install", "--project", dir, "--root", path.join(dir, "j")])
    assert.strictEqual(root.code, 0, root.stderr)
    for (const c of ourCommands(file)) assert.isTrue(c.endsWith(` claude-code hook --root ${path.join(dir, "j")}`), c)
    const both = await run(["--dir", "a", "claude-code", "install", "--project", dir, "--root", "b"])
    assert.strictEqual(both.code, 2)
  })

  it("a settings file that is a symbolic link: the target is updated, the link stays; a dangling link is refused", async () => {
    const dir = tempDir()
    const dotfiles = path.join(dir, "dotfiles", "claude")
    fs.mkdirSync(dotfiles, { recursive: true })
    const target = path.join(dotfiles, "settings.json")
    const original = JSON.stringify(theirs, null, 2)
    fs.writeFileSync(target, original)
    const config = path.join(dir, "config")
    fs.mkdirSync(config)
    const link = path.join(config, "settings.json")
    fs.symlinkSync(path.relative(config, target), link)

    const r = await run(["claude-code", "install", "--user"], { env: { CLAUDE_CONFIG_DIR: config } })
    assert.strictEqual(r.code, 0, r.stderr)
    assert.include(r.stdout, `${link} (a link to ${fs.realpathSync(target)}): installed hooks for 11 events`)
    assert.isTrue(fs.lstatSync(link).isSymbolicLink(), "the link was replaced")
    assert.strictEqual(fs.readlinkSync(link), path.relative(config, target))
    assert.strictEqual(ourCommands(target).length, EVENTS.length)
    assert.deepStrictEqual(fs.readdirSync(dotfiles), ["settings.json"], "a temporary file was left next to the target")
    assert.strictEqual(fs.readFileSync(link + ".session-journal.bak", "utf8"), original)

    const u = await run(["claude-code", "install", "--user", "--uninstall"], { env: { CLAUDE_CONFIG_DIR: config } })
    assert.strictEqual(u.code, 0, u.stderr)
    assert.isTrue(fs.lstatSync(link).isSymbolicLink())
    assert.strictEqual(fs.readFileSync(target, "utf8"), original)

    fs.rmSync(target)
    const dangling = await run(["claude-code", "install", "--user"], { env: { CLAUDE_CONFIG_DIR: config } })
    assert.strictEqual(dangling.code, 2)
    assert.match(dangling.stderr, /it is a symbolic link to \S+, which does not exist/)
    assert.isTrue(fs.lstatSync(link).isSymbolicLink())
    assert.isFalse(fs.existsSync(target))
  })

  it("never writes through a link planted at a temporary or backup name", async () => {
    const dir = tempDir()
    const config = path.join(dir, "config")
    fs.mkdirSync(config)
    const file = path.join(config, "settings.json")
    fs.writeFileSync(file, "{}")
    const victim = path.join(dir, "bashrc")
    fs.writeFileSync(victim, "# my shell\n")
    // The names the temporary and the backup of earlier versions had (this process runs the command).
    for (const name of [`settings.json.session-journal.tmp-${process.pid}`, "settings.json.session-journal.bak"]) {
      fs.symlinkSync(victim, path.join(config, name))
    }
    const r = await run(["claude-code", "install", "--user"], { env: { CLAUDE_CONFIG_DIR: config } })
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(fs.readFileSync(victim, "utf8"), "# my shell\n")
    assert.strictEqual(ourCommands(file).length, EVENTS.length)
    assert.include(r.stdout, `the previous content is in ${file}.session-journal.1.bak`)
    assert.strictEqual(fs.readFileSync(file + ".session-journal.1.bak", "utf8"), "{}")
    assert.isTrue(fs.lstatSync(path.join(config, "settings.json.session-journal.bak")).isSymbolicLink())
  })

  it("every change keeps a new backup; the first original is never overwritten", async () => {
    const dir = tempDir()
    const file = path.join(dir, "settings.json")
    fs.writeFileSync(file, "{\"v\": 1}", { mode: 0o640 })
    const env = { CLAUDE_CONFIG_DIR: dir }
    const contents = ["{\"v\": 1}"]
    for (const args of [[], ["--uninstall"], ["--root", "/j"], ["--root", "/k"]]) {
      const r = await run(["claude-code", "install", "--user", ...args], { env })
      assert.strictEqual(r.code, 0, r.stderr)
      contents.push(fs.readFileSync(file, "utf8"))
    }
    const backups = [
      ".session-journal.bak",
      ".session-journal.1.bak",
      ".session-journal.2.bak",
      ".session-journal.3.bak"
    ]
    assert.deepStrictEqual(backups.map((b) => fs.readFileSync(file + b, "utf8")), contents.slice(0, 4))
    for (const b of backups) assert.strictEqual(fs.statSync(file + b).mode & 0o777, 0o640)
  })

  it("--shared writes .claude/settings.json with no path of this machine; --uninstall finds ours in either file", async () => {
    const dir = tempDir()
    const project = path.join(dir, "a project")
    fs.mkdirSync(path.join(project, "config"), { recursive: true })
    fs.writeFileSync(path.join(project, "config", "policy.json"), JSON.stringify({ maxStreak: 3 }))
    fs.writeFileSync(path.join(dir, "outside.json"), JSON.stringify({ maxStreak: 3 }))

    const outside = await run(["claude-code", "install", "--shared", "--policy", path.join(dir, "outside.json")], {
      cwd: project
    })
    assert.strictEqual(outside.code, 2)
    assert.match(outside.stderr, /outside the project .*relative to \$CLAUDE_PROJECT_DIR/)
    assert.isFalse(fs.existsSync(path.join(project, ".claude")))

    const r = await run(
      ["claude-code", "install", "--shared", "--policy", "config/policy.json", "--root", ".journal"],
      {
        cwd: project
      }
    )
    assert.strictEqual(r.code, 0, r.stderr)
    const shared = path.join(project, ".claude", "settings.json")
    const text = fs.readFileSync(shared, "utf8")
    assert.notInclude(text, dir)
    assert.notInclude(text, process.execPath)
    for (const c of ourCommands(shared)) {
      assert.isTrue(
        c.endsWith(
          ` .claude/settings.json session-journal claude-code hook --root "$CLAUDE_PROJECT_DIR"/.journal --policy "$CLAUDE_PROJECT_DIR"/config/policy.json`
        ),
        c
      )
    }

    // A personal install on top: told that both files hold ours.
    const local = await run(["claude-code", "install"], { cwd: project })
    assert.strictEqual(local.code, 0, local.stderr)
    assert.include(local.stdout, `note: ${shared} has our hooks too`)

    const u = await run(["claude-code", "install", "--uninstall", "--project", project])
    assert.strictEqual(u.code, 0, u.stderr)
    assert.include(u.stdout, `${path.join(project, ".claude", "settings.local.json")}: uninstalled our hooks`)
    assert.include(u.stdout, `${shared}: uninstalled our hooks`)
    assert.deepStrictEqual(ourCommands(shared), [])
    assert.strictEqual(fs.readFileSync(shared, "utf8"), "{}\n")
  })

  it("refuses a file that is not settings, and a policy that does not decode, changing nothing", async () => {
    const dir = tempDir()
    const file = path.join(dir, ".claude", "settings.local.json")
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

  it("--mcp names the policy and the journal relative to the project, refuses what lies outside it, --check says what runs direct", async () => {
    const dir = tempDir()
    const project = path.join(dir, "proj")
    fs.mkdirSync(path.join(project, "conf"), { recursive: true })
    const file = path.join(project, ".mcp.json")
    const original =
      "{\"mcpServers\": {\"fs\": {\"command\": \"npx\", \"args\": [\"srv\"]}, \"old\": {\"type\": \"sse\", \"url\": \"u\"}}}\n"
    fs.writeFileSync(file, original)
    fs.writeFileSync(path.join(project, "conf", "policy.json"), "{\"maxStreak\": 3}")
    fs.writeFileSync(path.join(dir, "outside.json"), "{\"maxStreak\": 3}")
    const outside = await run([
      "claude-code",
      "install",
      "--mcp",
      "--project",
      project,
      "--policy",
      path.join(dir, "outside.json")
    ])
    assert.strictEqual(outside.code, 2)
    assert.match(outside.stderr, /is outside the project/)
    const shared = await run(["claude-code", "install", "--mcp", "--shared", "--project", project])
    assert.strictEqual(shared.code, 2)
    assert.match(shared.stderr, /--shared.*is for hooks/)
    assert.strictEqual(fs.readFileSync(file, "utf8"), original)

    const r = await run([
      "--dir",
      path.join(project, "journal"),
      "claude-code",
      "install",
      "--mcp",
      "--project",
      project,
      "--policy",
      path.join(project, "conf", "policy.json")
    ])
    assert.strictEqual(r.code, 0, r.stderr)
    assert.match(r.stdout, /old +direct: its type is "sse"/)
    const fsServer = JSON.parse(fs.readFileSync(file, "utf8")).mcpServers.fs
    assert.deepStrictEqual(fsServer, {
      command: "session-journal",
      args: ["--dir", "journal", "mcp", "proxy", "--name", "fs", "--policy", "conf/policy.json", "--", "npx", "srv"]
    })
    const checked = await run(["--json", "claude-code", "install", "--mcp", "--check", "--project", project])
    assert.strictEqual(checked.code, 1)
    assert.deepStrictEqual(JSON.parse(checked.stdout).servers.map((s: { state: string }) => s.state), [
      "gateway",
      "unsupported"
    ])
    const removed = await run(["claude-code", "install", "--mcp", "--uninstall", "--project", project])
    assert.strictEqual(removed.code, 0, removed.stderr)
    assert.strictEqual(fs.readFileSync(file, "utf8"), original)
  })

  it("--mcp-server adds a server through the gateway (creating .mcp.json), refuses a name taken; --uninstall leaves it direct", async () => {
    const dir = tempDir()
    const file = path.join(dir, ".mcp.json")
    const added = await run([
      "claude-code",
      "install",
      "--mcp-server",
      "github",
      "--project",
      dir,
      "--",
      "npx",
      "-y",
      "srv"
    ])
    assert.strictEqual(added.code, 0, added.stderr)
    assert.deepStrictEqual(JSON.parse(fs.readFileSync(file, "utf8")), {
      mcpServers: {
        github: { command: "session-journal", args: ["mcp", "proxy", "--name", "github", "--", "npx", "-y", "srv"] }
      }
    })
    const remote = await run([
      "claude-code",
      "install",
      "--mcp-server",
      "remote",
      "--url",
      "https://x/mcp",
      "--project",
      dir
    ])
    assert.strictEqual(remote.code, 0, remote.stderr)
    assert.deepStrictEqual(JSON.parse(fs.readFileSync(file, "utf8")).mcpServers.remote, {
      type: "stdio",
      url: "https://x/mcp",
      command: "session-journal",
      args: ["mcp", "proxy", "--name", "remote", "--url", "https://x/mcp"]
    })
    const before = fs.readFileSync(file, "utf8")
    const taken = await run(["claude-code", "install", "--mcp-server", "github", "--project", dir, "--", "other"])
    assert.strictEqual(taken.code, 2)
    assert.match(taken.stderr, /a server named "github" already/)
    const both = await run(["claude-code", "install", "--mcp-server", "x", "--url", "u", "--project", dir, "--", "c"])
    assert.strictEqual(both.code, 2)
    const stray = await run(["claude-code", "install", "--project", dir, "--", "npx"])
    assert.strictEqual(stray.code, 2)
    assert.match(stray.stderr, /is for --mcp-server/)
    assert.strictEqual(fs.readFileSync(file, "utf8"), before)
    const removed = await run(["claude-code", "install", "--mcp", "--uninstall", "--project", dir])
    assert.strictEqual(removed.code, 0, removed.stderr)
    assert.deepStrictEqual(JSON.parse(fs.readFileSync(file, "utf8")), {
      mcpServers: {
        github: { command: "npx", args: ["-y", "srv"] },
        remote: { type: "http", url: "https://x/mcp" }
      }
    })
  })

  it("--user writes $CLAUDE_CONFIG_DIR/settings.json; a new file gets no backup", async () => {
    const dir = tempDir()
    const r = await run(["--dir", path.join(dir, "j"), "claude-code", "install", "--user"], {
      env: { CLAUDE_CONFIG_DIR: dir }
    })
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(Object.keys(read(path.join(dir, "settings.json"))["hooks"]).length, EVENTS.length)
    assert.deepStrictEqual(fs.readdirSync(dir), ["settings.json"])
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
