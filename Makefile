# Quiver. `make test` is the one command that runs every test (CI runs it).
GO ?= go
# stress: small in CI (make test runs the default sizes); `make stress` runs
# the full settings documented in docs/reliability.md.

.PHONY: lint test test-go test-race test-python test-reliability vet build bench bench-peers stress tools test-s3 test-on-s3


build:
	$(GO) build -o bin/quiver ./cmd/quiver

# versitygw: the S3 server the tests run against (installed into .tools/bin
# from the Go module proxy on first use; internal/s3test does the same when
# a test needs it and it is missing).
VERSITYGW_VERSION := v1.8.0
VERSITYGW := .tools/bin/versitygw-$(VERSITYGW_VERSION)

$(VERSITYGW):
	mkdir -p .tools/bin/.install
	GOBIN=$(CURDIR)/.tools/bin/.install GOFLAGS=-buildvcs=false $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)
	mv .tools/bin/.install/versitygw $@ && rmdir .tools/bin/.install

tools: $(VERSITYGW)

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed:"; gofmt -l .; exit 1)

# Servers and stores under test overwrite the memory Arrow frees before the
# pools reuse it (internal/poison): a value kept past its batch then reads
# as garbage at once. (Test binaries do it anyway; this reaches the servers
# the Python and integration suites start.)
test-go test-race test-python test-on-s3 test-s3 test-reliability: export QUIVER_POISON_FREED = 1

# The crash test kills a writer 100 times here (its plain `go test` default
# is 30, to keep a developer's loop quick). Then the build without cgo
# (pages compressed by pure-Go zstd) and the codec's tests in it.
test-go: $(VERSITYGW)
	QUIVER_CRASH_KILLS=100 $(GO) test -count=1 -timeout 20m ./...
	CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/quiver
	CGO_ENABLED=0 $(GO) test -count=1 ./store/codec/

# Under the race detector the multi-process and crash tests run their
# -short sizes.
test-race: $(VERSITYGW)
	$(GO) test -count=1 -short -race ./...

# The suites that do not care where the data lies, again on a bucket of
# versitygw (QUIVER_TEST_STORAGE=s3; about 2 min): the Flight integration
# tests and the pyarrow suite. (The conformance suite, the store's protocol
# tests, cmd's S3 tests, the direct reads of a bucket and the reliability
# load test on S3 run in test-go, test-python and test-reliability.)
test-on-s3: $(VERSITYGW)
	CI=true QUIVER_TEST_STORAGE=s3 $(GO) test -count=1 ./integration/
	CI=true QUIVER_TEST_STORAGE=s3 scripts/test-python.sh

# Every S3 test alone (~3 min), never skipped.
test-s3: test-on-s3
	CI=true $(GO) test -count=1 ./store/fsys/s3fs/
	CI=true $(GO) test -count=1 -run 'TestProtocolOnEachFS|TestLockReleaseConditional' ./store/
	CI=true $(GO) test -count=1 -run S3 ./cmd/quiver/
	CI=true scripts/test-python.sh -k s3_direct
	CI=true QUIVER_STRESS_SCALE=ci $(GO) test -count=1 -run TestLoadS3 ./reliability/

test-python: $(VERSITYGW)
	scripts/test-python.sh

# The reliability suite at its CI size (about a minute; `make stress` runs
# the full one).
test-reliability: $(VERSITYGW)
	QUIVER_STRESS_SCALE=ci $(GO) test -count=1 -timeout 20m ./reliability/

# staticcheck, pinned (fetched through the Go module proxy on first use).
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

test: vet lint test-go test-race test-python test-on-s3 test-reliability

# Full-size concurrency and crash runs (minutes).
stress:
	QUIVER_STRESS=1 $(GO) test -count=1 -run 'MultiProcess|CrashKilled|PowerLoss' -v ./store/
	QUIVER_STRESS_SCALE=$${QUIVER_STRESS_SCALE:-full} $(GO) test -count=1 -timeout 90m -v ./reliability/
	FUZZTIME=$${FUZZTIME:-10m} reliability/fuzz.sh

# Benchmarks (docs/benchmarks.md): Quiver against its peers, then the Go
# benchmarks: store throughput matrix, peak heap/RSS at 100 MB and 1 GB,
# DoGet/DoPut through an in-process server, and DoPut, DoGet and small
# appends with the data on a local disk against on S3 (versitygw).
bench: bench-peers $(VERSITYGW)
	$(GO) test -run '^$$' -bench 'Put|Read' -benchmem ./store/
	$(GO) test -run '^$$' -bench Memory -benchtime 1x -timeout 30m ./store/
	$(GO) test -run '^$$' -bench 'DoGet|DoPut' -benchmem ./flightserver/
	CI=true $(GO) test -run '^$$' -bench Storage -benchtime 5x -timeout 30m ./flightserver/

# Quiver vs the pyarrow Flight server, pyarrow, DuckDB and polars on the same
# generated data; prints the table, writes bench/out/{results.md,results.json,
# benchmarks.png}. BENCH_SCALE=0.01 for CI (under a minute), default 1 (1 GiB,
# about 7 minutes). See bench/bench.py for the other BENCH_* settings.
bench-peers:
	bench/run.sh
