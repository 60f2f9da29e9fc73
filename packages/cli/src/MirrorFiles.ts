/**
 * The executing side of `mirror DEST`: lists the journal directory and the
 * mirror without following symlinks, asks the pure planner of
 * `@session-journal/core/Mirror` what to do, and does it file by file.
 *
 * Guarantees per file: a copy is written to a temporary file in the mirror
 * directory, synced and renamed into place (the directory synced after), so a
 * crash leaves the old mirrored file or the new one, never a mix. An extension
 * first checks that the mirrored bytes are a byte prefix of the source, then
 * appends and syncs. Failures are recorded per file and the run goes on; mirror
 * directories are created 0700 and files 0600.
 *
 * Hardening (DESIGN §6 applied to the backup side): every existing component of
 * the destination path is lstat-checked, so a symlink anywhere on the way is
 * refused rather than followed; the destination root and every directory below it
 * must be directories owned by us, and each one we create is fchmod-ed to 0700
 * whatever the umask. Every file, source or mirror, is opened with O_NOFOLLOW and
 * its fstat dev/ino compared with the lstat taken just before, so a file swapped
 * between the check and the open is refused. Temporary files carry the pid, a
 * counter and random bytes in their name, and those left behind by runs whose
 * process is gone are removed before planning.
 *
 * @since 0.1.0
 */
import { Mirror, StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as fs from "node:fs/promises"
import { constants, type Stats } from "node:fs"
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import { InvalidInput, NotAvailable } from "./Failure.ts"
import * as Output from "./Output.ts"
import * as Storage from "./Storage.ts"

/**
 * The result of a mirror run, as printed with `--json`.
 *
 * @since 0.1.0
 */
export interface Result extends Mirror.Summary {
  readonly source: string
  readonly dest: string
  readonly failures: ReadonlyArray<{ readonly path: string; readonly reason: string }>
}

// The lock files belong to the writing process and temporary files to a write in
// progress: neither means anything in a backup.
const excluded = (rel: string): boolean => {
  const name = path.posix.basename(rel)
  return name === "lock" || name === "lock.takeover" || name.startsWith(".tmp-") || name.includes(".mirror-")
}

const CHUNK = 1 << 16

const walk = async (root: string, onlyFiles: boolean): Promise<Array<Mirror.SourceFile>> => {
  const out: Array<Mirror.SourceFile> = []
  const visit = async (rel: string): Promise<void> => {
    const names = await fs.readdir(path.join(root, rel))
    names.sort()
    for (const name of names) {
      const r = rel === "" ? name : `${rel}/${name}`
      const st = await fs.lstat(path.join(root, r))
      if (st.isDirectory()) await visit(r)
      else if (st.isFile()) out.push({ path: r, type: "file", size: st.size })
      else if (!onlyFiles) out.push({ path: r, type: st.isSymbolicLink() ? "symlink" : "other", size: 0 })
    }
  }
  await visit("")
  return out
}

const uid: number | null = typeof process.getuid === "function" ? process.getuid() : null

const codeOf = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

const refused = (p: string, reason: string): Error => new Error(`refused ${p}: ${reason}`)

const lstatOrNull = async (p: string): Promise<Stats | null> => {
  try {
    return await fs.lstat(p)
  } catch (e) {
    if (codeOf(e) === "ENOENT") return null
    throw e
  }
}

const syncDir = async (dir: string): Promise<void> => {
  const handle = await fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW)
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

// Opens `p` with O_NOFOLLOW and requires the handle to be the very inode that `st`
// (an lstat of `p`) described: a swap between the check and the open is refused.
const openChecked = async (p: string, flags: number, st: Stats): Promise<fs.FileHandle> => {
  let handle: fs.FileHandle
  try {
    handle = await fs.open(p, flags | constants.O_NOFOLLOW)
  } catch (e) {
    if (codeOf(e) === "ELOOP") throw refused(p, "a symbolic link")
    throw e
  }
  try {
    const fst = await handle.stat()
    if (fst.dev !== st.dev || fst.ino !== st.ino) throw refused(p, "replaced between lstat and open")
    return handle
  } catch (e) {
    await handle.close()
    throw e
  }
}

// A directory of the mirror: ours, not a symlink, and 0700 (set through the opened
// handle, so a directory swapped in after the lstat is never chmod-ed).
const ownDir = async (dir: string, st: Stats): Promise<void> => {
  if (st.isSymbolicLink()) throw refused(dir, "a symbolic link")
  if (!st.isDirectory()) throw refused(dir, "not a directory")
  if (uid !== null && st.uid !== uid) throw refused(dir, `owned by uid ${st.uid}, not ${uid}`)
  if ((st.mode & 0o777) === 0o700) return
  const handle = await openChecked(dir, constants.O_RDONLY | constants.O_DIRECTORY, st)
  try {
    await handle.chmod(0o700)
  } finally {
    await handle.close()
  }
}

// Creates `dir` 0700 whatever the umask, then makes its name durable in `parent`.
// A name that appeared meanwhile is checked like any existing directory.
const makeDir = async (dir: string, parent: string): Promise<void> => {
  try {
    await fs.mkdir(dir, { mode: 0o700 })
  } catch (e) {
    if (codeOf(e) !== "EEXIST") throw e
  }
  const st = await fs.lstat(dir)
  if (st.isSymbolicLink() || !st.isDirectory()) throw refused(dir, "replaced while being created")
  if (uid !== null && st.uid !== uid) throw refused(dir, `owned by uid ${st.uid}, not ${uid}`)
  const handle = await openChecked(dir, constants.O_RDONLY | constants.O_DIRECTORY, st)
  try {
    await handle.chmod(0o700)
  } finally {
    await handle.close()
  }
  await syncDir(parent)
}

// An ancestor of the destination root is not ours to chmod, but it must not
// redirect us (symlink) nor let another user swap what lies below it: owned by us
// or root, and not writable by others unless sticky (like /tmp).
const checkAncestor = (dir: string, st: Stats): void => {
  if (st.isSymbolicLink()) throw refused(dir, "a symbolic link")
  if (!st.isDirectory()) throw refused(dir, "not a directory")
  if (uid === null) return
  if (st.uid !== uid && st.uid !== 0) throw refused(dir, `owned by uid ${st.uid}, neither ${uid} nor root`)
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
    throw refused(dir, `group- or other-writable without the sticky bit (mode ${(st.mode & 0o7777).toString(8)})`)
  }
}

