/**
 * The command's start as `pnpm build` bundles it (`scripts/bundle.ts`): the bundle
 * creates no `Intl.Segmenter` (whose first construction initializes ICU, tens of
 * milliseconds of every start) unless a cell of non-ASCII text is measured, and
 * `record` and `--help` behave exactly as with Effect's module bundled unchanged.
 *
 * The tests bundle `src/main.ts` twice into temporary directories, with and without
 * the change, and run both bundles with a preloaded module that reports every
 * `Intl.Segmenter` constructed. The widths the changed `CliOutput` measures are
 * compared with Effect's own for every kind of text.
 */
import { CliOutput } from "effect/cli"
import * as fc from "fast-check"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { baseEnv, cleanup, hasNodeAdapter, tempDir } from "./Run.ts"

const PACKAGE = fileURLToPath(new URL("../", import.meta.url))
const BUNDLE_SCRIPT = fileURLToPath(new URL("../../../scripts/bundle.ts", import.meta.url))
const nodeAdapter = await hasNodeAdapter()

afterAll(cleanup)

/** The environment of a bundle's process: no source condition (a bundle needs none). */
const bundleEnv = (extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const env = { ...baseEnv(), ...extra }
  delete env["NODE_OPTIONS"]
  return env
}

/** Bundles `input` into `output` with `scripts/bundle.ts`, in a child process (as `pnpm build` runs it). */
const bundle = (input: string, output: string, lazyGraphemes: boolean): void => {
  const options = JSON.stringify({ dir: PACKAGE, input, output, lazyGraphemes })
  const ran = spawnSync(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `const m = await import(${JSON.stringify(pathToFileURL(BUNDLE_SCRIPT).href)}); await m.bundleCommand(${options})`
    ],
    { cwd: PACKAGE, env: bundleEnv({}), encoding: "utf8" }
  )
  if (ran.status !== 0) throw new Error(`bundling ${input} failed (${ran.status}): ${ran.stderr}`)
}

const SPY = `const Real = Intl.Segmenter
Intl.Segmenter = class Segmenter extends Real {
  constructor(...args) { process._rawDebug("Intl.Segmenter constructed"); super(...args) }
}
`

let dir = ""
let spy = ""
const bundles = { changed: "", unchanged: "" }

beforeAll(() => {
  dir = tempDir()
  spy = path.join(dir, "spy.mjs")
  fs.writeFileSync(spy, SPY)
  bundles.changed = path.join(dir, "changed", "session-journal.js")
  bundles.unchanged = path.join(dir, "unchanged", "session-journal.js")
  const main = path.join(PACKAGE, "src", "main.ts")
  bundle(main, bundles.changed, true)
  bundle(main, bundles.unchanged, false)
}, 180_000)

const runBundle = (file: string, args: ReadonlyArray<string>, journals: string) =>
  spawnSync(process.execPath, ["--import", pathToFileURL(spy).href, file, ...args], {
    cwd: dir,
    env: bundleEnv({ SESSION_JOURNAL_DIR: journals }),
    encoding: "utf8"
  })

const recordArgs = (
  id: string
) => [
  "record",
  id,
  "--tool",
  "read_file",
  "--server",
  "srv-1",
  "--agent",
  "agent-1",
  "--read",
  "512",
  "--written",
  "0",
  "--depth",
  "0"
]

describe("the bundled command's start", () => {
  it("Effect's module as published constructs a segmenter at every start (what the bundle avoids)", () => {
    const ran = runBundle(bundles.unchanged, ["--version"], path.join(dir, "journals-version"))
    assert.strictEqual(ran.status, 0, ran.stderr)
    assert.include(ran.stderr, "Intl.Segmenter constructed")
  })

  it("--help and each subcommand's help: no segmenter, the same text as the unchanged bundle", () => {
    for (
      const args of [["--help"], ["record", "--help"], ["report", "--help"], ["import", "--help"], ["verify", "--help"]]
    ) {
      const changed = runBundle(bundles.changed, args, path.join(dir, "journals-help"))
      const unchanged = runBundle(bundles.unchanged, args, path.join(dir, "journals-help"))
      assert.strictEqual(changed.status, 0, changed.stderr)
      assert.strictEqual(unchanged.status, 0, unchanged.stderr)
      assert.notInclude(changed.stderr, "Intl.Segmenter constructed", args.join(" "))
      assert.strictEqual(changed.stdout, unchanged.stdout, args.join(" "))
      assert.include(changed.stdout, "USAGE")
    }
  })

  it.skipIf(!nodeAdapter)("record into a new and into an existing session: no segmenter, entries #0 and #1", () => {
    const journals = path.join(dir, "journals-record")
    const first = runBundle(bundles.changed, recordArgs("s1"), journals)
    assert.strictEqual(first.status, 0, first.stderr)
    assert.notInclude(first.stderr, "Intl.Segmenter constructed")
    assert.match(
      first.stdout,
      /^#0 \S+ tool read_file srv-1\/agent-1 read=512 written=0 depth=0 allowed [0-9a-f]{12}\n$/
    )
    const second = runBundle(bundles.changed, recordArgs("s1"), journals)
    assert.strictEqual(second.status, 0, second.stderr)
    assert.notInclude(second.stderr, "Intl.Segmenter constructed")
    assert.match(second.stdout, /^#1 /)
    // The unchanged bundle continues the same chain: the two bundles write the same journal.
    const third = runBundle(bundles.unchanged, recordArgs("s1"), journals)
    assert.strictEqual(third.status, 0, third.stderr)
    assert.match(third.stdout, /^#2 /)
    const verified = runBundle(bundles.changed, ["verify", "s1"], journals)
    assert.strictEqual(verified.status, 0, verified.stdout + verified.stderr)
  })
})

describe("the changed CliOutput measures text as Effect's does", () => {
  let displayWidth: (text: string) => number = () => -1

  beforeAll(async () => {
    // effect/cli's CliOutput, bundled alone with the change.
    const cliOutput = createRequire(path.join(PACKAGE, "package.json")).resolve("effect/cli/CliOutput")
    const entry = path.join(dir, "width.mjs")
    fs.writeFileSync(entry, `export { displayWidth } from ${JSON.stringify(cliOutput)}\n`)
    const output = path.join(dir, "width", "width.js")
    bundle(entry, output, true)
    const source = fs.readFileSync(output, "utf8")
    assert.include(source, "x20-\\x7e", "the expression was replaced")
    const mod = (await import(pathToFileURL(output).href)) as { displayWidth: (text: string) => number }
    displayWidth = mod.displayWidth
  }, 120_000)

  it("examples: ASCII, wide, combining, emoji, flags, ANSI styling, CR LF, controls", () => {
    const examples = [
      "",
      "file",
      "~ !",
      "tab\there",
      "a\r\nb",
      "a\nb",
      "\u001B[1mbold\u001B[0m",
      "\u007f",
      "ファイル",
      "한국어",
      "é",
      "e\u0301",
      "1\uFE0F\u20E3",
      "👍🏽",
      "🇫🇷",
      "x\u200By",
      "import   Append JSON lines ({tool_name,…} or {kind,payload})"
    ]
    for (const text of examples) {
      assert.strictEqual(displayWidth(text), CliOutput.displayWidth(text), JSON.stringify(text))
    }
  })

  it("any string (property)", () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: "binary" }), fc.string({ unit: "grapheme" }), fc.string()), (text) => {
        assert.strictEqual(displayWidth(text), CliOutput.displayWidth(text), JSON.stringify(text))
      }),
      { numRuns: 500 }
    )
  })
})
