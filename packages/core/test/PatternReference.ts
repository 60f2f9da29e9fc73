/**
 * A slow reference for `Pattern.matches`, written apart from it: each pattern becomes
 * one regular expression over the whole text (a command part, a resolved absolute
 * path), paths are resolved with `node:path`. Only for small test inputs.
 */
import { posix } from "node:path"

const escape = (c: string): string => c.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&")

/** The regular expression of a Bash command pattern, as docs/DESIGN.md §15 states it. */
export const commandRegex = (specifier: string): RegExp => {
  let text = specifier.trim().replace(/\s+/g, " ")
  if (text.length > 2 && text.endsWith(":*") && !text.endsWith("\\:*")) text = `${text.slice(0, -2).trimEnd()} *`
  let boundary = false
  if (text.endsWith(" *") && !text.endsWith("\\ *")) {
    boundary = true
    text = text.slice(0, -2)
  }
  let source = ""
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (c === "\\" && (text[i + 1] === "*" || text[i + 1] === "\\")) {
      source += escape(text[i + 1]!)
      i++
    } else if (c === "*") source += "[\\s\\S]*"
    else source += escape(c)
  }
  return new RegExp(`^${source}${boundary ? "(?: [\\s\\S]*)?" : ""}$`)
}

const segmentRegex = (seg: string): string => {
  let out = ""
  const cs = Array.from(seg)
  for (let i = 0; i < cs.length; i++) {
    const c = cs[i]!
    if (c === "*") out += "[^/]*"
    else if (c === "?") out += "[^/]"
    else if (c === "[") {
      const end = cs.indexOf("]", i + 2)
      let body = cs.slice(i + 1, end).join("")
      if (body.startsWith("!")) body = `^${body.slice(1)}`
      out += `[${body}]`
      i = end
    } else out += escape(c)
  }
  return out
}

export interface Where {
  readonly cwd: string
  readonly projectDir: string
  readonly home: string
}

/** The absolute path a call's path names (`~` expanded, `.`, `..` and `//` resolved). */
export const resolveCallPath = (path: string, where: Where): string =>
  path === "~" || path.startsWith("~/")
    ? posix.resolve(where.home, `.${path.slice(1)}`)
    : posix.resolve(where.cwd, path)

/** Whether a path pattern (the specifier of `Read(…)`) matches an absolute path. */
export const pathMatches = (pattern: string, absolute: string, where: Where): boolean => {
  let base: string
  let rest: string
  let anchored = true
  if (pattern.startsWith("//")) [base, rest] = ["/", pattern.slice(2)]
  else if (pattern === "~" || pattern.startsWith("~/")) [base, rest] = [where.home, pattern.slice(2)]
  else if (pattern.startsWith("/")) [base, rest] = [where.projectDir, pattern.slice(1)]
  else if (pattern.startsWith("./")) [base, rest] = [where.cwd, pattern.slice(2)]
  else [base, rest, anchored] = [where.cwd, pattern, false]
  const trailing = rest.endsWith("/")
  rest = rest.replace(/\/+$/, "")
  if (!anchored && !rest.includes("/") && rest !== ".." && rest.length > 0) rest = `**/${rest}`
  if (trailing) rest = rest.length > 0 ? `${rest}/**` : "**"
  // The literal directories before the first wildcard resolve like a path.
  const segs = rest.split("/").filter((s) => s.length > 0)
  const firstGlob = segs.findIndex((s) => /[*?[]/.test(s))
  const literal = firstGlob < 0 ? segs : segs.slice(0, firstGlob)
  const globbed = firstGlob < 0 ? [] : segs.slice(firstGlob).filter((s) => s !== ".")
  const root = posix.resolve(base, ...literal)
  let source = root === "/" ? "" : root.split("/").slice(1).map((s) => `/${escape(s)}`).join("")
  for (const s of globbed) source += s === "**" ? "(?:/[^/]+)*" : `/${segmentRegex(s)}`
  const target = absolute === "/" ? "" : absolute
  return new RegExp(`^${source}$`, "u").test(target)
}
