/**
 * A small shell-aware splitter for Bash patterns (docs/DESIGN.md §15): a command
 * becomes the list of its simple commands, each as its words with quotes and
 * escapes removed. It understands single and double quotes, backslashes, the
 * separators `&&`, `||`, `;`, `|`, `|&`, `&` and newlines, `( … )` groups,
 * `$( … )`, `<( … )`, `>( … )` and backticks (nested), comments, and the script of
 * `sh -c` / `bash -c` / `eval`. It does not expand anything: variables, aliases,
 * functions, globs and here-documents stay text. Work is bounded: at most
 * `MAX_PARTS` parts and `MAX_DEPTH` levels of nesting, beyond which the split is
 * marked `exceeded`. A command left open (a quote, group or substitution not
 * closed), or a script handed to a shell that is, is `complete: false`, and is also
 * read a second time with quotes as ordinary characters, its parts added to the
 * first reading's.
 */

/** The most simple commands one command is split into. */
export const MAX_PARTS = 1000

/** The deepest nesting of `$( … )`, backticks, groups and `sh -c` scripts followed. */
export const MAX_DEPTH = 32

/** One simple command: its words and how deep it sat. */
export interface Part {
  readonly words: ReadonlyArray<string>
  readonly depth: number
}

/** What `split` found. `complete` is false when a quote, group or substitution was left open. */
export interface Split {
  readonly parts: ReadonlyArray<Part>
  readonly complete: boolean
  readonly exceeded: boolean
}

