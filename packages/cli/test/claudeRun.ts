/**
 * The setting of the `claude-code run` tests: a fake Messages API, a temporary
 * root with the CLI's working directory, HOME and journal, the real CLI behind a
 * wrapper that writes its pid first, and the offline environment plus what the
 * command's own Node needs (the source condition of the tests).
 */
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as Fake from "@session-journal/claude-code/test/fakeApi"
import * as fs from "node:fs"
import * as path from "node:path"

/** What a run test works in. */
export interface Setup {
  readonly api: Fake.FakeApi
  readonly root: string
  readonly work: string
  readonly journal: string
  readonly env: Record<string, string>
  /** A wrapper of the CLI that writes its pid to `pidFile` first. */
  readonly claude: string
  readonly pidFile: string
}

/** A fake API running `script` and a fresh root named by `prefix`. */
export const setup = async (script: Fake.Script, prefix: string): Promise<Setup> => {
  const api = await Fake.start(script)
  const root = Claude.tempDir(prefix)
  const work = path.join(root, "work")
  const home = path.join(root, "home")
  fs.mkdirSync(path.join(home, "tmp"), { recursive: true })
  fs.mkdirSync(work, { recursive: true })
  const pidFile = path.join(root, "claude.pid")
  const claude = path.join(root, "claude")
  fs.writeFileSync(claude, `#!/bin/sh\necho $$ > '${pidFile}'\nexec '${Claude.CLAUDE_BIN}' "$@"\n`, { mode: 0o755 })
  const env: Record<string, string> = {
    ...Claude.offlineEnv(api, home),
    NODE_OPTIONS: process.env["NODE_OPTIONS"] ?? ""
  }
  return { api, root, work, journal: path.join(root, "journal"), env, claude, pidFile }
}

/** The command line up to `claude-code run`'s own arguments. */
export const common = (
  s: Setup
): Array<string> => ["--dir", s.journal, "claude-code", "run", "--claude", s.claude, "--cwd", s.work]
