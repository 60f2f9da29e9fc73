/**
 * Confinement (the lstat walk from the root, ownership and mode checks), directory
 * creation and sync, checked opens and durable writes.
 */
import { constants } from "node:fs"
import type { Stats } from "node:fs"
import { StorageError } from "@session-journal/core"
import { call, codeOf, type Context, DIR_MODE, FILE_MODE, type FileHandle } from "./base.ts"

const refuse = (p: string, reason: string): StorageError =>
  new StorageError({ operation: "confine", path: p, reason: `refused: ${reason}` })

const checkOwnerAndMode = (ctx: Context, st: Stats, p: string): void => {
  if (ctx.uid !== null && st.uid !== ctx.uid) throw refuse(p, `owned by uid ${st.uid}, not ${ctx.uid}`)
  if ((st.mode & 0o022) !== 0) throw refuse(p, `group- or other-writable (mode ${(st.mode & 0o777).toString(8)})`)
}

/**
 * Checks one directory component: not a symlink, a directory, owned by us, not
 * group/other-writable. Throws `StorageError` (operation "confine") otherwise.
 */
export const checkDir = async (ctx: Context, p: string): Promise<Stats> => {
  const st = await call("lstat", p, () => ctx.fs.lstat(p))
  if (st.isSymbolicLink()) throw refuse(p, "a symbolic link")
  if (!st.isDirectory()) throw refuse(p, "not a directory")
  checkOwnerAndMode(ctx, st, p)
  return st
}

/**
 * Confines a session directory: lstat-checks the root and the session directory.
 * Returns false when the session directory does not exist (the root must).
 */
export const confineSessionDir = async (ctx: Context, dir: string): Promise<boolean> => {
  await checkDir(ctx, ctx.root)
  try {
    await checkDir(ctx, dir)
    return true
  } catch (e) {
    if (e instanceof StorageError && codeOf(e.cause) === "ENOENT") return false
    throw e
  }
}

/** Closes a handle, ignoring errors (the descriptor is released regardless). */
export const closeQuietly = async (fh: FileHandle): Promise<void> => {
  try {
    await fh.close()
  } catch {
    // Linux releases the descriptor even when close reports an error.
  }
}

/**
 * Makes the creation, rename or removal of entries in `dir` durable: opens the
 * directory read-only (O_NOFOLLOW) and fsyncs it. Without it a crash can forget a
 * file that was created and written and fsynced itself.
 */
export const syncDir = async (ctx: Context, dir: string): Promise<void> => {
  const fh = await call("open", dir, () => ctx.fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW))
  try {
    await call("fsync", dir, () => fh.sync())
  } finally {
    await closeQuietly(fh)
  }
}

/**
 * Creates directory `dir` (inside an already confined `parent`) with mode 0700
 * whatever the umask (fchmod on the opened directory, checked against the lstat),
 * then fsyncs `parent` so the directory survives a crash. An existing directory is
 * only checked. Returns whether it was created.
 */
export const ensureDir = async (ctx: Context, dir: string, parent: string): Promise<boolean> => {
  let created = false
  try {
    await call("mkdir", dir, () => ctx.fs.mkdir(dir, DIR_MODE))
    created = true
  } catch (e) {
    if (!(e instanceof StorageError && codeOf(e.cause) === "EEXIST")) throw e
  }
  if (created) {
    const st = await call("lstat", dir, () => ctx.fs.lstat(dir))
    if (st.isSymbolicLink() || !st.isDirectory()) throw refuse(dir, "replaced while being created")
    const fh = await call("open", dir, () => ctx.fs.open(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW))
    try {
      const fst = await call("fstat", dir, () => fh.stat())
      if (fst.dev !== st.dev || fst.ino !== st.ino) throw refuse(dir, "replaced while being created")
      await call("fchmod", dir, () => fh.chmod(DIR_MODE))
    } finally {
      await closeQuietly(fh)
    }
    await syncDir(ctx, parent)
  }
  await checkDir(ctx, dir)
  return created
}

