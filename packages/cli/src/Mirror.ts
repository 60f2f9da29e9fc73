/**
 * The mirror planner: what to do, file by file, to bring the backup of one
 * session up to date, and whether the result may replace the backup at all. Pure:
 * it compares listings and content hashes gathered by an executor and returns a
 * plan and a verdict; the executor performs them and records the outcome.
 *
 * Files are compared by content, never by size alone. The executor hashes every
 * mirrored file and, for each source file at least as long, the source's first
 * bytes up to the mirrored length: equal hashes mean the mirror holds a byte
 * prefix of the source, which is then extended (or left alone when the lengths
 * are equal too); any other difference is copied again. Files that exist only in
 * the mirror are kept: a mirror is a backup, and a backup must never lose what the
 * source has since removed.
 *
 * A plan alone does not make a backup: the copy is assembled aside and verified,
 * and `judge` then decides whether it may replace the previous backup. A source
 * that holds fewer entries than the backup, or a chain that is not an extension of
 * the backup's, is refused, never mirrored over it.
 *
 * @since 0.1.0
 */

/**
 * One source file as the executor saw it, without following symlinks. `path` is
 * relative to the session directory, with `/` separators. `prefix` is the SHA-256
 * (lowercase hex) of the source's first `length` bytes; the executor supplies it
 * for the length the mirror holds (see `prefixLength`).
 *
 * @since 0.1.0
 */
export interface SourceFile {
  readonly path: string
  readonly type: "file" | "symlink" | "other"
  readonly size: number
  readonly prefix?: { readonly length: number; readonly hash: string } | undefined
}

/**
 * One file already in the mirror: its length and the SHA-256 (lowercase hex) of
 * its content.
 *
 * @since 0.1.0
 */
export interface MirroredFile {
  readonly size: number
  readonly hash: string
}

/**
 * What to do with one path of the source.
 *
 * - `Copy`: absent from the mirror; copy it whole.
 * - `Extend`: the mirror holds the source's first `from` bytes (by content);
 *   append the rest up to `size`.
 * - `Recopy`: the mirror holds something that is not a prefix of the source (a
 *   replaced, truncated or different file); copy it whole again.
 * - `Unchanged`: the mirror holds exactly the source's bytes.
 * - `Skip`: not a regular file; never followed nor copied.
 *
 * @since 0.1.0
 */
export type Action =
  | { readonly _tag: "Copy"; readonly path: string; readonly size: number }
  | { readonly _tag: "Extend"; readonly path: string; readonly from: number; readonly size: number }
  | { readonly _tag: "Recopy"; readonly path: string; readonly size: number }
  | { readonly _tag: "Unchanged"; readonly path: string; readonly size: number }
  | { readonly _tag: "Skip"; readonly path: string; readonly reason: "symlink" | "not_a_file" }

/**
 * A plan: one action per source path, in path order, and the mirror-only paths
 * that are kept untouched.
 *
 * @since 0.1.0
 */
export interface Plan {
  readonly actions: ReadonlyArray<Action>
  readonly kept: ReadonlyArray<string>
}

/**
 * How many leading bytes of a source file the executor must hash so that the
 * planner can tell whether the mirrored copy is a prefix of it: the mirrored
 * length, when the source is at least that long; null when there is nothing to
 * compare (no mirrored copy, a shorter source, or not a regular file).
 *
 * @since 0.1.0
 */
export const prefixLength = (file: Omit<SourceFile, "prefix">, mirrored: MirroredFile | undefined): number | null =>
  file.type !== "file" || mirrored === undefined || file.size < mirrored.size ? null : mirrored.size

/**
 * Plans the mirror of one directory from the source listing (with prefix hashes)
 * and the files already in the mirror (by the same relative path).
 *
 * @since 0.1.0
 */
