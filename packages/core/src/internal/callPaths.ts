/**
 * The paths of patterns (docs/DESIGN.md §15): a path pattern's anchor (`//`, `~/`,
 * `/`, `./` or none) and glob segments, gitignore's any-depth rule, and the absolute
 * path a file tool's call touches, with `.`, `..` and repeated slashes resolved.
 */
import * as Wild from "./wildcard.ts"

/** Longest path judged, before resolution. */
export const MAX_PATH_LENGTH = 16_384

const field = (input: { readonly [k: string]: unknown } | undefined, name: string): unknown =>
  input !== undefined && Object.hasOwn(input, name) ? input[name] : undefined

/** Where a path pattern starts: the root (`//`), `home` (`~/`), the project (`/`) or the call's cwd. */
export type Anchor = "root" | "home" | "project" | "cwd"

/** A compiled path pattern: its anchor, how many `..` step up from it, then its segments. */
export interface PathGlob {
  readonly anchor: Anchor
  readonly up: number
  readonly segments: ReadonlyArray<Wild.Segment>
}

/** Splits a path pattern into its anchor and glob segments; a string says what is wrong. */
export const pathGlob = (path: string): PathGlob | string => {
  let anchor: Anchor = "cwd"
  let rest = path
  let anchored = false
  if (path.startsWith("//")) {
    anchor = "root"
    rest = path.slice(2)
    anchored = true
  } else if (path === "~" || path.startsWith("~/")) {
    anchor = "home"
    rest = path.slice(2)
    anchored = true
  } else if (path.startsWith("/")) {
    anchor = "project"
    rest = path.slice(1)
    anchored = true
  } else if (path.startsWith("./")) {
    rest = path.slice(2)
    anchored = true
  }
  const directory = rest.endsWith("/")
  const body = rest.replace(/\/+$/, "")
  // gitignore: a pattern without a slash but at its end matches at any depth.
  const floating = !anchored && !body.includes("/") && body !== ".."
  const texts = body.split("/").filter((s) => s.length > 0 && s !== ".")
  if (directory) texts.push("**")
  if (floating && texts.length > 0) texts.unshift("**")
  const segments: Array<Wild.Segment> = []
  const literal: Array<boolean> = []
  let up = 0
  for (const t of texts) {
    if (t === "..") {
      if (segments.length === 0) up++
      else if (literal[literal.length - 1] === true) {
        segments.pop()
        literal.pop()
      } else return "\"..\" after a wildcard segment"
      continue
    }
    const seg = Wild.segment(t)
    segments.push(seg)
    literal.push(seg.k === "glob" && seg.literal !== undefined)
  }
  return { anchor, up, segments }
}

/** What is wrong with a path pattern, if anything. */
export const pathProblem = (path: string): string | undefined => {
  if (path.length === 0) return "expected a path"
  const glob = pathGlob(path)
  return typeof glob === "string" ? glob : undefined
}

// The segments of an absolute path with `.`, `..` and repeated slashes resolved; above
// the root stays at the root.
const resolveSegments = (segments: ReadonlyArray<string>, into: Array<string>): Array<string> => {
  for (const s of segments) {
    if (s.length === 0 || s === ".") continue
    if (s === "..") into.pop()
    else into.push(s)
  }
  return into
}

/** The segments of an absolute directory, resolved, or `undefined` for anything else. */
export const absoluteSegments = (dir: unknown): ReadonlyArray<string> | undefined => {
  if (typeof dir !== "string" || !dir.startsWith("/") || dir.length > MAX_PATH_LENGTH) return undefined
  if (dir.length > MAX_KEPT_LENGTH) return resolveSegments(dir.split("/"), [])
  const known = directories.get(dir)
  if (known !== undefined) return known
  // The same few directories (a session's cwd, home and project) anchor every call.
  if (directories.size >= MAX_DIRECTORIES) directories.clear()
  const segments = resolveSegments(dir.split("/"), [])
  directories.set(dir, segments)
  return segments
}

// The directories resolved lately, by their text: at most `MAX_DIRECTORIES` of at most
// `MAX_KEPT_LENGTH` characters (a few hundred KB at most); their segments are shared,
// never changed.
const directories = new Map<string, ReadonlyArray<string>>()
const MAX_DIRECTORIES = 64
const MAX_KEPT_LENGTH = 1024

// A path of a call as absolute segments: absolute, `~`-relative or relative to `base`.
export const resolvePath = (
  path: string,
  base: ReadonlyArray<string> | undefined,
  home: ReadonlyArray<string> | undefined
): Array<string> | undefined => {
  if (path.length === 0 || path.length > MAX_PATH_LENGTH) return undefined
  if (path.startsWith("/")) return resolveSegments(path.split("/"), [])
  if (path === "~" || path.startsWith("~/")) {
    return home === undefined ? undefined : resolveSegments(path.slice(1).split("/"), [...home])
  }
  return base === undefined ? undefined : resolveSegments(path.split("/"), [...base])
}

/** What a file tool's call touches: a path, and whether it searches under it. */
export interface Target {
  readonly path: ReadonlyArray<string>
  readonly search: boolean
}

// The literal directories at the start of a glob (`src/**/*.ts` → `src`).
const literalPrefix = (glob: string): string => {
  const segs = glob.split("/")
  const out: Array<string> = []
  for (let i = 0; i < segs.length - 1; i++) {
    if (Wild.isGlob(segs[i]!)) break
    out.push(segs[i]!)
  }
  return (glob.startsWith("/") ? "/" : "") + out.filter((s) => s.length > 0).join("/")
}

/**
 * The path a file tool's call touches (`file_path`, `notebook_path`, Grep's and LS's
 * `path` or the cwd, Glob's `path` or the cwd joined with its pattern's literal
 * directories), or `undefined` when it cannot be read.
 */
export const targetOf = (
  tool: string,
  input: { readonly [k: string]: unknown } | undefined,
  cwd: ReadonlyArray<string> | undefined,
  home: ReadonlyArray<string> | undefined
): Target | undefined => {
  const at = (p: unknown, search: boolean): Target | undefined => {
    if (typeof p !== "string") return undefined
    const path = resolvePath(p, cwd, home)
    return path === undefined ? undefined : { path, search }
  }
  switch (tool) {
    case "Read":
    case "Edit":
    case "Write":
    case "MultiEdit":
      return at(field(input, "file_path"), false)
    case "NotebookEdit":
      return at(field(input, "notebook_path"), false)
    case "Grep":
    case "LS": {
      const p = field(input, "path")
      return p === undefined || p === null ? (cwd === undefined ? undefined : { path: cwd, search: true }) : at(p, true)
    }
    case "Glob": {
      const p = field(input, "path")
      const base = p === undefined || p === null ? cwd : typeof p === "string" ? resolvePath(p, cwd, home) : undefined
      const glob = field(input, "pattern")
      if (base === undefined || typeof glob !== "string" || glob.length > MAX_PATH_LENGTH) return undefined
      const prefix = literalPrefix(glob)
      if (prefix.length === 0) return { path: base, search: true }
      const path = resolvePath(prefix, base, home)
      return path === undefined ? undefined : { path, search: true }
    }
    default:
      return undefined
  }
}