// Prepares the destination root: every existing component of the absolute path is
// lstat-checked (a symlink anywhere is refused, never followed, unlike
// `mkdir -p`), every missing one is created 0700, and the root itself must be a
// directory owned by us (made 0700).
const prepareRoot = async (target: string): Promise<void> => {
  const parts = target.split(path.sep).filter((part) => part.length > 0)
  let current = path.parse(target).root
  for (let i = 0; i < parts.length; i++) {
    const parent = current
    current = path.join(current, parts[i]!)
    const st = await lstatOrNull(current)
    if (st === null) await makeDir(current, parent)
    else if (i === parts.length - 1) await ownDir(current, st)
    else checkAncestor(current, st)
  }
}

// Creates every missing directory from the mirror root down, 0700 whatever the
// umask; existing ones must be directories owned by us, never symlinks.
const ensureDir = async (root: string, relDir: string): Promise<void> => {
  let current = root
  for (const part of relDir === "." || relDir === "" ? [] : relDir.split("/")) {
    const parent = current
    current = path.join(current, part)
    const st = await lstatOrNull(current)
    if (st === null) await makeDir(current, parent)
    else await ownDir(current, st)
  }
}

// Opens a source file for reading: it must still be the regular file it was when
// listed, and the opened handle must be that file (O_NONBLOCK so a FIFO planted
// between the checks cannot hang the run).
const openSource = async (src: string): Promise<fs.FileHandle> => {
  const st = await fs.lstat(src)
  if (st.isSymbolicLink()) throw refused(src, "a symbolic link")
  if (!st.isFile()) throw refused(src, "not a regular file")
  return await openChecked(src, constants.O_RDONLY | constants.O_NONBLOCK, st)
}

