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

CLAUDE_CODE_VERSION=2.1.328
AGENT_SDK_VERSION=0.3.328 # its package.json says claudeCodeVersion 2.1.328

cache="${SESSION_JOURNAL_CLAUDE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/session-journal/claude-code-$CLAUDE_CODE_VERSION}"
bin="$cache/node_modules/.bin/claude"

# The wrapper package ships no binary of its own: its `claude` resolves to the native
# binary of the platform's optional dependency. Run it once to prove it starts here.
works() {
  [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null | grep -oE '^[0-9]+\.[0-9]+\.[0-9]+' || true)" = "$CLAUDE_CODE_VERSION" ]
}
has_sdk() {
  [ -f "$cache/node_modules/@anthropic-ai/claude-agent-sdk/package.json" ] &&
    grep -q "\"version\": *\"$AGENT_SDK_VERSION\"" "$cache/node_modules/@anthropic-ai/claude-agent-sdk/package.json"
}

if ! works || ! has_sdk; then
  # Installed into a fresh directory next to the cache and renamed into place only once
  # the binary runs: a run that is interrupted, or two runs at once, never leave a
  # half-installed cache that looks complete.
  mkdir -p "$(dirname "$cache")"
  staging="$(mktemp -d "$cache.staging.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  # A package.json of its own keeps npm from walking up into a workspace above the cache.
  echo '{"name":"session-journal-claude-code-cache","private":true}' > "$staging/package.json"
  echo "installing @anthropic-ai/claude-code@$CLAUDE_CODE_VERSION and @anthropic-ai/claude-agent-sdk@$AGENT_SDK_VERSION into $cache" >&2
  # --no-save: the cache's package.json stays as written. Optional dependencies carry
  # the native binary (the package's postinstall links it into bin/), so they must not
  # be omitted, and scripts must run.
  npm install --prefix "$staging" --no-save --no-audit --no-fund --include=optional --ignore-scripts=false \
    --loglevel=error "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@anthropic-ai/claude-agent-sdk@$AGENT_SDK_VERSION" >&2
  staged="$staging/node_modules/.bin/claude"
  if [ "$("$staged" --version 2>/dev/null | grep -oE '^[0-9]+\.[0-9]+\.[0-9]+' || true)" != "$CLAUDE_CODE_VERSION" ]; then
    echo "claude-code: the installed $staged does not run or is not version $CLAUDE_CODE_VERSION" >&2
    exit 1
  fi
  # Another run may have finished first; a broken old cache is moved aside, then removed.
  if ! works || ! has_sdk; then
    if [ -e "$cache" ]; then
      old="$(mktemp -d "$cache.old.XXXXXX")"
      mv "$cache" "$old/" && rm -rf "$old"
    fi
    # Checked, not forced: `mv` onto a directory that another run just created would
    # move the staging directory into it.
    [ -e "$cache" ] || mv "$staging" "$cache" || true
  fi
  if ! works; then
    echo "claude-code: $bin does not run or is not version $CLAUDE_CODE_VERSION" >&2
    exit 1
  fi
fi

if [ "${1:-}" = "--export" ]; then
  printf 'export SESSION_JOURNAL_CLAUDE_BIN=%q\n' "$bin"
else
  printf '%s\n' "$bin"
fi
