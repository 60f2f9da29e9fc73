/**
 * Loads a command started once per event (the hooks) from a script the build
 * writes next to the entry (`scripts/bundle.ts`: `<name>.cjs`, the module and
 * everything it imports in one CommonJS file) with V8's code cache of it, kept in
 * the user's cache directory.
 *
 * Node's own compile cache (`module.enableCompileCache`) stores a module's code as
 * compiled before it runs: the functions V8 compiles lazily, on their first call
 * (most of a bundle: Effect's, the journal's), are compiled again at every start.
 * The cache this module writes is V8's after the first run, with every function
 * that run compiled; later starts compile nothing they ran before.
 *
 * A cache is used only when it cannot change what the script does:
 *
 * - its directory is `$XDG_CACHE_HOME/session-journal/code` (an absolute path),
 *   else `$HOME/.cache/session-journal/code`, made readable and writable by its
 *   user only, and used only when it is a directory of this user that no one else
 *   may write (a cache is code the process runs);
 * - a cache's name holds the CRC-32 of the script's text and Node's version and
 *   architecture (V8's own check of the source is its length), and its first four
 *   bytes are the CRC-32 of the rest (V8 verifies no checksum in a release build): a
 *   cache of another script, or a cache with a byte changed, is not given to V8;
 * - V8 rejects a cache of another V8 or of other flags, and the script is then
 *   compiled from its text, as it is when the cache is not intact or not there;
 *   without a private directory the module is imported as usual.
 *
 * A cache is written after a script's first run, again after the first run of each
 * other kind (`Loaded.save`, `MAX_KINDS`), and replaces the caches of the script's
 * other versions. Reading or writing a cache never
 * fails the command: without one the script is compiled from its text. Without the script (a run from the TypeScript sources),
 * on a Node without `zlib.crc32` or without `vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER`
 * (which the script's own `import()` needs), the module is imported as usual.
 *
 * Node's modules only, loaded by the command's entry: `node:vm` and `node:zlib`
 * are loaded only when a script is there to run.
 */
import * as fs from "node:fs"
import { createRequire } from "node:module"
import type * as Vm from "node:vm"
import type * as Zlib from "node:zlib"

/**
 * What became of a script's code cache: given to V8 and taken, given and rejected
 * by V8, not there (or not intact: its checksum does not hold), not looked for
 * because there is no private directory for it (the module imported as usual), or
 * no script (the module imported as usual).
 */
export type Cache = "accepted" | "rejected" | "absent" | "unsafe" | "none"

/** A module loaded, and what stores its code cache once it ran (nothing when it is stored or not wanted). */
export interface Loaded<M> {
  readonly module: M
  readonly cache: Cache
  /**
   * Writes the code cache of what ran so far when there was none, or when this
   * run's `kind` (a hook's event) is not among the kinds of run the cache holds
   * the code of (at most `MAX_KINDS`); never throws.
   */
  readonly save: (kind: string) => void
}

/**
 * How many kinds of run a cache records the code of. A cache holds the functions
 * its runs compiled: the first run of a hook is seldom a tool call (a session
 * starts first), and a tool call's decision runs code a session's start does not,
 * so a run of another kind writes the cache again, with its own functions and
 * every function of the cache it was given. A kind is at most 64 characters.
 */
export const MAX_KINDS = 16

/**
 * The directory of the code caches: `$XDG_CACHE_HOME/session-journal/code` when
 * `XDG_CACHE_HOME` is an absolute path, else `$HOME/.cache/session-journal/code`;
 * undefined without a usable `HOME`.
 */
export const cacheDir = (env: Readonly<Record<string, string | undefined>>): string | undefined => {
  const xdg = env["XDG_CACHE_HOME"]
  if (xdg !== undefined && xdg.startsWith("/")) return `${xdg.replace(/\/+$/, "")}/session-journal/code`
  const home = env["HOME"]
  return home !== undefined && home.startsWith("/")
    ? `${home.replace(/\/+$/, "")}/.cache/session-journal/code`
    : undefined
}

// The directory made if missing (its user only) and then trusted only if it is a
// directory, not a link, of this user, that neither its group nor others may write.
const privateDir = (dir: string): boolean => {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
    const stat = fs.lstatSync(dir)
    const uid = process.getuid?.()
    return stat.isDirectory() && uid !== undefined && stat.uid === uid && (stat.mode & 0o022) === 0
  } catch {
    return false
  }
}

const hex = (n: number): string => (n >>> 0).toString(16).padStart(8, "0")

// A cache file: the CRC-32 of the rest (4 bytes, big-endian), the length of the
// kinds (2 bytes), the kinds (a JSON array of strings), V8's data.
interface Stored {
  readonly kinds: ReadonlyArray<string>
  readonly data: Buffer
}

