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
 *   compiled from its text, as it is when anything above is not so.
 *
 * A cache is written once per version of a script, after its first run, and
 * replaces the caches of its other versions. Reading or writing a cache never
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
 * because its directory is not private, or no script (the module imported as usual).
 */
export type Cache = "accepted" | "rejected" | "absent" | "unsafe" | "none"

/** A module loaded, and what stores its code cache once it ran (nothing when it is stored or not wanted). */
export interface Loaded<M> {
  readonly module: M
  readonly cache: Cache
  /** Writes the code cache of what ran so far, when there was none; never throws. */
  readonly save: () => void
}

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

/** A cache's bytes when its checksum holds (the first four bytes, CRC-32 of the rest, big-endian). */
const verified = (zlib: typeof Zlib, bytes: Buffer): Buffer | undefined => {
  if (bytes.length <= 4) return undefined
  const payload = bytes.subarray(4)
  return bytes.readUInt32BE(0) === zlib.crc32(payload) >>> 0 ? payload : undefined
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
  const none = async (): Promise<Loaded<M>> => ({ module: await fallback(), cache: "none", save: () => undefined })
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
  const cacheFile = dir === undefined
    ? undefined
    : `${dir}/${name}-${hex(zlib.crc32(source))}-${process.version}-${process.arch}.v8`
  const usable = dir !== undefined && privateDir(dir)
  let cachedData: Buffer | undefined
  if (usable && cacheFile !== undefined) {
    try {
      cachedData = verified(zlib, fs.readFileSync(cacheFile))
    } catch {
      cachedData = undefined
    }
  }
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
  const wanted = usable && cacheFile !== undefined && (cachedData === undefined || script.cachedDataRejected === true)
  const save = () => {
    if (!wanted) return
    const temp = `${cacheFile}.${process.pid}.tmp`
    try {
      const data = script.createCachedData()
      const head = Buffer.alloc(4)
      head.writeUInt32BE(zlib.crc32(data) >>> 0, 0)
      fs.writeFileSync(temp, Buffer.concat([head, data]), { mode: 0o600, flag: "wx" })
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
  const cache: Cache = !usable
    ? "unsafe"
    : cachedData === undefined
    ? "absent"
    : script.cachedDataRejected === true
    ? "rejected"
    : "accepted"
  return { module: module.exports, cache, save }
}
