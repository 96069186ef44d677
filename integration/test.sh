#!/usr/bin/env bash
# `make test`: everything the README promises, against a real Kafka broker.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=go1.27.3

need() { command -v "$1" >/dev/null 2>&1; }
if ! need java || ! need mvn; then
	if [ "$(id -u)" = 0 ] && need apt-get; then
		echo "make test: installing Java 17 and Maven for the test broker" >&2
		apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null
	else
		echo "make test: the test broker needs Java 17+ and Maven on PATH" >&2
		exit 1
	fi
fi

go build -o bin/brokerctl ./internal/testbroker/cmd/brokerctl
started=0
if ! bin/brokerctl status >/dev/null 2>&1; then
	bin/brokerctl up >/dev/null
	started=1
fi
stop() {
	rc=$?
	if [ "$rc" != 0 ]; then
		echo "make test: failed (exit $rc); broker log: ${TIDEMARK_KAFKA_DIR:-$PWD/.kafka}/logs/broker.log" >&2
	fi
	if [ "$started" = 1 ]; then bin/brokerctl down; fi
	exit "$rc"
}
trap stop EXIT

# The toolchain's own gofmt: the machine's older one rejects generic methods.
gofmt="$(go env GOROOT)/bin/gofmt"
unformatted=$("$gofmt" -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then
	echo "make test: gofmt needed on:" >&2
	echo "$unformatted" >&2
	exit 1
fi
go vet ./...
TIDEMARK_REQUIRE_KAFKA=1 go test -race -timeout 25m ./...
