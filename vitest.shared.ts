/**
 * Settings every package's vitest project merges in: tests run the packages from
 * their TypeScript sources, not from `dist/`, so a test never sees a stale build.
 * The export condition `@session-journal/source` (each package.json maps it to
 * `./src/*.ts`) is set for Vitest's resolver and its workers, and, through
 * NODE_OPTIONS, for every process a test starts (fixtures, the CLI's bin).
 */
import { defineProject } from "vitest/config"

/** The export condition that selects a package's TypeScript sources. */
export const SOURCE_CONDITION = "@session-journal/source"

/** Vite's default server conditions, after the source condition. */
const conditions = [SOURCE_CONDITION, "module", "node", "development|production"]

/** The shared part of every package's `vitest.config.ts`. */
export const fromSources = defineProject({
  ssr: { resolve: { conditions } },
  test: {
    env: {
      NODE_OPTIONS: [process.env["NODE_OPTIONS"], `--conditions=${SOURCE_CONDITION}`].filter((o) =>
        o !== undefined && o !== ""
      ).join(" ")
    }
  }
})
