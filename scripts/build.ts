/**
 * `pnpm build`: builds every package under packages/ into its `dist/`, as the
 * packages are published: ES modules, `.d.ts` declarations and source maps
 * compiled from `src/` by `tsc -b` (each package's `tsconfig.json`), and for a
 * package with a command (an `imports["#main"]` entry in its package.json) its
 * `src/main.ts` bundled with everything it imports into the `#main` target, so
 * the command starts from one entry file (and the chunks it imports on demand) on
 * any supported Node.
 *
 * The bundle (`bundle.ts`) makes one change to a dependency's code: the
 * grapheme segmenter of `effect/cli`'s help layout is created on its first use,
 * not when the module is evaluated, and is not needed at all for ASCII text, so
 * a command that prints no help table never starts ICU's segmentation.
 *
 * Every build starts from empty `dist/` and `.tsbuild/` directories: a module
 * removed from `src/` must not live on in a published package.
 *
 *   node scripts/build.ts
 */
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { bundleCommand } from "./bundle.ts"

/** The workspace root (this file lives in `<root>/scripts`). */
const root = path.resolve(import.meta.dirname, "..")
const SOURCE = "@session-journal/source"

interface Manifest {
  readonly name: string
  readonly private?: boolean
  readonly imports?: Record<string, Record<string, string>>
}

const packages = fs.readdirSync(path.join(root, "packages"))
  .map((name) => path.join(root, "packages", name))
  .filter((dir) => fs.existsSync(path.join(dir, "package.json")) && fs.existsSync(path.join(dir, "tsconfig.json")))
  .map((dir) => ({ dir, manifest: JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8")) as Manifest }))
  .filter((p) => p.manifest.private !== true)
  .sort((a, b) => a.dir.localeCompare(b.dir))

const started = Date.now()
for (const { dir } of packages) {
  fs.rmSync(path.join(dir, "dist"), { recursive: true, force: true })
  fs.rmSync(path.join(dir, ".tsbuild"), { recursive: true, force: true })
}

// One `tsc -b` over the packages' source projects: references are built in order.
execFileSync(
  path.join(root, "node_modules", ".bin", "tsc"),
  ["-b", ...packages.map((p) => path.relative(root, p.dir))],
  {
    cwd: root,
    stdio: "inherit"
  }
)

for (const { dir, manifest } of packages) {
  const main = manifest.imports?.["#main"]
  if (main === undefined) continue
  const input = main[SOURCE]
  const output = main["default"]
  if (input === undefined || output === undefined) {
    throw new Error(`${manifest.name}: imports["#main"] needs a "${SOURCE}" and a "default" target`)
  }
  await bundleCommand({ dir, input: path.join(dir, input), output: path.join(dir, output) })
}

process.stdout.write(
  `built ${packages.map((p) => p.manifest.name).join(", ")} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`
)
