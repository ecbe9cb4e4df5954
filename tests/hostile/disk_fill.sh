#!/usr/bin/env bash
# Attack: disk fill through the raw and crash fds (issue 14 item 4). An
# unprivileged app, playing its own runtime, tries fallocate/ftruncate of
# 1 GiB and writes past the artifact cap on its capture fd, then the same
# on the crash fd a CRASH trigger gets. The daemon's filesystem must not
# lose that space, during the session or after it; the oversize capture
# must fail; an honest capture right after must succeed.
. "$(dirname "$0")/lib.sh"
attacker=$(make_user fill)
cap=1048576
start_daemon "[limits]" "max_result_bytes = $cap" "[capture]" "deadline_grace_ms = 5000"
env_rt=(PROFILING_NO_AGENT=1 PROFILINGD_RUNTIME_SOCKET="$RUNTIME_SOCKET")

for t in capture crash; do
	args=("$T/state")
	[ "$t" = capture ] && args+=("$cap")
	as_uid "$attacker" "${env_rt[@]}" "$HOSTILE/hostile_disk_fill" "$t" "${args[@]}" \
		> "$T/$t.out" 2>&1 && rc=0 || rc=$?
	cat "$T/$t.out"
	[ "$rc" -ne 2 ] || fail "the $t attacker could not run"
	[ "$rc" -eq 0 ] || fail "disk fill through the $t fd: $(grep 'ATTACK WORKED' "$T/$t.out" | sed -n 1p)"
done
grep -q '^capture result: 5 ' "$T/capture.out" || fail "the capture past the cap did not fail with POST_PROCESSING"
daemon_alive || fail "daemon died"
# Nothing of the attacker's is left in raw/.
left=$(du -sk "$T/state/raw" | cut -f1)
[ "$left" -lt 1024 ] || fail "raw/ holds $left KiB after the attacks"
stop_daemon

# The real agent past the cap: the daemon closes the pipe while the agent
# still writes its trace (a few hundred KiB against a 4 KiB cap and a
# 64 KiB pipe); the write fails with EPIPE and the app lives on to get the
# failure result (trace_app exits 1), never killed by SIGPIPE (141).
start_daemon "[limits]" "max_result_bytes = 4096"
"$APPS/trace_app" > "$T/app.out" 2> "$T/app.err" && rc=0 || rc=$?
cat "$T/app.err"
[ "$rc" -eq 1 ] || fail "trace_app over the cap ended with $rc, want 1 (a failure result)"
grep -q "exceeds max_result_bytes" "$T/app.err" || fail "trace_app did not get the cap's failure"
daemon_alive || fail "daemon died"
pass "disk fill: the capture and crash fds cannot grow the daemon's disk; the cap holds"
