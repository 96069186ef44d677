# tidemark — the two commands a fresh checkout needs are `make demo` and
# `make test`. Both install what they need; the Go toolchain below is fetched
# by the go command itself.
export GOTOOLCHAIN := go1.27.3
GO ?= go

.PHONY: all build test vet fmt kafka-up kafka-down kafka-status kafka-restart demo bench bench-sweep bench-txn soak

all: build

build:
	$(GO) build -o bin/tidemark ./cmd/tidemark

# Starts the real broker if none runs, runs gofmt/vet and the race-enabled
# tests (integration tests included), and stops the broker it started.
test:
	@bash integration/test.sh

vet:
	$(GO) vet ./...

fmt:
	"$$($(GO) env GOROOT)/bin/gofmt" -w $$(git ls-files '*.go')

bin/brokerctl: $(wildcard internal/testbroker/*.go internal/testbroker/cmd/brokerctl/*.go)
	$(GO) build -o bin/brokerctl ./internal/testbroker/cmd/brokerctl

# A real Apache Kafka broker on 127.0.0.1 (jars from Maven Central, cached).
kafka-up: bin/brokerctl
	bin/brokerctl up

kafka-down: bin/brokerctl
	bin/brokerctl down

kafka-status: bin/brokerctl
	bin/brokerctl status

# Graceful restart of the running broker, keeping its data and ports (clients
# reconnect to the same address). bin/brokerctl also has stop, start,
# restart --hard, kill, pause and resume for fault injection.
kafka-restart: bin/brokerctl
	bin/brokerctl restart

# The marketplace pipelines on an embedded broker with a live dashboard.
# DEMO_ARGS passes flags, e.g. make demo DEMO_ARGS="--duration 30s --rate 1000".
DEMO_ARGS ?=
demo:
	$(GO) run ./cmd/tidemark demo $(DEMO_ARGS)

# The side-by-side benchmark: tidemark, Kafka Streams and the raw limit, one
# after the other on the test broker (started if none runs; or --brokers).
# Dev tooling under internal/, not part of the tidemark CLI. BENCH_ARGS passes
# flags, e.g. make bench BENCH_ARGS="--quick".
BENCH_ARGS ?=
bench:
	$(GO) run ./internal/bench/cmd/bench $(BENCH_ARGS)

# The freshness sweep of issue #12 (~15 min on 2 cores): every commit policy
# and Kafka Streams through 10→50→90→50→10% load with a SIGKILL, per-phase
# staleness, goodput, window close→visible, commits/s and CPU, and the
# issue's targets. SWEEP_ARGS passes flags, e.g. SWEEP_ARGS="--quick".
SWEEP_ARGS ?=
bench-sweep:
	$(GO) run ./internal/bench/cmd/bench sweep $(SWEEP_ARGS)

# One-record transaction commit latency on the real broker (p50/p99).
bench-txn: bin/brokerctl
	bin/brokerctl up >/dev/null
	TIDEMARK_REQUIRE_KAFKA=1 $(GO) test -run '^$$' -bench TxnCommitOneRecord -benchtime=200x ./integration/

# The fault campaign (not in CI; ~15 min on 2 cores): SIGKILLed instances,
# broker SIGKILLs and restarts, a rebalance storm, a 20 s broker SIGSTOP and
# poison pills, against a private broker; every output checked. Exits non-zero
# on any FAIL. SOAK_ARGS passes flags, e.g. SOAK_ARGS="--seed 42 --scenarios storm".
SOAK_ARGS ?=
soak:
	$(GO) run ./internal/soak/cmd/soak $(SOAK_ARGS)