// Opens a mirrored file to extend it: a regular file owned by us, opened as checked.
const openMirrored = async (dst: string): Promise<fs.FileHandle> => {
  const st = await fs.lstat(dst)
  if (st.isSymbolicLink()) throw refused(dst, "a symbolic link")
  if (!st.isFile()) throw refused(dst, "not a regular file")
  if (uid !== null && st.uid !== uid) throw refused(dst, `owned by uid ${st.uid}, not ${uid}`)
  return await openChecked(dst, constants.O_RDWR | constants.O_NONBLOCK, st)
}

let tempCounter = 0

// Unique per run and per file: the pid tells later runs whether the writer is
// gone (see `removeStaleTemps`), the counter separates files of one run, and the
// random part keeps a reused pid from meeting an old leftover.
const tempName = (dst: string): string =>
  `${dst}.mirror-${process.pid}-${(tempCounter++).toString(36)}-${randomBytes(6).toString("hex")}.tmp`

const TEMP = /\.mirror-(\d+)(?:-[0-9a-z]+-[0-9a-f]+)?\.tmp$/

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return codeOf(e) !== "ESRCH"
  }
}

// Removes the temporary files that runs whose process no longer exists left in
// the mirror (a crash between create and rename). A live pid may be a concurrent
// run, so its files stay; leftovers are never planned either way.
const removeStaleTemps = async (root: string, mirrored: ReadonlyArray<Mirror.SourceFile>): Promise<void> => {
  for (const file of mirrored) {
    const match = TEMP.exec(path.posix.basename(file.path))
    if (match === null || isAlive(Number(match[1]))) continue
    try {
      await fs.unlink(path.join(root, file.path))
    } catch {
      // Best effort: a leftover that cannot be removed is still never planned.
    }
  }
}

const copyRange = async (
  from: fs.FileHandle,
  to: fs.FileHandle,
  start: number,
  end: number
): Promise<void> => {
  const buffer = Buffer.allocUnsafe(CHUNK)
  let pos = start
  while (pos < end) {
    const { bytesRead } = await from.read(buffer, 0, Math.min(CHUNK, end - pos), pos)
    if (bytesRead === 0) throw new Error(`source ended at ${pos} bytes, ${end} expected`)
    let off = 0
    while (off < bytesRead) {
      const { bytesWritten } = await to.write(buffer, off, bytesRead - off, pos + off)
      off += bytesWritten
    }
    pos += bytesRead
  }
}

const copyWhole = async (src: string, dst: string, size: number): Promise<void> => {
  const tmp = tempName(dst)
  const source = await openSource(src)
  try {
    const target = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
    try {
      await target.chmod(0o600)
      const [fst, st] = await Promise.all([target.stat(), fs.lstat(tmp)])
      if (st.isSymbolicLink() || fst.dev !== st.dev || fst.ino !== st.ino) throw refused(tmp, "replaced while being created")
      await copyRange(source, target, 0, size)
      await target.sync()
    } finally {
      await target.close()
    }
    await fs.rename(tmp, dst)
    await syncDir(path.dirname(dst))
  } catch (e) {
    await fs.rm(tmp, { force: true })
    throw e
  } finally {
    await source.close()
  }
}

const isPrefix = async (mirrored: fs.FileHandle, source: fs.FileHandle, length: number): Promise<boolean> => {
  const a = Buffer.allocUnsafe(CHUNK)
  const b = Buffer.allocUnsafe(CHUNK)
  let pos = 0
  while (pos < length) {
    const n = Math.min(CHUNK, length - pos)
    const ra = await mirrored.read(a, 0, n, pos)
    const rb = await source.read(b, 0, n, pos)
    if (ra.bytesRead !== n || rb.bytesRead !== n || !a.subarray(0, n).equals(b.subarray(0, n))) return false
    pos += n
  }
  return true
}