const SHELLS = new Set(["sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "busybox"])

const RESERVED = new Set(["!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "fi", "done"])

// Wrappers that run the rest of their arguments as a command, with the options that take a
// separate argument. A heuristic: an unknown option is assumed to take none.
const WRAPPERS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ["time", new Set<string>()],
  ["exec", new Set(["-a"])],
  ["command", new Set<string>()],
  ["builtin", new Set<string>()],
  ["nohup", new Set<string>()],
  ["nice", new Set(["-n"])],
  ["timeout", new Set(["-s", "-k"])],
  ["stdbuf", new Set(["-i", "-o", "-e"])],
  ["env", new Set(["-u", "-C"])],
  ["sudo", new Set(["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"])],
  ["doas", new Set(["-u", "-C"])],
  ["xargs", new Set(["-n", "-I", "-L", "-P", "-d", "-E", "-s", "-a"])],
  ["setsid", new Set<string>()],
  ["ionice", new Set(["-c", "-n", "-p"])]
])

// The characters that never end a word or change how the next is read, once a word has
// begun (a `#` inside a word is a character): all but whitespace, the separators,
// parentheses, quotes, `\\`, `$`, `<` and `>`, each read by its own case.
const ORDINARY: Uint8Array = (() => {
  const table = new Uint8Array(65536).fill(1)
  for (const c of " \t\r\n;&|()\\'\"`$<>") table[c.charCodeAt(0)] = 0
  return table
})()

const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=/

/**
 * The index of the word that names the command: past reserved words (`if`, `!`,
 * `{`…), variable assignments and the wrappers `WRAPPERS` names with their options
 * (`timeout` also with its duration).
 */
export const commandStart = (words: ReadonlyArray<string>): number => {
  let i = 0
  while (i < words.length) {
    const w = words[i]!
    if (RESERVED.has(w) || ASSIGNMENT.test(w)) {
      i++
      continue
    }
    const withArg = WRAPPERS.get(w)
    if (withArg === undefined) break
    i++
    while (i < words.length && words[i]!.startsWith("-") && words[i] !== "-") {
      const option = words[i]!
      i++
      if (option === "--") break
      if (withArg.has(option)) i++
    }
    if (w === "timeout" && i < words.length) i++
  }
  return i
}

// The scripts a part hands to a shell: `eval a b` gives `a b`; `sh -c 'script' name args`
// gives every word after the option holding `c` (the script is the first that the shell
// does not take as an option, which a word starting with `-` may or may not be: all are
// split, so none is missed).
const scriptsOf = (words: ReadonlyArray<string>): ReadonlyArray<string> => {
  const at = commandStart(words)
  const name = words[at]
  if (name === undefined) return []
  if (name === "eval") return [words.slice(at + 1).join(" ")]
  const base = name.slice(name.lastIndexOf("/") + 1)
  if (!SHELLS.has(base)) return []
  for (let i = at + 1; i < words.length; i++) {
    const w = words[i]!
    if (/^-[A-Za-z]*c[A-Za-z]*$/.test(w)) return words.slice(i + 1)
    if (!w.startsWith("-") || w === "-" || w === "--") return []
  }
  return []
}

class Splitter {
  readonly parts: Array<Part> = []
  complete = true
  exceeded = false
  // The second reading of a command left open: quotes are ordinary characters.
  literalQuotes = false

  add(words: Array<string>, depth: number): void {
    if (words.length === 0) return
    if (this.parts.length >= MAX_PARTS) {
      this.exceeded = true
      this.complete = false
      return
    }
    this.parts.push({ words, depth })
  }

  // Splits `s` from `i` until `stop` (or the end); returns the index after `stop`.
  list(s: string, start: number, depth: number, stop: ")" | undefined): number {
    const n = s.length
    if (depth > MAX_DEPTH) {
      this.exceeded = true
      this.complete = false
      return n
    }
    let words: Array<string> = []
    let word = ""
    let inWord = false
    const endWord = () => {
      if (inWord) words.push(word)
      word = ""
      inWord = false
    }
    const endPart = () => {
      endWord()
      this.add(words, depth)
      words = []
    }
    // A substitution: its commands are parts of their own, its text stays in the word.
    const substitution = (from: number, open: number): number => {
      const end = this.list(s, open, depth + 1, ")")
      word += s.slice(from, end)
      inWord = true
      return end
    }
    let i = start
    while (i < n) {
      if (this.exceeded) return n
      const c = s[i]!
      const next = s[i + 1]
      if (this.literalQuotes && (c === "'" || c === "\"" || c === "`")) {
        word += c
        inWord = true
        i++
        continue
      }
      if (c === ")" && stop === ")") {
        endPart()
        return i + 1
      }
      switch (c) {
        case " ":
        case "\t":
        case "\r":
          endWord()
          i++
          break
        case "\n":
        case ";":
          endPart()
          i++
          break
        case "&":
          if (s[i - 1] === ">" || s[i - 1] === "<" || next === ">") {
            word += c
            inWord = true
            i++
          } else {
            endPart()
            i += next === "&" ? 2 : 1
          }
          break
        case "|":
          endPart()
          i += next === "|" || next === "&" ? 2 : 1
          break
        case "(":
          if (inWord) {
            word += c
            i++
          } else {
            endPart()
            i = this.list(s, i + 1, depth + 1, ")")
          }
          break
        case ")":
          // A closing parenthesis with nothing open.
          this.complete = false
          endPart()
          i++
          break
        case "#":
          if (inWord) {
            word += c
            i++
          } else {
            while (i < n && s[i] !== "\n") i++
          }
          break
        case "\\":
          if (next === "\n") i += 2
          else if (next !== undefined) {
            word += next
            inWord = true
            i += 2
          } else i++
          break
        case "'": {
          const j = s.indexOf("'", i + 1)
          inWord = true
          if (j < 0) {
            this.complete = false
            word += s.slice(i + 1)
            i = n
          } else {
            word += s.slice(i + 1, j)
            i = j + 1
          }
          break
        }
        case "\"":
          i = this.doubleQuoted(s, i + 1, depth, (text) => {
            word += text
          })
          inWord = true
          break
        case "`": {
          const end = this.backtick(s, i + 1, depth)
          word += s.slice(i, end)
          inWord = true
          i = end
          break
        }
        case "$":
        case "<":
        case ">":
          if (next === "(") i = substitution(i, i + 2)
          else {
            word += c
            inWord = true
            i++
          }
          break
        default: {
          // A run of ordinary characters joins the word at once.
          let j = i + 1
          while (j < n && ORDINARY[s.charCodeAt(j)] !== 0) j++
          word += j === i + 1 ? c : s.slice(i, j)
          inWord = true
          i = j
        }
      }
    }
    endPart()
    if (stop !== undefined) this.complete = false
    return n
  }

  // The inside of "…" from `i` (after the quote); returns the index after the closing quote.
  doubleQuoted(s: string, start: number, depth: number, emit: (text: string) => void): number {
    const n = s.length
    let i = start
    while (i < n) {
      const c = s[i]!
      if (c === "\"") return i + 1
      if (c === "\\") {
        const next = s[i + 1]
        if (next === "\n") i += 2
        else if (next === "\"" || next === "\\" || next === "$" || next === "`") {
          emit(next)
          i += 2
        } else {
          emit(c)
          i++
        }
      } else if (c === "$" && s[i + 1] === "(") {
        const end = this.list(s, i + 2, depth + 1, ")")
        emit(s.slice(i, end))
        i = end
      } else if (c === "`") {
        const end = this.backtick(s, i + 1, depth)
        emit(s.slice(i, end))
        i = end
      } else {
        emit(c)
        i++
      }
    }
    this.complete = false
    return n
  }

  // A `…` substitution from `i` (after the backtick); returns the index after the closing one.
  backtick(s: string, start: number, depth: number): number {
    const n = s.length
    let i = start
    let inner = ""
    while (i < n && s[i] !== "`") {
      if (s[i] === "\\" && i + 1 < n) {
        const next = s[i + 1]!
        inner += next === "`" || next === "\\" || next === "$" ? next : `\\${next}`
        i += 2
      } else {
        inner += s[i]
        i++
      }
    }
    this.list(inner, 0, depth + 1, undefined)
    if (i >= n) {
      this.complete = false
      return n
    }
    return i + 1
  }
}

/** Splits a command into its simple commands (`Split`), following `sh -c` and `eval` scripts. */
export const split = (command: string): Split => {
  const splitter = new Splitter()
  let complete = true
  // A quote left open hides what follows it: such a text is read again with quotes as
  // ordinary characters, so every separator it holds splits it too.
  const read = (text: string, depth: number) => {
    splitter.complete = true
    splitter.list(text, 0, depth, undefined)
    if (!splitter.complete && !splitter.exceeded) {
      splitter.literalQuotes = true
      splitter.list(text, 0, depth, undefined)
      splitter.literalQuotes = false
    }
    complete &&= splitter.complete
  }
  read(command, 0)
  // Scripts handed to a shell are split in turn; the loop sees the parts they add.
  for (let k = 0; k < splitter.parts.length && !splitter.exceeded; k++) {
    const part = splitter.parts[k]!
    for (const script of scriptsOf(part.words)) read(script, part.depth + 1)
  }
  return { parts: splitter.parts, complete: complete && !splitter.exceeded, exceeded: splitter.exceeded }
}
