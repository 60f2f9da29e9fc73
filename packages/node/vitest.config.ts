import { defineProject, mergeConfig } from "vitest/config"
import { fromSources } from "../../vitest.shared.ts"

export default mergeConfig(
  fromSources,
  defineProject({
    test: {
      name: "node",
      include: ["test/**/*.test.ts"]
    }
  })
)