export const plan = (source: Iterable<SourceFile>, mirror: ReadonlyMap<string, MirroredFile>): Plan => {
  const actions: Array<Action> = []
  const seen = new Set<string>()
  for (const file of source) {
    if (seen.has(file.path)) continue
    seen.add(file.path)
    actions.push(planFile(file, mirror.get(file.path)))
  }
  actions.sort((a, b) => compare(a.path, b.path))
  const kept = Array.from(mirror.keys()).filter((p) => !seen.has(p)).sort(compare)
  return { actions, kept }
}

/**
 * The action for one source file, given the mirrored copy (`undefined` when the
 * mirror does not hold it). Without a prefix hash of the right length the mirrored
 * bytes cannot be shown to be a prefix, so the file is copied again: equal sizes
 * alone never make a file unchanged.
 *
 * @since 0.1.0
 */
export const planFile = (file: SourceFile, mirrored: MirroredFile | undefined): Action => {
  if (file.type === "symlink") return { _tag: "Skip", path: file.path, reason: "symlink" }
  if (file.type !== "file") return { _tag: "Skip", path: file.path, reason: "not_a_file" }
  if (mirrored === undefined) return { _tag: "Copy", path: file.path, size: file.size }
  const isPrefix = file.size >= mirrored.size && file.prefix !== undefined &&
    file.prefix.length === mirrored.size && file.prefix.hash === mirrored.hash
  if (!isPrefix) return { _tag: "Recopy", path: file.path, size: file.size }
  if (file.size === mirrored.size) return { _tag: "Unchanged", path: file.path, size: file.size }
  return { _tag: "Extend", path: file.path, from: mirrored.size, size: file.size }
}

/**
 * What one file's action did, once executed.
 *
 * @since 0.1.0
 */
export type Outcome =
  | { readonly _tag: "Copied"; readonly path: string; readonly bytes: number }
  | { readonly _tag: "Extended"; readonly path: string; readonly bytes: number }
  | { readonly _tag: "Refreshed"; readonly path: string; readonly bytes: number }
  | { readonly _tag: "Skipped"; readonly path: string; readonly reason: string }
  | { readonly _tag: "Failed"; readonly path: string; readonly reason: string }

/**
 * The outcome of an action whose bytes went into the copy (`Unchanged` and `Skip`
 * count as skipped; `bytes` is what was read from the source).
 *
 * @since 0.1.0
 */
export const outcomeOf = (action: Action): Outcome => {
  switch (action._tag) {
    case "Copy":
      return { _tag: "Copied", path: action.path, bytes: action.size }
    case "Recopy":
      return { _tag: "Refreshed", path: action.path, bytes: action.size }
    case "Extend":
      return { _tag: "Extended", path: action.path, bytes: action.size - action.from }
    case "Unchanged":
      return { _tag: "Skipped", path: action.path, reason: "unchanged" }
    case "Skip":
      return { _tag: "Skipped", path: action.path, reason: action.reason }
  }
}

/**
 * The totals of a mirror run, as the command prints them.
 *
 * @since 0.1.0
 */
export interface Summary {
  readonly copied: number
  readonly extended: number
  readonly refreshed: number
  readonly skipped: number
  readonly failed: number
  readonly kept: number
  readonly bytes: number
}

/**
 * Adds up the outcomes of a run; `kept` is the number of mirror-only files.
 *
 * @since 0.1.0
 */
export const summarize = (outcomes: Iterable<Outcome>, kept: number): Summary => {
  let copied = 0, extended = 0, refreshed = 0, skipped = 0, failed = 0, bytes = 0
  for (const o of outcomes) {
    switch (o._tag) {
      case "Copied":
        copied++
        bytes += o.bytes
        break
      case "Extended":
        extended++
        bytes += o.bytes
        break
      case "Refreshed":
        refreshed++
        bytes += o.bytes
        break
      case "Skipped":
        skipped++
        break
      case "Failed":
        failed++
        break
    }
  }
  return { copied, extended, refreshed, skipped, failed, kept, bytes }
}

