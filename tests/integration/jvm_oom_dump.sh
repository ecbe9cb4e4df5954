#!/usr/bin/env bash
# it_jvm_oom_dump: a JVM with -Xmx64m fills its heap; the JVMTI agent's
# ResourceExhausted event fires a system OOM trigger matched by main class
# (java_main = OomFill); the daemon takes a heap dump through the attach
# protocol while the agent holds the OOM thread, releases it (EventDone),
# and the JVM exits only afterwards. The dump is stored for the app, parses,
# and holds the byte[] chunks that filled the heap. Then the same without a
# trigger: the hold is released at once and the JVM exits with its OOM.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run the JVM as another uid"
U=61022
# The JVM runs as another uid: the agent and the classes must be reachable
# by it wherever the build tree is (a clone under /root is not).
mkdir -p "$T/jvmti" "$T/classes"
cp "$AGENT" "$T/jvmti/" && cp "$CLASSES"/*.class "$T/classes/"
chmod -R a+rX "$T/jvmti" "$T/classes"
AGENT=$T/jvmti/$(basename "$AGENT") CLASSES=$T/classes

start_daemon "[trigger.javaoom]" "type = oom" "java_main = OomFill"
for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	go=$T/go-$name
	setpriv --reuid=$U --regid=$U --clear-groups "$jdk/bin/java" -Xmx64m \
		"-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$CLASSES" OomFill "$go" \
		> "$T/oom-$name.out" 2> "$T/oom-$name.err" &
	JPID=$!
	JPIDS="$JPIDS $JPID"
	wait_runtime "$JPID"
	before=$(ls "$T/state/results/$U" 2>/dev/null | grep -c '\.hprof$' || true)
	# The trigger matched at exec, by main class.
	touch "$go"; chmod 666 "$go"
	rc=0
	for _ in $(seq 1200); do kill -0 "$JPID" 2>/dev/null || break; sleep 0.1; done
	wait "$JPID" || rc=$?
	kill -0 "$JPID" 2>/dev/null && fail "$name: the JVM did not exit after its OOM"
	grep -q "JVM pid $JPID ran out of Java heap" "$T/daemon.log" || fail "$name: no OOM event from the agent"
	grep -q "oom trigger of sys:javaoom fired for pid $JPID" "$T/daemon.log" ||
		fail "$name: the system OOM trigger did not fire"
	grep -q "JVM heap dump of pid $JPID: ok" "$T/daemon.log" ||
		fail "$name: no heap dump was taken while the JVM lived"
	grep -q "OutOfMemoryError" "$T/oom-$name.err" || fail "$name: the JVM did not end with its OOM"
	f=
	for _ in $(seq 100); do
		f=$(ls -t "$T/state/results/$U"/*.hprof 2>/dev/null | sed -n 1p || true)
		[ -n "$f" ] && [ "$(ls "$T/state/results/$U" | grep -c '\.hprof$')" -gt "$before" ] && break
		sleep 0.1
	done
	[ -n "$f" ] || fail "$name: no heap dump stored for uid $U"
	facts=$("$CHECKERS/hprof_check" "$f" '[B') || fail "$name: the OOM dump does not parse"
	chunks=$(echo "$facts" | awk '$1 == "instances" { print $3 }')
	# 64 MiB of 256 KiB arrays: the heap was full when it was dumped.
	[ "$chunks" -ge 100 ] || fail "$name: only $chunks byte[] in the OOM dump"
	echo "$facts" | qgrep '^thread main ' || fail "$name: no main thread stack in the OOM dump"
	pass "$name: OOM -> heap dump ($(stat -c %s "$f") bytes, $chunks byte[]) before the JVM exited (rc $rc)"
done
stop_daemon

# No trigger for it: the agent's hold is released at once.
start_daemon
jdk=${JDKS%% *}; jdk=${JDKS# }; jdk=${jdk%% *}
go=$T/go-none
"$jdk/bin/java" -Xmx32m "-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$CLASSES" OomFill "$go" \
	> "$T/none.out" 2> "$T/none.err" &
JPID=$!
JPIDS="$JPIDS $JPID"
wait_runtime "$JPID"
t0=$(date +%s)
touch "$go"
wait "$JPID" || true
t1=$(date +%s)
grep -q "pid $JPID has no OOM trigger" "$T/daemon.log" || fail "no-trigger OOM not seen by the daemon"
# The agent's own hold limit is 60 s: an exit well before it was EventDone.
[ $((t1 - t0)) -lt 45 ] || fail "the JVM was held $((t1 - t0)) s without a trigger"
pass "no OOM trigger: the hold was released and the JVM exited after $((t1 - t0)) s"
stop_daemon
