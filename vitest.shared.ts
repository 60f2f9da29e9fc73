/**
 * Settings every package's vitest project merges in: tests run the packages from
 * their TypeScript sources, not from `dist/`, so a test never sees a stale build.
 * The export condition `@session-journal/source` (each package.json maps each
 * public module to its `./src/<Module>.ts`) is set for Vitest's resolver and its workers, and, through
 * NODE_OPTIONS, for every process a test starts (fixtures, the CLI's bin).
 */
import { defineProject, mergeConfig } from "vitest/config"

/** The export condition that selects a package's TypeScript sources. */
export const SOURCE_CONDITION = "@session-journal/source"

/** Vite's default server conditions, after the source condition. */
const conditions = [SOURCE_CONDITION, "module", "node", "development|production"]

/**
 * The shared part of every package's `vitest.config.ts`.
 *
 * `maxWorkers` is set here because Vitest 5 resolves it per project: the root
 * config's value does not reach the projects, which would each default to one
 * worker (cores − 1 on two cores) and so run their files one after another. Most
 * test files wait on child processes, fsync and sockets rather than on the CPU:
 * three workers keep a two-core machine busy while one file waits. Every project
 * must use the same value (Vitest refuses projects of one group that differ);
 * `VITEST_MAX_WORKERS` or `--maxWorkers` still override it.
 *
 * `testTimeout` is 30 s rather than Vitest's 5 s: with three files at once on a
 * shared machine, a property test or a write-heavy case can take several times
 * its unloaded time. A project may set a longer one.
 */
export const fromSources = defineProject({
  ssr: { resolve: { conditions } },
  test: {
    maxWorkers: 3,
    testTimeout: 30_000,
    env: {
      NODE_OPTIONS: [process.env["NODE_OPTIONS"], `--conditions=${SOURCE_CONDITION}`].filter((o) =>
        o !== undefined && o !== ""
      ).join(" ")
    }
  }
})

/**
 * The vitest project of one package: its tests are the `*.test.ts` files under
 * `test/`, run from sources with the settings above; `test` adds what the package needs besides
 * (a longer `testTimeout` where every test starts real processes).
 */
export const project = (name: string, test?: { readonly testTimeout?: number }) =>
  mergeConfig(fromSources, defineProject({ test: { name, include: ["test/**/*.test.ts"], ...test } }))
