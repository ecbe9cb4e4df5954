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

AGENT=$BUILD/runtime/jvmti/libprofiling_jvmti.so
JAVA=$(ls /usr/lib/jvm/*/bin/java 2> /dev/null | head -n 1 || true)
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
