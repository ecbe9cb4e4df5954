#!/usr/bin/env bash
# ht_oom_tid (issue #20): an OOM event names the thread whose allocation
# failed; a heap graph marks that thread's stack as the OOM's. A runtime is
# the app's own word, so the daemon keeps the tid only when it is one of
# the runtime's own threads (/proc/<pid>/task/<tid>). Attacker A (its own
# uid each time, so no trigger cooldown is shared) sends:
#   1. the tid of a process of another user (a victim's sleeping process);
#   2. a tid no thread has, near 2^32;
#   3. the daemon's own pid;
# each must be logged as "not one of its threads: ignored" and never kept,
# and its capture must still be delivered. Then the friendly case: a
# second thread of its own is kept ("the OOM's failing thread is T").
. "$(dirname "$0")/lib.sh"
PROG=$HOSTILE/hostile_oom_tid
V=$(make_user oomvic)
start_daemon
as_uid "$V" sleep 300 &
VPID=$!

# attack WHAT TID N: run the attacker as a fresh user; sets pid and tid.
attack() {
	local what=$1 u out
	u=$(make_user "oomatt$3")
	out=$(as_uid "$u" env PROFILINGD_RUNTIME_SOCKET="$RUNTIME_SOCKET" PROFILING_NO_AGENT=1 \
		"$PROG" "$2" 2> "$T/att$3.err") ||
		{ cat "$T/att$3.err"; fail "$what: the attacker could not run"; }
	pid=$(echo "$out" | awk '{print $2}')
	tid=$(echo "$out" | awk '{print $4}')
	[ -n "$pid" ] && [ -n "$tid" ] || fail "$what: the attacker said: $out"
}

for c in "victim:$VPID:1" "huge:4294967294:2" "daemon:$DAEMON_PID:3"; do
	IFS=: read -r what t n <<< "$c"
	attack "$what" "$t" "$n"
	grep -q "failing thread is $tid of pid $pid\$" "$T/daemon.log" &&
		fail "$what: the daemon kept thread $tid, not one of pid $pid's, as its OOM's"
	grep -q "pid $pid named thread $tid as its OOM's, which is not one of its threads: ignored" \
		"$T/daemon.log" || fail "$what: no refusal of thread $tid logged for pid $pid"
	echo "ok: $what: thread $tid named by pid $pid was ignored"
done

attack self self 4
grep -q "failing thread is $tid of pid $pid\$" "$T/daemon.log" ||
	fail "a runtime's own second thread $tid was not kept as its OOM's"
pass "foreign, made-up and the daemon's tids ignored; the runtime's own thread $tid kept"
kill "$VPID" 2>/dev/null || true
stop_daemon
