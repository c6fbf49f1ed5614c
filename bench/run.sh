#!/usr/bin/env bash
# bench/run.sh: the benchmark suite against the peers (`make bench-peers`).
# Builds quiver and the Go bench client, installs bench/requirements.txt into
# the venv of scripts/pyenv.sh (once), and runs bench/bench.py, which prints
# the table and writes results.{md,json} and benchmarks.png to $BENCH_OUT
# (default bench/out). BENCH_SCALE=0.01 is the CI size (a couple of
# minutes); the default 1 is the full 1 GiB report. See bench/bench.py.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"
PY="$(scripts/pyenv.sh)"
req="$repo/bench/requirements.txt"
stamp="$(dirname "$(dirname "$PY")")/.quiver-bench.stamp"
want="$(sha256sum <"$req" | cut -d' ' -f1)"
if [[ "$(cat "$stamp" 2>/dev/null)" != "$want" ]] || ! "$PY" -c 'import matplotlib, numpy' 2>/dev/null; then
	echo "bench/run.sh: installing $req" >&2
	"$PY" -m pip install -q --disable-pip-version-check --only-binary=:all: -r "$req"
	"$PY" -m pip check >&2
	echo "$want" >"$stamp"
fi
bin="$(mktemp -d "${TMPDIR:-/tmp}/quiver-bench-bin.XXXXXX")"
trap 'rm -rf "$bin"' EXIT
# The server runs from a copy, as an installed binary would: the linker
# writes its output through a shared mapping, and a process started from
# that very file then has the whole of its 53 MiB of code and tables
# mapped (counted in its RSS), where one started from a copy maps the
# pages it touches (29 MiB at start). docs/benchmarks.md, "RSS".
go build -o "$bin/quiver.linked" ./cmd/quiver
cp "$bin/quiver.linked" "$bin/quiver"
rm "$bin/quiver.linked"
go build -o "$bin/flightbench" ./bench/flightbench
QUIVER_BIN="$bin/quiver" FLIGHTBENCH_BIN="$bin/flightbench" "$PY" "$repo/bench/bench.py"
