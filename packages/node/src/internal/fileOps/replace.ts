/**
 * Atomic replacement of a file, and the side files that keep damaged bytes aside.
 */
import { randomBytes } from "node:crypto"
import * as path from "node:path"
import { StorageError } from "@session-journal/core"
import { call, codeOf, type Context } from "./base.ts"
import { closeQuietly, createExclusive, openRead, syncDir, writeAll } from "./open.ts"
import { allZero, boundedSize, readAt, ZERO_CHUNK } from "./lines.ts"

let tempCounter = 0

/** Prefix of every temporary file name; such files are never session data. */
export const TEMP_PREFIX = ".tmp-"

/** A unique temporary name in `dir` for a file that will become `name`. */
export const tempName = (dir: string, name: string): string =>
  path.join(dir, `${TEMP_PREFIX}${name}-${process.pid}-${randomBytes(4).toString("hex")}-${(tempCounter++).toString(36)}`)

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
