/**
 * The session lifecycle rests on what Effect promises, not on how a release of it
 * happens to be built: no source of any package reads or writes the fields that
 * Effect's structures expose but keep for themselves (an `RcMap`'s state, its
 * entries' reference counts and expiry, a `SynchronizedRef`'s backing cell, a
 * `SubscriptionRef`'s semaphore). Those structures are used through their
 * operations (`RcMap.get`, `touch`, `invalidate`; `Ref.set`; `SubscriptionRef.changes`).
 */
import { assert, describe, it } from "@effect/vitest"
import { readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const packagesDir = fileURLToPath(new URL("../../", import.meta.url))

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const path = join(dir, d.name)
    if (d.isDirectory()) return d.name === "node_modules" ? [] : sourceFiles(path)
    return /\.tsx?$/.test(d.name) ? [path] : []
  })

// Comments out, line breaks kept (so that a finding's line number is the file's).
const stripComments = (code: string): string =>
  code.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, "")).replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1")

/**
 * Reaches into a structure's own fields, by the names Effect 4.1 gives them; looked
 * for in the files that import the structure's module.
 */
const internals: ReadonlyArray<
  { readonly modules: ReadonlyArray<string>; readonly pattern: RegExp; readonly what: string }
> = [
  { modules: ["effect/RcMap"], pattern: /\bRcMap\.State\b/, what: "RcMap's state types" },
  { modules: ["effect/RcMap"], pattern: /\.state\.map\b/, what: "an RcMap's entry map" },
  { modules: ["effect/RcMap"], pattern: /\.state\._tag\b/, what: "an RcMap's open or closed state" },
  { modules: ["effect/RcMap"], pattern: /\.refCount\b/, what: "an RcMap entry's reference count" },
  { modules: ["effect/RcMap"], pattern: /\.expiresAt\b/, what: "an RcMap entry's expiry" },
  { modules: ["effect/SynchronizedRef"], pattern: /\.backing\b/, what: "a SynchronizedRef's backing cell" },
  {
    modules: ["effect/SynchronizedRef", "effect/SubscriptionRef"],
    pattern: /\.semaphore\b/,
    what: "a SynchronizedRef's or SubscriptionRef's semaphore"
  }
]

const imports = (code: string, module: string): boolean => code.includes(`"${module}"`) || code.includes(`'${module}'`)

describe("Effect's structures through their operations only", () => {
  const files = readdirSync(packagesDir, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .flatMap((d) => {
      const src = join(packagesDir, d.name, "src")
      try {
        return sourceFiles(src)
      } catch {
        return []
      }
    })

  it("finds the sources of every package", () => {
    const names = files.map((f) => relative(packagesDir, f))
    for (const expected of [join("core", "src", "internal", "sessions.ts"), join("node", "src", "index.ts")]) {
      assert.include(names, expected)
    }
  })

  it("no source reads or writes the internal fields of an RcMap, SynchronizedRef or SubscriptionRef", () => {
    const found: Array<string> = []
    for (const file of files) {
      const code = stripComments(readFileSync(file, "utf8"))
      for (const { modules, pattern, what } of internals) {
        if (!modules.some((m) => imports(code, m))) continue
        const at = code.search(pattern)
        if (at >= 0) found.push(`${relative(packagesDir, file)}:${code.slice(0, at).split("\n").length}: ${what}`)
      }
    }
    assert.deepStrictEqual(found, [])
  })
})
