/**
 * The file work of `mirror`: the destination's checks and housekeeping, the
 * files of one session (hashing, copying ranges, staging) and reading a backup.
 */
import { Checkpoint, Mirror, StorageError } from "@session-journal/core"
import { Files, Lock, NodePersistence } from "@session-journal/node"
import * as Effect from "effect/Effect"
import * as Result_ from "effect/Result"
import { createHash } from "node:crypto"
import * as fs from "node:fs/promises"
import type { Stats } from "node:fs"
import * as path from "node:path"

export const CHECKPOINT = "checkpoint.json"

export const CHUNK = 1 << 20

// Temporary files of the writer, its lock, and the per-file temporaries older
// versions of `mirror` left in backups: none of them is session data.
export const OLD_TEMP = /\.mirror-\d+(?:-[0-9a-z]+-[0-9a-f]+)?\.tmp$/
export const excluded = (name: string): boolean =>
  name === Lock.LOCK_FILE || name === Lock.CLAIM_FILE || name.includes(Files.TEMP_PREFIX) || OLD_TEMP.test(name)

export const message = (e: unknown): string => (e instanceof Error ? e.message : String(e))

export const io = <A>(operation: string, p: string, f: () => Promise<A>): Effect.Effect<A, StorageError> =>
  Effect.tryPromise({
    try: f,
    catch: (e) => e instanceof StorageError ? e : new StorageError({ operation, path: p, reason: message(e), cause: e })
  })

export const lstatOrNull = async (p: string): Promise<Stats | null> => {
  try {
    return await fs.lstat(p)
  } catch (e) {
    if (Files.codeOf(e) === "ENOENT") return null
    throw e
  }
}

export const removeTree = (p: string): Promise<void> => fs.rm(p, { recursive: true, force: true })

export const refused = (p: string, reason: string): StorageError =>
  new StorageError({ operation: "confine", path: p, reason: `refused ${p}: ${reason}` })

// ---------------------------------------------------------------------------
// The destination

export const isInside = (parent: string, child: string): boolean => {
  const rel = path.relative(parent, child)
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel))
}

// The real path of `p` even when its tail does not exist yet: the deepest existing
// ancestor resolved through every symlink, then the missing components.
export const realPathOf = async (p: string): Promise<string> => {
  const missing: Array<string> = []
  let current = p
  for (;;) {
    try {
      return path.join(await fs.realpath(current), ...missing.reverse())
    } catch (e) {
      const parent = path.dirname(current)
      if (Files.codeOf(e) !== "ENOENT" || parent === current) throw e
      missing.push(path.basename(current))
      current = parent
    }
  }
}

// An ancestor of DEST is not ours to chmod, but it must not redirect us (symlink)
// nor let another user swap what lies below it: owned by us or root, and not
// writable by others unless sticky (like /tmp).
export const checkAncestor = (ctx: Files.Context, dir: string, st: Stats): void => {
  if (st.isSymbolicLink()) throw refused(dir, "a symbolic link")
  if (!st.isDirectory()) throw refused(dir, "not a directory")
  if (ctx.uid === null) return
  if (st.uid !== ctx.uid && st.uid !== 0) throw refused(dir, `owned by uid ${st.uid}, neither ${ctx.uid} nor root`)
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
    throw refused(dir, `group- or other-writable without the sticky bit (mode ${(st.mode & 0o7777).toString(8)})`)
  }
}

// Every existing component of DEST's absolute path is lstat-checked (a symlink
// anywhere is refused, never followed, unlike `mkdir -p`), every missing one is
// created 0700, and DEST itself must be a directory of ours (made 0700).
export const prepareRoot = async (ctx: Files.Context, target: string): Promise<void> => {
  const parts = target.split(path.sep).filter((part) => part.length > 0)
  let current = path.parse(target).root
  for (let i = 0; i < parts.length; i++) {
    const parent = current
    current = path.join(current, parts[i]!)
    const st = await lstatOrNull(current)
    if (st === null) await Files.ensureDir(ctx, current, parent)
    else if (st.isSymbolicLink()) throw refused(current, "a symbolic link")
    else if (i === parts.length - 1) await Files.privateDir(ctx, current)
    else checkAncestor(ctx, current, st)
  }
}

// Finishes what a run that died left in `.mirror`: a previous copy whose
// replacement never arrived is put back, one that was replaced is removed, and
// staging directories are removed. Only called while holding the lock.
export const recoverHouse = async (ctx: Files.Context, target: string, house: string): Promise<void> => {
  for (const name of await Files.listDir(ctx, house)) {
    const p = path.join(house, name)
    if (name.startsWith("prev-")) {
      const live = path.join(target, name.slice("prev-".length))
      if ((await lstatOrNull(live)) === null) {
        await Files.call("rename", p, () => fs.rename(p, live))
        await Files.syncDir(ctx, target)
        await Files.syncDir(ctx, house)
      } else await removeTree(p)
    } else if (name.startsWith("stage-")) await removeTree(p)
  }
}

// ---------------------------------------------------------------------------
// Files of one session

export interface Listed {
  readonly name: string
  readonly type: "file" | "symlink" | "other"
  readonly size: number
}

export const listSession = async (dir: string): Promise<Array<Listed>> => {
  const out: Array<Listed> = []
  for (const name of (await fs.readdir(dir)).sort()) {
    if (excluded(name)) continue
    const st = await lstatOrNull(path.join(dir, name))
    if (st === null) continue
    out.push({ name, type: st.isFile() ? "file" : st.isSymbolicLink() ? "symlink" : "other", size: st.isFile() ? st.size : 0 })
  }
  return out
}

