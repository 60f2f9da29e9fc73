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
 * @since 0.1.0
 */
import { Mirror, StorageError } from "@session-journal/core"
import * as Effect from "effect/Effect"
import * as fs from "node:fs/promises"
import { constants } from "node:fs"
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

const syncDir = async (dir: string): Promise<void> => {
  const handle = await fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY)
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

// Creates every missing directory from the mirror root down, 0700 whatever the umask.
const ensureDir = async (root: string, relDir: string): Promise<void> => {
  let current = root
  for (const part of relDir === "." || relDir === "" ? [] : relDir.split("/")) {
    current = path.join(current, part)
    try {
      const st = await fs.lstat(current)
      if (!st.isDirectory()) throw new Error(`${current} exists and is not a directory`)
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw e
      await fs.mkdir(current, { mode: 0o700 })
      await fs.chmod(current, 0o700)
      await syncDir(path.dirname(current))
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
  const tmp = `${dst}.mirror-${process.pid}.tmp`
  const source = await fs.open(src, constants.O_RDONLY | constants.O_NOFOLLOW)
  try {
    const target = await fs.open(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
    try {
      await target.chmod(0o600)
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
        const source = await fs.open(src, constants.O_RDONLY | constants.O_NOFOLLOW)
        try {
          const target = await fs.open(dst, constants.O_RDWR | constants.O_NOFOLLOW)
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
    const sourceFiles = yield* Effect.tryPromise({ try: () => walk(source, false), catch: fail("mirror: list source", source) })
    yield* Effect.tryPromise({
      try: async () => {
        await fs.mkdir(target, { recursive: true, mode: 0o700 })
        await fs.chmod(target, 0o700)
      },
      catch: fail("mirror: create destination", target)
    })
    const mirrored = yield* Effect.tryPromise({ try: () => walk(target, true), catch: fail("mirror: list destination", target) })
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
