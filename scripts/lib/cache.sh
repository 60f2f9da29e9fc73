# Shared by the scripts that install a pinned test dependency (the Claude Code CLI, the
# Codex CLI, the MCP SDK and servers, the OTLP decoder) into a cache directory outside the
# workspace. Sourced, not run.
#
#   cache_install NAME CACHE CHECK INSTALL
#     CHECK DIR    succeeds when DIR holds a complete install of the pinned versions that runs
#     INSTALL DIR  installs into DIR, a fresh directory with a package.json of its own
#   When CACHE does not pass CHECK, the install goes into a fresh directory next to it and is
#   renamed into place only once it passes CHECK: an interrupted run, or two runs at once,
#   never leave a half-installed cache that looks complete. A broken old cache is moved
#   aside, then removed. Exits 1, saying why on stderr, when the result does not pass.
#
#   cache_print VARIABLE VALUE [--export]
#     prints VALUE, or `export VARIABLE=VALUE` (shell-quoted) with --export.

cache_staging=""

cache_install() {
  local name="$1" cache="$2" check="$3" install="$4"
  if "$check" "$cache"; then return 0; fi
  mkdir -p "$(dirname "$cache")"
  cache_staging="$(mktemp -d "$cache.staging.XXXXXX")"
  trap 'rm -rf "$cache_staging"' EXIT
  # A package.json of its own keeps npm from walking up into a workspace above the cache.
  printf '{"name":"session-journal-%s-cache","private":true}\n' "$name" > "$cache_staging/package.json"
  echo "$name: installing into $cache" >&2
  "$install" "$cache_staging" >&2
  if ! "$check" "$cache_staging"; then
    echo "$name: what was installed into $cache_staging does not run or is not the pinned version" >&2
    exit 1
  fi
  # Another run may have finished first.
  if ! "$check" "$cache"; then
    if [ -e "$cache" ]; then
      local old
      old="$(mktemp -d "$cache.old.XXXXXX")"
      mv "$cache" "$old/" && rm -rf "$old"
    fi
    # Checked, not forced: `mv` onto a directory that another run just created would move
    # the staging directory into it.
    [ -e "$cache" ] || mv "$cache_staging" "$cache" || true
  fi
  if ! "$check" "$cache"; then
    echo "$name: $cache is not complete" >&2
    exit 1
  fi
}

cache_print() {
  if [ "${3:-}" = "--export" ]; then
    printf 'export %s=%q\n' "$1" "$2"
  else
    printf '%s\n' "$2"
  fi
}
