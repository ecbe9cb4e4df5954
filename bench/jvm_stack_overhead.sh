#!/usr/bin/env bash
# bench/jvm_stack_overhead: a Java workload (tests/integration/apps/java/JvmBench.java,
# 2 threads, hot:cold 3:1) unprofiled vs sampled at 100 Hz by the JVMTI agent
# through the daemon, with the AsyncGetCallTrace signal sampler (the
# default) and with the GetStackTrace sampler (sampler=thread, the peer),
# alternating runs in one invocation. Prints the rates and the costs; the
# summary line is the cost per process CPU second (goal < 1 %). Not a
# test: it asserts nothing.
#   usage: bench/jvm_stack_overhead [BUILD_DIR] [SECONDS] [PAIRS] [JDK_HOME]
set -euo pipefail
BUILD=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[ -x "$BUILD/service/profilingd" ] || BUILD=$(cd "$BUILD/build" && pwd)
SECS=${2:-5}
PAIRS=${3:-$([ -n "${PD_BENCH_QUICK:-}" ] && echo 3 || echo 5)}
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
JDK=${4:-/usr/lib/jvm/java-17-openjdk-amd64}
AGENT=$BUILD/runtime/jvmti/libprofiling_jvmti.so
CLASSES=$BUILD/tests/integration/apps/java
[ -f "$AGENT" ] && [ -f "$CLASSES/JvmBench.class" ] && [ -x "$JDK/bin/java" ] ||
	{ echo "jvm_stack_overhead: needs $AGENT, $CLASSES/JvmBench.class and $JDK"; exit 0; }
T=$(mktemp -d /tmp/pd-bench.XXXXXX)
printf '[ratelimit]\nhour_app_cap = 100000\nhour_system_cap = 100000\nday_app_cap = 100000\nday_system_cap = 100000\nweek_app_cap = 100000\nweek_system_cap = 100000\n' > "$T/bench.conf"
getent passwd profilingd-redact > /dev/null || { echo "the redactor's user profilingd-redact does not exist: run ./quickstart.sh" >&2; exit 1; }
"$BUILD/service/profilingd" -f -d -c "$T/bench.conf" -S "$T/state" --client-socket "$T/c.sock" \
	--runtime-socket "$T/r.sock" > "$T/daemon.log" 2>&1 &
DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -S "$T/c.sock" ] && [ -S "$T/r.sock" ] && break; sleep 0.05; done
export PROFILINGD_SOCKET=$T/c.sock

rate() { sed -n 's/^work_rate=//p' "$1"; }
crate() { sed -n 's/^cpu_rate=//p' "$1"; }
un=() pa=() pt=() cun=() cpa=() cpt=()
# profiled SAMPLER: one sampled run; its rates in $T/p.txt.
profiled() {
	"$JDK/bin/java" "-agentpath:$AGENT=socket=$T/r.sock,sampler=$1" -cp "$CLASSES" JvmBench "$SECS" 2 > "$T/p.txt" &
	JP=$!
	for _ in $(seq 300); do grep -q "runtime up: pid $JP " "$T/daemon.log" && break; sleep 0.05; done
	# Started at the hello, the capture covers the 2 s warm-up and the
	# measured window; the workload's 2 s tail covers a late start.
	"$BUILD/tests/integration/apps/it_request" --pid "$JP" --type stack --hz 100 \
		--duration-ms $(( (SECS + 2) * 1000 + 500 )) > "$T/res.txt" 2>&1 || echo "  (capture failed: $(cat "$T/res.txt"))"
	wait "$JP"
	sleep 1 # the daemon's redaction of the capture is over
}
for i in $(seq "$PAIRS"); do
	profiled async
	pa+=("$(rate "$T/p.txt")")
	cpa+=("$(crate "$T/p.txt")")
	"$JDK/bin/java" -cp "$CLASSES" JvmBench "$SECS" 2 > "$T/u.txt"
	un+=("$(rate "$T/u.txt")")
	cun+=("$(crate "$T/u.txt")")
	sleep 1
	profiled thread
	pt+=("$(rate "$T/p.txt")")
	cpt+=("$(crate "$T/p.txt")")
	echo "round $i: unprofiled ${un[-1]} rounds/s (${cun[-1]} per CPU s), AGCT ${pa[-1]} (${cpa[-1]}), GetStackTrace ${pt[-1]} (${cpt[-1]})"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
mu=$(median "${un[@]}")
ma=$(median "${pa[@]}")
mt=$(median "${pt[@]}")
cu=$(median "${cun[@]}")
ca=$(median "${cpa[@]}")
ct=$(median "${cpt[@]}")
awk -v u="$mu" -v a="$ma" -v t="$mt" -v cu="$cu" -v ca="$ca" -v ct="$ct" -v s="$SECS" -v n="$PAIRS" -v j="$(basename "$JDK")" 'BEGIN {
	printf "jvm_stack_overhead (%s): median of %d x %d s, 2 threads, 100 Hz\n", j, n, s
	printf "  wall clock:  unprofiled %.1f rounds/s; AGCT %.1f (slowdown %.2f %%); GetStackTrace %.1f (%.2f %%)\n", u, a, (u / a - 1) * 100, t, (u / t - 1) * 100
	printf "  process CPU: unprofiled %.1f rounds/CPU s; AGCT %.1f (cost %.2f %%); GetStackTrace %.1f (cost %.2f %%)\n", cu, ca, (cu / ca - 1) * 100, ct, (cu / ct - 1) * 100
	printf "  (on a shared machine the wall-clock rate follows the load; the CPU rate counts the agent thread too)\n"
}'
summary "JVM stack sampling cost at 100 Hz per process CPU s (AGCT vs GetStackTrace)" \
	"$(awk -v u="$cu" -v p="$ca" 'BEGIN { printf "%.2f %%", (u / p - 1) * 100 }')" "GetStackTrace" \
	"$(awk -v u="$cu" -v p="$ct" 'BEGIN { printf "%.2f %%", (u / p - 1) * 100 }')" "< 1 %"
