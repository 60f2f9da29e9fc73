/**
 * What the command hook loads of Node's own modules: it runs once per Claude Code
 * event, and a module it loads is time every tool call waits. `node:crypto` (every
 * part of Node's crypto, for a few SHA-256 digests core computes itself) and
 * `node:child_process` (needed only to arm the watchdog past a deadline) are not
 * loaded by a PreToolUse that is decided and journaled. Checked on the built
 * command, as installed (run from the sources, Node's TypeScript loader itself
 * loads parts of its crypto).
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { baseEnv, BIN, cleanup, tempDir } from "./Run.ts"

afterAll(cleanup)

describe("the command hook's modules", () => {
  it("a PreToolUse decided and journaled loads neither node:crypto nor node:child_process", () => {
    const dir = tempDir()
    const loaded = path.join(dir, "loaded.json")
    const preload = path.join(dir, "preload.cjs")
    fs.writeFileSync(
      preload,
      `process.on("exit", () => require("node:fs").writeFileSync(${
        JSON.stringify(loaded)
      }, JSON.stringify(process.moduleLoadList)))\n`
    )
    const policy = path.join(dir, "policy.json")
    fs.writeFileSync(policy, JSON.stringify([{ maxStreak: 1000 }, { denyList: ["rm"] }]))
    const input = JSON.stringify({
      session_id: "0b7e1c52-3a4d-4e5f-8a9b-0c1d2e3f4a5b",
      transcript_path: path.join(dir, "claude", "projects", "p", "transcript.jsonl"),
      cwd: path.join(dir, "work"),
      hook_event_name: "PreToolUse",
      tool_name: "Read",
      tool_input: { file_path: path.join(dir, "work", "a.txt") },
      tool_use_id: "toolu_loads1",
      permission_mode: "default"
    })
    // Without the workspace's source condition: the built bundle.
    const env = baseEnv()
    delete env["NODE_OPTIONS"]
    for (const id of ["toolu_loads1", "toolu_loads2"]) {
      const ran = spawnSync(
        process.execPath,
        ["-r", preload, BIN, "claude-code", "hook", "--root", path.join(dir, "j"), "--policy", policy],
        { input: input.replace("toolu_loads1", id), env, encoding: "utf8" }
      )
      expect(ran.status, ran.stderr).toBe(0)
      expect(ran.stdout.trim()).toBe("{}")
      const modules = JSON.parse(fs.readFileSync(loaded, "utf8")) as Array<string>
      expect(modules.filter((m) => /\bcrypto\b|child_process/.test(m))).toEqual([])
    }
  }, 60_000)
})
