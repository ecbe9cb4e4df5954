#!/usr/bin/env bash
# Bad input and faults against the real daemon (it_faults.c plays the peers).
. "$(dirname "$0")/lib.sh"
IT=$BUILD/tests/integration/it_faults
export PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET
start_daemon "[capture]" "deadline_grace_ms = 300" "runtime_wait_ms = 500"

"$IT" invalid || fail "invalid"
"$IT" badpeer || fail "badpeer"
# One log line per bad peer, and the daemon is still up.
n=$(grep -c "closing client peer" "$T/daemon.log" || true)
[ "$n" -ge 4 ] || fail "expected >= 4 'closing client peer' log lines, got $n"
grep -q "message over the size cap" "$T/daemon.log" || fail "oversize not logged"
PROFILING_NO_AGENT=1 "$IT" runtime-gone || fail "runtime-gone"
PROFILING_NO_AGENT=1 "$IT" runtime-hang || fail "runtime-hang"
"$IT" wrong-pid || fail "wrong-pid"
grep -q "claims pid" "$T/daemon.log" || fail "wrong pid not logged"
PROFILING_NO_AGENT=1 "$IT" no-runtime || fail "no-runtime"
PROFILING_NO_AGENT=1 "$IT" cancel || fail "cancel"
daemon_alive || fail "daemon died"
stop_daemon
pass "fault scenarios"
