/**
 * Architecture rules of @session-journal/core (docs/DESIGN.md §1): the core runs anywhere
 * Effect runs, so no file under packages/core/src may import a Node builtin (by
 * `node:` or by bare name), call `require`, or reach for Node-only globals; and its
 * only packages are `effect`, `@noble/hashes` and `@noble/curves`' Ed25519. Across every package's sources:
 * no runtime import cycle, and an `internal/` module imports the public module
 * that uses it only as types.
 */
import { assert, describe, it } from "@effect/vitest"
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { builtinModules } from "node:module"
import { dirname, join, relative, resolve, sep } from "node:path"
import { fileURLToPath } from "node:url"

const srcDir = fileURLToPath(new URL("../src", import.meta.url))
const packagesDir = fileURLToPath(new URL("../..", import.meta.url))

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

const isNodeBuiltin = (spec: string): boolean =>
  spec.startsWith("node:") || builtins.has(spec) || builtins.has(spec.split("/")[0]!)

const allowedPackage = (spec: string): boolean =>
  spec.startsWith("./") || spec.startsWith("../") || spec === "effect" || spec.startsWith("effect/") ||
  spec.startsWith("@noble/hashes/") || spec === "@noble/curves/ed25519.js"

const nodeGlobals =
  /\brequire\s*\(|\bBuffer\s*\.|\bnew\s+Buffer\b|\bprocess\s*\.\s*[A-Za-z_]|\b__dirname\b|\b__filename\b/

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
    const report = files.flatMap((f) => violations(readFileSync(f, "utf8")).map((v) => `${relative(srcDir, f)}: ${v}`))
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
      `export * as Ring from "./internal/ring.ts"`,
      `// a comment about import "node:fs"`,
      `/* require("fs") in a comment */`,
      `const holder = "another writer in this process"`,
      `const url = "https://example.com" // trailing comment from "fs"`
    ]
    for (const code of good) assert.deepStrictEqual(violations(code), [], code)
  })
})

// ---------------------------------------------------------------------------
// Import graph of every package's sources

/** One static import or re-export of a module: whether it loads the module at run time. */
interface Edge {
  readonly spec: string
  readonly runtime: boolean
}

// `{ type A, type B }`: every name type-only (an empty clause loads the module).
const allTypes = (clause: string): boolean => {
  const names = clause.replace(/^\{|\}$/g, "").split(",").map((n) => n.trim()).filter((n) => n.length > 0)
  return names.length > 0 && names.every((n) => n.startsWith("type "))
}

