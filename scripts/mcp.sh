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

if ! complete "$cache"; then
  # Installed into a fresh directory next to the cache and renamed into place only
  # once complete: an interrupted run, or two runs at once, never leave a
  # half-installed cache that looks complete.
  mkdir -p "$(dirname "$cache")"
  staging="$(mktemp -d "$cache.staging.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  # A package.json of its own keeps npm from walking up into a workspace above the cache.
  echo '{"name":"session-journal-mcp-cache","private":true}' > "$staging/package.json"
  echo "installing @modelcontextprotocol/sdk@$SDK_VERSION, server-everything@$EVERYTHING_VERSION and server-filesystem@$FILESYSTEM_VERSION into $cache" >&2
  npm install --prefix "$staging" --no-save --no-audit --no-fund --loglevel=error \
    "@modelcontextprotocol/sdk@$SDK_VERSION" \
    "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
    "@modelcontextprotocol/server-filesystem@$FILESYSTEM_VERSION" >&2
  if ! complete "$staging"; then
    echo "mcp: the packages installed into $staging are not the pinned versions" >&2
    exit 1
  fi
  if ! complete "$cache"; then
    if [ -e "$cache" ]; then
      old="$(mktemp -d "$cache.old.XXXXXX")"
      mv "$cache" "$old/" && rm -rf "$old"
    fi
    [ -e "$cache" ] || mv "$staging" "$cache" || true
  fi
  if ! complete "$cache"; then
    echo "mcp: $cache is not complete" >&2
    exit 1
  fi
fi

if [ "${1:-}" = "--export" ]; then
  printf 'export SESSION_JOURNAL_MCP_CACHE=%q\n' "$cache"
else
  printf '%s\n' "$cache"
fi
