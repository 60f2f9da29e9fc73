import { project } from "../../vitest.shared.ts"

export default project("claude-code", { testTimeout: 60_000 })
