/**
 * Every citation of the design in the code base resolves: a `DESIGN §n` or
 * `docs/DESIGN.md §n` (also `§n, §m` and `§n and §m`) in the sources, tests, bench,
 * scripts, docs and READMEs names a section `## n.` of docs/DESIGN.md, and every link to
 * one of its anchors names one of its headings. The sections are numbered 1, 2, 3,
 * … without a gap, so a section cannot be renumbered without the citations failing.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const root = fileURLToPath(new URL("../../..", import.meta.url))
const designPath = join(root, "docs", "DESIGN.md")

const skipped = new Set(["node_modules", "dist", ".tsbuild", ".git"])

const textFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const path = join(dir, d.name)
    if (d.isDirectory()) return skipped.has(d.name) ? [] : textFiles(path)
    return /\.(?:[cm]?[jt]sx?|json|md)$/.test(d.name) ? [path] : []
  })

/** The files whose citations must resolve. */
const citingFiles = (): Array<string> => {
  const files = [join(root, "README.md"), join(root, "BENCHMARKS.md")].filter((f) => existsSync(f))
  for (const pkg of readdirSync(join(root, "packages"), { withFileTypes: true })) {
    if (!pkg.isDirectory()) continue
    for (const sub of ["src", "test", "README.md", "bin", "examples"]) {
      const path = join(root, "packages", pkg.name, sub)
      if (!existsSync(path)) continue
      if (sub.endsWith(".md")) files.push(path)
      else files.push(...textFiles(path))
    }
  }
  for (const dir of ["bench", "scripts", "docs"]) {
    if (existsSync(join(root, dir))) files.push(...textFiles(join(root, dir)))
  }
  return files
}

/** The section numbers a text cites, each with the text of the citation. */
const citations = (text: string): Array<{ readonly section: number; readonly cited: string }> => {
  const out: Array<{ section: number; cited: string }> = []
  const pattern = /\bDESIGN(?:\.md)?\s+(§\s?\d+(?:\s*(?:,|and|or)\s*§\s?\d+)*)/g
  for (const m of text.matchAll(pattern)) {
    for (const n of m[1]!.matchAll(/§\s?(\d+)/g)) out.push({ section: Number(n[1]), cited: m[0] })
  }
  return out
}

/** The anchors a text links to in DESIGN.md (`DESIGN.md#6-the-filesystem-adapter`, or `#…` inside it). */
const anchorLinks = (text: string, inDesign: boolean): Array<string> => {
  const pattern = inDesign ? /\]\(#([a-z0-9-]+)\)/g : /DESIGN\.md#([a-z0-9-]+)/g
  return Array.from(text.matchAll(pattern), (m) => m[1]!)
}

/** The numbered sections of the design: `## n. Title`. */
const sections = (design: string): Array<{ readonly n: number; readonly title: string }> =>
  Array.from(design.matchAll(/^## (\d+)\. (.+)$/gm), (m) => ({ n: Number(m[1]), title: m[2]! }))

/** GitHub's anchor of a heading's text. */
const slug = (heading: string): string =>
  heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-")

describe("docs/DESIGN.md: every citation resolves", () => {
  const design = readFileSync(designPath, "utf8")
  const numbered = sections(design)
  const numbers = new Set(numbered.map((s) => s.n))
  const anchors = new Set(Array.from(design.matchAll(/^#{1,6} (.+)$/gm), (m) => slug(m[1]!)))

  it("numbers its sections 1, 2, 3, … once each", () => {
    assert.isAbove(numbered.length, 0)
    assert.deepStrictEqual(numbered.map((s) => s.n), numbered.map((_, i) => i + 1))
  })

  it("every DESIGN §n in the code base names a section of docs/DESIGN.md", () => {
    const files = citingFiles()
    // The citations the code base had when this test was written are in these files.
    for (const expected of ["core/src/Entry.ts", "core/src/Recovery.ts", "node/src/internal/segment.ts"]) {
      assert.isTrue(files.some((f) => f.endsWith(expected)), expected)
    }
    let found = 0
    const unresolved: Array<string> = []
    for (const file of files) {
      for (const c of citations(readFileSync(file, "utf8"))) {
        found++
        if (!numbers.has(c.section)) unresolved.push(`${relative(root, file)}: "${c.cited}" (no section ${c.section})`)
      }
    }
    assert.isAtLeast(found, 20, "citations found")
    assert.deepStrictEqual(unresolved, [])
  })

  it("every link to a DESIGN.md anchor names one of its headings", () => {
    const broken: Array<string> = []
    for (const file of [...citingFiles(), designPath]) {
      for (const anchor of anchorLinks(readFileSync(file, "utf8"), file === designPath)) {
        if (!anchors.has(anchor)) broken.push(`${relative(root, file)}: #${anchor}`)
      }
    }
    assert.deepStrictEqual(broken, [])
  })

  it("the scanner reads every form of citation", () => {
    const cases: ReadonlyArray<readonly [string, ReadonlyArray<number>]> = [
      ["(DESIGN §6)", [6]],
      ["the pattern of docs/DESIGN.md §2,", [2]],
      ["docs/DESIGN.md §9: a torn tail; §11: unused", [9]],
      ["DESIGN.md §9, §11", [9, 11]],
      ["DESIGN §3 and §10", [3, 10]],
      ["[docs/DESIGN.md §10](../../docs/DESIGN.md#10-checkpoints)", [10]],
      ["cite its sections as `docs/DESIGN.md §n`", []],
      ["the design says", []]
    ]
    for (const [text, expected] of cases) {
      assert.deepStrictEqual(citations(text).map((c) => c.section), expected, text)
    }
    assert.strictEqual(
      slug("11. Preallocated segments and the durable write"),
      "11-preallocated-segments-and-the-durable-write"
    )
    assert.strictEqual(slug("4. The SessionJournal service"), "4-the-sessionjournal-service")
  })
})
