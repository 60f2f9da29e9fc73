/**
 * Reading and replacing a settings file the way a careful editor does, for
 * `claude-code install`.
 *
 * - A settings file that is a symbolic link (into a dotfiles repository) is
 *   edited through it: its final target is read and replaced; the link stays.
 *   A link whose target does not exist is refused.
 * - Nothing is opened through a link that was not resolved first: the file is
 *   read with `O_NOFOLLOW` at its resolved path, and every file this writes is
 *   new, created with `O_CREAT | O_EXCL | O_NOFOLLOW` (a link planted at its name
 *   makes the create fail instead of writing where the link points).
 * - The new content goes to a temporary file with a random name in the target's
 *   own directory, is synced, and is renamed over the target (then the directory
 *   is synced): a crash leaves the old file or the new one, never a mix.
 * - Before the rename, the previous content is kept in a backup next to the file
 *   as named, under a name no earlier backup has (`settings.json.session-journal.bak`,
 *   then `.1.bak`, `.2.bak`, …), with the file's mode: the first original is never
 *   overwritten.
 * - The target is checked again just before the rename: when it changed since it
 *   was read (another editor saved it), nothing is replaced.
 */
import { decodeStrict } from "@session-journal/core/Utf8"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"

/** Why a settings file was not read or not replaced. */
export class SettingsFileError extends Error {
  readonly _tag = "SettingsFileError"
  readonly reason: "DanglingLink" | "NotAFile" | "TooLarge" | "NotUtf8" | "Changed" | "Io"
  readonly file: string
  constructor(reason: SettingsFileError["reason"], file: string, detail: string, cause?: unknown) {
    super(detail, cause === undefined ? undefined : { cause })
    this.reason = reason
    this.file = file
  }
}

/** A settings file as read: where it is named, what is replaced, its content (null: no file yet). */
export interface Loaded {
  /** The path as given (maybe a symbolic link). */
  readonly file: string
  /** The regular file that is read and replaced (the link's final target). */
  readonly target: string
  readonly text: string | null
  readonly mode: number
  readonly identity: string | null
  /** Whether `file` is a symbolic link (then `target` is where it leads). */
  readonly linked: boolean
}

/** The real path of `p` (its links resolved), or undefined when it has none (missing, unreadable). */
export const realPath = (p: string): string | undefined => {
  try {
    return fs.realpathSync(p)
  } catch {
    return undefined
  }
}

/** The suffix of backups (`FILE.session-journal.bak`, `FILE.session-journal.N.bak`). */
export const BACKUP_SUFFIX = ".session-journal.bak"

const identityOf = (st: fs.Stats): string => `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`

const errnoOf = (e: unknown): string | undefined => (e as NodeJS.ErrnoException | undefined)?.code

/** Where `file` really is: its final target when it is a link, else itself (its directory resolved when it exists). */
export const resolveTarget = (file: string): string => {
  let st: fs.Stats
  try {
    st = fs.lstatSync(file)
  } catch (e) {
    if (errnoOf(e) !== "ENOENT") throw new SettingsFileError("Io", file, `cannot look at it: ${String(e)}`, e)
    try {
      return path.join(fs.realpathSync(path.dirname(file)), path.basename(file))
    } catch {
      return file
    }
  }
  if (!st.isSymbolicLink()) return path.join(fs.realpathSync(path.dirname(file)), path.basename(file))
  try {
    return fs.realpathSync(file)
  } catch (e) {
    const to = (() => {
      try {
        return fs.readlinkSync(file)
      } catch {
        return "?"
      }
    })()
    throw new SettingsFileError(
      "DanglingLink",
      file,
      `it is a symbolic link to ${to}, which does not exist (create the target, or remove the link)`,
      e
    )
  }
}

