#!/usr/bin/env bash
# Java heap OOM: OomFill (-Xmx32m) fills its heap once the agent is
# connected. The agent's ResourceExhausted handler must send
# RuntimeEvent{kind 1, hold} to the daemon (its log line) and hold the
# thread until EventDone or oom_hold_ms; the JVM must still exit after. On
# each JDK present.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
start_daemon

for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	rm -f "$T/go"
	jvm_start "$jdk" "oom-$name" -Xmx32m \
		"-agentpath:$AGENT=socket=$RUNTIME_SOCKET,oom_hold_ms=1500,debug=1" -cp "$CLASSES" OomFill "$T/go"
	wait_runtime "$JPID"
	touch "$T/go"
	rc=
	for _ in $(seq 1200); do
		kill -0 "$JPID" 2>/dev/null || { rc=0; wait "$JPID" || rc=$?; break; }
		sleep 0.1
	done
	[ -n "$rc" ] || fail "$name: the JVM did not exit after its OOM (hold not released?)"
	echo "$name: JVM exited with $rc"
	grep -q "OutOfMemoryError" "$T/oom-$name.err" || { tail "$T/oom-$name.err"; fail "$name: no OutOfMemoryError"; }
	grep -q "JVM pid $JPID ran out of Java heap" "$T/daemon.log" ||
		fail "$name: the daemon never heard of the OOM"
	grep -q "Java heap exhausted" "$T/oom-$name.err" || fail "$name: the agent did not hold the OOM"
	how=$(sed -n 's/.*OOM hold released: //p' "$T/oom-$name.err" | sed -n 1p)
	[ -n "$how" ] || { tail "$T/oom-$name.err"; fail "$name: the hold was never released"; }
	echo "$name: RuntimeEvent reached the daemon; hold released: $how"
	n=$(grep -c "Java heap exhausted" "$T/oom-$name.err")
	[ "$n" -eq 1 ] || fail "$name: $n holds in one 60 s window, want 1"
done

# -XX:+ExitOnOutOfMemoryError exits inside HotSpot's OOM report, before
# ResourceExhausted is posted: no event, no hold (docs/JVMTI.md).
jdk=${JDKS# }; jdk=${jdk%% *}
rm -f "$T/go"
jvm_start "$jdk" oom-exit -Xmx32m -XX:+ExitOnOutOfMemoryError \
	"-agentpath:$AGENT=socket=$RUNTIME_SOCKET,oom_hold_ms=1500,debug=1" -cp "$CLASSES" OomFill "$T/go"
wait_runtime "$JPID"
touch "$T/go"
rc=0
wait "$JPID" || rc=$?
echo "with -XX:+ExitOnOutOfMemoryError: exit $rc"
[ "$rc" -eq 3 ] || { tail "$T/oom-exit.err"; fail "ExitOnOutOfMemoryError: exit $rc, want 3"; }
! grep -q "JVM pid $JPID ran out of Java heap" "$T/daemon.log" ||
	fail "ExitOnOutOfMemoryError: the event reached the daemon after all (update docs/JVMTI.md)"
! grep -q "Java heap exhausted" "$T/oom-exit.err" || fail "ExitOnOutOfMemoryError: the agent held"
stop_daemon
pass "Java OOM events reach the daemon, holds are released, JVMs exit, on:$JDKS"
