/**
 * Files meant for others to read (published tiles, cosigned checkpoints): replaced
 * whole, crash-safely, mode 0644, and read with a bound. Plain promises; the callers
 * map failures to their own errors.
 */
import type * as Random from "effect/Random"
import * as fs from "node:fs"
import * as path from "node:path"

const syncDir = async (dir: string): Promise<void> => {
  const handle = await fs.promises.open(dir, fs.constants.O_RDONLY)
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/**
 * Writes `bytes` to `file` so that a crash leaves the old file or the new one, never a
 * part: a temporary file beside it (created exclusively, 0644), written and fsynced,
 * renamed over `file`, the directory fsynced so the rename survives a crash too. A crash
 * before the rename can leave the temporary file (`.tmp-…`), which no reader asks for.
 * Missing directories are created (0755). The temporary name is this process's id and
 * a draw of `random` (the caller's fiber's `Random`): it must be unique, not secret,
 * since the file is created exclusively and an existing one is never followed.
 */
export const write = async (file: string, bytes: Uint8Array | string, random: Random.Random): Promise<void> => {
  const dir = path.dirname(file)
  await fs.promises.mkdir(dir, { recursive: true, mode: 0o755 })
  const temp = path.join(dir, `.tmp-${process.pid}-${random.nextDoubleUnsafe().toString(36).slice(2)}`)
  const handle = await fs.promises.open(temp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o644)
  try {
    await handle.writeFile(bytes)
    await handle.sync()
  } finally {
    await handle.close()
  }
  await fs.promises.rename(temp, file)
  await syncDir(dir)
}

/**
 * The bytes of `file`, or `undefined` when there is none; a file of more than
 * `maxBytes` is an error, found before reading.
 */
export const read = async (file: string, maxBytes: number): Promise<Uint8Array | undefined> => {
  let handle: fs.promises.FileHandle
  try {
    handle = await fs.promises.open(file, fs.constants.O_RDONLY)
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined
    throw e
  }
  try {
    const { size } = await handle.stat()
    if (size > maxBytes) throw new Error(`it is ${size} bytes, more than the ${maxBytes} it may be`)
    return new Uint8Array(await handle.readFile())
  } finally {
    await handle.close()
  }
}