// SHA-256 of the first `length` bytes of a file; null when it holds fewer.
export const hashPrefix = async (ctx: Files.Context, file: string, length: number): Promise<string | null> => {
  const fh = await Files.openRead(ctx, file)
  try {
    const hash = createHash("sha256")
    for (let pos = 0; pos < length;) {
      const chunk = await Files.readAt(fh, file, pos, Math.min(CHUNK, length - pos))
      if (chunk.length === 0) return null
      hash.update(chunk)
      pos += chunk.length
    }
    return hash.digest("hex")
  } finally {
    await Files.close(fh)
  }
}

export const sha256 = (bytes: Uint8Array): string => createHash("sha256").update(bytes).digest("hex")

// Appends `[start, end)` of `from` to `out` at `at`; the source must still hold them.
export const copyRange = async (
  ctx: Files.Context,
  from: string,
  start: number,
  end: number,
  out: Files.FileHandle,
  outPath: string,
  at: number
): Promise<void> => {
  const fh = await Files.openRead(ctx, from)
  try {
    for (let pos = start; pos < end;) {
      const chunk = await Files.readAt(fh, from, pos, Math.min(CHUNK, end - pos))
      if (chunk.length === 0) throw new StorageError({ operation: "read", path: from, reason: `ended at ${pos} bytes, ${end} expected` })
      await Files.writeAll(out, outPath, chunk, at + pos - start)
      pos += chunk.length
    }
  } finally {
    await Files.close(fh)
  }
}

export type Piece =
  | { readonly _tag: "Bytes"; readonly bytes: Uint8Array }
  | { readonly _tag: "Range"; readonly file: string; readonly start: number; readonly end: number }

// A new file in the staging directory from pieces, fsynced before it is closed.
export const writeStaged = async (ctx: Files.Context, file: string, pieces: ReadonlyArray<Piece>): Promise<void> => {
  const out = await Files.createExclusive(ctx, file)
  try {
    let at = 0
    for (const piece of pieces) {
      if (piece._tag === "Bytes") {
        await Files.writeAll(out, file, piece.bytes, at)
        at += piece.bytes.length
      } else {
        await copyRange(ctx, piece.file, piece.start, piece.end, out, file, at)
        at += piece.end - piece.start
      }
    }
    await Files.call("fsync", file, () => out.sync())
  } finally {
    await Files.close(out)
  }
}

// A backup file that goes into the new copy unchanged: hard-linked (nothing ever
// writes to it, so both copies may share it), after checking it is a regular file
// of ours.
export const linkStaged = async (ctx: Files.Context, from: string, to: string): Promise<void> => {
  const fh = await Files.openRead(ctx, from)
  await Files.close(fh)
  await Files.call("link", to, () => fs.link(from, to))
}

// ---------------------------------------------------------------------------
// One session

export interface Backup {
  readonly exists: boolean
  readonly files: ReadonlyMap<string, Mirror.MirroredFile>
  readonly verified: Mirror.Verified | null
  readonly last: string | null
}

export const readBackup = (ctx: Files.Context, target: string, id: string) =>
  Effect.gen(function*() {
    const dir = path.join(target, id)
    const st = yield* io("mirror: lstat backup", dir, () => lstatOrNull(dir))
    if (st === null) return { exists: false, files: new Map(), verified: null, last: null } satisfies Backup
    yield* io("mirror: check backup", dir, () => Files.checkDir(ctx, dir))
    const listed = yield* io("mirror: list backup", dir, () => listSession(dir))
    const files = new Map<string, Mirror.MirroredFile>()
    for (const f of listed) {
      if (f.type !== "file") continue
      const file = path.join(dir, f.name)
      const hash = yield* io("mirror: hash backup", file, () => hashPrefix(ctx, file, f.size))
      if (hash !== null) files.set(f.name, { size: f.size, hash })
    }
    const report = yield* NodePersistence.inspect({ root: target }, id).pipe(
      Effect.map((r): Mirror.Verified | null => ({ ok: r.ok, nextSequence: r.nextSequence, head: r.head })),
      Effect.catchTag("SessionNotFound", () => Effect.succeed(null))
    )
    const last = report !== null && report.ok && report.nextSequence > 0
      ? yield* io("mirror: read backup", dir, () => Files.entryHashAt(ctx, dir, report.nextSequence - 1))
      : null
    return { exists: true, files, verified: report, last } satisfies Backup
  })

// The checkpoint of the cut: one read of the whole file, parsed and decoded.
export const readCheckpoint = async (
  ctx: Files.Context,
  dir: string,
  id: string
): Promise<{ readonly bytes: Uint8Array | null } | { readonly broken: string }> => {
  const file = path.join(dir, CHECKPOINT)
  let bytes: Uint8Array
  try {
    const fh = await Files.openRead(ctx, file)
    try {
      bytes = await Files.readBounded(ctx, fh, file)
    } finally {
      await Files.close(fh)
    }
  } catch (e) {
    if (Files.codeOf(e) === "ENOENT") return { bytes: null }
    throw e
  }
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
  } catch {
    return { broken: `${CHECKPOINT} is not valid JSON (${bytes.length} bytes read)` }
  }
  const decoded = Checkpoint.decode(json)
  if (Result_.isFailure(decoded)) return { broken: `${CHECKPOINT}: ${decoded.failure}` }
  if (decoded.success.session_id !== id) return { broken: `${CHECKPOINT} belongs to session ${decoded.success.session_id}` }
  return { bytes }
}

export type Staged =
  | { readonly _tag: "Staged"; readonly plan: Mirror.Plan; readonly verified: Mirror.Verified }
  | { readonly _tag: "Empty" }
  | { readonly _tag: "Retry"; readonly reason: string; readonly storage?: boolean }
