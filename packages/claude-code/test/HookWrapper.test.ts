/**
 * The fail-closed wrapper of every installed hook (`Install.wrap`), run with
 * `/bin/sh -c` as Claude Code runs command hooks: each exit of the program it
 * wraps (0, 1, 2, 3, 126, 127, a signal, a Node that cannot find its script) per
 * kind of event, its stdout and stdin passed through, its one line on stderr, and
 * arguments that survive the shell whatever they hold.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, assert, describe, it } from "vitest"
import * as Install from "../src/Installer.ts"
import { cleanup, tempDir } from "./claudeCli.ts"

afterAll(cleanup)

const sh = (command: string, input = "", env?: NodeJS.ProcessEnv) => {
  const r = spawnSync("/bin/sh", ["-c", command], {
    input,
    encoding: "utf8",
    env: { PATH: process.env["PATH"], ...env }
  })
  return { code: r.status, stdout: r.stdout, stderr: r.stderr }
}

// A program that prints to both streams, then exits with `code`.
const program = (code: number) => [
  "/bin/sh",
  "-c",
  `printf out; echo "Error: the program's own reason" >&2; exit ${code}`
]

const SETTINGS = ".claude/settings.local.json"

describe("the hook wrapper", () => {
  it("has no single quote in its script, so it survives shell quoting", () => {
    assert.notInclude(Install.WRAPPER_SCRIPT, "'")
  })

  for (const event of ["PreToolUse", "PermissionRequest", "UserPromptSubmit", "PostToolUse", "SessionStart"]) {
    it(`${event}: 0 and 2 pass as they are; every other exit becomes 2 with one line`, () => {
      for (const code of [0, 2]) {
        const r = sh(Install.wrap(program(code), { event, settings: SETTINGS }))
        assert.strictEqual(r.code, code)
        assert.strictEqual(r.stdout, "out")
        assert.strictEqual(r.stderr, "Error: the program's own reason\n")
      }
      for (const code of [1, 3, 70, 126, 127]) {
        const r = sh(Install.wrap(program(code), { event, settings: SETTINGS }))
        assert.strictEqual(r.code, 2, `exit ${code}`)
        assert.strictEqual(r.stdout, "out")
        const lines = r.stderr.split("\n")
        assert.deepStrictEqual(lines.length, 2, r.stderr)
        assert.strictEqual(lines[1], "")
        assert.match(lines[0]!, new RegExp(`^session-journal: the ${event} hook cannot run: /bin/sh `))
        assert.include(lines[0]!, "(Error: the program's own reason)")
        assert.include(lines[0]!, "so it is refused")
        assert.include(lines[0]!, `remove its hooks from ${SETTINGS} (session-journal claude-code install --uninstall)`)
        assert.include(
          lines[0]!,
          code === 126 ? "cannot be executed" : code === 127 ? "was not found" : `exited with ${code}`
        )
      }
    })
  }

  for (const event of ["Stop", "SubagentStop"]) {
    it(`${event}: 0, 1 (ours: a stop already kept going) and 2 pass; every other exit becomes 1`, () => {
      for (const code of [0, 1, 2]) {
        const r = sh(Install.wrap(program(code), { event }))
        assert.strictEqual(r.code, code)
        assert.strictEqual(r.stderr, "Error: the program's own reason\n")
      }
      for (const code of [3, 126, 127, 137]) {
        const r = sh(Install.wrap(program(code), { event }))
        assert.strictEqual(r.code, 1, `exit ${code}`)
        assert.match(
          r.stderr,
          new RegExp(`^session-journal: the ${event} hook cannot run: .*so it is not journaled\\.`)
        )
        assert.include(r.stderr, `remove its hooks from ${Install.DEFAULT_SETTINGS_HINT}`)
        assert.strictEqual(r.stderr.split("\n").length, 2)
      }
    })
  }

  it("a program that is not installed (127), not executable (126), killed (a signal), or a Node without its script", () => {
    const dir = tempDir()
    const missing = sh(Install.wrap([path.join(dir, "gone", "session-journal"), "claude-code", "hook"], {
      event: "PreToolUse"
    }))
    assert.strictEqual(missing.code, 2)
    assert.match(
      missing.stderr,
      /^session-journal: the PreToolUse hook cannot run: \S+\/gone\/session-journal was not found \(.*not found\)/
    )
    assert.strictEqual(missing.stderr.split("\n").length, 2)

    const plain = path.join(dir, "plain")
    fs.writeFileSync(plain, "#!/bin/sh\nexit 0\n", { mode: 0o644 })
    const notExecutable = sh(Install.wrap([plain], { event: "UserPromptSubmit" }))
    assert.strictEqual(notExecutable.code, 2)
    assert.include(notExecutable.stderr, "cannot be executed")

    const killed = sh(Install.wrap(["/bin/sh", "-c", "kill -9 $$"], { event: "PostToolUse" }))
    assert.strictEqual(killed.code, 2)
    assert.include(killed.stderr, "was killed by signal 9")
    const killedStop = sh(Install.wrap(["/bin/sh", "-c", "kill -9 $$"], { event: "Stop" }))
    assert.strictEqual(killedStop.code, 1)

    const node = sh(
      Install.wrap([process.execPath, path.join(dir, "moved", "session-journal.js")], {
        event: "PreToolUse"
      }),
      "",
      { NODE_OPTIONS: "" }
    )
    assert.strictEqual(node.code, 2)
    assert.match(node.stderr, /exited with 1 \(Error: Cannot find module '.*moved\/session-journal\.js'\)/)
    assert.strictEqual(node.stderr.split("\n").length, 2)
  })

  it("passes stdin and stdout through, and every argument exactly, whatever it holds", () => {
    const awkward = ["it's here", "$HOME `x` \"q\" a\\b", "ünï 😀;|&<>*?", "", "-c", "\n"]
    const r = sh(
      Install.wrap([
        process.execPath,
        "-e",
        "process.stdin.pipe(process.stdout); process.stderr.write(JSON.stringify(process.argv.slice(1)))",
        ...awkward
      ], {
        event: "PreToolUse",
        settings: "/home/it's me/.claude/settings.json"
      }),
      "{\"hook_event_name\":\"PreToolUse\"}",
      { NODE_OPTIONS: "" }
    )
    assert.strictEqual(r.code, 0, r.stderr)
    assert.strictEqual(r.stdout, "{\"hook_event_name\":\"PreToolUse\"}")
    assert.deepStrictEqual(JSON.parse(r.stderr), awkward)
  })

  it("a project path expands $CLAUDE_PROJECT_DIR at run time, spaces and all", () => {
    const line = Install.wrap(
      [
        process.execPath,
        "-e",
        "console.log(JSON.stringify(process.argv.slice(1)))",
        Install.projectPath("my dir/p.json")
      ],
      { event: "PreToolUse" }
    )
    const r = sh(line, "", { CLAUDE_PROJECT_DIR: "/work/a b", NODE_OPTIONS: "" })
    assert.deepStrictEqual(JSON.parse(r.stdout), ["/work/a b/my dir/p.json"])
  })

  it("the hook and forwarder commands are wrapped per event; without an event they are the plain lines", () => {
    const hook = Install.hookCommand(["session-journal"], { policy: "/p.json", event: "Stop", settings: SETTINGS })
    assert.isTrue(hook.startsWith("/bin/sh -c '"))
    assert.isTrue(
      hook.endsWith(` session-journal-hook Stop ${SETTINGS} session-journal claude-code hook --policy /p.json`)
    )
    assert.isTrue(Install.isOurs({ type: "command", command: hook }))
    const forward = Install.forwardCommand(["session-journal"], "http://127.0.0.1:1/hook", { event: "PreToolUse" })
    assert.isTrue(
      forward.endsWith(" session-journal claude-code forward --url http://127.0.0.1:1/hook --timeout-ms 10000")
    )
    assert.isTrue(Install.isOurs({ type: "command", command: forward }))
    assert.strictEqual(
      Install.forwardCommand(["session-journal"], "http://127.0.0.1:1/hook"),
      "session-journal claude-code forward --url http://127.0.0.1:1/hook --timeout-ms 10000"
    )
    assert.strictEqual(Install.hookCommand(["sj"], {}), "sj claude-code hook")
  })
})
