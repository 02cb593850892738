# replab — see README.md. Targets install what they need (scripts/deps.sh).
GO      ?= go
BIN     := bin/replab
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
TESTTIMEOUT ?= 18m

.PHONY: all build demo test check unit bench fmt vet clean

all: build

build:
	@scripts/deps.sh build
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/replab

# The quickstart lab: three sites, WAN links, a measured check of every link,
# then PostgreSQL with two standbys under the personnel workload.
demo: build
	@scripts/deps.sh demo
	./$(BIN) lab check scenarios/quickstart.toml
	./$(BIN) run scenarios/quickstart.toml

# Everything, including the integration tests that need root and namespaces.
# Packages and integration tests run side by side (most wait on servers and
# links, not on the CPU: a whole suite used about half of the 2 cores; six
# packages at once were 2 minutes faster but failed more often); a test that
# measures time takes the machine alone (internal/testkit: Exclusive), the
# others wait for it.
# The packages whose tests take longest start first (go test runs them in
# the order named; ./... after them adds the rest once each): the suite
# lasts about as long as its longest package, not that plus the others
# (the runner's HA tests, 10 minutes of test time, are a package of their
# own for that).
LONGPKGS = ./internal/runner ./internal/runner/hatest ./cmd/replab ./internal/engine/postgres ./internal/engine/bdbje ./internal/lab ./internal/engine/mariadb

test:
	@scripts/deps.sh test
	@test -z "$$(gofmt -l cmd internal bench)" || { echo "gofmt needed:"; gofmt -l cmd internal bench; exit 1; }
	$(GO) vet ./...
	$(GO) test -count=1 -p 4 -parallel 4 -timeout $(TESTTIMEOUT) $(LONGPKGS) ./...

# The edit-test loop: build, gofmt, vet and the fast tests (-short: no root,
# no namespaces, no servers).
check:
	@scripts/deps.sh build
	$(GO) build ./...
	@test -z "$$(gofmt -l cmd internal bench)" || { echo "gofmt needed:"; gofmt -l cmd internal bench; exit 1; }
	$(GO) vet ./...
	$(GO) test -count=1 -short ./...

unit: check

# Benchmarks: figures, not pass/fail. Writes bench/results/*.json.
bench: build
	@scripts/deps.sh bench
	$(GO) test -run '^$$' -bench . -benchtime 2s ./internal/linkem/ | tee bench/results/linkem-model.txt
	$(GO) run ./bench/linkem --out bench/results/linkem.json
	$(GO) run ./bench/driver --out bench/results/driver.json
	$(GO) run ./bench/pgsetup --out bench/results/pgsetup.json
	$(GO) run ./bench/spread --out bench/results/spread.json
	$(GO) run ./bench/check --out bench/results/check.json

fmt:
	gofmt -w cmd internal

clean:
	rm -rf bin
