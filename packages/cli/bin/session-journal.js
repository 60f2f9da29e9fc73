#!/usr/bin/env node
// The `session-journal` command. The sources are TypeScript and run as they are:
// Node 22 strips the types of files outside node_modules, and this package is
// reached through a workspace symlink, so its real path never is inside one.
import module from "node:module"

// Reuse compiled code between runs (a command is started many times in scripts).
module.enableCompileCache?.()
await import("../src/main.ts")
