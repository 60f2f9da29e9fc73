import { defineProject, mergeConfig } from "vitest/config"
import { fromSources } from "../../vitest.shared.ts"

export default mergeConfig(
  fromSources,
  defineProject({
    test: {
      name: "ai",
      include: ["test/**/*.test.ts"]
    }
  })
)
