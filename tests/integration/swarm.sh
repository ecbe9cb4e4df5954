#!/usr/bin/env bash
# A 1,620-client malicious swarm against the real daemon (it_swarm.c), then
# a real capture. The daemon runs with the usual soft fd limit of 1024, as
# systemd starts services: it must still serve its max_clients. Then its
# fd limit is cut to 256 under it: it must pause accepting, not spin.
. "$(dirname "$0")/lib.sh"
IT=$APPS/it_swarm
[ "$(id -u)" -eq 0 ] || skip "needs root (the swarm runs under many uids)"
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] || [ "$hard" -ge 4096 ] || skip "hard fd limit $hard is below 4096"
ulimit -Sn 1024
# 1,080 valid clients are held at once: room for them and the test's own.
start_daemon "[capture]" "runtime_wait_ms = 0" "[limits]" "max_clients = 2048"

# Warm up (the first capture opens what the daemon keeps open), then swarm.
"$DEMO" --threads 1 --duration-ms 300 > "$T/demo1.out" 2> "$T/demo1.err" ||
	{ cat "$T/demo1.err" >&2; fail "capture before the swarm failed"; }
"$IT" "$DAEMON_PID" "$PROFILINGD_SOCKET" "$RUNTIME_SOCKET" 64 || fail "swarm checks"
daemon_alive || fail "daemon died"

# Out of fds: a hard limit under the caps that the daemon cannot raise
# (prlimit from outside, after its start). It must pause accept, not spin.
prlimit --pid "$DAEMON_PID" --nofile=256:256 || fail "prlimit"
"$IT" exhaust "$DAEMON_PID" "$PROFILINGD_SOCKET" "$T/daemon.log" || fail "out-of-fds checks"
daemon_alive || fail "daemon died"

# The daemon still serves a normal request: a real capture is delivered.
out=$("$DEMO" --threads 1 --duration-ms 300 2> "$T/demo2.err") ||
	{ cat "$T/demo2.err" >&2; fail "capture after the swarm failed"; }
[ -s "$out" ] || fail "capture after the swarm: '$out' is not a file"
echo "capture after the swarm: $out ($(stat -c %s "$out") bytes)"
n=$(grep -c "closing client peer" "$T/daemon.log" || true)
echo "daemon log: $n client peers closed, $(grep -c "closing runtime peer" "$T/daemon.log" || true) runtime peers closed"
stop_daemon
pass "1,620-client swarm: daemon alive, capture delivered, no fd leak, RSS bounded, per-uid cap held, out of fds handled"
