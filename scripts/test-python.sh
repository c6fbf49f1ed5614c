#!/usr/bin/env bash
# scripts/test-python.sh: the real-clients suite (integration/*.py).
#
# Creates/reuses the pinned Python venv (scripts/pyenv.sh), installs the
# Python client (./python, distribution quiverdb) into it, builds the quiver
# binary into a temp dir, and runs pytest on integration/ against it: real
# `quiver serve` processes on 127.0.0.1, driven by pyarrow.flight, the
# client, polars, DuckDB and pyrosome. Extra arguments go to pytest, e.g.
#
#     scripts/test-python.sh -k pyrosome -x
#
# Exit status is pytest's, except that "no tests collected" (5) is a failure
# too (it is already non-zero) and is said out loud.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$repo"

PY="$(scripts/pyenv.sh)"

# The client as a user installs it (pip install ./python), offline: its build
# backend (flit_core) is pinned in the venv. Reinstalled every run, so the
# tests see the working tree's client.
"$PY" -m pip install -q --disable-pip-version-check --root-user-action=ignore \
	--no-deps --no-build-isolation --no-index --force-reinstall ./python

tmp="$(mktemp -d "${TMPDIR:-/tmp}/quiver-pytest.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/quiver" ./cmd/quiver
export QUIVER_BIN="$tmp/quiver"

# pytest's own temp dirs go under $tmp as well, so nothing is left behind
set +e
"$PY" -m pytest -c integration/pytest.ini --rootdir integration --basetemp "$tmp/pytest" integration "$@"
rc=$?
set -e
if [[ $rc -eq 5 ]]; then
	echo "test-python.sh: pytest collected no tests: that is a failure" >&2
fi
exit "$rc"
