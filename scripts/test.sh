#!/usr/bin/env bash
# Runs the Go tests, each test binary on a DynamoDB Local engine of its own.
#
#   TEST_RACE      1: build the tests with the race detector (make test-race; CI runs both)
#   PKGS           packages to test (default ./...)
#   GOTESTFLAGS    extra flags for go test (default empty; a -p there overrides ours)
#   TEST_P         test binaries run at once (default: the number of CPUs plus one: the
#                  root package's process tests mostly wait on leases, and beside them a
#                  third binary keeps both cores busy)
#   TEST_PARALLEL  t.Parallel tests run at once in one binary (default 4)
#   INBOX_TEST_TESTS_PER_ENGINE  top-level tests one engine serves before its binary
#                  starts a fresh one (dynlocaltest's default: 0, one for the binary)
#   INBOX_TEST_DYNAMODB_ENDPOINT  if set, every test uses that engine and none is started
#
# Each binary starts its engine on first use (package dynlocal/dynlocaltest) and the engine
# dies with it (Pdeathsig), even on SIGKILL. Tables there have no stream unless their test
# reads it: DynamoDB Local's writes slow down as stream records pile up (dynlocaltest's
# streams.go has the measurements).
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=${PKGS:-./...}
GOTESTFLAGS=${GOTESTFLAGS:-}
TEST_P=${TEST_P:-$(($(nproc) + 1))}
race=()
if [[ ${TEST_RACE:-} == 1 ]]; then
	race=(-race)
fi
TEST_PARALLEL=${TEST_PARALLEL:-4}

if [[ -n ${INBOX_TEST_DYNAMODB_ENDPOINT:-} ]]; then
	echo "test.sh: using DynamoDB at $INBOX_TEST_DYNAMODB_ENDPOINT" >&2
fi
# shellcheck disable=SC2086 # GOTESTFLAGS and PKGS are word lists
exec go test -count=1 "${race[@]}" -timeout 20m -p "$TEST_P" -parallel "$TEST_PARALLEL" $GOTESTFLAGS $PKGS
