/**
 * The hardened file primitives of the filesystem adapter. Every durable or
 * security-relevant filesystem step of the adapter goes through this module, and
 * each function's comment states the crash guarantee it gives and what the caller
 * must still do (DESIGN §6).
 *
 * The functions are plain async code over a small `Fs` interface (the calls the
 * adapter makes, with `node:fs/promises` as the default), so tests can inject a
 * failing filesystem that wraps the real one. Failures surface as the typed errors
 * of core (`StorageError`, `CorruptJournal`); the adapter maps them into the
 * Effect error channel at its edge.
 *
 * Confinement: Node has `O_NOFOLLOW` only for the last path component and no
 * `openat`, so every open is preceded by an lstat walk from the journal root (no
 * symlinks, owned by this user, not group/other-writable) and followed by an fstat
 * whose dev/ino must equal the lstat's.
 */
import { constants } from "node:fs"
import type { Stats } from "node:fs"
import * as fsp from "node:fs/promises"
import * as path from "node:path"
import { CorruptJournal, StorageError } from "@session-journal/core"

/**
 * The calls made on an open file. `node:fs/promises`' `FileHandle` satisfies it.
 */
export interface FileHandle {
  readonly fd: number
  read(buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ readonly bytesRead: number }>
  write(buffer: Uint8Array, offset: number, length: number, position: number): Promise<{ readonly bytesWritten: number }>
  datasync(): Promise<void>
  sync(): Promise<void>
  stat(): Promise<Stats>
  chmod(mode: number): Promise<void>
  truncate(length: number): Promise<void>
  close(): Promise<void>
}

/**
 * The filesystem calls the adapter makes. The default is `node:fs/promises`; tests
 * wrap it to inject failures (real files, only the failure is made up).
 */
export interface Fs {
  open(path: string, flags: number, mode?: number): Promise<FileHandle>
  lstat(path: string): Promise<Stats>
  mkdir(path: string, mode: number): Promise<void>
  readdir(path: string): Promise<Array<string>>
  rename(from: string, to: string): Promise<void>
  link(existing: string, newPath: string): Promise<void>
  unlink(path: string): Promise<void>
  rmdir(path: string): Promise<void>
}

/**
 * The real filesystem.
 */
export const nodeFs: Fs = {
  open: (p, flags, mode) => fsp.open(p, flags, mode),
  lstat: (p) => fsp.lstat(p),
  mkdir: async (p, mode) => {
    await fsp.mkdir(p, { mode })
  },
  readdir: (p) => fsp.readdir(p),
  rename: (a, b) => fsp.rename(a, b),
  link: (a, b) => fsp.link(a, b),
  unlink: (p) => fsp.unlink(p),
  rmdir: (p) => fsp.rmdir(p)
}

/** Largest file the adapter reads (DESIGN §6): 1 GiB. */
export const MAX_FILE_BYTES = 1024 * 1024 * 1024

/** Largest line of a segment: 8 MiB. Longer entries are refused on append. */
export const MAX_LINE_BYTES = 8 * 1024 * 1024

/** Mode of every directory the adapter creates, whatever the umask. */
export const DIR_MODE = 0o700

/** Mode of every file the adapter creates, whatever the umask. */
export const FILE_MODE = 0o600

/**
 * What the primitives need: the filesystem, the journal root (absolute), the uid
 * that must own everything (null where the platform has none), and the bounds.
 */
export interface Context {
  readonly fs: Fs
  readonly root: string
  readonly uid: number | null
  readonly maxFileBytes: number
  readonly maxLineBytes: number
}

/** The node error code of a failure, if it has one. */
export const codeOf = (cause: unknown): string | undefined =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : undefined

/** Runs one filesystem call, turning a failure into a `StorageError` naming it. */
export const call = async <A>(operation: string, p: string, f: () => Promise<A>): Promise<A> => {
  try {
    return await f()
  } catch (cause) {
    if (cause instanceof StorageError || cause instanceof CorruptJournal) throw cause
    throw new StorageError({ operation, path: p, cause })
  }
}

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

