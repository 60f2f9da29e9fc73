/**
 * Bundles a package's command (`src/main.ts` and everything it imports) into one
 * ES module for Node, as `build.ts` does for every package with an
 * `imports["#main"]` entry; the command's tests use it to bundle variants.
 *
 * One change to a dependency's code is made on the way (`lazyGraphemes`).
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { build, type Plugin } from "rolldown"

/**
 * `effect/cli`'s `CliOutput` creates an `Intl.Segmenter` when the module is
 * evaluated, to measure the width of help and table cells. The first `Intl`
 * object of a process initializes ICU (locale resolution, data): 30–60 ms CPU,
 * paid at every start of the command, `record` included, which measures no text.
 * This plugin replaces that one expression with an object whose `segment` splits
 * printable ASCII (U+0020–U+007E, where every character is its own grapheme
 * cluster) without ICU and hands any other text to a real segmenter made on first
 * use, with the same arguments. `displayWidth`, the only caller, reads `segment`
 * of each part. If an Effect release changes the expression, the build says so
 * and bundles the module unchanged.
 */
export const lazyGraphemes = (): Plugin => {
  const original = /new Intl\.Segmenter\(undefined, \{\s*granularity: "grapheme"\s*\}\)/
  const replacement = "((ascii, real) => ({ segment: (text) => ascii.test(text) " +
    "? Array.from(text, (segment, index) => ({ segment, index, input: text })) " +
    ": (real ??= new Intl.Segmenter(undefined, { granularity: \"grapheme\" })).segment(text) }))" +
    "(/^[\\x20-\\x7e]*$/, undefined)"
  return {
    name: "lazy-graphemes",
    transform: {
      filter: { id: /[\\/]effect[\\/]dist[\\/]cli[\\/]CliOutput\.js$/ },
      handler(code) {
        if (!original.test(code)) {
          this.warn("effect/cli CliOutput: the grapheme segmenter was not found; it is created at module evaluation")
          return null
        }
        // As many line breaks as the expression had: the lines after it keep their
        // numbers, so the module's own source map (map: null) stays right.
        return {
          code: code.replace(original, (found) => replacement + "\n".repeat(found.split("\n").length - 1)),
          map: null
        }
      }
    }
  }
}

/**
 * The modules of a command bundled each into one file of its own by default
 * (`BundleOptions.standalone`), relative to the package's directory, when they
 * exist: the forwarder, which Claude Code starts once per hook event, and the live
 * export's sender, which runs on a worker thread of its own (the thread loads one
 * file).
 */
export const DEFAULT_STANDALONE: ReadonlyArray<string> = [
  "src/commands/ForwardProcess.ts",
  "src/otel/SenderWorker.ts"
]

/**
 * The modules of a command bundled each into one CommonJS script by default
 * (`BundleOptions.cached`), relative to the package's directory, when they exist:
 * the hooks, which Claude Code and Codex start once per tool call, and `record`,
 * which an agent's hook starts once per tool call. The entry loads them with V8's
 * code cache of their first run (`src/internal/codeCache.ts`).
 */
export const DEFAULT_CACHED: ReadonlyArray<string> = [
  "src/commands/HookProcess.ts",
  "src/commands/CodexHook.ts",
  "src/commands/RecordProcess.ts"
]

/**
 * A cached script runs with the filesystem only (the entry imports the module as
 * usual for PostgreSQL): the PostgreSQL adapter, whose driver loads Node's
 * `net`, `tls` and `crypto` when the script starts, is left out, and importing it
 * there fails (the storage layer's `NotAvailable`).
 */
const withoutPostgres = (): Plugin => ({
  name: "without-postgres",
  resolveId(source) {
    return source === "@session-journal/postgres" ? { id: "\0without-postgres" } : null
  },
  load(id) {
    return id === "\0without-postgres"
      ? "throw new Error(\"the PostgreSQL adapter is not in this script\")\n"
      : null
  }
})

/**
 * Sends the imports of the modules in `files` (absolute paths of sources, to the
 * file each was bundled into, relative to the entry) out of the bundle.
 */
