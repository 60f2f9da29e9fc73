/**
 * A project with our hooks installed, for the tests that run the real Claude
 * Code CLI with the command hook: the command as it ships, one bundle
 * (`scripts/bundle.ts`) built from the workspace's sources (`Run.ts`'s `BUNDLE`,
 * shared by the test files; its start is the hook's, and a hook started from the
 * TypeScript sources takes seconds on a loaded machine), and `setUp` installing it
 * under a policy.
 */
import { assert } from "@effect/vitest"
import * as Claude from "@session-journal/claude-code/test/claudeCli"
import * as fs from "node:fs"
import * as path from "node:path"
import { BUNDLE, run as runSources } from "./Run.ts"

/** Gives the bundled command's runner and `setUp` (`enabled`: whether the file's tests run). */
export const hookedProjects = (enabled: boolean) => {
  const bundle = enabled ? BUNDLE : ""

  /** The bundled command (`install` then names it in the hooks it writes). */
  const run = (args: ReadonlyArray<string>) => runSources([bundle, ...args], { command: process.execPath })

  /** A project with our hooks installed by `install` under `policy`, journaling into `journal`. */
  const setUp = async (policy: unknown) => {
    const root = Claude.tempDir()
    const work = path.join(root, "work")
    fs.mkdirSync(work, { recursive: true })
    const policyFile = path.join(root, "policy.json")
    fs.writeFileSync(policyFile, JSON.stringify(policy))
    const journal = path.join(root, "journal")
    const installed = await run(["--dir", journal, "claude-code", "install", "--project", work, "--policy", policyFile])
    assert.strictEqual(installed.code, 0, installed.stderr)
    return { root, work, home: path.join(root, "home"), journal }
  }

  return { run, setUp }
}