/** Reads a settings file through its links; a missing file reads as null. */
export const load = (file: string, maxBytes: number): Loaded => {
  const target = resolveTarget(file)
  let linked = false
  try {
    linked = fs.lstatSync(file).isSymbolicLink()
  } catch {
    // Not there (yet).
  }
  let fd: number
  try {
    fd = fs.openSync(target, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK)
  } catch (e) {
    if (errnoOf(e) === "ENOENT") return { file, target, text: null, mode: 0o644, identity: null, linked }
    if (errnoOf(e) === "ELOOP") throw new SettingsFileError("Changed", file, "it became a symbolic link while read", e)
    throw new SettingsFileError("Io", file, `cannot open it: ${String(e)}`, e)
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) throw new SettingsFileError("NotAFile", file, "not a regular file")
    if (st.size > maxBytes) throw new SettingsFileError("TooLarge", file, `larger than ${maxBytes} bytes`)
    const bytes = fs.readFileSync(fd)
    let text: string
    try {
      // A byte-order mark is kept as text, so the file is written back as it was.
      text = decodeStrict(bytes, { keepBom: true })
    } catch (e) {
      throw new SettingsFileError("NotUtf8", file, "not UTF-8 text", e)
    }
    return { file, target, text, mode: st.mode & 0o777, identity: identityOf(st), linked }
  } finally {
    fs.closeSync(fd)
  }
}

// Writes `text` into a new file at `file` (which must not exist, not even as a link), synced.
const createExclusive = (file: string, text: string, mode: number): void => {
  const fd = fs.openSync(
    file,
    fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW,
    mode
  )
  try {
    fs.writeFileSync(fd, text)
    // The umask may have narrowed the mode; the copy gets the file's own.
    fs.fchmodSync(fd, mode)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

const syncDir = (dir: string): void => {
  let fd: number | undefined
  try {
    fd = fs.openSync(dir, fs.constants.O_RDONLY | fs.constants.O_DIRECTORY)
    fs.fsyncSync(fd)
  } catch {
    // Some filesystems cannot sync a directory; the rename itself is still atomic.
  } finally {
    if (fd !== undefined) fs.closeSync(fd)
  }
}

/** Keeps `text` in a backup next to `file` under a name no earlier backup has; returns its path. */
export const backup = (file: string, text: string, mode: number): string => {
  for (let n = 0; n < 100_000; n++) {
    const name = n === 0 ? file + BACKUP_SUFFIX : `${file}.session-journal.${n}.bak`
    try {
      createExclusive(name, text, mode)
      syncDir(path.dirname(name))
      return name
    } catch (e) {
      if (errnoOf(e) !== "EEXIST") throw new SettingsFileError("Io", file, `cannot write its backup ${name}: ${e}`, e)
    }
  }
  throw new SettingsFileError("Io", file, "no free backup name")
}

/**
 * Replaces the file `loaded` was read from with `text`: a backup of the previous
 * content first (when there was one; its path is returned), then a new file in the
 * target's directory renamed over the target.
 */
export const save = (loaded: Loaded, text: string): { readonly backup: string | null } => {
  const dir = path.dirname(loaded.target)
  try {
    fs.mkdirSync(dir, { recursive: true })
  } catch (e) {
    throw new SettingsFileError("Io", loaded.file, `cannot create ${dir}: ${e}`, e)
  }
  const realDir = fs.realpathSync(dir)
  const target = path.join(realDir, path.basename(loaded.target))
  const unchanged = (): void => {
    let now: string | null
    try {
      const st = fs.lstatSync(target)
      now = st.isFile() ? identityOf(st) : "not a file"
    } catch (e) {
      if (errnoOf(e) !== "ENOENT") throw new SettingsFileError("Io", loaded.file, String(e), e)
      now = null
    }
    if (now !== loaded.identity) {
      throw new SettingsFileError("Changed", loaded.file, "it changed while install ran; run it again")
    }
  }
  unchanged()
  const saved = loaded.text === null ? null : backup(loaded.file, loaded.text, loaded.mode)
  const temp = path.join(
    realDir,
    `.${path.basename(target)}.session-journal-${crypto.randomBytes(8).toString("hex")}.tmp`
  )
  try {
    createExclusive(temp, text, loaded.mode)
    unchanged()
    fs.renameSync(temp, target)
  } catch (e) {
    try {
      fs.unlinkSync(temp)
    } catch {
      // Not created, or already renamed.
    }
    if (e instanceof SettingsFileError) throw e
    throw new SettingsFileError("Io", loaded.file, `cannot replace it: ${e}`, e)
  }
  syncDir(realDir)
  return { backup: saved }
}
