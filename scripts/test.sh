#!/usr/bin/env bash
# Runs the Go tests against ONE DynamoDB Local shared by every test binary.
#
#   PKGS        packages to test (default ./...)
#   GOTESTFLAGS extra flags for go test (default empty; a -p there overrides ours)
#   TEST_P      test binaries run at once (default: the number of CPUs)
#   TEST_PARALLEL  t.Parallel tests run at once in one binary (default 4)
#   TEST_ENGINES   2 (default for the whole suite): light packages, then each HEAVY one on a fresh engine; 1: all at once on one
#   INBOX_TEST_DYNAMODB_ENDPOINT  if already set, that engine is used and none is started
#
# Each engine is started by cmd/dynlocal with its stdin on a pipe this script
# holds, so it stops when the script exits for any reason, even SIGKILL.
#
# Why two phases: DynamoDB Local serves requests on about one core (the JVM sat at 97%
# CPU with the machine's load average at 1), so once the send pipeline's tests
# (broadcasts, bulk sends: hundreds of recipients' transactions each) shared the engine
# with the rest, every package waited on it: lease renewals and request deadlines ran
# out, and a full run failed where each package alone passed. Two engines side by side
# did not help on two cores (the JVMs and the -race binaries shared them). So the light
# packages run first, TEST_P binaries at once, then the heaviest writers (HEAVY below),
# one binary at a time, each on a fresh engine.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=${PKGS:-./...}
GOTESTFLAGS=${GOTESTFLAGS:-}
# Test binaries run at once: go's default (one per CPU). -p 4 was 11% faster on 2 cores
# (112 s against 126 s), but with the scheduler, lease and relay tests beside the store's
# races it overloaded the one DynamoDB Local they share: lease renewals and takeovers missed
# their deadlines and a full run failed where each package alone passed. One DynamoDB Local
# serves them all (one per binary took 118 s and doubled the load average).
TEST_P=${TEST_P:-$(nproc)}
# The parallel tests of one binary: 4 at once (httpapi's took 29 s, 41 s with 2).
TEST_PARALLEL=${TEST_PARALLEL:-4}

# The packages whose tests write the most: each runs alone on an engine of its own.
# (every send now goes through the service: accept, routing and status records; the
# packages that send hundreds of notifications through GraphQL, or hammer the store,
# belong here too).
# The root package runs whole gateway processes whose schedulers renew real-time leases: beside
# the light packages (the relay's and lease's tests now drive their workers on a fake clock, as
# fast as the engine answers), its renewals timed out and four process tests failed.
HEAVY=${HEAVY:-". ./rest/ ./service/ ./sched/ ./delivery/ ./tmpl/ ./httpapi/ ./store/ ./resolvers/"}

# run_tests P PKGS...: go test with P binaries at once.
run_tests() {
	local p=$1
	shift
	# shellcheck disable=SC2086 # GOTESTFLAGS is a word list
	go test -count=1 -race -timeout 20m -p "$p" -parallel "$TEST_PARALLEL" $GOTESTFLAGS "$@"
}

if [[ -n ${INBOX_TEST_DYNAMODB_ENDPOINT:-} ]]; then
	echo "test.sh: using DynamoDB at $INBOX_TEST_DYNAMODB_ENDPOINT" >&2
	# shellcheck disable=SC2086 # PKGS is a word list
	run_tests "$TEST_P" $PKGS
	exit
fi

tmp=$(mktemp -d)
pids=()
ins=()
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	local fd pid
	for fd in "${ins[@]}"; do
		exec {fd}>&- || true # stdin EOF: dynlocal stops the engine
	done
	for pid in "${pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if ((rc != 0)); then
		for log in "$tmp"/dynlocal*.log; do
			[[ -s $log ]] || continue
			echo "test.sh: DynamoDB Local log ($log):" >&2
			tail -n 40 "$log" >&2
		done
	fi
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

go build -o "$tmp/dynlocal" ./cmd/dynlocal

# start_engine N: starts engine N and sets endpoint to its URL and engine_in to the
# descriptor of its stdin pipe.
start_engine() {
	local n=$1 fd_in fd_out
	mkfifo "$tmp/in$n" "$tmp/out$n"
	"$tmp/dynlocal" -timeout 3m <"$tmp/in$n" >"$tmp/out$n" 2>"$tmp/dynlocal$n.log" &
	pids+=("$!")
	exec {fd_in}>"$tmp/in$n" # hold the write end of its stdin
	ins+=("$fd_in")
	engine_in=$fd_in
	exec {fd_out}<"$tmp/out$n"
	endpoint=""
	if ! read -r -t 200 endpoint <&"$fd_out" || [[ -z $endpoint ]]; then
		echo "test.sh: DynamoDB Local $n did not start" >&2
		exit 1
	fi
	exec {fd_out}<&-
	echo "test.sh: DynamoDB Local $n at $endpoint (pid ${pids[-1]})" >&2
}

# The tests must not inherit an engine's stdin pipe, or the engine would outlive a
# killed script: every run closes them ({in1}>&- and the like).
engines=${TEST_ENGINES:-}
if [[ -z $engines ]]; then
	engines=1
	[[ $PKGS == "./..." ]] && engines=2
fi

start_engine 1
first=$endpoint
in1=$engine_in
if ((engines < 2)); then
	# shellcheck disable=SC2086 # PKGS is a word list
	INBOX_TEST_DYNAMODB_ENDPOINT=$first run_tests "$TEST_P" $PKGS {in1}>&-
	exit
fi

# The packages of PKGS, split into the heavy ones and the rest.
# shellcheck disable=SC2086 # PKGS is a word list
mapfile -t all < <(go list -f '{{.Dir}}' $PKGS)
root=$(pwd)
heavy=()
light=()
for dir in "${all[@]}"; do
	rel=./${dir#"$root"/}/
	[[ $dir == "$root" ]] && rel=.
	if [[ " $HEAVY " == *" $rel "* ]]; then
		heavy+=("$rel")
	else
		light+=("$rel")
	fi
done
status=0
# The light packages first, TEST_P binaries at once on engine 1; then the heavy ones one
# binary at a time.
if ((${#light[@]})); then
	INBOX_TEST_DYNAMODB_ENDPOINT=$first run_tests "$TEST_P" "${light[@]}" {in1}>&- || status=$?
fi
# Each heavy package on an engine of its own, started for it and stopped after it: in
# one engine shared in turn, the later packages found it slow (a scheduler test's
# UpdateItem over 5 s after the REST suite's broadcasts, with nothing else running).
n=1
for pkg in "${heavy[@]}"; do
	n=$((n + 1))
	start_engine "$n"
	fd=$engine_in
	INBOX_TEST_DYNAMODB_ENDPOINT=$endpoint run_tests 1 "$pkg" {in1}>&- {fd}>&- || status=$?
	exec {fd}>&- # stdin EOF: dynlocal stops that engine
done
exit "$status"
