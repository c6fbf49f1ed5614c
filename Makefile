# Quiver. `make test` is the one command that runs every test (CI runs it).
GO ?= go
STRESS_SCALE ?= small

.PHONY: test test-go test-race vet build bench stress

build:
	$(GO) build -o bin/quiver ./cmd/quiver

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (echo "gofmt needed:"; gofmt -l .; exit 1)

test-go:
	$(GO) test -count=1 ./...

test-race:
	$(GO) test -count=1 -race ./store/...

test: vet test-go test-race
