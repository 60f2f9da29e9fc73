/**
 * Every access to the transcripts' directory tree, and nothing else: the one
 * place that touches files, through the node package's hardened primitives
 * (lstat-checked directories, O_NOFOLLOW opens checked by dev/ino, bounded
 * reads). The tree is walked with lstat and never through a symbolic link: a
 * link anywhere under the source is reported and refused, never followed.
 */
import { Files } from "@session-journal/node"
import * as Effect from "effect/Effect"
import { constants } from "node:fs"
import * as path from "node:path"
import { SourceError } from "../Errors.ts"

/** How deep under the source the walk looks (project / session / subagents / file, and one more). */
const MAX_DEPTH = 5

/** Most directory entries one walk visits. */
const MAX_VISITS = 200_000

/** One regular file found under a project directory. */
export interface Found {
  readonly project: string
  /** Path relative to the project directory, `/`-separated. */
  readonly relative: string
  readonly path: string
}

/** A path under the source that was refused (a symbolic link, or unreadable). */
export interface Refused {
  readonly path: string
  readonly reason: string
}

/** The size and identity of a file, to notice a change without reading it. */
export interface Stamp {
  readonly size: number
  readonly mtimeMs: number
  readonly ino: number
}

const reasonOf = (e: unknown): string => {
  const code = Files.codeOf(e)
  const message = e instanceof Error ? e.message : String(e)
  return code === undefined || message.includes(code) ? message : `${message} (${code})`
}

const fail = (p: string, e: unknown) => new SourceError({ path: p, reason: reasonOf(e) })

const ctx = (root: string) => Files.context(root)

/**
 * Checks the source directory itself: it must exist, be a directory and not be
 * a symbolic link.
 */
export const checkRoot = (root: string): Effect.Effect<string, SourceError> =>
  Effect.tryPromise({
    try: async () => {
      const abs = path.resolve(root)
      const st = await ctx(abs).fs.lstat(abs)
      if (st.isSymbolicLink()) throw new Error("refused: a symbolic link")
      if (!st.isDirectory()) throw new Error("not a directory")
      return abs
    },
    catch: (e) => fail(root, e)
  })

/**
 * Walks the source: every regular file under the project directories that
 * `wanted` accepts (by name), and every symbolic link met, refused.
 */
export const scan = (
  root: string,
  wanted: (project: string) => boolean
): Effect.Effect<{ readonly files: Array<Found>; readonly refused: Array<Refused> }, SourceError> =>
  Effect.tryPromise({
    try: async () => {
      const c = ctx(root)
      const files: Array<Found> = []
      const refused: Array<Refused> = []
      let visits = 0
      const walk = async (dir: string, project: string | null, relative: string, depth: number): Promise<void> => {
        let names: Array<string>
        try {
          names = (await c.fs.readdir(dir)).sort()
        } catch (e) {
          refused.push({ path: dir, reason: reasonOf(e) })
          return
        }
        for (const name of names) {
          if (++visits > MAX_VISITS) throw new Error(`more than ${MAX_VISITS} entries under the source`)
          const p = path.join(dir, name)
          let st
          try {
            st = await c.fs.lstat(p)
          } catch (e) {
            if (Files.codeOf(e) !== "ENOENT") refused.push({ path: p, reason: reasonOf(e) })
            continue
          }
          if (st.isSymbolicLink()) {
            if (project === null ? wanted(name) : true) refused.push({ path: p, reason: "refused: a symbolic link" })
            continue
          }
          if (project === null) {
            if (st.isDirectory() && wanted(name)) await walk(p, name, "", 1)
            continue
          }
          const rel = relative === "" ? name : `${relative}/${name}`
          if (st.isDirectory()) {
            if (depth < MAX_DEPTH) await walk(p, project, rel, depth + 1)
          } else if (st.isFile()) {
            files.push({ project, relative: rel, path: p })
          }
        }
      }
      await walk(root, null, "", 0)
      return { files, refused }
    },
    catch: (e) => fail(root, e)
  })

/** The stamp of a file, or null when it does not exist. A symbolic link is refused. */
export const stamp = (file: string): Effect.Effect<Stamp | null, SourceError> =>
  Effect.tryPromise({
    try: async () => {
      try {
        const st = await ctx(path.dirname(file)).fs.lstat(file)
        if (st.isSymbolicLink()) throw new Error("refused: a symbolic link")
        return { size: st.size, mtimeMs: st.mtimeMs, ino: st.ino }
      } catch (e) {
        if (Files.codeOf(e) === "ENOENT") return null
        throw e
      }
    },
    catch: (e) => fail(file, e)
  })

/**
 * Reads a whole transcript through a checked open: lstat (no symbolic link, a
 * regular file), open with O_NOFOLLOW and O_NONBLOCK (a FIFO planted meanwhile
 * cannot hang the read), fstat must show the very inode the lstat saw; then a
 * bounded read that refuses files above `maxBytes` by their size before reading.
 *
 * Unlike the journal's own files, owner and mode are not checked: these files are
 * Claude Code's, often 0664 under a umask of 002, and custody means recording
 * what is there.
 */
export const read = (file: string, maxBytes: number): Effect.Effect<Uint8Array, SourceError> => {
  const c = ctx(path.dirname(file))
  const refused = (reason: string) => fail(file, new Error(`refused: ${reason}`))
  const attempt = <A>(f: () => Promise<A>) => Effect.tryPromise({ try: f, catch: (e) => fail(file, e) })
  // Opened uninterruptibly (the acquire below) and closed on every exit.
  const open = Effect.tryPromise({
    try: () => c.fs.open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK),
    catch: (e) => Files.codeOf(e) === "ELOOP" ? refused("a symbolic link") : fail(file, e)
  })
  return Effect.flatMap(attempt(() => c.fs.lstat(file)), (st) => {
    if (st.isSymbolicLink()) return Effect.fail(refused("a symbolic link"))
    if (!st.isFile()) return Effect.fail(refused("not a regular file"))
    return Files.withHandle(open, (fh) =>
      Effect.flatMap(attempt(() => fh.stat()), (fst) =>
        fst.dev !== st.dev || fst.ino !== st.ino
          ? Effect.fail(refused("replaced between lstat and open"))
          : Effect.mapError(Files.readBounded(c, fh, file, maxBytes), (e) => fail(file, e))))
  })
}
