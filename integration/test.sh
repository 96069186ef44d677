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

# The web view test (cmd/tidemark) drives Debian's chromium headless;
# tidemark describe --format svg runs Graphviz's dot.
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
need dot || missing+=(graphviz)
if [ "${#missing[@]}" -gt 0 ]; then
	if [ "$(id -u)" = 0 ] && need apt-get; then
		echo "make test: installing ${missing[*]} (apt-get install) for the web view and describe tests" >&2
		t0=$(date +%s)
		export DEBIAN_FRONTEND=noninteractive
		if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
			echo "make test: install failed; apt-get update and retry" >&2
			apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
		fi
		echo "make test: ${missing[*]} installed in $(($(date +%s) - t0))s" >&2
	else
		echo "make test: the web view and describe tests need: apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
fi
export TIDEMARK_REQUIRE_BROWSER=1 TIDEMARK_REQUIRE_GRAPHVIZ=1

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
