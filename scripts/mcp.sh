#!/usr/bin/env bash
# The real MCP pieces for the gateway's tests, pinned, in a cache directory outside
# the workspace: never a dependency of our packages. Installs them when missing and
# prints the cache directory on stdout (nothing else goes there).
#
#   scripts/mcp.sh            install when missing, print the cache directory
#   eval "$(scripts/mcp.sh --export)"
#                             the same, as `export SESSION_JOURNAL_MCP_CACHE=…`
#
# The cache is $SESSION_JOURNAL_MCP_CACHE when set, else
# ${XDG_CACHE_HOME:-~/.cache}/session-journal/mcp-<sdk>-<everything>-<filesystem>.
# It holds the TypeScript SDK (its client drives the gateway in the tests) and the
# reference servers `server-everything` and `server-filesystem`. The tests find it
# through SESSION_JOURNAL_MCP_CACHE, or at this same path (packages/mcp/test/mcpCache.ts
# mirrors the rule below).
set -euo pipefail
. "$(dirname "$0")/lib/cache.sh"

SDK_VERSION=1.32.2
EVERYTHING_VERSION=2026.8.31
FILESYSTEM_VERSION=2026.8.31

cache="${SESSION_JOURNAL_MCP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/session-journal/mcp-$SDK_VERSION-$EVERYTHING_VERSION-$FILESYSTEM_VERSION}"

version_of() {
  node -e 'try { process.stdout.write(require(process.argv[1]).version) } catch { process.stdout.write("") }' \
    "$1/node_modules/$2/package.json"
}
complete() {
  [ "$(version_of "$1" @modelcontextprotocol/sdk)" = "$SDK_VERSION" ] &&
    [ "$(version_of "$1" @modelcontextprotocol/server-everything)" = "$EVERYTHING_VERSION" ] &&
    [ "$(version_of "$1" @modelcontextprotocol/server-filesystem)" = "$FILESYSTEM_VERSION" ]
}
install() {
  npm install --prefix "$1" --no-save --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/sdk@$SDK_VERSION" \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
    "@modelcontextprotocol/server-filesystem@$FILESYSTEM_VERSION"
}

cache_install mcp "$cache" complete install
cache_print SESSION_JOURNAL_MCP_CACHE "$cache" "${1:-}"