const closeQuietly = async (fh: FileHandle): Promise<void> => {
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

let tempCounter = 0

/** Prefix of every temporary file name; such files are never session data. */
export const TEMP_PREFIX = ".tmp-"

/** A unique temporary name in `dir` for a file that will become `name`. */
export const tempName = (dir: string, name: string): string =>
  path.join(dir, `${TEMP_PREFIX}${name}-${process.pid}-${Date.now().toString(36)}-${(tempCounter++).toString(36)}`)

/**
 * Atomic replace: writes `bytes` to a fresh temp file (O_CREAT|O_EXCL|O_NOFOLLOW,
 * 0600), fsyncs it, renames it over `dir/name`, then fsyncs `dir`. After a crash
 * at any point, `dir/name` is either the old file or the complete new one, never a
 * mixture; once this returns, the new one survives a crash. On failure the temp
 * file is removed (best effort; a writer also clears stale temp files when it
 * takes the lock).
 */
export const atomicReplace = async (ctx: Context, dir: string, name: string, bytes: Uint8Array): Promise<void> => {
  const tmp = tempName(dir, name)
  const target = path.join(dir, name)
  let renamed = false
  try {
    const fh = await createExclusive(ctx, tmp)
    try {
      await writeAll(fh, tmp, bytes, 0)
      await call("fsync", tmp, () => fh.sync())
    } finally {
      await closeQuietly(fh)
    }
    await call("rename", target, () => ctx.fs.rename(tmp, target))
    renamed = true
    await syncDir(ctx, dir)
  } finally {
    if (!renamed) {
      try {
        await ctx.fs.unlink(tmp)
      } catch {
        // Already gone, or the filesystem is failing; the next writer clears it.
      }
    }
  }
}

/** Reads `length` bytes at `position` (fewer at the end of the file). */
export const readAt = async (fh: FileHandle, file: string, position: number, length: number): Promise<Uint8Array> => {
  const buf = new Uint8Array(length)
  let done = 0
  while (done < length) {
    const { bytesRead } = await call("read", file, () => fh.read(buf, done, length - done, position + done))
    if (bytesRead === 0) break
    done += bytesRead
  }
  return done === length ? buf : buf.subarray(0, done)
}

/**
 * The size of an opened file, refusing files above the read bound before a byte
 * is read (so a huge or sparse file costs no memory).
 */
export const boundedSize = async (ctx: Context, fh: FileHandle, file: string): Promise<number> => {
  const st = await call("fstat", file, () => fh.stat())
  if (st.size > ctx.maxFileBytes) {
    throw new StorageError({
      operation: "read",
      path: file,
      reason: `file is ${st.size} bytes, above the read bound of ${ctx.maxFileBytes} bytes`
    })
  }
  return st.size
}

/**
 * Bounded read of a whole file on an opened handle: refuses files above `limit`
 * (default the 1 GiB bound) by their fstat size, before reading.
 */
export const readBounded = async (ctx: Context, fh: FileHandle, file: string, limit?: number): Promise<Uint8Array> => {
  const size = await boundedSize(ctx, fh, file)
  if (limit !== undefined && size > limit) {
    throw new StorageError({ operation: "read", path: file, reason: `file is ${size} bytes, above the bound of ${limit} bytes` })
  }
  return await readAt(fh, file, 0, size)
}

/** One line handed out by `LineReader`. */
export interface Line {
  /** Byte offset of the line's first byte in the file. */
  readonly offset: number
  /** The line without its newline; empty for a zero-filled tail. */
  readonly line: Uint8Array
  /** False for the incomplete tail (the bytes after the last newline). */
  readonly complete: boolean
  /**
   * Set on an incomplete tail that is a run of zero bytes from a line start to the
   * end of the file (DESIGN §6: a zero-filled tail of any length is a torn tail).
   * Its bytes are not handed out (`line` is empty); it runs from `offset` to the end.
   */
  readonly zeros?: boolean
}

// Bytes read per call when checking a run of zeros; also the size of the shared
// zero buffer it is compared with.
const ZERO_CHUNK = 1024 * 1024
let zeroBuffer: Buffer | undefined

const allZero = (bytes: Uint8Array): boolean => {
  zeroBuffer ??= Buffer.alloc(ZERO_CHUNK)
  for (let at = 0; at < bytes.length; at += ZERO_CHUNK) {
    const part = bytes.subarray(at, Math.min(bytes.length, at + ZERO_CHUNK))
    if (Buffer.compare(part, zeroBuffer.subarray(0, part.length)) !== 0) return false
  }
  return true
}

/**
 * Whether the bytes of `fh` from `from` to `end` are all zero, read in bounded
 * chunks (never more than `ZERO_CHUNK` bytes held). A file that ends before `end`
 * (trimmed under us) ends the run there.
 */
const zerosTo = async (fh: FileHandle, file: string, from: number, end: number): Promise<boolean> => {
  const scratch = new Uint8Array(Math.min(ZERO_CHUNK, Math.max(0, end - from)))
  for (let pos = from; pos < end;) {
    const want = Math.min(scratch.length, end - pos)
    const { bytesRead } = await call("read", file, () => fh.read(scratch, 0, want, pos))
    if (bytesRead === 0) return true
    if (!allZero(scratch.subarray(0, bytesRead))) return false
    pos += bytesRead
  }
  return true
}

/**
 * Reads complete lines from an opened file from `start` up to `end`, in chunks,
 * without ever holding more than one chunk plus one line (at most
 * `ctx.maxLineBytes`; a longer line fails with `CorruptJournal`). Bytes after the
 * last newline are reported as the incomplete tail. A run of zero bytes that starts
 * at a line and reaches `end` is reported as an incomplete tail with `zeros` set,
 * whatever its length: it is checked in bounded chunks, never buffered, so a
 * zero-filled tail longer than the line bound is still a torn tail. A run of zeros
 * followed by other bytes is read like any other line.
 */
export class LineReader {
  // Unconsumed bytes are store[lo, hi). Lines handed out are views into a store,
  // so a store is only ever written past `hi`, never compacted in place: when a
  // chunk does not fit, a new store twice the needed size takes the unconsumed
  // bytes. Growing geometrically keeps a long line at O(line) copying and its
  // peak memory near twice the line, instead of one new buffer per chunk.
  private store: Uint8Array = new Uint8Array(0)
  private lo = 0
  private hi = 0
  private bufStart: number
  private readPos: number
  private readonly ctx: Context
  private readonly fh: FileHandle
  private readonly file: string
  private readonly label: string
  private readonly end: number
  constructor(ctx: Context, fh: FileHandle, file: string, label: string, start: number, end: number) {
    this.ctx = ctx
    this.fh = fh
    this.file = file
    this.label = label
    this.bufStart = start
    this.readPos = start
    this.end = end
  }

  /**
   * The next complete line (without its newline) and its offset; at the end, the
   * incomplete tail (`complete: false`, with `zeros` when it is a zero-filled
   * tail) if there is one, then `null`.
   */
  async next(): Promise<null | Line> {
    // Every call starts at a line start: a zero byte there may begin a zero-filled tail.
    if (this.lo === this.hi && this.readPos < this.end) await this.fill(this.lo)
    if (this.lo < this.hi && this.store[this.lo] === 0) {
      const zeros = await this.zeroTail()
      if (zeros !== null) return zeros
    }
    let scanFrom = this.lo
    for (;;) {
      const nl = this.store.subarray(0, this.hi).indexOf(10, scanFrom)
      if (nl >= 0) {
        const line = this.store.subarray(this.lo, nl)
        const offset = this.bufStart
        this.bufStart += nl + 1 - this.lo
        this.lo = nl + 1
        return { offset, line, complete: true }
      }
      scanFrom = this.hi
      const pending = this.hi - this.lo
      if (pending > this.ctx.maxLineBytes) {
        throw new CorruptJournal({
          segment: this.label,
          offset: this.bufStart,
          reason: `line longer than the bound of ${this.ctx.maxLineBytes} bytes`
        })
      }
      if (this.readPos >= this.end) {
        if (pending === 0) return null
        const line = this.store.subarray(this.lo, this.hi)
        const offset = this.bufStart
        this.bufStart += pending
        this.lo = this.hi
        return { offset, line, complete: false }
      }
      scanFrom = await this.fill(scanFrom)
    }
  }

  /**
   * Reads the next chunk into the store; returns `scanFrom` moved along with the
   * store. At the end of the file (or where it shrank under us) reading stops.
   */
  private async fill(scanFrom: number): Promise<number> {
    const want = Math.min(256 * 1024, this.end - this.readPos)
    const chunk = await readAt(this.fh, this.file, this.readPos, want)
    if (chunk.length === 0) {
      // The file shrank under us (a writer trimmed a torn tail): stop here.
      this.readPos = this.end
      return scanFrom
    }
    this.readPos += chunk.length
    const pending = this.hi - this.lo
    if (this.hi + chunk.length > this.store.length) {
      const grown = new Uint8Array(2 * (pending + chunk.length))
      grown.set(this.store.subarray(this.lo, this.hi), 0)
      this.store = grown
      scanFrom -= this.lo
      this.lo = 0
      this.hi = pending
    }
    this.store.set(chunk, this.hi)
    this.hi += chunk.length
    return scanFrom
  }

  /**
   * At a line start whose first byte is zero: when every byte from here to the end
   * is zero, consumes them all and returns the zero-filled tail; otherwise changes
   * nothing and returns null.
   */
  private async zeroTail(): Promise<Line | null> {
    if (!allZero(this.store.subarray(this.lo, this.hi))) return null
    if (!(await zerosTo(this.fh, this.file, this.readPos, this.end))) return null
    const offset = this.bufStart
    this.bufStart = Math.max(this.bufStart + (this.hi - this.lo), this.end)
    this.lo = this.hi
    this.readPos = this.end
    return { offset, line: new Uint8Array(0), complete: false, zeros: true }
  }
}

/** Suffix of the side files that keep damaged bytes: `<name>.damaged-<offset>[.<n>]`. */
export const DAMAGED_INFIX = ".damaged-"

/**
 * Links the complete, fsynced temp file `tmp` to the first free name among
 * `dir/base`, `dir/base.1`, `dir/base.2`, ... and returns that name. `link` never
 * replaces an existing name, so a name taken meanwhile is skipped, and the names
 * never run out (the next free one is found from a listing of `dir`). The caller
 * removes `tmp` and fsyncs `dir`.
 */
export const linkToFreeName = async (ctx: Context, dir: string, tmp: string, base: string): Promise<string> => {
  for (let listing = 0; listing < 64; listing++) {
    const taken = new Set(await listDir(ctx, dir))
    let n = 0
    for (let tries = 0; tries < 64; tries++) {
      let name = n === 0 ? base : `${base}.${n}`
      while (taken.has(name)) name = `${base}.${++n}`
      try {
        await ctx.fs.link(tmp, path.join(dir, name))
        return name
      } catch (cause) {
        if (codeOf(cause) !== "EEXIST") throw new StorageError({ operation: "link", path: path.join(dir, name), cause })
        taken.add(name)
      }
    }
  }
  throw new StorageError({ operation: "link", path: path.join(dir, base), reason: "no free name: the directory keeps changing" })
}

/**
 * Copies the bytes of `dir/name` from `from` to its end into a new side file
 * `dir/name.damaged-<from>` (or `.damaged-<from>.<n>` when that name is taken), so
 * damaged bytes survive before the caller truncates or abandons them. Returns the
 * new name.
 *
 * Crash and failure guarantees: the copy is written to a temp file (0600, in
 * bounded chunks, runs of zero bytes left as holes so a huge sparse zero-filled
 * tail costs neither memory nor disk), fsynced, and only then linked to its final
 * name and the directory fsynced. So a side file with the final name is always
 * complete; a copy that fails (a full disk) leaves no side file, and its temp file
 * is removed (or, after a crash, cleared by the next writer with the temp files).
 */
export const copyAside = async (ctx: Context, dir: string, name: string, from: number): Promise<string> => {
  const src = path.join(dir, name)
  const fh = await openRead(ctx, src)
  try {
    const size = await boundedSize(ctx, fh, src)
    const tmp = tempName(dir, name)
    let target: string
    try {
      const out = await createExclusive(ctx, tmp)
      try {
        let pos = from
        while (pos < size) {
          const chunk = await readAt(fh, src, pos, Math.min(ZERO_CHUNK, size - pos))
          if (chunk.length === 0) break
          if (!allZero(chunk)) await writeAll(out, tmp, chunk, pos - from)
          pos += chunk.length
        }
        // Sets the length; trailing zero chunks that were skipped become a hole.
        await call("ftruncate", tmp, () => out.truncate(pos - from))
        await call("fsync", tmp, () => out.sync())
      } finally {
        await closeQuietly(out)
      }
      target = await linkToFreeName(ctx, dir, tmp, `${name}${DAMAGED_INFIX}${from}`)
    } finally {
      try {
        await ctx.fs.unlink(tmp)
      } catch {
        // Already gone, or the filesystem is failing; the next writer clears it.
      }
    }
    await syncDir(ctx, dir)
    return target
  } finally {
    await closeQuietly(fh)
  }
}

/** Closes a handle, ignoring errors (the descriptor is released regardless). */
export const close = closeQuietly

/** Removes a file; a missing file is not an error. */
export const unlinkIfExists = async (ctx: Context, file: string): Promise<void> => {
  try {
    await ctx.fs.unlink(file)
  } catch (cause) {
    if (codeOf(cause) !== "ENOENT") throw new StorageError({ operation: "unlink", path: file, cause })
  }
}

/** Lists a directory; a missing directory lists as empty. */
export const listDir = async (ctx: Context, dir: string): Promise<Array<string>> => {
  try {
    return await ctx.fs.readdir(dir)
  } catch (cause) {
    if (codeOf(cause) === "ENOENT") return []
    throw new StorageError({ operation: "readdir", path: dir, cause })
  }
}
