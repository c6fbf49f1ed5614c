// Package integration holds Quiver's end-to-end tests: they build the real
// `quiver` binary, run `quiver serve` processes on 127.0.0.1 with temporary
// data dirs, and talk to them only over the wire — with arrow-go's Flight
// client (the Go tests here) and with pyarrow, polars, DuckDB and pyrosome
// (the pytest suite, *.py, run by scripts/test-python.sh). They never import
// the server's internals.
//
// QUIVER_BIG=1 also runs the 1 GB DoGet (with the server's peak RSS), and
// QUIVER_RACE=1 builds the server with the race detector.
package integration
