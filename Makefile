# Quiver. `make test` is the one command that runs every test (CI runs it).
GO ?= go
# stress: small in CI (make test runs the default sizes); `make stress` runs
# the full settings documented in docs/reliability.md.

.PHONY: lint test test-go test-race test-python vet build bench bench-peers stress

build:
	$(GO) build -o bin/quiver ./cmd/quiver

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed:"; gofmt -l .; exit 1)

# The crash test kills a writer 100 times here (its plain `go test` default
# is 30, to keep a developer's loop quick).
test-go:
	QUIVER_CRASH_KILLS=100 $(GO) test -count=1 -timeout 20m ./...

# Under the race detector the multi-process and crash tests run their
# -short sizes.
test-race:
	$(GO) test -count=1 -short -race ./...

test-python:
	scripts/test-python.sh

# The reliability suite at its CI size (about a minute; `make stress` runs
# the full one).
test-reliability:
	QUIVER_STRESS_SCALE=ci $(GO) test -count=1 -timeout 20m ./reliability/

# staticcheck, pinned (fetched through the Go module proxy on first use).
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

test: vet lint test-go test-race test-python test-reliability

# Full-size concurrency and crash runs (minutes).
stress:
	QUIVER_STRESS=1 $(GO) test -count=1 -run 'MultiProcess|CrashKilled' -v ./store/
	QUIVER_STRESS_SCALE=$${QUIVER_STRESS_SCALE:-full} $(GO) test -count=1 -timeout 90m -v ./reliability/
	FUZZTIME=$${FUZZTIME:-10m} reliability/fuzz.sh

# Benchmarks (docs/benchmarks.md): Quiver against its peers, then the Go
# benchmarks: store throughput matrix, peak heap/RSS at 100 MB and 1 GB,
# DoGet/DoPut through an in-process server.
bench: bench-peers
	$(GO) test -run '^$$' -bench 'Put|Read' -benchmem ./store/
	$(GO) test -run '^$$' -bench Memory -benchtime 1x -timeout 30m ./store/
	$(GO) test -run '^$$' -bench 'DoGet|DoPut' -benchmem ./flightserver/

# Quiver vs the pyarrow Flight server, pyarrow, DuckDB and polars on the same
# generated data; prints the table, writes bench/out/{results.md,results.json,
# benchmarks.png}. BENCH_SCALE=0.01 for CI (under a minute), default 1 (1 GiB,
# about 7 minutes). See bench/bench.py for the other BENCH_* settings.
bench-peers:
	bench/run.sh
