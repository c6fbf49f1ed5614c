#!/usr/bin/env bash
# Runs every Go fuzz target of Quiver's parsers for FUZZTIME each (default
# 10s; the report setting is FUZZTIME=10m). Targets: client bytes (catalog:
# tickets, descriptors, action bodies; flightserver: whole DoPut IPC streams
# through an in-process server and store) and on-disk files (store:
# manifest.json, commit records, .version.json). A crasher is written by `go test` to
# <pkg>/testdata/fuzz/<Target>/ — keep it there as a seed once fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME="${FUZZTIME:-10s}"
GO="${GO:-go}"
targets=(
  "./catalog/ FuzzParseTicket"
  "./catalog/ FuzzParseDescriptor"
  "./catalog/ FuzzParseAction"
  "./flightserver/ FuzzDoPut"
  "./store/ FuzzParseManifest"
  "./store/ FuzzParseCommitRecord"
  "./store/ FuzzParseVersionInfo"
  "./store/codec/ FuzzCheckBatchBody"
)
fail=0
for t in "${targets[@]}"; do
  set -- $t
  echo "== $2 ($1) for $FUZZTIME"
  if ! "$GO" test -run '^$' -fuzz "^$2\$" -fuzztime "$FUZZTIME" "$1" 2>&1 | tail -4; then
    fail=1
  fi
done
exit $fail
