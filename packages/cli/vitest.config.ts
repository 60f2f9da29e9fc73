import { project } from "../../vitest.shared.ts"

// Each test starts the real binary several times (about half a second each).
export default project("cli", { testTimeout: 60_000 })
