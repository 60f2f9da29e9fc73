import { defineProject, mergeConfig } from "vitest/config"
import { fromSources } from "../../vitest.shared.ts"

export default mergeConfig(
  fromSources,
  defineProject({
    test: {
      name: "codex",
      include: ["test/**/*.test.ts"],
      testTimeout: 60_000
    }
  })
)
