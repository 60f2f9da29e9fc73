#!/usr/bin/env bash
# The real Codex CLI for the tests, pinned, in a cache directory outside the workspace:
# never a dependency of our packages. Installs it when it is missing and prints the path
# of the native `codex` binary on stdout (nothing else goes there).
#
#   scripts/codex.sh            install when missing, print the binary's path
#   eval "$(scripts/codex.sh --export)"
#                               the same, as `export SESSION_JOURNAL_CODEX_BIN=…`
#
# The cache is $SESSION_JOURNAL_CODEX_CACHE when set, else
# ${XDG_CACHE_HOME:-~/.cache}/session-journal/codex-<version>. The tests find the binary
# through SESSION_JOURNAL_CODEX_BIN, or at this same cache path
# (packages/codex/test/codexCli.ts mirrors the rule below).
set -euo pipefail
. "$(dirname "$0")/lib/cache.sh"

CODEX_VERSION=0.169.0

cache="${SESSION_JOURNAL_CODEX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/session-journal/codex-$CODEX_VERSION}"
# npm installs the platform's native binary as the optional dependency @openai/codex-<platform>;
# `bin/codex.js` only execs it, so the tests run the native binary itself.
native() {
  local dir="$1"
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) echo "$dir/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex" ;;
    Linux-aarch64) echo "$dir/node_modules/@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex" ;;
    *) echo "$dir/node_modules/.bin/codex" ;;
  esac
}
works() {
  local bin
  bin="$(native "$1")"
  [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' || true)" = "$CODEX_VERSION" ]
}
install() {
  npm install --prefix "$1" --no-save --no-audit --no-fund --include=optional \
    --loglevel=error "@openai/codex@$CODEX_VERSION"
}

cache_install codex "$cache" works install
cache_print SESSION_JOURNAL_CODEX_BIN "$(native "$cache")" "${1:-}"
