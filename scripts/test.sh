#!/usr/bin/env bash
# Runs the Go tests (-race), each test binary on DynamoDB Local engines of its own.
#
#   PKGS           packages to test (default ./...)
#   GOTESTFLAGS    extra flags for go test (default empty; a -p there overrides ours)
#   TEST_P         test binaries run at once (default: the number of CPUs)
#   TEST_PARALLEL  t.Parallel tests run at once in one binary (default 4)
#   INBOX_TEST_TESTS_PER_ENGINE  top-level tests one engine serves before its binary
#                  starts a fresh one (dynlocaltest's default: 12)
#   INBOX_TEST_DYNAMODB_ENDPOINT  if set, every test uses that engine and none is started
#
# Why engines of each binary, replaced as they serve: DynamoDB Local slows down with what
# it has served, and deleting the tables does not bring it back (three store tests: 21 s
# on a fresh engine, 437 s on one that had served an afternoon of tests, 278 s once its
# tables were deleted). The suite used to share one engine per phase (the light packages
# together, then each heavy package alone on a fresh one): the store package took 359 s
# there, its later tests five to seven times slower than alone; with an engine per 12
# tests it takes 120 s. dynlocaltest (package dynlocal/dynlocaltest) starts and replaces
# the engines; each one dies with its test binary (Pdeathsig), even on SIGKILL.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=${PKGS:-./...}
GOTESTFLAGS=${GOTESTFLAGS:-}
TEST_P=${TEST_P:-$(nproc)}
TEST_PARALLEL=${TEST_PARALLEL:-4}

if [[ -n ${INBOX_TEST_DYNAMODB_ENDPOINT:-} ]]; then
	echo "test.sh: using DynamoDB at $INBOX_TEST_DYNAMODB_ENDPOINT" >&2
fi
run_tests() {
	# shellcheck disable=SC2086 # GOTESTFLAGS is a word list
	go test -count=1 -race -timeout 20m -p "$TEST_P" -parallel "$TEST_PARALLEL" $GOTESTFLAGS "$@"
}

# The root package's tests run whole gateway processes (schedulers, relays and their
# leases, in real time): beside another package's engines their renewals and takeovers
# missed their deadlines (a relay's standby acquired 17 s late; a gateway took over 10 s
# to seed and die). In a whole run they go last, alone.
if [[ $PKGS != "./..." ]]; then
	# shellcheck disable=SC2086 # PKGS is a word list
	run_tests $PKGS
	exit
fi
module=$(go list -m)
mapfile -t rest < <(go list ./... | grep -vx "$module")
status=0
run_tests "${rest[@]}" || status=$?
run_tests . || status=$?
exit "$status"
