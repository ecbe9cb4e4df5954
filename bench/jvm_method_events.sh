#!/usr/bin/env bash
# bench/jvm_method_events: what a JVM method event costs (docs/METHOD_EVENTS.md,
# "JVM targets"). tests/integration/apps/java/MethodBench.java times, on
# its own thread CPU clock, WORK calls of a method nobody hooks and HITS
# calls of MethodBench.target, in three alternating runs a round:
#   plain   no agent at all;
#   every1  the JVMTI agent with target hooked through the daemon, the
#           stack of every hit (GetStackTrace);
#   every100  the same, a stack every 100th hit (the others only counted);
#   args1   as every1 with the target spelled ...#args: its long parameter
#           goes to MethodHook.argJ after each hit (recorded for a thread's
#           first 128 hits with arguments, JVE_ARG_HITS; later hits still
#           make the call, which the hook then ignores);
#   entry   the peer, the naive way: JVMTI MethodEntry events counting the
#           target's calls (bench/jvmti/method_entry_agent.c), which runs
#           every thread interpreted: WORK/100 calls and one warm-up round,
#           compared per call.
# Prints the medians: cost per hit (goal < 10 us) and the non-target
# throughput with the hook in vs no agent (goal >= 0.99), and the same for
# MethodEntry. Then the time to install and to remove a hook (the agent's
# own measure, in its log) in a JVM with about 500 classes and in one with
# 10,000 more (apps/java/ManyClasses). Not a test: it asserts nothing.
#   usage: bench/jvm_method_events [BUILD_DIR] [ROUNDS] [HITS] [WORK] [JDK_HOME]
set -euo pipefail
BUILD=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[ -x "$BUILD/service/profilingd" ] || BUILD=$(cd "$BUILD/build" && pwd)
ROUNDS=${2:-$([ -n "${PD_BENCH_QUICK:-}" ] && echo 3 || echo 5)}
HITS=${3:-100000}   # under the daemon's method_max_hits cap (200000)
WORK=${4:-300000000}
JDK=${5:-/usr/lib/jvm/java-17-openjdk-amd64}
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
AGENT=$BUILD/runtime/jvmti/libprofiling_jvmti.so
ENTRY=$BUILD/bench/libpd_method_entry.so
WORK_E=$((WORK / 100))
CLASSES=$BUILD/tests/integration/apps/java
[ -f "$AGENT" ] && [ -f "$CLASSES/MethodBench.class" ] && [ -x "$JDK/bin/java" ] ||
	{ echo "jvm_method_events: needs $AGENT, $CLASSES/MethodBench.class and $JDK"; exit 0; }
getent passwd profilingd-redact > /dev/null || { echo "the redactor's user profilingd-redact does not exist: run ./quickstart.sh" >&2; exit 1; }
T=$(mktemp -d /tmp/pd-bench.XXXXXX)
printf '[ratelimit]\nhour_app_cap = 100000\nhour_system_cap = 100000\nday_app_cap = 100000\nday_system_cap = 100000\nweek_app_cap = 100000\nweek_system_cap = 100000\n' > "$T/bench.conf"
"$BUILD/service/profilingd" -f -d -c "$T/bench.conf" -S "$T/state" --client-socket "$T/c.sock" \
	--runtime-socket "$T/r.sock" > "$T/daemon.log" 2>&1 &
DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -S "$T/c.sock" ] && [ -S "$T/r.sock" ] && break; sleep 0.05; done
export PROFILINGD_SOCKET=$T/c.sock

wait_for() { # FILE PATTERN
	for _ in $(seq 1200); do grep -q "$2" "$1" 2> /dev/null && return 0; sleep 0.05; done
	return 1
}

