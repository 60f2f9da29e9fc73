import { project } from "../../vitest.shared.ts"

export default project("claude-code-session", { testTimeout: 60_000 })
