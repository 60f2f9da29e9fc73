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

/** Reaches into a structure's own fields, by the names Effect 4.1 gives them. */
const internals: ReadonlyArray<readonly [RegExp, string]> = [
  [/\bRcMap\.State\b/, "RcMap's state types"],
  [/\.state\.map\b/, "an RcMap's entry map"],
  [/\.state\._tag\b/, "an RcMap's open or closed state"],
  [/\.refCount\b/, "an RcMap entry's reference count"],
  [/\.expiresAt\b/, "an RcMap entry's expiry"],
  [/\.backing\b/, "a SynchronizedRef's backing cell"],
  [/\.semaphore\b/, "a SynchronizedRef's or SubscriptionRef's semaphore"]
]

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
      // The ai package's chat views keep an `expiresAt` of their own.
      const code = stripComments(readFileSync(file, "utf8"))
      for (const [pattern, what] of internals) {
        if (pattern.source.includes("expiresAt") && file.includes(join("ai", "src"))) continue
        const at = code.search(pattern)
        if (at >= 0) found.push(`${relative(packagesDir, file)}:${code.slice(0, at).split("\n").length}: ${what}`)
      }
    }
    assert.deepStrictEqual(found, [])
  })
})
