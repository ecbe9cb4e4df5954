# Helpers for the shell integration tests. Each test gets a private state
# dir with its own sockets, starts the real daemon and stops it at exit.
set -euo pipefail

BUILD=${1:?usage: $0 BUILD_DIR}
BUILD=$(cd "$BUILD" && pwd)
PROFILINGD=$BUILD/service/profilingd
DEMO=$BUILD/client/profiling-demo
# The programs the drivers run (tests/integration/apps) and the checkers of
# results (tests/integration/check), as built.
APPS=$BUILD/tests/integration/apps
CHECKERS=$BUILD/tests/integration/check
T=$(mktemp -d /tmp/pd-it.XXXXXX)
chmod 755 "$T" # apps under other uids reach the sockets in here
DAEMON_PID=
export PROFILINGD_SOCKET=$T/client.sock
RUNTIME_SOCKET=$T/runtime.sock

fail() { echo "FAIL: $*" >&2; [ -f "$T/daemon.log" ] && tail -n 30 "$T/daemon.log" >&2; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
pass() { echo "PASS: $*"; }

# grep -q at the end of a pipe exits at its first match, and under pipefail
# the writer's SIGPIPE then fails the test even though the line was there
# (it_jvm_heapgraph failed so in CI: "pids N" was the fifth of many lines).
# qgrep takes grep's options and reads to the end instead.
qgrep() { grep "$@" > /dev/null; }

cleanup() {
	if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kill -TERM "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
	fi
	rm -rf "$T"
}
trap cleanup EXIT

# The redactor's own user ([redact] user, service/svc_config.h SVC_REDACT_USER):
# quickstart.sh creates it; without it the daemon refuses to start, so a
# test that starts it says so and skips.
REDACT_USER=profilingd-redact
need_redact_user() {
	getent passwd "$REDACT_USER" > /dev/null ||
		skip "the redactor's user $REDACT_USER does not exist: run ./quickstart.sh, or useradd --system --no-create-home --shell /usr/sbin/nologin $REDACT_USER"
}

# start_daemon [extra config lines...]: config goes to $T/profilingd.conf
start_daemon() {
	need_redact_user
	{
		echo "[daemon]"
		echo "state_dir = $T/state"
		echo "client_socket = $PROFILINGD_SOCKET"
		echo "runtime_socket = $RUNTIME_SOCKET"
		# Tests that are not about rate limits get budgets they cannot
		# exhaust; PD_REAL_LIMITS=1 keeps the shipped defaults.
		if [ -z "${PD_REAL_LIMITS:-}" ]; then
			echo "[ratelimit]"
			for w in hour day week; do
				echo "${w}_system_cap = 1000000"
				echo "${w}_app_cap = 1000000"
			done
		fi
		for l in "$@"; do echo "$l"; done
	} > "$T/profilingd.conf"
	# Sockets left by a daemon killed with -9 exist at once: wait for this
	# one's "ready" line too.
	local ready
	ready=$(grep -c ' ready (state ' "$T/daemon.log" 2>/dev/null || true)
	"$PROFILINGD" -f -d -c "$T/profilingd.conf" >> "$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 200); do
		[ -S "$PROFILINGD_SOCKET" ] && [ -S "$RUNTIME_SOCKET" ] &&
			[ "$(grep -c ' ready (state ' "$T/daemon.log" || true)" -gt "${ready:-0}" ] && return 0
		kill -0 "$DAEMON_PID" 2>/dev/null || fail "daemon exited at start"
		sleep 0.05
	done
	fail "daemon did not create its sockets"
}

# stop_daemon: SIGTERM, expect a clean exit 0.
stop_daemon() {
	kill -TERM "$DAEMON_PID"
	local rc=0
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=
	[ "$rc" -eq 0 ] || fail "daemon exited with $rc on SIGTERM"
}

daemon_alive() { kill -0 "$DAEMON_PID" 2>/dev/null; }

# pprof_flat FILE FUNC: the flat% of FUNC in `go tool pprof -top`.
pprof_flat() {
	go tool pprof -top "$1" 2>/dev/null |
		awk -v f="$2" '$NF == f { sub("%", "", $2); print $2; found=1 } END { if (!found) print 0 }'
}

need_go() {
	command -v go >/dev/null 2>&1 || skip "go (golang-go) is not installed: no go tool pprof"
	export HOME=${HOME:-$T} GOCACHE=${GOCACHE:-$T/gocache} GOFLAGS=-mod=mod
}
