import { defineProject } from "vitest/config"

export default defineProject({
  test: {
    name: "ai",
    include: ["test/**/*.test.ts"],
    // The filesystem and PostgreSQL tests wait on fsync and on the server; on a
    // loaded machine a few of them take longer than the default 5 seconds.
    testTimeout: 30_000
  }
})
