/**
 * The matching primitives of patterns (docs/DESIGN.md §15), none built on regular
 * expressions so that no input can make them backtrack: `*`-only wildcards over text
 * (commands, parameter values, tool names, domain labels), gitignore-style globs
 * over one path segment, and a whole path glob walked segment by segment.
 */

/**
 * A `*`-only wildcard as the literal pieces between its stars: `a*b` is `["a", "b"]`,
 * `a` is `["a"]`. `\*` is a literal star and `\\` a literal backslash; any other
 * backslash is itself.
 */
export const starPieces = (text: string): Array<string> => {
  const pieces: Array<string> = []
  let piece = ""
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    const next = text[i + 1]
    if (c === "\\" && (next === "*" || next === "\\")) {
      piece += next
      i++
    } else if (c === "*") {
      pieces.push(piece)
      piece = ""
    } else piece += c
  }
  pieces.push(piece)
  return pieces
}

/**
 * Whether `text` matches the wildcard of `pieces` (`starPieces`) as a whole. The
 * leftmost occurrence of each middle piece is the right choice for `*`-only
 * wildcards, so this is a linear scan, whatever the input.
 */
export const starMatch = (pieces: ReadonlyArray<string>, text: string): boolean => {
  const first = pieces[0] ?? ""
  if (pieces.length === 1) return text === first
  const last = pieces[pieces.length - 1]!
  if (text.length < first.length + last.length) return false
  if (!text.startsWith(first) || !text.endsWith(last)) return false
  const end = text.length - last.length
  let at = first.length
  for (let k = 1; k < pieces.length - 1; k++) {
    const piece = pieces[k]!
    const j = text.indexOf(piece, at)
    if (j < 0 || j + piece.length > end) return false
    at = j + piece.length
  }
  return true
}

/** One token of a segment glob: a character, `?`, a class `[…]`, or `*`. */
type Token =
  | { readonly k: "char"; readonly c: string }
  | { readonly k: "any" }
  | { readonly k: "star" }
  | { readonly k: "class"; readonly negated: boolean; readonly ranges: ReadonlyArray<readonly [string, string]> }

/**
 * A compiled path segment: `**`, or a glob over one segment's code points. `pieces`:
 * the same glob as a `*`-only wildcard (`starPieces`), when it is one and holds no
 * surrogate, so that its pieces can only match whole code points.
 */
export type Segment =
  | { readonly k: "globstar" }
  | {
    readonly k: "glob"
    readonly tokens: ReadonlyArray<Token>
    readonly literal: string | undefined
    readonly pieces?: ReadonlyArray<string> | undefined
  }

/** A segment that matches exactly `name`. */
export const literalSegment = (name: string): Segment => ({ k: "glob", tokens: [], literal: name })

const SURROGATE = /[\uD800-\uDFFF]/

