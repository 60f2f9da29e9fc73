import { defineConfig } from "vitest/config"
import projects from "./vitest.workspace.ts"

export default defineConfig({
  test: {
    projects,
    // The projects' worker count is set in vitest.shared.ts: Vitest 5 does not pass
    // this root value on to them. It is kept equal for the reports that read it.
    maxWorkers: 3
  }
})
