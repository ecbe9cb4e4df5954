#!/usr/bin/env bash
# The Android-parity parameters reach the capture (docs/ANDROID.md):
#  - buffer_fill_policy of a system trace: profilingd-ftrace runs its
#    instance with options/overwrite 0 for discard, 1 for ring (the default)
#    and says which in its status line;
#  - track_java_allocations of a JVM's heap profile: on (the default) gives
#    the JVMTI agent's sampled Java allocations, off is refused by the
#    agent, which has nothing else to record (JVM part only where a JDK,
#    the agent and the Java test programs are built).
. "$(dirname "$0")/lib.sh"
start_daemon
# A target whose runtime agent (LD_PRELOAD, client/preload.c) answers:
# sleep, or under sanitizers the instrumented spinner, since the preload
# library then needs the sanitizer runtime in the process.
TARGET=(sleep 120)
[ -n "${PD_SANITIZE:-}" ] && TARGET=("$APPS/spinner" 120)
PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET LD_PRELOAD=$BUILD/client/libprofiling_preload.so \
	"${TARGET[@]}" &
TGT=$!
for _ in $(seq 600); do
	grep -q "runtime up: pid $TGT " "$T/daemon.log" && break
	sleep 0.1
done
grep -q "runtime up: pid $TGT " "$T/daemon.log" || fail "the LD_PRELOAD agent of $TGT never said hello"

# Traces so far per fill, after each run: discard 1 0, ring 1 1, default 1 2.
n=0
declare -A seen=([discard]=0 [ring]=0)
for fill in discard ring default; do
	args=(--pid "$TGT" --type trace --duration-ms 500)
	[ "$fill" = default ] || args+=(--fill "$fill")
	out=$("$APPS/it_request" "${args[@]}" 2> "$T/req.err") ||
		{ cat "$T/req.err"; fail "system trace with fill $fill failed"; }
	[ -s "$out" ] || fail "fill $fill: no trace at '$out'"
	n=$((n + 1))
	if grep -q "no kernel sched data" "$T/daemon.log"; then
		kill "$TGT"; wait "$TGT" 2> /dev/null || true
		skip "no kernel sched data here (tracefs?): $(grep -m1 'no kernel sched data' "$T/daemon.log")"
	fi
	want=$fill
	[ "$fill" = default ] && want=ring
	seen[$want]=$((seen[$want] + 1))
	for f in discard ring; do
		got=$(grep -c "kernel sched data: ok .* fill=$f\$" "$T/daemon.log" || true)
		[ "$got" -eq "${seen[$f]}" ] ||
			fail "after fill $fill: $got traces with fill=$f, want ${seen[$f]}"
	done
done
[ "$(grep -c 'kernel sched data: ok .* fill=discard$' "$T/daemon.log")" -eq 1 ] ||
	fail "more than one trace ran with fill=discard"
# profctl request --fill (root): through the control socket to the same place.
timeout 120 "$BUILD/tools/profctl/profctl" --socket "$T/state/control.sock" request \
	--pid "$TGT" --type trace --duration 500ms --fill discard --wait > "$T/ctl.txt" ||
	{ cat "$T/ctl.txt"; fail "profctl request --fill discard failed"; }
[ "$(grep -c 'kernel sched data: ok .* fill=discard$' "$T/daemon.log")" -eq 2 ] ||
	fail "profctl request --fill discard did not reach profilingd-ftrace"
n=$((n + 1))
kill "$TGT"; wait "$TGT" 2> /dev/null || true
pass "buffer fill policy: $n system traces, discard/ring reached profilingd-ftrace"

# A system trigger ([trigger.NAME] buffer_fill_policy) carries the policy
# into its capture as a request's params do. The trigger is EXCESSIVE_CPU of
# the spinner (a path no other test's process has), so its preload agent
# has said hello when it fires: a system trigger does not wait for one.
stop_daemon
start_daemon "[trigger.fill]" "type = excessive-cpu" "exe = $APPS/spinner" "cpu_percent = 15" \
	"cpu_window_ms = 1s" "capture = trace" "duration_ms = 500" "buffer_fill_policy = discard"
"$PROFILINGD" --check-config "$T/profilingd.conf" 2> /dev/null |
	qgrep -x "buffer_fill_policy = discard" || fail "--check-config does not print buffer_fill_policy"
PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET LD_PRELOAD=$BUILD/client/libprofiling_preload.so \
	"$APPS/spinner" 120 &
TGT=$!
for _ in $(seq 600); do
	[ "$(grep -c 'kernel sched data: ok .* fill=discard$' "$T/daemon.log")" -ge 3 ] && break
	sleep 0.1
done
kill "$TGT" 2> /dev/null || true
wait "$TGT" 2> /dev/null || true
grep -q "excessive-cpu trigger of sys:fill fired for pid $TGT" "$T/daemon.log" ||
	fail "the excessive-cpu system trigger did not fire for pid $TGT"
[ "$(grep -c 'kernel sched data: ok .* fill=discard$' "$T/daemon.log")" -eq 3 ] ||
	fail "[trigger.fill] buffer_fill_policy = discard did not reach profilingd-ftrace"
pass "[trigger.fill] buffer_fill_policy = discard: the system trigger's trace ran with fill=discard"

AGENT=$BUILD/runtime/jvmti/libprofiling_jvmti.so
JAVA=$(ls /usr/lib/jvm/*/bin/java 2> /dev/null | sed -n 1p || true)
if [ ! -f "$AGENT" ] || [ ! -f "$APPS/java/HeapHog.class" ] || [ -z "$JAVA" ]; then
	echo "note: no JVMTI agent, Java test programs or JDK: track_java_allocations not tested"
	exit 0
fi
"$JAVA" "-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$APPS/java" HeapHog 60 \
	> "$T/hh.out" 2> "$T/hh.err" &
JPID=$!
for _ in $(seq 600); do
	grep -q "runtime up: pid $JPID " "$T/daemon.log" && break
	kill -0 "$JPID" 2> /dev/null || fail "JVM exited before its agent said hello"
	sleep 0.1
done
if "$APPS/it_request" --pid "$JPID" --type heap --duration-ms 500 --java-allocs off \
	> /dev/null 2> "$T/off.err"; then
	fail "track_java_allocations off gave a JVM heap profile"
fi
grep -q "invalid request: track_java_allocations is off" "$T/off.err" ||
	{ cat "$T/off.err"; fail "track_java_allocations off: not the agent's refusal"; }
out=$("$APPS/it_request" --pid "$JPID" --type heap --duration-ms 1000 --java-allocs on \
	2> "$T/on.err") || { cat "$T/on.err"; fail "track_java_allocations on failed"; }
[ -s "$out" ] || fail "track_java_allocations on: no profile at '$out'"
kill "$JPID"; wait "$JPID" 2> /dev/null || true
pass "track_java_allocations: on gives $(stat -c %s "$out") bytes of Java allocations, off is refused"

# The same switch from a system trigger ([trigger.NAME]
# track_java_allocations = off): a busy JVM whose main class matches gets
# a heap profile, and the JVM's agent refuses it as above.
stop_daemon
start_daemon "[trigger.jalloc]" "type = excessive-cpu" "java_main = HeapHog" "cpu_percent = 10" \
	"cpu_window_ms = 1s" "capture = heap" "duration_ms = 500" "track_java_allocations = off"
"$PROFILINGD" --check-config "$T/profilingd.conf" 2> /dev/null |
	qgrep -x "track_java_allocations = off" || fail "--check-config does not print track_java_allocations"
"$JAVA" "-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$APPS/java" HeapHog 60 \
	> "$T/hh2.out" 2> "$T/hh2.err" &
JPID=$!
offs() { grep -c "failed: invalid request: track_java_allocations is off" "$T/daemon.log" || true; }
before=$(offs)
for _ in $(seq 600); do
	[ "$(offs)" -gt "$before" ] && break
	kill -0 "$JPID" 2> /dev/null || fail "JVM exited before the trigger's capture"
	sleep 0.1
done
kill "$JPID" 2> /dev/null || true
wait "$JPID" 2> /dev/null || true
grep -q "excessive-cpu trigger of sys:jalloc fired for pid $JPID" "$T/daemon.log" ||
	fail "the excessive-cpu system trigger did not fire for JVM pid $JPID"
[ "$(offs)" -gt "$before" ] ||
	fail "[trigger.jalloc] track_java_allocations = off did not reach the JVM's agent"
pass "[trigger.jalloc] track_java_allocations = off: the JVM's agent refused the trigger's heap profile"
