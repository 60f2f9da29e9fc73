/**
 * What no call guarded by Claude Code's hooks may touch (`Hook.selfProtection`),
 * as every door computes it: the command hook, the resident guard and the
 * driven session (`claude-code run`).
 *
 * @since 0.1.0
 */
import { decodeStrict } from "@session-journal/core/Utf8"
import * as fs from "node:fs"
import * as path from "node:path"
import type * as Hook from "../Hook.ts"

/** A settings file holds our hooks when it names one of our hook commands. */
const OUR_HOOKS = /claude-code (hook|forward)\b/

/** Largest settings file read (4 MiB); a longer one is read as holding none. */
const MAX_SETTINGS_BYTES = 4 * 1024 * 1024

const holdsOurHooks = async (file: string): Promise<boolean> => {
  try {
    const handle = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK)
    try {
      if (!(await handle.stat()).isFile()) return false
      // Reading stops as soon as the bound is passed; strict UTF-8 (a file that is
      // not is read as holding none).
      const parts: Array<Buffer> = []
      let size = 0
      for await (const chunk of handle.createReadStream({ autoClose: false })) {
        const bytes = chunk as Buffer
        size += bytes.length
        if (size > MAX_SETTINGS_BYTES) return false
        parts.push(bytes)
      }
      return OUR_HOOKS.test(decodeStrict(Buffer.concat(parts)))
    } finally {
      await handle.close()
    }
  } catch {
    return false
  }
}

/**
 * What no guarded call may touch (`Hook.selfProtection`): the journal directory,
 * the policy file, and every Claude Code settings file that holds our hooks (the
 * project's `.claude/settings.json` and `.claude/settings.local.json`, of the
 * event's `cwd` and of `$CLAUDE_PROJECT_DIR`, and the user's settings), Claude
 * Code's transcripts of the project (where the hooks' count and the sub-agents'
 * depths are read), and where any of them leads through a symbolic link.
 *
 * @since 0.1.0
 */
export const protectedPaths = async (
  cwd: string,
  env: Readonly<Record<string, string | undefined>>,
  journalDir: string | null,
  policyFile: string | undefined,
  transcriptPath?: string | undefined
): Promise<Array<Hook.Protected>> => {
  const out: Array<Hook.Protected> = []
  // Claude Code's transcripts of the project: the count of what the hooks allowed
  // and the sub-agents' depths are read there.
  if (transcriptPath !== undefined && path.isAbsolute(transcriptPath)) {
    out.push({ path: path.dirname(transcriptPath), what: "Claude Code's transcripts of this project", directory: true })
  }
  if (journalDir !== null) {
    out.push({ path: path.resolve(cwd, journalDir), what: "the journal directory", directory: true })
  }
  if (policyFile !== undefined) {
    out.push({ path: path.resolve(cwd, policyFile), what: "the policy file", directory: false })
  }
  const projects = new Set([cwd, ...(env["CLAUDE_PROJECT_DIR"] ? [env["CLAUDE_PROJECT_DIR"]] : [])])
  const config = env["CLAUDE_CONFIG_DIR"] ?? (env["HOME"] ? path.join(env["HOME"], ".claude") : undefined)
  const candidates = [
    ...[...projects].flatMap((
      p
    ) => [path.join(p, ".claude", "settings.json"), path.join(p, ".claude", "settings.local.json")]),
    ...(config === undefined ? [] : [path.join(config, "settings.json")])
  ]
  for (const file of new Set(candidates.map((c) => path.resolve(cwd, c)))) {
    if (await holdsOurHooks(file)) {
      out.push({ path: file, what: "the Claude Code settings that hold the hooks", directory: false })
    }
  }
  // A protected path behind a symbolic link (settings kept in a dotfiles
  // repository) is protected where it leads too.
  const targets = await Promise.all(out.map(async (p) => {
    try {
      const real = await fs.promises.realpath(p.path)
      return real === p.path ? null : { ...p, path: real }
    } catch {
      return null
    }
  }))
  return [...out, ...targets.filter((t): t is Hook.Protected => t !== null)]
}