/** Whether a segment's text holds glob syntax (`*`, `?`, `[`, or a backslash escape). */
export const isGlob = (segment: string): boolean => /[*?[\\]/.test(segment)

/**
 * Compiles one segment of a path glob. `**` alone is the globstar; otherwise `*` is
 * any run of characters, `?` one character, `[abc]`, `[a-z]`, `[!…]` / `[^…]` a class
 * (a `[` without its `]` is a literal `[`), and `\x` the literal `x`.
 */
export const segment = (text: string): Segment => {
  if (text === "**") return { k: "globstar" }
  if (!isGlob(text)) return literalSegment(text)
  const cs = Array.from(text)
  const tokens: Array<Token> = []
  for (let i = 0; i < cs.length; i++) {
    const c = cs[i]!
    if (c === "\\" && i + 1 < cs.length) {
      tokens.push({ k: "char", c: cs[++i]! })
    } else if (c === "*") {
      if (tokens[tokens.length - 1]?.k !== "star") tokens.push({ k: "star" })
    } else if (c === "?") {
      tokens.push({ k: "any" })
    } else if (c === "[") {
      const parsed = charClass(cs, i)
      if (parsed === undefined) tokens.push({ k: "char", c })
      else {
        tokens.push(parsed.token)
        i = parsed.end
      }
    } else tokens.push({ k: "char", c })
  }
  const starOnly = tokens.every((t) => t.k === "char" || t.k === "star") && !SURROGATE.test(text)
  return { k: "glob", tokens, literal: undefined, pieces: starOnly ? piecesOf(tokens) : undefined }
}

const piecesOf = (tokens: ReadonlyArray<Token>): Array<string> => {
  const pieces: Array<string> = []
  let piece = ""
  for (const t of tokens) {
    if (t.k === "star") {
      pieces.push(piece)
      piece = ""
    } else if (t.k === "char") piece += t.c
  }
  pieces.push(piece)
  return pieces
}

const charClass = (
  cs: ReadonlyArray<string>,
  open: number
): { readonly token: Token; readonly end: number } | undefined => {
  let i = open + 1
  const negated = cs[i] === "!" || cs[i] === "^"
  if (negated) i++
  const ranges: Array<readonly [string, string]> = []
  let first = true
  while (i < cs.length) {
    let c = cs[i]!
    if (c === "]" && !first) return { token: { k: "class", negated, ranges }, end: i }
    first = false
    if (c === "\\" && i + 1 < cs.length) c = cs[++i]!
    if (cs[i + 1] === "-" && i + 2 < cs.length && cs[i + 2] !== "]") {
      let hi = cs[i + 2]!
      i += 2
      if (hi === "\\" && i + 1 < cs.length) hi = cs[++i]!
      ranges.push([c, hi])
    } else ranges.push([c, c])
    i++
  }
  return undefined
}

const tokenMatches = (token: Token, c: string): boolean => {
  switch (token.k) {
    case "char":
      return token.c === c
    case "any":
      return true
    case "star":
      return true
    case "class": {
      const cp = c.codePointAt(0)!
      const inside = token.ranges.some(([lo, hi]) => cp >= lo.codePointAt(0)! && cp <= hi.codePointAt(0)!)
      return inside !== token.negated
    }
  }
}

/**
 * Whether one path segment matches a compiled segment glob (never `**`). The usual
 * two-pointer walk that returns to the last `*`: at most length × tokens steps.
 */
export const segmentMatch = (seg: Segment, text: string): boolean => {
  if (seg.k === "globstar") return true
  if (seg.literal !== undefined) return seg.literal === text
  if (seg.pieces !== undefined) return starMatch(seg.pieces, text)
  const cs = Array.from(text)
  const ts = seg.tokens
  let t = 0
  let c = 0
  let starT = -1
  let starC = 0
  while (c < cs.length) {
    const token = ts[t]
    if (token !== undefined && token.k === "star") {
      starT = t++
      starC = c
    } else if (token !== undefined && tokenMatches(token, cs[c]!)) {
      t++
      c++
    } else if (starT >= 0) {
      t = starT + 1
      c = ++starC
    } else return false
  }
  while (ts[t]?.k === "star") t++
  return t === ts.length
}

const NONE: PathMatch = { full: false, below: false }

// The states `s` (bits) and those a `**` reaches from them without a segment.
const closeBits = (glob: ReadonlyArray<Segment>, s: number): number => {
  for (let p = 0; p < glob.length; p++) if ((s & (1 << p)) !== 0 && glob[p]!.k === "globstar") s |= 1 << (p + 1)
  return s
}

// `pathMatch` for globs of fewer than 30 segments: the set of states as the bits of
// one number (bit p: glob position p reached), no array per segment.
const pathMatchBits = (
  glob: ReadonlyArray<Segment>,
  path: ReadonlyArray<string>,
  from: number,
  start: number
): PathMatch => {
  const m = glob.length
  let states = closeBits(glob, 1 << start)
  for (let i = from; i < path.length; i++) {
    const name = path[i]!
    let next = 0
    for (let p = 0; p < m; p++) {
      if ((states & (1 << p)) === 0) continue
      const g = glob[p]!
      if (g.k === "globstar") next |= 1 << p
      else if (segmentMatch(g, name)) next |= 1 << (p + 1)
    }
    if (next === 0) return NONE
    states = closeBits(glob, next)
  }
  return { full: (states & (1 << m)) !== 0, below: (states & ((1 << m) - 1)) !== 0 }
}

/** How a path glob relates to a path: `full` when it matches it, `below` when it could match something under it. */
export interface PathMatch {
  readonly full: boolean
  readonly below: boolean
}

/**
 * Walks `path` (segments, from index `from`) through `glob` (segments, `**` matching
 * zero or more whole segments), from glob position `start`. The states are the glob
 * positions reachable so far, so the work is segments × glob length whatever the input.
 */
export const pathMatch = (
  glob: ReadonlyArray<Segment>,
  path: ReadonlyArray<string>,
  from = 0,
  start = 0
): PathMatch => {
  const m = glob.length
  if (m < 30) return pathMatchBits(glob, path, from, start)
  let states = new Uint8Array(m + 1)
  const close = (s: Uint8Array) => {
    for (let p = 0; p < m; p++) if (s[p] === 1 && glob[p]!.k === "globstar") s[p + 1] = 1
  }
  states[start] = 1
  close(states)
  for (let i = from; i < path.length; i++) {
    const name = path[i]!
    const next = new Uint8Array(m + 1)
    let any = false
    for (let p = 0; p < m; p++) {
      if (states[p] !== 1) continue
      const g = glob[p]!
      if (g.k === "globstar") {
        next[p] = 1
        any = true
      } else if (segmentMatch(g, name)) {
        next[p + 1] = 1
        any = true
      }
    }
    if (!any) return { full: false, below: false }
    close(next)
    states = next
  }
  let below = false
  for (let p = 0; p < m; p++) if (states[p] === 1) below = true
  return { full: states[m] === 1, below }
}

const BELOW: PathMatch = { full: false, below: true }

/**
 * `pathMatch` of the glob made of the first `n` segments of `base`, each literal,
 * then `glob`: the literal directories, and the glob's own literal segments before its
 * first wildcard, are compared, not walked (a path that stops among them is below the
 * glob), so a pattern's anchor is never copied into a glob.
 */
export const pathMatchUnder = (
  base: ReadonlyArray<string>,
  n: number,
  glob: ReadonlyArray<Segment>,
  path: ReadonlyArray<string>
): PathMatch => {
  const k = Math.min(n, path.length)
  for (let i = 0; i < k; i++) if (path[i] !== base[i]) return NONE
  if (path.length < n) return BELOW
  let j = 0
  for (; j < glob.length; j++) {
    const g = glob[j]!
    if (g.k !== "glob" || g.literal === undefined) break
    if (n + j >= path.length) return BELOW
    if (path[n + j] !== g.literal) return NONE
  }
  return pathMatch(glob, path, n + j, j)
}
