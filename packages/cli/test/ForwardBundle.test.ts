/**
 * What the bundled forwarder loads. `claude-code forward` runs once per hook event,
 * so the bundle's entry and the chunk it imports for `Forward` (with every chunk
 * that one imports, transitively) may hold nothing but the forwarder's own small
 * modules and `Refusal`, which imports nothing, and import nothing but Node's own
 * modules: no Effect, no command tree. Checked on a bundle made from the sources
 * as `scripts/build.ts` makes it, through its source maps.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import { afterAll, describe, expect, it } from "vitest"
import { bundleFromSources, cleanup, tempDir } from "./Run.ts"

afterAll(cleanup)

// The modules the forwarder may load, by their path under packages/.
const ALLOWED = [
  "cli/src/main.ts",
  "cli/src/internal/hookArgs.ts",
  "cli/src/commands/ForwardProcess.ts",
  "claude-code/src/Forwarder.ts",
  "claude-code/src/internal/guardAuth.ts",
  "claude-code/src/internal/secretFile.ts",
  "cli/src/internal/processStreams.ts",
  "claude-code/src/Refusal.ts",
  "core/src/ErrorMessage.ts",
  "core/src/Hmac.ts",
  // The strict UTF-8 decoding the secret file's read shares (it imports nothing).
  "core/src/Utf8.ts",
  // The top-level scan of an event past the bound (it imports only Utf8; the
  // running hash is node:crypto's, given by the forwarder).
  "claude-code/src/internal/topLevel.ts"
]

const staticImports = (code: string): Array<string> =>
  [...code.matchAll(/(?:\bfrom|\bimport)\s*(["`])([^"`]+)\1/g)].map((m) => m[2]!)

const dynamicImports = (code: string): Array<string> =>
  [...code.matchAll(/\bimport\(\s*(["`])([^"`]+)\1\s*\)/g)].map((m) => m[2]!)

const sourcesOf = (file: string): Array<string> => {
  if (!fs.existsSync(`${file}.map`)) {
    // A chunk without a map only re-exports another (a facade): nothing else in it.
    const rest = fs.readFileSync(file, "utf8")
      .replace(/^\/\/# sourceMappingURL=.*$/m, "")
      .replace(/import\s*\{[^}]*\}\s*from\s*"[^"]+";?/g, "")
      .replace(/import\s*"[^"]+";?/g, "")
      .replace(/export\s*\{[^}]*\}(\s*from\s*"[^"]+")?;?/g, "")
      .trim()
    expect(rest, `${file} holds code and has no source map`).toBe("")
    return []
  }
  const map = JSON.parse(fs.readFileSync(`${file}.map`, "utf8")) as { sources: ReadonlyArray<string> }
  return map.sources.map((s) => {
    const resolved = path.resolve(path.dirname(file), s).split(path.sep).join("/")
    const at = resolved.lastIndexOf("/packages/")
    return at < 0 ? resolved : resolved.slice(at + "/packages/".length)
  })
}

describe("the bundled forwarder", () => {
  it("loads only Node's own modules, Refusal and its own small modules", () => {
    const dir = tempDir()
    const entry = bundleFromSources(path.join(dir, "bin", "session-journal.js"))
    const entryCode = fs.readFileSync(entry, "utf8")
    // The chunk main.ts imports for `claude-code forward`.
    const forward = dynamicImports(entryCode).map((s) => path.resolve(path.dirname(entry), s)).find((f) =>
      path.basename(f).startsWith("ForwardProcess-")
    )
    expect(forward, "no chunk of the entry is the forwarder's").toBeDefined()
    const loaded = new Set<string>([entry])
    const builtins = new Set<string>()
    const visit = (file: string) => {
      for (const spec of staticImports(fs.readFileSync(file, "utf8"))) {
        if (!spec.startsWith(".")) {
          builtins.add(spec)
          continue
        }
        const next = path.resolve(path.dirname(file), spec)
        if (loaded.has(next)) continue
        loaded.add(next)
        visit(next)
      }
    }
    visit(entry)
    loaded.add(forward!)
    visit(forward!)
    const sources = new Set([...loaded].flatMap(sourcesOf))
    expect(sources).toContain("claude-code/src/Forwarder.ts")
    for (const source of sources) expect(ALLOWED, `the forwarder loads ${source}`).toContain(source)
    expect(sources).toContain("claude-code/src/Refusal.ts")
    expect(sources).toContain("claude-code/src/internal/guardAuth.ts")
    for (const spec of builtins) expect(spec, `the forwarder imports ${spec}`).toMatch(/^node:/)
  }, 120_000)
})
