/**
 * Which journal session holds which transcript file. Claude Code keeps, per
 * project directory, a main transcript `<session>.jsonl` per session and the
 * transcripts of the sub-agents it spawned under
 * `<session>/subagents/agent-<id>.jsonl`. Each file gets its own journal
 * session, with an id derived from the file's place alone (so every run, on
 * every machine, picks the same session):
 *
 * - `cc-<P>-<session>` for a main transcript;
 * - `cc-<P>-<session>_<agent file stem>` for a sub-agent transcript;
 * - `cc-<P>-_<H>` when a name does not fit (a character outside
 *   `[A-Za-z0-9-]`, a session stem over 64 or an agent stem over 48 characters);
 *
 * where `<P>` is the first 8 hex digits of the SHA-256 of the project
 * directory's name and `<H>` the first 40 hex digits of the SHA-256 of the
 * file's path relative to the project directory. Stems never contain `_`, so
 * the three forms cannot meet, and every id matches `^[A-Za-z0-9_-]{1,128}$`.
 * Pure.
 *
 * @since 0.1.0
 */
import { sha256 } from "@noble/hashes/sha2.js"
import { bytesToHex } from "@noble/hashes/utils.js"

/**
 * Prefix of every session id this package derives.
 *
 * @since 0.1.0
 */
export const PREFIX = "cc-"

/**
 * A transcript file, by its place in a project directory.
 *
 * - `Main`: `<session>.jsonl`, the main transcript of session `<session>`.
 * - `SubAgent`: `<session>/subagents/agent-<id>.jsonl`, the transcript of
 *   sub-agent `<id>` spawned by session `<session>`.
 *
 * @since 0.1.0
 */
export type Transcript =
  | { readonly _tag: "Main"; readonly project: string; readonly session: string }
  | {
    readonly _tag: "SubAgent"
    readonly project: string
    readonly session: string
    /** The file name without `.jsonl` (`agent-a1b2c3`). */
    readonly stem: string
    /** The sub-agent's id (the stem without `agent-`). */
    readonly agentId: string
  }

/**
 * The transcript a path relative to a project directory names (`/`
 * separators), or null when it is no transcript (another file, or a
 * `.jsonl` file elsewhere in the tree).
 *
 * @since 0.1.0
 */
export const classify = (project: string, relative: string): Transcript | null => {
  const parts = relative.split("/")
  if (parts.length === 1 && parts[0]!.endsWith(".jsonl") && parts[0]!.length > ".jsonl".length) {
    return { _tag: "Main", project, session: parts[0]!.slice(0, -".jsonl".length) }
  }
  if (parts.length === 3 && parts[1] === "subagents") {
    const file = parts[2]!
    if (file.startsWith("agent-") && file.endsWith(".jsonl") && file.length > "agent-.jsonl".length) {
      const stem = file.slice(0, -".jsonl".length)
      return { _tag: "SubAgent", project, session: parts[0]!, stem, agentId: stem.slice("agent-".length) }
    }
  }
  return null
}

/**
 * The path of a transcript relative to its project directory.
 *
 * @since 0.1.0
 */
export const relativePath = (t: Transcript): string =>
  t._tag === "Main" ? `${t.session}.jsonl` : `${t.session}/subagents/${t.stem}.jsonl`

/**
 * The first `digits` hex digits of the SHA-256 of `text` (UTF-8): the hashed part
 * of every session id derived from a name that does not fit as it is, here and in
 * the hook's, the store's and Codex's ids.
 *
 * @since 0.1.0
 */
export const digestPrefix = (text: string, digits: number): string =>
  bytesToHex(sha256(new TextEncoder().encode(text))).slice(0, digits)

const stemPattern = (max: number) => new RegExp(`^[A-Za-z0-9-]{1,${max}}$`)
const sessionStem = stemPattern(64)
const agentStem = stemPattern(48)

/**
 * The journal session id of a transcript (see the module header for the rule).
 *
 * @since 0.1.0
 */
export const sessionId = (t: Transcript): string => {
  const base = `${PREFIX}${digestPrefix(t.project, 8)}-`
  if (t._tag === "Main" && sessionStem.test(t.session)) return base + t.session
  if (t._tag === "SubAgent" && sessionStem.test(t.session) && agentStem.test(t.stem)) {
    return `${base}${t.session}_${t.stem}`
  }
  return `${base}_${digestPrefix(relativePath(t), 40)}`
}

/**
 * The journal session id of the main transcript of `session` in `project`, the
 * parent of its sub-agents.
 *
 * @since 0.1.0
 */
export const parentId = (t: Transcript): string => sessionId({ _tag: "Main", project: t.project, session: t.session })