# run plain|every1|every100|entry: one run; "work_ns=W hit_ns=H" on stdout.
run() {
	rm -f "$T/go"
	if [ "$1" = entry ]; then
		"$JDK/bin/java" "-agentpath:$ENTRY=MethodBench.target" -cp "$CLASSES" MethodBench \
			"$T/go" "$HITS" "$WORK_E" 1 > "$T/out" 2> "$T/err" &
		local jp=$!
		wait_for "$T/out" ready
		touch "$T/go"
		wait "$jp"
		grep work_ns "$T/out"
		return
	fi
	if [ "$1" = plain ]; then
		"$JDK/bin/java" -cp "$CLASSES" MethodBench "$T/go" "$HITS" "$WORK" > "$T/out" &
		local jp=$!
		wait_for "$T/out" ready
		touch "$T/go"
		wait "$jp"
		grep work_ns "$T/out"
		return
	fi
	"$JDK/bin/java" "-agentpath:$AGENT=socket=$T/r.sock,debug=1" -cp "$CLASSES" MethodBench \
		"$T/go" "$HITS" "$WORK" > "$T/out" 2> "$T/err" &
	local jp=$! rq
	wait_for "$T/out" ready
	wait_for "$T/daemon.log" "runtime up: pid $jp "
	local every=${1#every} meth="java:MethodBench.target(J)J"
	if [ "$1" = args1 ]; then every=1; meth="$meth#args"; fi
	"$BUILD/tests/integration/apps/it_request" --pid "$jp" --type methods --duration-ms 600000 \
		--every "$every" --method "$meth" > /dev/null 2> "$T/req.err" &
	rq=$!
	wait_for "$T/err" "method events: 1 target(s)" || echo "  (no hooks: $(cat "$T/req.err"))" >&2
	touch "$T/go"
	wait "$jp"
	kill "$rq" 2> /dev/null || true
	wait "$rq" 2> /dev/null || true
	grep work_ns "$T/out"
	sleep 0.5 # the daemon sees the process gone
}

med() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
w() { sed 's/.*work_ns=\([0-9]*\).*/\1/' "$T/$1" | med; }
h() { sed 's/.*hit_ns=\([0-9]*\).*/\1/' "$T/$1" | med; }

: > "$T/plain"; : > "$T/every1"; : > "$T/every100"; : > "$T/entry"; : > "$T/args1"
MODES="plain every1 args1 every100"
[ -f "$ENTRY" ] && MODES="$MODES entry" || echo "note: no $ENTRY: no MethodEntry comparison"
for r in $(seq "$ROUNDS"); do
	for m in $MODES; do
		run "$m" >> "$T/$m"
	done
	echo "round $r: plain $(tail -n 1 "$T/plain"); every1 $(tail -n 1 "$T/every1"); args1 $(tail -n 1 "$T/args1"); every100 $(tail -n 1 "$T/every100"); MethodEntry $(tail -n 1 "$T/entry")"
done
w0=$(w plain) h0=$(h plain) w1=$(w every1) h1=$(h every1) w2=$(w every100) h2=$(h every100) w3= h3=
ha=$(h args1)
echo "jvm_method_events ($(basename "$JDK")): median of $ROUNDS rounds, $HITS hits, $WORK non-target calls"
awk -v h0="$h0" -v h1="$h1" -v h2="$h2" -v n="$HITS" 'BEGIN {
	printf "  cost per hit, stack every hit:   %.2f us (hooked %.1f ms, plain %.3f ms for %d calls; goal < 10 us)\n",
	       (h1 - h0) / n / 1000, h1 / 1e6, h0 / 1e6, n
	printf "  cost per hit, stack every 100th: %.2f us (hooked %.1f ms)\n", (h2 - h0) / n / 1000, h2 / 1e6 }'
awk -v h0="$h0" -v h1="$h1" -v ha="$ha" -v n="$HITS" 'BEGIN {
	printf "  cost per hit, stack every hit + #args (one long): %.2f us, %+.2f us over without (hooked %.1f ms)\n",
	       (ha - h0) / n / 1000, (ha - h1) / n / 1000, ha / 1e6 }'
awk -v w0="$w0" -v w1="$w1" -v w2="$w2" 'BEGIN {
	printf "  non-target throughput, hooked / no agent: %.4f (every hit), %.4f (every 100th) (goal >= 0.99)\n",
	       w0 / w1, w0 / w2 }'
if [ -s "$T/entry" ]; then
	w3=$(w entry) h3=$(h entry)
	awk -v w0="$w0" -v w3="$w3" -v n0="$WORK" -v n3="$WORK_E" -v h0="$h0" -v h3="$h3" -v n="$HITS" 'BEGIN {
		printf "  peer, JVMTI MethodEntry (counting only, every thread interpreted): %.2f us a hit; non-target throughput %.4f of no agent (per call, %d calls)\n",
		       (h3 - h0) / n / 1000, (w0 / n0) / (w3 / n3), n3 }'