/** A cache file's kinds and V8's data when its checksum holds and its kinds read. */
const verified = (zlib: typeof Zlib, bytes: Buffer): Stored | undefined => {
  if (bytes.length <= 6 || bytes.readUInt32BE(0) !== zlib.crc32(bytes.subarray(4)) >>> 0) return undefined
  const end = 6 + bytes.readUInt16BE(4)
  if (end >= bytes.length) return undefined
  try {
    const kinds: unknown = JSON.parse(bytes.toString("utf8", 6, end))
    return Array.isArray(kinds) && kinds.every((k) => typeof k === "string")
      ? { kinds, data: bytes.subarray(end) }
      : undefined
  } catch {
    return undefined
  }
}

const stored = (zlib: typeof Zlib, kinds: ReadonlyArray<string>, data: Buffer): Buffer => {
  const text = Buffer.from(JSON.stringify(kinds), "utf8")
  const bytes = Buffer.alloc(6 + text.length + data.length)
  bytes.writeUInt16BE(text.length, 4)
  text.copy(bytes, 6)
  data.copy(bytes, 6 + text.length)
  bytes.writeUInt32BE(zlib.crc32(bytes.subarray(4)) >>> 0, 0)
  return bytes
}

/**
 * Loads `<name>.cjs` beside the entry (`base`, the entry's `import.meta.url`) with
 * its code cache, or `fallback()` when there is no such script or this Node cannot
 * run it as the build meant (see the module's documentation).
 */
export const load = async <M>(
  base: string,
  name: string,
  env: Readonly<Record<string, string | undefined>>,
  fallback: () => Promise<M>
): Promise<Loaded<M>> => {
  const none = async (cache: Cache = "none"): Promise<Loaded<M>> => ({
    module: await fallback(),
    cache,
    save: () => undefined
  })
  const file = new URL(`./${name}.cjs`, base)
  if (file.protocol !== "file:") return none()
  let source: string
  try {
    source = fs.readFileSync(file, "utf8")
  } catch {
    return none()
  }
  const require = createRequire(file)
  const vm = require("node:vm") as typeof Vm
  const zlib = require("node:zlib") as typeof Zlib
  const loader = vm.constants?.USE_MAIN_CONTEXT_DEFAULT_LOADER
  if (loader === undefined || typeof zlib.crc32 !== "function") return none()

  const dir = cacheDir(env)
  // Without a cache the script would be compiled whole at every start: the modules,
  // with Node's compile cache, start sooner.
  if (dir === undefined || !privateDir(dir)) return none("unsafe")
  const cacheFile = `${dir}/${name}-${hex(zlib.crc32(source))}-${process.version}-${process.arch}.v8`
  let found: Stored | undefined
  try {
    found = verified(zlib, fs.readFileSync(cacheFile))
  } catch {
    found = undefined
  }
  const cachedData = found?.data
  const filename = decodeURIComponent(file.pathname)
  // The function CommonJS wraps a module in, on one line: the script's lines keep
  // their numbers for stack traces and its source map.
  const script = new vm.Script(
    `(function (exports, require, module, __filename, __dirname) {${source}\n})`,
    { filename, importModuleDynamically: loader, ...(cachedData === undefined ? {} : { cachedData }) }
  )
  const module = { exports: {} as M }
  ;(script.runInThisContext() as (...args: ReadonlyArray<unknown>) => void)(
    module.exports,
    require,
    module,
    filename,
    filename.slice(0, filename.lastIndexOf("/"))
  )
  // The kinds of run whose code the cache given to V8 holds (none when V8 took none).
  const held = found === undefined || script.cachedDataRejected === true ? [] : found.kinds
  const save = (kind: string) => {
    if (kind.length > 64) return
    if (held.includes(kind) || held.length >= MAX_KINDS) return
    const temp = `${cacheFile}.${process.pid}.tmp`
    try {
      const bytes = stored(zlib, [...held, kind], script.createCachedData())
      fs.writeFileSync(temp, bytes, { mode: 0o600, flag: "wx" })
      // A reader sees the whole cache or none: the name appears when it is written.
      fs.renameSync(temp, cacheFile)
      // The caches of this script's earlier versions (or of another Node) are not read again.
      for (const other of fs.readdirSync(dir)) {
        if (other.startsWith(`${name}-`) && other.endsWith(".v8") && `${dir}/${other}` !== cacheFile) {
          fs.rmSync(`${dir}/${other}`, { force: true })
        }
      }
    } catch {
      try {
        fs.rmSync(temp, { force: true })
      } catch {
        // Nothing to remove.
      }
    }
  }
  const cache: Cache = cachedData === undefined
    ? "absent"
    : script.cachedDataRejected === true
    ? "rejected"
    : "accepted"
  return { module: module.exports, cache, save }
}
