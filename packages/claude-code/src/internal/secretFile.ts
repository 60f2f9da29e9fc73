/**
 * Reading a secret from a file (the guard's token, a checkpoint signer key): one
 * rule for every secret the command reads. The file is opened once and checked on
 * that descriptor (no check of one file and read of another): it must be a regular
 * file, at most `maxBytes` long, and neither its group nor others may have any
 * permission on it (`mode & 0o077` is 0, as `chmod 600` leaves it). A file others
 * may read is refused, not used: a secret that others could read is no secret,
 * and saying so at once beats signing or authenticating with it in silence.
 *
 * Node built-ins only (`node:fs`, loaded with `createRequire`): the forwarder
 * loads this module at every hook.
 *
 * @since 0.1.0
 */
import { decodeStrict } from "@session-journal/core/Utf8"
import type * as Fs from "node:fs"
import { createRequire } from "node:module"

const fs = createRequire(import.meta.url)("node:fs") as typeof Fs

/**
 * Why a secret file's mode is refused, or null: any permission for its group or
 * others (POSIX only; on Windows modes say nothing of this and none is refused).
 *
 * @since 0.1.0
 */
export const exposure = (file: string, mode: number, what: string): string | null =>
  process.platform === "win32" || (mode & 0o077) === 0
    ? null
    : `the ${what} ${file} may be read by others (mode ${(mode & 0o777).toString(8)}); chmod 600 ${file}`

/**
 * What reading a secret file gave: its text, or why it cannot be used
 * (`exposed`: refused for its mode).
 *
 * @since 0.1.0
 */
export type Read =
  | { readonly _tag: "Read"; readonly text: string }
  | { readonly _tag: "Refused"; readonly reason: string; readonly exposed: boolean }

/**
 * Reads `file` as a secret (see the module's header); `what` names it in reasons
 * (`token file`, `signer key`). Never throws.
 *
 * @since 0.1.0
 */
export const read = (file: string, what: string, maxBytes: number): Read => {
  let fd: number
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0))
  } catch (e) {
    return { _tag: "Refused", reason: `the ${what} ${file} cannot be read: ${messageOf(e)}`, exposed: false }
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) return { _tag: "Refused", reason: `the ${what} ${file} is not a regular file`, exposed: false }
    const exposed = exposure(file, st.mode, what)
    if (exposed !== null) return { _tag: "Refused", reason: exposed, exposed: true }
    if (st.size > maxBytes) {
      return { _tag: "Refused", reason: `the ${what} ${file} is larger than ${maxBytes} bytes`, exposed: false }
    }
    const buffer = Buffer.alloc(maxBytes + 1)
    let size = 0
    for (;;) {
      const n = fs.readSync(fd, buffer, size, buffer.length - size, null)
      if (n === 0) break
      size += n
      if (size > maxBytes) {
        return { _tag: "Refused", reason: `the ${what} ${file} is larger than ${maxBytes} bytes`, exposed: false }
      }
    }
    let text: string
    try {
      text = decodeStrict(buffer.subarray(0, size))
    } catch {
      return { _tag: "Refused", reason: `the ${what} ${file} is not UTF-8 text`, exposed: false }
    }
    return { _tag: "Read", text }
  } catch (e) {
    return { _tag: "Refused", reason: `the ${what} ${file} cannot be read: ${messageOf(e)}`, exposed: false }
  } finally {
    fs.closeSync(fd)
  }
}

const messageOf = (e: unknown): string => e instanceof Error ? e.message : String(e)

/**
 * Creates `file` exclusively (never replacing anything, never through a link) with
 * mode 0600 and writes `text` to it, synced; its directory is created 0700 when
 * missing, and refused when its group or others may write to it (they could put
 * another file in its place). Throws an `Error` saying what went wrong.
 *
 * @since 0.1.0
 */
export const create = (file: string, text: string): void => {
  const dir = file.slice(0, Math.max(file.lastIndexOf("/"), 0)) || "/"
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
  const st = fs.statSync(dir)
  if (!st.isDirectory()) throw new Error(`${dir} is not a directory`)
  if (process.platform !== "win32" && (st.mode & 0o022) !== 0) {
    throw new Error(
      `its directory ${dir} may be written by others (mode ${(st.mode & 0o777).toString(8)}); chmod 700 ${dir}`
    )
  }
  const fd = fs.openSync(
    file,
    fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | (fs.constants.O_NOFOLLOW ?? 0),
    0o600
  )
  try {
    fs.fchmodSync(fd, 0o600)
    fs.writeSync(fd, text)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}
