/**
 * `internal/codeCache.ts`, the hooks' loader: a script runs with V8's code cache
 * of its first run only when the cache is intact, of this very script, and kept
 * in a directory no one else may write; anything else compiles the script from
 * its text, and what the script does is the same either way. Each load is a
 * process of its own, as a hook is.
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, assert, describe, it } from "vitest"
import { cleanup, tempDir } from "./Run.ts"

afterAll(cleanup)

const CODE_CACHE = fileURLToPath(new URL("../src/internal/codeCache.ts", import.meta.url))

// Two scripts of one length: V8's own check of a cache against its source is the length.
const SCRIPT = "module.exports.answer = () => [40 + 2, require(\"node:path\").sep]\n"
const CHANGED = "module.exports.answer = () => [40 - 2, require(\"node:path\").sep]\n"

interface Load {
  readonly cache: string
  readonly answer: unknown
}

/**
 * Loads `script.cjs` of `dir` in a process of its own, with its cache under
 * `cacheHome`, and saves the cache as a run of `kind`.
 */
const load = (dir: string, cacheHome: string, kind = "PreToolUse"): Load => {
  const entry = pathToFileURL(path.join(dir, "entry.js")).href
  const ran = spawnSync(process.execPath, [
    "--input-type=module",
    "-e",
    `import * as C from ${JSON.stringify(CODE_CACHE)}
const loaded = await C.load(${JSON.stringify(entry)}, "script", { XDG_CACHE_HOME: ${JSON.stringify(cacheHome)} },
  async () => ({ answer: () => "imported" }))
const answer = loaded.module.answer()
loaded.save(${JSON.stringify(kind)})
process.stdout.write(JSON.stringify({ cache: loaded.cache, answer }))`
  ], { encoding: "utf8", timeout: 60_000 })
  assert.strictEqual(ran.status, 0, ran.stderr)
  return JSON.parse(ran.stdout) as Load
}

/** A directory with `script.cjs` (SCRIPT) and its cache home, the script loaded once: its cache written. */
const loadedOnce = () => {
  const dir = tempDir()
  const home = path.join(dir, "cache")
  fs.writeFileSync(path.join(dir, "script.cjs"), SCRIPT)
  const first = load(dir, home)
  return { dir, home, first, file: cacheFiles(home)[0]! }
}

const cacheFiles = (cacheHome: string): Array<string> => {
  const dir = path.join(cacheHome, "session-journal", "code")
  return fs.existsSync(dir) ? fs.readdirSync(dir).map((name) => path.join(dir, name)) : []
}

describe.skipIf(typeof process.getuid !== "function")("a hook's code cache", () => {
  it("is written after the first run, private, and taken by the next", () => {
    const { dir, first, home } = loadedOnce()
    assert.deepStrictEqual(first, { cache: "absent", answer: [42, "/"] })
    const [file, ...more] = cacheFiles(home)
    assert.isDefined(file)
    assert.deepStrictEqual(more, [])
    assert.strictEqual(fs.statSync(file!).mode & 0o777, 0o600)
    assert.strictEqual(fs.statSync(path.dirname(file!)).mode & 0o777, 0o700)
    assert.deepStrictEqual(load(dir, home), { cache: "accepted", answer: [42, "/"] })
  })

  it("with a byte changed is not given to V8: the script compiles from its text and the cache is written again", () => {
    const { dir, file, home } = loadedOnce()
    const bytes = fs.readFileSync(file)
    // A byte of V8's data, past the checksum and V8's own header.
    const at = Math.floor((bytes.length + 64) / 2)
    bytes[at] = bytes[at]! ^ 0x40
    fs.writeFileSync(file, bytes)
    assert.deepStrictEqual(load(dir, home), { cache: "absent", answer: [42, "/"] })
    assert.deepStrictEqual(load(dir, home), { cache: "accepted", answer: [42, "/"] })
  })

  it("of another script of the same length is not used: the changed script runs as changed, its cache replaces it", () => {
    const { dir, home } = loadedOnce()
    assert.strictEqual(load(dir, home).cache, "accepted")
    fs.writeFileSync(path.join(dir, "script.cjs"), CHANGED)
    assert.deepStrictEqual(load(dir, home), { cache: "absent", answer: [38, "/"] })
    assert.lengthOf(cacheFiles(home), 1, "the earlier version's cache is removed")
    assert.deepStrictEqual(load(dir, home), { cache: "accepted", answer: [38, "/"] })
  })

  it("is written again after the first run of each other kind, with the kinds it holds", () => {
    const { dir, file, home } = loadedOnce()
    const inode = () => fs.statSync(file).ino
    const first = inode()
    assert.deepStrictEqual(load(dir, home, "PreToolUse"), { cache: "accepted", answer: [42, "/"] })
    assert.strictEqual(inode(), first, "a run of a kind the cache holds does not write it")
    assert.deepStrictEqual(load(dir, home, "SessionStart"), { cache: "accepted", answer: [42, "/"] })
    const second = inode()
    assert.notStrictEqual(second, first, "a run of another kind writes it again")
    assert.include(fs.readFileSync(file).toString("latin1"), "[\"PreToolUse\",\"SessionStart\"]")
    for (const kind of ["PreToolUse", "SessionStart"]) {
      assert.deepStrictEqual(load(dir, home, kind), { cache: "accepted", answer: [42, "/"] })
    }
    assert.strictEqual(inode(), second)
  })

  it("in a directory others may write is neither read nor written: the module is imported as usual", () => {
    const { dir, file, home } = loadedOnce()
    fs.chmodSync(path.dirname(file), 0o777)
    fs.rmSync(file)
    assert.deepStrictEqual(load(dir, home), { cache: "unsafe", answer: "imported" })
    assert.deepStrictEqual(cacheFiles(home), [])
  })

  it("without the script (a run from the sources) the module is imported as usual", () => {
    const dir = tempDir()
    assert.deepStrictEqual(load(dir, path.join(dir, "cache")), { cache: "none", answer: "imported" })
  })
})
