#!/bin/sh
":" //; # The `session-journal` command. This file is both a shell script and an
":" //; # ES module: pnpm's shim starts it with /bin/sh, which replaces itself with
":" //; # Node (exec), so the pid a caller holds is Node's and a signal sent to it
":" //; # (SIGTERM, SIGINT) reaches the command, which then ends with exit 130 after
":" //; # releasing its session lock. `node bin/session-journal.js` runs it directly.
":" //; # Node is the workspace's own (node_modules/node/bin/node, the `node`
":" //; # devDependency, Node 22) found from this file's real directory upwards;
":" //; # not node_modules/.bin/node, a wrapper that would start Node as its child.
":" //; # Directories are cut with the shell's own ${d%/*}, not dirname: every
":" //; # program the shell starts adds to each call's start-up time.
":" //; case $0 in */*) d=${0%/*};; *) d=.;; esac; d=$(cd -P -- "$d" && pwd) || exit 70; n=node
":" //; while :; do if [ -x "$d/node_modules/node/bin/node" ]; then n="$d/node_modules/node/bin/node"; break; fi; [ -z "$d" ] && break; d=${d%/*}; done
":" //; exec "$n" "$0" "$@"

// The module: `#main` (package.json `imports`) is the command bundled into one
// file by `pnpm build` (dist/bin), which any supported Node runs, installed or not.
// With the condition `@session-journal/source` (the workspace's tests and its
// `pnpm sj` / `pnpm demo` set it in NODE_OPTIONS) it is the TypeScript source,
// which Node 22 runs as it is: this package is reached through a workspace
// symlink, so its real path is never inside node_modules.
import module from "node:module"

// Reuse compiled code between runs (a command is started many times in scripts).
module.enableCompileCache?.()
await import("#main")
