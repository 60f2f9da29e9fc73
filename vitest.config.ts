import { defineConfig } from "vitest/config"
import projects from "./vitest.workspace.ts"

export default defineConfig({
  test: {
    projects,
    // Most test files wait on child processes, fsync and sockets rather than on
    // the CPU: three workers keep a two-core machine busy while one file waits.
    maxWorkers: 3
  }
})
