import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "cli",
    include: ["test/**/*.test.ts"],
    // Each test starts the real binary several times (about half a second each).
    testTimeout: 60_000
  }
})
