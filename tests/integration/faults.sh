#!/usr/bin/env bash
# Bad input and faults against the real daemon (it_faults.c plays the peers).
. "$(dirname "$0")/lib.sh"
IT=$APPS/it_faults
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
PROFILING_NO_AGENT=1 "$IT" runtime-killed || fail "runtime-killed"
"$IT" wrong-pid || fail "wrong-pid"
grep -q "claims pid" "$T/daemon.log" || fail "wrong pid not logged"
PROFILING_NO_AGENT=1 "$IT" no-runtime || fail "no-runtime"
PROFILING_NO_AGENT=1 "$IT" cancel || fail "cancel"
PROFILING_NO_AGENT=1 "$IT" garbage || fail "garbage"
ls "$T/state/raw" | qgrep . && fail "raw artifact kept after a failed redaction"
ls -a "$T/state/results/"* 2>/dev/null | qgrep "^.tmp-" && fail "temp result left behind"
PROFILING_NO_AGENT=1 "$IT" queued || fail "queued"
PROFILING_NO_AGENT=1 "$IT" nonblock-app || fail "nonblock-app"
PROFILING_NO_AGENT=1 "$IT" hung-daemon "$T" || fail "hung-daemon"
daemon_alive || fail "daemon died"
stop_daemon

# The redactor's caps: past its time it is killed; past its memory it fails.
# Writing the bomb takes seconds on a loaded machine: a long runtime deadline.
start_daemon "[redact]" "timeout_ms = 100" "[capture]" "deadline_grace_ms = 120000"
PROFILING_NO_AGENT=1 IT_WANT="killed after 100 ms" "$IT" bomb || fail "redactor time cap"
stop_daemon
# Under sanitizers there is no address-space cap: the redactor then chews
# on the bomb until its time cap, kept short so the result comes in time.
start_daemon "[redact]" "max_memory_bytes = 33554432" "timeout_ms = 30000" \
	"[capture]" "deadline_grace_ms = 120000"
want="Cannot allocate memory"
[ -n "${PD_SANITIZE:-}" ] && want= # no address-space cap under sanitizers
PROFILING_NO_AGENT=1 IT_WANT="$want" "$IT" bomb || fail "redactor memory cap"
stop_daemon
pass "fault scenarios"
