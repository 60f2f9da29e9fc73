import { defineProject, mergeConfig } from "vitest/config"
import { fromSources } from "../../vitest.shared.ts"

export default mergeConfig(
  fromSources,
  defineProject({
    test: {
      name: "ai",
      include: ["test/**/*.test.ts"],
      // The filesystem and PostgreSQL tests wait on fsync and on the server; on a
      // loaded machine a few of them take longer than the default 5 seconds.
      testTimeout: 30_000
    }
  })
)
