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
. "$(dirname "$0")/lib/cache.sh"

TRANSFORMER_VERSION=0.57.2 # the last release that ships the generated protobuf decoder
SEMCONV_VERSION=1.45.0

cache="${SESSION_JOURNAL_OTLP_RECEIVER:-${XDG_CACHE_HOME:-$HOME/.cache}/session-journal/otlp-receiver-$TRANSFORMER_VERSION-$SEMCONV_VERSION}"

installed() {
  [ -f "$1/node_modules/@opentelemetry/otlp-transformer/build/src/generated/root.js" ] &&
    grep -q "\"version\": *\"$TRANSFORMER_VERSION\"" "$1/node_modules/@opentelemetry/otlp-transformer/package.json" &&
    grep -q "\"version\": *\"$SEMCONV_VERSION\"" "$1/node_modules/@opentelemetry/semantic-conventions/package.json"
}
install() {
  npm install --prefix "$1" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error \
    "@opentelemetry/otlp-transformer@$TRANSFORMER_VERSION" "@opentelemetry/semantic-conventions@$SEMCONV_VERSION"
}

cache_install otlp-receiver "$cache" installed install
cache_print SESSION_JOURNAL_OTLP_RECEIVER "$cache" "${1:-}"