const importsOf = (files: ReadonlyMap<string, string>): Plugin => ({
  name: "standalone-modules",
  resolveId(source, importer) {
    if (importer === undefined || !source.startsWith(".")) return null
    const bundled = files.get(path.resolve(path.dirname(importer), source))
    return bundled === undefined ? null : { id: bundled, external: true }
  }
})

/** What `bundleCommand` bundles, and where to. */
export interface BundleOptions {
  /** The package's directory (dependencies resolve from there). */
  readonly dir: string
  /** The entry module (the package's `src/main.ts`). */
  readonly input: string
  /** The bundle's entry file; chunks of dynamic imports go next to it. */
  readonly output: string
  /** Whether to make the grapheme segmenter lazy (default true; false bundles Effect unchanged). */
  readonly lazyGraphemes?: boolean
  /**
   * Export conditions tried before the published ones (`["@session-journal/source"]`
   * bundles the workspace's packages from their sources, as tests do).
   */
  readonly conditions?: ReadonlyArray<string>
  /**
   * Modules the entry imports dynamically (absolute paths) that are bundled each
   * into one file with everything they import, shared with nothing (default:
   * `DEFAULT_STANDALONE` under `dir`). A command started once per event then reads
   * one file instead of a chunk and the chunks it shares with the rest (each an
   * ES module to resolve, read and link); the modules they import are bundled
   * twice.
   */
  readonly standalone?: ReadonlyArray<string>
  /**
   * Modules the entry loads through `codeCache.ts` (absolute paths), each bundled
   * with everything it imports into `<name>.cjs` next to the entry, a CommonJS
   * script without the PostgreSQL adapter (default: `DEFAULT_CACHED` under `dir`).
   */
  readonly cached?: ReadonlyArray<string>
}

/**
 * Bundles `input` into `output` (minified, with a source map), each standalone
 * module into its own file, each cached module into its own script.
 */
export const bundleCommand = async (options: BundleOptions): Promise<void> => {
  const dir = path.dirname(options.output)
  const resolve = { conditionNames: [...(options.conditions ?? []), "node", "import", "default"] }
  const plugins = options.lazyGraphemes === false ? [] : [lazyGraphemes()]
  const output = {
    dir,
    format: "esm" as const,
    // Smaller code parses faster at every start; names are kept for stack traces.
    minify: { compress: true, mangle: { keepNames: true }, codegen: true },
    sourcemap: true,
    sourcemapExcludeSources: true
  }
  const standalone = options.standalone ??
    DEFAULT_STANDALONE.map((file) => path.join(options.dir, file)).filter((file) => fs.existsSync(file))
  const bundled = new Map<string, string>()
  for (const file of standalone) {
    const built = await build({
      input: file,
      cwd: options.dir,
      platform: "node",
      // Dependencies resolve as they will for a host: the published `default` targets.
      resolve,
      logLevel: "warn",
      plugins,
      output: {
        ...output,
        entryFileNames: `${path.basename(file, path.extname(file))}-[hash].js`,
        codeSplitting: false
      }
    })
    bundled.set(path.resolve(file), `./${built.output[0].fileName}`)
  }
  const cached = options.cached ??
    DEFAULT_CACHED.map((file) => path.join(options.dir, file)).filter((file) => fs.existsSync(file))
  for (const file of cached) {
    await build({
      input: file,
      cwd: options.dir,
      platform: "node",
      resolve,
      logLevel: "warn",
      plugins: [withoutPostgres(), ...plugins],
      // Effect reads `import.meta.env` where a bundler gives one; Node has none.
      transform: { define: { "import.meta.env": "undefined" } },
      output: {
        ...output,
        format: "cjs",
        entryFileNames: `${path.basename(file, path.extname(file))}.cjs`,
        codeSplitting: false
      }
    })
  }
  await build({
    input: options.input,
    cwd: options.dir,
    platform: "node",
    resolve,
    logLevel: "warn",
    plugins: [importsOf(bundled), ...plugins],
    output: {
      ...output,
      entryFileNames: path.basename(options.output),
      chunkFileNames: "[name]-[hash].js"
    }
  })
}
