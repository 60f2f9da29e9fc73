/**
 * The mirror planner: what to do, file by file, to bring a backup copy of a
 * journal directory up to date. Pure: it compares listings (paths, kinds and
 * sizes) and returns a plan; an executor performs it and records the outcome.
 *
 * Journal files only grow between checkpoints (segments are append-only), so the
 * common case is an extension of the mirrored copy from its current size. A file
 * that shrank or was replaced (`checkpoint.json` is atomically replaced) is copied
 * again. Files that exist only in the mirror are kept: a mirror is a backup, and a
 * backup must never lose what the source has since removed.
 *
 * @since 0.1.0
 */

/**
 * One source file as the executor saw it, without following symlinks. `path` is
 * relative to the source root, with `/` separators.
 *
 * @since 0.1.0
 */
export interface SourceFile {
  readonly path: string
  readonly type: "file" | "symlink" | "other"
  readonly size: number
}

/**
 * What to do with one path of the source.
 *
 * - `Copy`: absent from the mirror; copy it whole.
 * - `Extend`: the mirror holds `from` bytes, the source more; append the rest,
 *   but only after the mirrored bytes are verified to be a prefix of the source
 *   (see `afterPrefixCheck`), otherwise recopy.
 * - `Recopy`: the mirror holds more bytes than the source (the file was replaced
 *   or truncated); copy it whole again.
 * - `Skip`: nothing to do (`reason` says why: equal size, or not a regular file).
 *
 * @since 0.1.0
 */
export type Action =
  | { readonly _tag: "Copy"; readonly path: string; readonly size: number }
  | { readonly _tag: "Extend"; readonly path: string; readonly from: number; readonly size: number }
  | { readonly _tag: "Recopy"; readonly path: string; readonly size: number }
  | { readonly _tag: "Skip"; readonly path: string; readonly reason: "equal" | "symlink" | "not_a_file" }

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
 * Plans a mirror run from the source listing and the sizes of the files already
 * in the mirror (by the same relative path). Equal sizes are skipped: the executor
 * never rewrites a file it cannot tell apart by size, which is sound for
 * append-only segments and cheap for everything else; a replaced file of the same
 * size is caught by the next run that sees it grow or shrink.
 *
 * @since 0.1.0
 */
export const plan = (source: Iterable<SourceFile>, mirror: ReadonlyMap<string, number>): Plan => {
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
 * The action for one source file, given the mirrored size (`undefined` when the
 * mirror does not hold it).
 *
 * @since 0.1.0
 */
export const planFile = (file: SourceFile, mirrored: number | undefined): Action => {
  if (file.type === "symlink") return { _tag: "Skip", path: file.path, reason: "symlink" }
  if (file.type !== "file") return { _tag: "Skip", path: file.path, reason: "not_a_file" }
  if (mirrored === undefined) return { _tag: "Copy", path: file.path, size: file.size }
  if (file.size > mirrored) return { _tag: "Extend", path: file.path, from: mirrored, size: file.size }
  if (file.size < mirrored) return { _tag: "Recopy", path: file.path, size: file.size }
  return { _tag: "Skip", path: file.path, reason: "equal" }
}

/**
 * Resolves an `Extend` once the executor has compared the mirrored bytes with the
 * source's first `from` bytes: when they are a prefix, extend; otherwise the mirror
 * holds something else (a replaced file, damage) and the file is copied again.
 *
 * @since 0.1.0
 */
export const afterPrefixCheck = (
  action: Extract<Action, { readonly _tag: "Extend" }>,
  isPrefix: boolean
): Extract<Action, { readonly _tag: "Extend" | "Recopy" }> =>
  isPrefix ? action : { _tag: "Recopy", path: action.path, size: action.size }

/**
 * What happened to one file when a plan was executed.
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

const compare = (a: string, b: string): number => a < b ? -1 : a > b ? 1 : 0