/**
 * Opens an existing regular file of a confined directory for reading: lstat (no
 * symlink, a regular file, ours, not group/other-writable), open with O_NOFOLLOW
 * (and O_NONBLOCK, so a FIFO planted between the checks cannot hang us), fstat,
 * and dev/ino must match the lstat. The caller closes the handle.
 */
export const openRead = async (ctx: Context, file: string): Promise<FileHandle> => {
  const st = await call("lstat", file, () => ctx.fs.lstat(file))
  if (st.isSymbolicLink()) throw refuse(file, "a symbolic link")
  if (!st.isFile()) throw refuse(file, "not a regular file")
  checkOwnerAndMode(ctx, st, file)
  return await openChecked(ctx, file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK, st)
}

/**
 * Opens an existing regular file for writing (no O_APPEND: the adapter writes at
 * the offsets it tracks), with the same checks as `openRead`.
 */
export const openWrite = async (ctx: Context, file: string): Promise<FileHandle> => {
  const st = await call("lstat", file, () => ctx.fs.lstat(file))
  if (st.isSymbolicLink()) throw refuse(file, "a symbolic link")
  if (!st.isFile()) throw refuse(file, "not a regular file")
  checkOwnerAndMode(ctx, st, file)
  return await openChecked(ctx, file, constants.O_WRONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK, st)
}

const openChecked = async (ctx: Context, file: string, flags: number, st: Stats): Promise<FileHandle> => {
  const fh = await call("open", file, async () => {
    try {
      return await ctx.fs.open(file, flags)
    } catch (cause) {
      if (codeOf(cause) === "ELOOP") throw refuse(file, "a symbolic link")
      throw cause
    }
  })
  try {
    const fst = await call("fstat", file, () => fh.stat())
    if (fst.dev !== st.dev || fst.ino !== st.ino) throw refuse(file, "replaced between lstat and open")
    return fh
  } catch (e) {
    await closeQuietly(fh)
    throw e
  }
}

/**
 * Creates a new file exclusively (O_CREAT|O_EXCL|O_NOFOLLOW, so neither an
 * existing file nor a planted symlink is ever written through), sets 0600 with
 * fchmod whatever the umask, and checks dev/ino against an lstat. The new name is
 * not durable until the caller fsyncs the directory (`syncDir`). Fails with
 * `StorageError` whose cause has code EEXIST when the name is taken.
 */
export const createExclusive = async (ctx: Context, file: string): Promise<FileHandle> => {
  const fh = await call("open", file, async () => {
    try {
      return await ctx.fs.open(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, FILE_MODE)
    } catch (cause) {
      if (codeOf(cause) === "ELOOP") throw refuse(file, "a symbolic link")
      throw cause
    }
  })
  try {
    await call("fchmod", file, () => fh.chmod(FILE_MODE))
    const fst = await call("fstat", file, () => fh.stat())
    const st = await call("lstat", file, () => ctx.fs.lstat(file))
    if (st.isSymbolicLink() || fst.dev !== st.dev || fst.ino !== st.ino) throw refuse(file, "replaced while being created")
    return fh
  } catch (e) {
    await closeQuietly(fh)
    throw e
  }
}

/**
 * Writes all of `bytes` at `position` (looping over short writes). Not durable by
 * itself; see `appendDurable`.
 */
export const writeAll = async (fh: FileHandle, file: string, bytes: Uint8Array, position: number): Promise<void> => {
  let done = 0
  while (done < bytes.length) {
    const { bytesWritten } = await call("write", file, () => fh.write(bytes, done, bytes.length - done, position + done))
    if (bytesWritten <= 0) throw new StorageError({ operation: "write", path: file, reason: "no progress" })
    done += bytesWritten
  }
}

/**
 * Durable append: writes `bytes` at `position` and fdatasyncs. When it returns,
 * the bytes survive a crash (the file's size is data, so fdatasync covers it); a
 * newly created file additionally needs `syncDir` of its directory before the
 * first acknowledgement. When it fails, any prefix of the bytes may be on disk:
 * the caller must forget its idea of the file's end and rescan.
 */
export const appendDurable = async (fh: FileHandle, file: string, bytes: Uint8Array, position: number): Promise<void> => {
  await writeAll(fh, file, bytes, position)
  await call("fdatasync", file, () => fh.datasync())
}

