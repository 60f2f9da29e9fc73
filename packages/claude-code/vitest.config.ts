import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "claude-code",
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000
  }
})
