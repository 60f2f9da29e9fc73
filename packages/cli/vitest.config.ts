import { defineProject, mergeConfig } from "vitest/config"
import { fromSources } from "../../vitest.shared.ts"

export default mergeConfig(
  fromSources,
  defineProject({
    test: {
      name: "cli",
      include: ["test/**/*.test.ts"],
      // Each test starts the real binary several times (about half a second each).
      testTimeout: 60_000
    }
  })
)
