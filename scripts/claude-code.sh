#!/usr/bin/env bash
# The real Claude Code CLI for the tests, pinned, in a cache directory outside the
# workspace: never a dependency of our packages. Installs it when it is missing and
# prints the path of the native `claude` binary on stdout (nothing else goes there).
#
#   scripts/claude-code.sh            install when missing, print the binary's path
#   eval "$(scripts/claude-code.sh --export)"
#                                     the same, as `export SESSION_JOURNAL_CLAUDE_BIN=…`
#
# The cache is $SESSION_JOURNAL_CLAUDE_CACHE when set, else
# ${XDG_CACHE_HOME:-~/.cache}/session-journal/claude-code-<version>. The Agent SDK of the
# same release goes into the same cache (for the SessionStore work; nothing uses it yet).
# The tests find the binary through SESSION_JOURNAL_CLAUDE_BIN, or at this same cache path
# (packages/claude-code/test/claudeBin.ts mirrors the rule below).
set -euo pipefail
. "$(dirname "$0")/lib/cache.sh"

CLAUDE_CODE_VERSION=2.1.328
AGENT_SDK_VERSION=0.3.328 # its package.json says claudeCodeVersion 2.1.328

cache="${SESSION_JOURNAL_CLAUDE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/session-journal/claude-code-$CLAUDE_CODE_VERSION}"

# The wrapper package ships no binary of its own: its `claude` resolves to the native
# binary of the platform's optional dependency. Run it once to prove it starts here.
works() {
  local bin="$1/node_modules/.bin/claude" sdk="$1/node_modules/@anthropic-ai/claude-agent-sdk/package.json"
  [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null | grep -oE '^[0-9]+\.[0-9]+\.[0-9]+' || true)" = "$CLAUDE_CODE_VERSION" ] &&
    [ -f "$sdk" ] && grep -q "\"version\": *\"$AGENT_SDK_VERSION\"" "$sdk"
}
# Optional dependencies carry the native binary (the package's postinstall links it into
# bin/), so they must not be omitted, and scripts must run. --no-save: the cache's
# package.json stays as written.
install() {
  npm install --prefix "$1" --no-save --no-audit --no-fund --include=optional --ignore-scripts=false \
    --loglevel=error "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@anthropic-ai/claude-agent-sdk@$AGENT_SDK_VERSION"
}

cache_install claude-code "$cache" works install
cache_print SESSION_JOURNAL_CLAUDE_BIN "$cache/node_modules/.bin/claude" "${1:-}"
