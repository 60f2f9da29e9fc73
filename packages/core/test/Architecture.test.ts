/**
 * Architecture rules of @session-journal/core (docs/DESIGN.md §1): the core runs anywhere
 * Effect runs, so no file under packages/core/src may import a Node builtin (by
 * `node:` or by bare name), call `require`, or reach for Node-only globals; and its
 * only packages are `effect` and `@noble/hashes`.
 */
import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { builtinModules } from "node:module"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const srcDir = fileURLToPath(new URL("../src", import.meta.url))

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const path = join(dir, d.name)
    if (d.isDirectory()) return sourceFiles(path)
    return /\.(m|c)?[jt]sx?$/.test(d.name) ? [path] : []
  })

const stripComments = (code: string): string =>
  code.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1")

/** Every module specifier a source text loads: static, side-effect, dynamic, re-export, require. */
const specifiers = (code: string): Array<string> => {
  const out: Array<string> = []
  const pattern = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+|\brequire\s*\(\s*)(["'`])([^"'`]+)\1/g
  for (const m of stripComments(code).matchAll(pattern)) out.push(m[2]!)
  return out
}

const builtins = new Set(builtinModules.flatMap((m) => [m, m.split("/")[0]!]))

const isNodeBuiltin = (spec: string): boolean => spec.startsWith("node:") || builtins.has(spec) || builtins.has(spec.split("/")[0]!)

const allowedPackage = (spec: string): boolean =>
  spec.startsWith("./") || spec.startsWith("../") || spec === "effect" || spec.startsWith("effect/") ||
  spec.startsWith("@noble/hashes/")

const nodeGlobals = /\brequire\s*\(|\bBuffer\s*\.|\bnew\s+Buffer\b|\bprocess\s*\.\s*[A-Za-z_]|\b__dirname\b|\b__filename\b/

/** Every violation in one source text. */
const violations = (code: string): Array<string> => {
  const found: Array<string> = []
  for (const spec of specifiers(code)) {
    if (isNodeBuiltin(spec)) found.push(`imports Node builtin ${spec}`)
    else if (!allowedPackage(spec)) found.push(`imports ${spec}, which core may not depend on`)
  }
  const global = stripComments(code).match(nodeGlobals)
  if (global !== null) found.push(`uses Node-only ${global[0]}`)
  return found
}

describe("Architecture: core never touches Node", () => {
  const files = sourceFiles(srcDir)

  it("finds the source files", () => {
    const names = files.map((f) => relative(srcDir, f))
    for (const expected of ["Entry.ts", "Chain.ts", "JournalState.ts", "index.ts", join("internal", "jcs.ts")]) {
      assert.include(names, expected)
    }
  })

  it("no file under packages/core/src imports node:, a bare builtin, require, or a foreign package", () => {
    const report = files.flatMap((f) =>
      violations(readFileSync(f, "utf8")).map((v) => `${relative(srcDir, f)}: ${v}`)
    )
    assert.deepStrictEqual(report, [])
  })

  it("the scanner catches every form it is meant to catch", () => {
    const bad = [
      `import { readFileSync } from "node:fs"`,
      `import * as fs from 'fs'`,
      `import "node:process"`,
      `export { join } from "path"`,
      `const c = await import("crypto")`,
      `const c = await import ( 'node:crypto' )`,
      `const fs = require("fs")`,
      `import { x } from "fs/promises"`,
      "import os from `os`",
      `import type { Stats } from "node:fs"`,
      `import { z } from "zod"`,
      `const b = Buffer.from("x")`,
      `const e = process.env.HOME`,
      `const d = __dirname`
    ]
    for (const code of bad) assert.isAbove(violations(code).length, 0, code)
  })

  it("the scanner accepts what core legitimately contains", () => {
    const good = [
      `import * as Effect from "effect/Effect"`,
      `import { sha256 } from "@noble/hashes/sha2.js"`,
      `import * as Entry from "./Entry.ts"`,
      `export * as Ring from "./internal/Ring.ts"`,
      `// a comment about import "node:fs"`,
      `/* require("fs") in a comment */`,
      `const holder = "another writer in this process"`,
      `const url = "https://example.com" // trailing comment from "fs"`
    ]
    for (const code of good) assert.deepStrictEqual(violations(code), [], code)
  })
})