const NAME = String.raw`[A-Za-z_$][\w$]*`
const IMPORT = new RegExp(
  String
    .raw`^\s*import\s+(type\s+)?((?:${NAME}\s*,\s*)?(?:\*\s+as\s+${NAME}|\{[^}]*\})|${NAME})\s+from\s*(["'])([^"']+)\3`,
  "gm"
)
const EXPORT = new RegExp(
  String.raw`^\s*export\s+(type\s+)?(\*(?:\s+as\s+${NAME})?|\{[^}]*\})\s+from\s*(["'])([^"']+)\3`,
  "gm"
)
const BARE = /^\s*import\s*(["'])([^"']+)\1/gm

/**
 * The static imports and re-exports of a source text, each marked runtime unless
 * type-only (`import type`, `export type`, or a clause whose every name is
 * `type`). Dynamic `import()` is lazy, so it is no edge of the load-time graph.
 */
const edges = (code: string): Array<Edge> => {
  const text = stripComments(code)
  const out: Array<Edge> = []
  for (const m of text.matchAll(IMPORT)) {
    const clause = m[2]!.trim()
    out.push({ spec: m[4]!, runtime: m[1] === undefined && !(clause.startsWith("{") && allTypes(clause)) })
  }
  for (const m of text.matchAll(EXPORT)) {
    const clause = m[2]!.trim()
    out.push({ spec: m[4]!, runtime: m[1] === undefined && !(clause.startsWith("{") && allTypes(clause)) })
  }
  for (const m of text.matchAll(BARE)) out.push({ spec: m[2]!, runtime: true })
  return out
}

interface Pkg {
  readonly name: string
  readonly dir: string
}

const packages: Array<Pkg> = readdirSync(packagesDir, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(packagesDir, d.name, "package.json")))
  .map((d) => {
    const dir = join(packagesDir, d.name)
    return { name: (JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { name: string }).name, dir }
  })

/** The packages whose exports map lists its public modules (no `./*`, no `./main`) and maps `./internal/*` to null. */
const FENCED = [
  "@session-journal/core",
  "@session-journal/node",
  "@session-journal/postgres",
  "@session-journal/ai",
  "@session-journal/claude-code",
  "@session-journal/codex",
  "@session-journal/mcp",
  "@session-journal/cli"
]

const asSource = (base: string): string | undefined => {
  for (const candidate of [base, base.replace(/\.js$/, ".ts"), `${base}.ts`, join(base, "index.ts")]) {
    if (candidate.endsWith(".ts") && existsSync(candidate)) return candidate
  }
  return undefined
}

/** The source file a specifier of `from` loads, when it is one of the packages' sources. */
const resolveSpec = (from: string, spec: string): string | undefined => {
  if (spec.startsWith("./") || spec.startsWith("../")) return asSource(resolve(dirname(from), spec))
  const pkg = packages.find((p) => spec === p.name || spec.startsWith(`${p.name}/`))
  if (pkg === undefined) return undefined
  const sub = spec.slice(pkg.name.length + 1)
  if (sub === "") return asSource(join(pkg.dir, "src", "index.ts"))
  return sub.startsWith("test/") ? undefined : asSource(join(pkg.dir, "src", sub))
}

/** The edges between the packages' source files: every import, or the runtime ones only. */
const importGraph = (only: "runtime" | "all"): Map<string, Array<string>> => {
  const graph = new Map<string, Array<string>>()
  for (const pkg of packages) {
    const src = join(pkg.dir, "src")
    if (!existsSync(src)) continue
    for (const file of sourceFiles(src).filter((f) => f.endsWith(".ts"))) {
      const to = edges(readFileSync(file, "utf8")).flatMap((e) => {
        const target = e.runtime || only === "all" ? resolveSpec(file, e.spec) : undefined
        return target === undefined ? [] : [target]
      })
      graph.set(file, [...new Set(to)])
    }
  }
  return graph
}

/** The strongly connected components with a cycle (Tarjan), each as a readable cycle. */
const cycles = (graph: Map<string, ReadonlyArray<string>>): Array<Array<string>> => {
  let index = 0
  const indices = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const found: Array<Array<string>> = []
  const visit = (v: string) => {
    indices.set(v, index)
    low.set(v, index)
    index++
    stack.push(v)
    onStack.add(v)
    for (const w of graph.get(v) ?? []) {
      if (!indices.has(w)) {
        visit(w)
        low.set(v, Math.min(low.get(v)!, low.get(w)!))
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, indices.get(w)!))
    }
    if (low.get(v) === indices.get(v)) {
      const component: Array<string> = []
      let w: string
      do {
        w = stack.pop()!
        onStack.delete(w)
        component.push(w)
      } while (w !== v)
      if (component.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(component.sort())
    }
  }
  for (const v of [...graph.keys()].sort()) if (!indices.has(v)) visit(v)
  return found
}

// A read of the process's clock or of `Math.random`.
const WALL_CLOCK = /\bDate\s*\.\s*now\b|\bperformance\s*\.\s*now\b|\bMath\s*\.\s*random\b|\bnew\s+Date\s*\(\s*\)/g

const shown = (file: string): string => relative(packagesDir, file).split(sep).join("/")

describe("Architecture: the import graph of every package", () => {
  const graph = importGraph("runtime")
  const all = importGraph("all")

  it("finds the sources of every package", () => {
    const names = [...graph.keys()].map(shown)
    for (
      const expected of [
        "core/src/Persistence.ts",
        "core/src/internal/memory.ts",
        "node/src/Lock.ts",
        "cli/src/main.ts",
        "postgres/src/index.ts"
      ]
    ) {
      assert.include(names, expected)
    }
    assert.include(graph.get(join(packagesDir, "node", "src", "index.ts"))!.map(shown), "node/src/NodePersistence.ts")
  })

  it("no runtime import cycle among the packages' source modules (type-only imports aside)", () => {
    assert.deepStrictEqual(cycles(graph).map((c) => c.map(shown)), [])
  })

  it("an internal/ module imports its public parent (a public module importing it) only as types", () => {
    const report: Array<string> = []
    for (const [file, targets] of all) {
      if (file.includes(`${sep}internal${sep}`)) continue
      for (
        const internal of targets.filter((t) =>
          t.includes(`${sep}internal${sep}`) && dirname(t).startsWith(dirname(file))
        )
      ) {
        if ((graph.get(internal) ?? []).includes(file)) {
          report.push(`${shown(internal)} imports its parent ${shown(file)} at run time`)
        }
      }
    }
    assert.deepStrictEqual(report, [])
  })

  // The benchmarks (bench/, never published) may time an internal function such as
  // the preimage encoder; the packages and their tests go through public modules.
  it("no package's source or test file imports another package's internal/ module", () => {
    const files = packages.flatMap((p) =>
      ["src", "test"].flatMap((d) => existsSync(join(p.dir, d)) ? sourceFiles(join(p.dir, d)) : [])
    ).filter((f) => f.endsWith(".ts"))
    const owner = (file: string) => packages.find((p) => file.startsWith(p.dir + sep))
    const report: Array<string> = []
    for (const file of files) {
      for (const e of edges(readFileSync(file, "utf8"))) {
        const named = packages.find((p) => e.spec.startsWith(`${p.name}/internal/`))
        const target = resolveSpec(file, e.spec)
        const into = named ??
          (target !== undefined && target.includes(`${sep}internal${sep}`) ? owner(target) : undefined)
        if (into !== undefined && into !== owner(file)) {
          report.push(`${relative(packagesDir, file)} imports ${e.spec}, an internal module of ${into.name}`)
        }
      }
    }
    assert.deepStrictEqual(report, [])
  })

  // An internal module is imported for what it defines, from where it defines it:
  // no internal barrel gathers others (a public module may choose what to publish).
  it("no internal/ module re-exports another module", () => {
    const report: Array<string> = []
    for (const file of all.keys()) {
      if (!file.includes(`${sep}internal${sep}`)) continue
      for (const m of stripComments(readFileSync(file, "utf8")).matchAll(EXPORT)) {
        report.push(`${shown(file)} re-exports ${m[4]}`)
      }
    }
    assert.deepStrictEqual(report, [])
  })

  it("internal/ modules are named in lower camel case, public modules in upper camel case", () => {
    const report: Array<string> = []
    for (const pkg of packages) {
      const src = join(pkg.dir, "src")
      if (!existsSync(src)) continue
      for (const file of sourceFiles(src)) {
        const rel = relative(src, file).split(sep)
        const internal = rel[0] === "internal"
        for (const part of internal ? rel.slice(1) : rel) {
          if (part === "index.ts" || part === "main.ts") continue
          if (internal ? !/^[a-z]/.test(part) : rel.length === 1 && !/^[A-Z]/.test(part)) {
            report.push(`${pkg.name}: src/${rel.join("/")}`)
          }
        }
      }
    }
    assert.deepStrictEqual(report, [])
  })

  it("the exports of every library package list each public module, and no internal/ one", () => {
    for (const name of FENCED) {
      const pkg = packages.find((p) => p.name === name)!
      const exports = (JSON.parse(readFileSync(join(pkg.dir, "package.json"), "utf8")) as {
        exports: Record<string, unknown>
      }).exports
      // Every module outside internal/ is public, under its own name (a folder such
      // as core's transparency/ groups modules, it does not rename them).
      // The command's package publishes its top-level modules only: its folders
      // (commands/, viewer/, otel/) are the command's own, and main.ts is the bin.
      const src = join(pkg.dir, "src")
      const command = name === "@session-journal/cli"
      const modules = new Map(
        sourceFiles(src)
          .map((f) => relative(src, f).split(sep).join("/"))
          .filter((f) => f.endsWith(".ts") && f !== "index.ts" && !f.startsWith("internal/"))
          .filter((f) => !command || (!f.includes("/") && f !== "main.ts"))
          .map((f) => [`./${f.slice(f.lastIndexOf("/") + 1, -3)}`, `./src/${f}`])
      )
      // `internal/` is fenced off by name too, so a pattern added later cannot open it.
      assert.strictEqual(exports["./internal/*"], null, `${name} "./internal/*"`)
      const keys = Object.keys(exports).filter((k) => ![".", "./package.json", "./test/*", "./internal/*"].includes(k))
        .sort()
      assert.deepStrictEqual(keys, [...modules.keys()].sort(), name)
      for (const key of keys) {
        const target = exports[key] as Record<string, string>
        assert.strictEqual(target["@session-journal/source"], modules.get(key), `${name} ${key}`)
        assert.strictEqual(
          target["types"],
          modules.get(key)!.replace(/^\.\/src\//, "./dist/").replace(/\.ts$/, ".d.ts"),
          `${name} ${key}`
        )
      }
    }
  })

  // Time and chance come from Effect's `Clock` and `Random` (a test moves them with
  // `TestClock` or a seed). Allowed: the forwarder's process entry, which gives the
  // Effect-free forwarder the system clock once, and the viewer's page script, which
  // runs in the browser.
  it("no package's source reads the process's clock or Math.random", () => {
    const allowed = new Map([
      ["cli/src/commands/ForwardProcess.ts", 1],
      ["cli/src/viewer/ViewerScript.ts", 2]
    ])
    const report: Array<string> = []
    for (const file of graph.keys()) {
      const found = stripComments(readFileSync(file, "utf8")).match(WALL_CLOCK) ?? []
      if (found.length > (allowed.get(shown(file)) ?? 0)) report.push(`${shown(file)}: ${found.join(", ")}`)
    }
    assert.deepStrictEqual(report, [])
    assert.deepStrictEqual(
      ["Date.now()", "Date . now", "performance.now()", "Math.random()", "new Date()", "new Date(now)"].map((c) =>
        (c.match(WALL_CLOCK) ?? []).length
      ),
      [1, 1, 1, 1, 1, 0]
    )
  })

  it("the edge scanner tells runtime imports from type-only ones", () => {
    const runtime = (code: string) => edges(code).map((e) => e.runtime)
    assert.deepStrictEqual(runtime(`import type * as P from "./P.ts"`), [false])
    assert.deepStrictEqual(runtime(`import type { A } from "./P.ts"`), [false])
    assert.deepStrictEqual(runtime(`import { type A, type B } from "./P.ts"`), [false])
    assert.deepStrictEqual(runtime(`export type { A } from "./P.ts"`), [false])
    assert.deepStrictEqual(runtime(`export { type A } from "./P.ts"`), [false])
    assert.deepStrictEqual(runtime(`import { type A, b } from "./P.ts"`), [true])
    assert.deepStrictEqual(runtime(`import {\n  tipMatches\n} from "../Persistence.ts"`), [true])
    assert.deepStrictEqual(runtime(`import * as P from "./P.ts"`), [true])
    assert.deepStrictEqual(runtime(`import P, { type A } from "./P.ts"`), [true])
    assert.deepStrictEqual(runtime(`export * as P from "./P.ts"`), [true])
    assert.deepStrictEqual(runtime(`export { a } from "./P.ts"`), [true])
    assert.deepStrictEqual(runtime(`import "./P.ts"`), [true])
    assert.deepStrictEqual(runtime(`// import { a } from "./P.ts"`), [])
    assert.deepStrictEqual(runtime(`const m = await import("./P.ts")`), [])
  })

  it("the cycle finder reports a cycle and a self-import, and nothing in a tree", () => {
    const g = (edges: Record<string, Array<string>>) => new Map(Object.entries(edges))
    assert.deepStrictEqual(cycles(g({ a: ["b"], b: ["c"], c: ["a"], d: ["a"] })), [["a", "b", "c"]])
    assert.deepStrictEqual(cycles(g({ a: ["a"] })), [["a"]])
    assert.deepStrictEqual(cycles(g({ a: ["b", "c"], b: ["c"], c: [] })), [])
  })
})