const execute = async (srcRoot: string, dstRoot: string, action: Mirror.Action): Promise<Mirror.Outcome> => {
  const src = path.join(srcRoot, action.path)
  const dst = path.join(dstRoot, action.path)
  try {
    switch (action._tag) {
      case "Skip":
        return { _tag: "Skipped", path: action.path, reason: action.reason }
      case "Copy":
      case "Recopy":
        await ensureDir(dstRoot, path.posix.dirname(action.path))
        await copyWhole(src, dst, action.size)
        return { _tag: action._tag === "Copy" ? "Copied" : "Refreshed", path: action.path, bytes: action.size }
      case "Extend": {
        await ensureDir(dstRoot, path.posix.dirname(action.path))
        const source = await openSource(src)
        try {
          const target = await openMirrored(dst)
          let checked: ReturnType<typeof Mirror.afterPrefixCheck>
          try {
            checked = Mirror.afterPrefixCheck(action, await isPrefix(target, source, action.from))
            if (checked._tag === "Extend") {
              await copyRange(source, target, checked.from, checked.size)
              await target.sync()
            }
          } finally {
            await target.close()
          }
          if (checked._tag === "Extend") return { _tag: "Extended", path: action.path, bytes: action.size - action.from }
          await copyWhole(src, dst, action.size)
          return { _tag: "Refreshed", path: action.path, bytes: action.size }
        } finally {
          await source.close()
        }
      }
    }
  } catch (e) {
    return { _tag: "Failed", path: action.path, reason: e instanceof Error ? e.message : String(e) }
  }
}

const isInside = (parent: string, child: string): boolean => {
  const rel = path.relative(parent, child)
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel))
}

/**
 * Mirrors the journal directory of `storage` into `dest`. Fails only when the run
 * cannot start; per-file failures are in the result (and make the command exit 3).
 *
 * @since 0.1.0
 */
export const run = (storage: Storage.Options, dest: string) =>
  Effect.gen(function*() {
    if (!Storage.isFilesystem(storage)) {
      return yield* new NotAvailable({ feature: "mirror", reason: "it copies a journal directory, not a PostgreSQL database" })
    }
    const source = path.resolve(storage.dir)
    const target = path.resolve(dest)
    if (dest.length === 0) return yield* new InvalidInput({ field: "DEST", reason: "must not be empty" })
    if (isInside(source, target) || isInside(target, source)) {
      return yield* new InvalidInput({ field: "DEST", reason: `must not contain or be inside the journal directory ${source}` })
    }
    const fail = (operation: string, p: string) => (e: unknown) =>
      new StorageError({ operation, path: p, reason: e instanceof Error ? e.message : String(e), cause: e })
    const sourceFiles = yield* Effect.tryPromise({
      try: async () => {
        // The journal root is listed, not followed: the adapter refuses a symlinked root too.
        const st = await fs.lstat(source)
        if (st.isSymbolicLink()) throw refused(source, "a symbolic link")
        if (!st.isDirectory()) throw refused(source, "not a directory")
        return await walk(source, false)
      },
      catch: fail("mirror: list source", source)
    })
    yield* Effect.tryPromise({ try: () => prepareRoot(target), catch: fail("mirror: prepare destination", target) })
    const mirrored = yield* Effect.tryPromise({ try: () => walk(target, true), catch: fail("mirror: list destination", target) })
    yield* Effect.promise(() => removeStaleTemps(target, mirrored))
    const plan = Mirror.plan(
      sourceFiles.filter((f) => !excluded(f.path)),
      new Map(mirrored.filter((f) => !excluded(f.path)).map((f) => [f.path, f.size]))
    )
    const outcomes = yield* Output.withProgress("mirror", plan.actions.length, (bar) =>
      Effect.forEach(plan.actions, (action) =>
        Effect.promise(() => execute(source, target, action)).pipe(Effect.tap(() => Effect.sync(() => bar.advance(1))))))
    const summary = Mirror.summarize(outcomes, plan.kept.length)
    const result: Result = {
      source,
      dest: target,
      ...summary,
      failures: outcomes.flatMap((o) => (o._tag === "Failed" ? [{ path: o.path, reason: o.reason }] : []))
    }
    return result
  })

/**
 * Human output for a mirror run.
 *
 * @since 0.1.0
 */
export const text = (r: Result): Array<string> => [
  `mirror ${r.source} -> ${r.dest}: copied ${r.copied}, extended ${r.extended}, refreshed ${r.refreshed}, skipped ${r.skipped}, failed ${r.failed} (${r.bytes} bytes; ${r.kept} mirror-only files kept)`,
  ...r.failures.map((f) => `  failed ${f.path}: ${f.reason}`)
]