fi
summary "JVM method event cost per hit, stack every hit (bytecode injection)" \
	"$(awk -v a="$h0" -v b="$h1" -v n="$HITS" 'BEGIN { printf "%.2f us", (b - a) / n / 1000 }')" \
	"-" "-" "< 10 us"
summary "JVM method event cost per hit, stack every hit, #args (one long) vs without" \
	"$(awk -v a="$h0" -v b="$ha" -v n="$HITS" 'BEGIN { printf "%.2f us", (b - a) / n / 1000 }')" \
	"without #args" "$(awk -v a="$h0" -v b="$h1" -v n="$HITS" 'BEGIN { printf "%.2f us", (b - a) / n / 1000 }')" "< 10 us"
summary "JVM method event cost per hit, stack every 100th (vs MethodEntry events, counting)" \
	"$(awk -v a="$h0" -v b="$h2" -v n="$HITS" 'BEGIN { printf "%.2f us", (b - a) / n / 1000 }')" \
	"MethodEntry" "${h3:+$(awk -v a="$h0" -v b="$h3" -v n="$HITS" 'BEGIN { printf "%.2f us", (b - a) / n / 1000 }')}" "< 10 us"
summary "JVM non-target throughput, hooks in / no agent (vs MethodEntry events)" \
	"$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.4f", a / b }')" "MethodEntry" \
	"${w3:+$(awk -v w0="$w0" -v w3="$w3" -v n0="$WORK" -v n3="$WORK_E" 'BEGIN { printf "%.4f", (w0 / n0) / (w3 / n3) }')}" ">= 0.99"

# Install and removal times: ManyClasses defines N extra classes, then the
# agent hooks Target.register (a capture of 1 s) and logs both times.
hook_times() { # N -> "install_ms remove_ms loaded"
	rm -f "$T/stop"
	"$JDK/bin/java" "-agentpath:$AGENT=socket=$T/r.sock,debug=1" -cp "$CLASSES" ManyClasses "$1" \
		"$T/stop" > "$T/mout" 2> "$T/merr" &
	local jp=$!
	wait_for "$T/mout" ready
	wait_for "$T/daemon.log" "runtime up: pid $jp "
	"$BUILD/tests/integration/apps/it_request" --pid "$jp" --type methods --duration-ms 1000 \
		--method "java:Target.register" > /dev/null 2> "$T/req.err" || true
	touch "$T/stop"
	wait "$jp" || true
	local i r l
	i=$(sed -n 's/.*installed in \([0-9.]*\) ms over \([0-9]*\) loaded classes.*/\1/p' "$T/merr" | tail -n 1)
	l=$(sed -n 's/.*installed in \([0-9.]*\) ms over \([0-9]*\) loaded classes.*/\2/p' "$T/merr" | tail -n 1)
	r=$(sed -n 's/.*hooks removed in \([0-9.]*\) ms.*/\1/p' "$T/merr" | tail -n 1)
	echo "${i:-?} ${r:-?} ${l:-?}"
	sleep 0.5
}
: > "$T/h0"; : > "$T/h10k"
for r in $(seq "$ROUNDS"); do
	hook_times 0 >> "$T/h0"
	hook_times 10000 >> "$T/h10k"
done
i0=$(awk '{ print $1 }' "$T/h0" | med) r0=$(awk '{ print $2 }' "$T/h0" | med) l0=$(awk '{ print $3 }' "$T/h0" | med)
i1=$(awk '{ print $1 }' "$T/h10k" | med) r1=$(awk '{ print $2 }' "$T/h10k" | med) l1=$(awk '{ print $3 }' "$T/h10k" | med)
echo "  hook install / removal, $l0 loaded classes: $i0 ms / $r0 ms; $l1 loaded classes: $i1 ms / $r1 ms"
summary "JVM method events: install / removal of a hook, $l1 loaded classes" "$i1 ms / $r1 ms" \
	"$l0 classes" "$i0 ms / $r0 ms" "-"