/**
 * A session copy as verification saw it: whether it verified, the sequence its
 * next entry would get, and its exported head.
 *
 * @since 0.1.0
 */
export interface Verified {
  readonly ok: boolean
  readonly nextSequence: number
  readonly head: string
}

/**
 * What `judge` compares: the existing backup (null when there is none), the
 * verified staged copy of the source, and the `entry_hash` each of them stores at
 * the backup's last sequence (`backup.nextSequence − 1`; null when that entry is
 * not stored there).
 *
 * @since 0.1.0
 */
export interface Comparison {
  readonly backup: Verified | null
  readonly staged: Verified
  readonly backupLast: string | null
  readonly stagedAtBackupLast: string | null
}

/**
 * Whether a staged copy may replace the backup.
 *
 * @since 0.1.0
 */
export type Verdict =
  | { readonly _tag: "Publish" }
  | { readonly _tag: "Refuse"; readonly reason: string }

/**
 * Decides whether a verified staged copy may replace the backup of a session. It
 * may when there is no backup, or when it holds at least the backup's entries and
 * stores, at the backup's last sequence, the very entry the backup stores there
 * (its `entry_hash` commits to every earlier entry through the chain). Anything
 * else is refused: a copy that does not verify, a backup that does not (it is left
 * for a person to look at), a source with fewer entries (truncated, or rolled back
 * to an older copy), a source that lacks the backup's last entry, and a different
 * chain.
 *
 * @since 0.1.0
 */
export const judge = (c: Comparison): Verdict => {
  const { backup, staged } = c
  if (!staged.ok) return refuse("the copy of the source does not verify")
  if (backup === null) return { _tag: "Publish" }
  if (!backup.ok) return refuse("the existing backup does not verify; it is left as it is")
  if (staged.nextSequence < backup.nextSequence) {
    return refuse(
      `the source holds ${staged.nextSequence} entries, fewer than the ${backup.nextSequence} of the backup`
    )
  }
  if (backup.nextSequence === 0) return { _tag: "Publish" }
  const last = backup.nextSequence - 1
  if (staged.nextSequence === backup.nextSequence && staged.head !== backup.head) {
    return refuse(`the source's head differs from the backup's at ${backup.nextSequence} entries: a different chain`)
  }
  if (c.backupLast === null) {
    return staged.nextSequence === backup.nextSequence
      ? { _tag: "Publish" }
      : refuse(`the backup stores no entry at sequence ${last}, so the source cannot be shown to extend it`)
  }
  if (c.stagedAtBackupLast === null) return refuse(`the source lacks entry ${last}, which the backup holds`)
  if (c.stagedAtBackupLast !== c.backupLast) {
    return refuse(`the source's entry ${last} differs from the backup's: its chain does not extend the backup`)
  }
  return { _tag: "Publish" }
}

/**
 * What happened to one session in a mirror run.
 *
 * @since 0.1.0
 */
export type SessionOutcome = "copied" | "extended" | "unchanged" | "refused" | "failed"

/**
 * The outcome of publishing a plan: `copied` when there was no backup, or when
 * files changed without the chain growing (a checkpoint rewritten, a file copied
 * again); `extended` when the published copy holds more entries than the backup
 * (`judge` has shown that they extend it); `unchanged` when every file was already
 * in the backup.
 *
 * @since 0.1.0
 */
export const published = (
  p: Plan,
  backup: Verified | null,
  staged: Verified
): Extract<SessionOutcome, "copied" | "extended" | "unchanged"> => {
  if (backup === null) return "copied"
  if (p.actions.every((a) => a._tag === "Unchanged" || a._tag === "Skip")) return "unchanged"
  return staged.nextSequence > backup.nextSequence ? "extended" : "copied"
}

const refuse = (reason: string): Verdict => ({ _tag: "Refuse", reason })

const compare = (a: string, b: string): number => a < b ? -1 : a > b ? 1 : 0
