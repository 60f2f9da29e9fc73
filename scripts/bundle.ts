/**
 * Bundles a package's command (`src/main.ts` and everything it imports) into one
 * ES module for Node, as `build.ts` does for every package with an
 * `imports["#main"]` entry; the command's tests use it to bundle variants.
 *
 * One change to a dependency's code is made on the way (`lazyGraphemes`).
 */
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
}

/** Bundles `input` into `output` (minified, with a source map). */
export const bundleCommand = async (options: BundleOptions): Promise<void> => {
  await build({
    input: options.input,
    cwd: options.dir,
    platform: "node",
    // Dependencies resolve as they will for a host: the published `default` targets.
    resolve: { conditionNames: [...(options.conditions ?? []), "node", "import", "default"] },
    logLevel: "warn",
    plugins: options.lazyGraphemes === false ? [] : [lazyGraphemes()],
    output: {
      dir: path.dirname(options.output),
      entryFileNames: path.basename(options.output),
      chunkFileNames: "[name]-[hash].js",
      format: "esm",
      // Smaller code parses faster at every start; names are kept for stack traces.
      minify: { compress: true, mangle: { keepNames: true }, codegen: true },
      sourcemap: true,
      sourcemapExcludeSources: true
    }
  })
}
