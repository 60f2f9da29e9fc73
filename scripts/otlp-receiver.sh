#!/usr/bin/env bash
# An OTLP receiver that is not ours, for the tests of `session-journal otel export`:
# the OpenTelemetry JS SDK's protobuf definitions of OTLP (the decoder protobufjs
# generated from opentelemetry-proto, as @opentelemetry/otlp-transformer 0.57.2
# publishes it) and the semantic conventions' own attribute names
# (@opentelemetry/semantic-conventions), pinned, in a cache directory outside the
# workspace: never a dependency of our packages. Installs them when missing and
# prints the cache directory on stdout (nothing else goes there).
#
#   scripts/otlp-receiver.sh            install when missing, print the directory
#   eval "$(scripts/otlp-receiver.sh --export)"
#                                       the same, as `export SESSION_JOURNAL_OTLP_RECEIVER=…`
#
# The cache is $SESSION_JOURNAL_OTLP_RECEIVER when set, else
# ${XDG_CACHE_HOME:-~/.cache}/session-journal/otlp-receiver-<versions>; the tests look
# at the same path (packages/cli/test/otlpReceiver.ts mirrors the rule).
set -euo pipefail

TRANSFORMER_VERSION=0.57.2 # the last release that ships the generated protobuf decoder
SEMCONV_VERSION=1.45.0

cache="${SESSION_JOURNAL_OTLP_RECEIVER:-${XDG_CACHE_HOME:-$HOME/.cache}/session-journal/otlp-receiver-$TRANSFORMER_VERSION-$SEMCONV_VERSION}"

installed() {
  [ -f "$cache/node_modules/@opentelemetry/otlp-transformer/build/src/generated/root.js" ] &&
    grep -q "\"version\": *\"$TRANSFORMER_VERSION\"" "$cache/node_modules/@opentelemetry/otlp-transformer/package.json" &&
    grep -q "\"version\": *\"$SEMCONV_VERSION\"" "$cache/node_modules/@opentelemetry/semantic-conventions/package.json"
}

if ! installed; then
  # Installed into a fresh directory and renamed into place once complete, so an
  # interrupted run never leaves a cache that looks complete.
  mkdir -p "$(dirname "$cache")"
  staging="$(mktemp -d "$cache.staging.XXXXXX")"
  trap 'rm -rf "$staging"' EXIT
  echo '{"name":"session-journal-otlp-receiver-cache","private":true}' > "$staging/package.json"
  echo "installing @opentelemetry/otlp-transformer@$TRANSFORMER_VERSION and @opentelemetry/semantic-conventions@$SEMCONV_VERSION into $cache" >&2
  npm install --prefix "$staging" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error \
    "@opentelemetry/otlp-transformer@$TRANSFORMER_VERSION" "@opentelemetry/semantic-conventions@$SEMCONV_VERSION" >&2
  if ! installed; then
    if [ -e "$cache" ]; then
      old="$(mktemp -d "$cache.old.XXXXXX")"
      mv "$cache" "$old/" && rm -rf "$old"
    fi
    [ -e "$cache" ] || mv "$staging" "$cache" || true
  fi
  if ! installed; then
    echo "otlp-receiver: $cache is not complete" >&2
    exit 1
  fi
fi

if [ "${1:-}" = "--export" ]; then
  printf 'export SESSION_JOURNAL_OTLP_RECEIVER=%q\n' "$cache"
else
  printf '%s\n' "$cache"
fi
