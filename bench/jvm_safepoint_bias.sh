#!/usr/bin/env bash
# bench/jvm_safepoint_bias: how much of a Java thread's time each sampling
# method gives a long counted loop without calls (countedLoop) and a loop of
# calls (withCalls), against the shares the workload measured itself
# (tests/integration/apps/java/SafepointBias.java). Samplers: the agent's AsyncGetCallTrace
# from signals (sampler=async, the default), per-thread GetStackTrace
# (sampler=thread, the old default) and GetAllStackTraces (sampler=all); JVMs
# with C2's counted-loop polls (default) and without
# (-XX:-UseCountedLoopSafepoints). Prints a table; asserts nothing. Summary
# lines (bench/run_all.sh): the async sampler's countedLoop share beside the
# GetStackTrace sampler's, for both flag settings, goal: the workload's own
# split within 5 points.
#   usage: bench/jvm_safepoint_bias [BUILD_DIR] [SECONDS] [JDK_HOME...]
set -euo pipefail
BUILD=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[ -x "$BUILD/service/profilingd" ] || BUILD=$(cd "$BUILD/build" && pwd)
SECS=${2:-$([ -n "${PD_BENCH_QUICK:-}" ] && echo 6 || echo 10)}
shift $(( $# > 2 ? 2 : $# ))
JDKS=${*:-/usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64}
JDK=${JDKS%% *}
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
AGENT=$BUILD/runtime/jvmti/libprofiling_jvmti.so
CLASSES=$BUILD/tests/integration/apps/java
[ -f "$AGENT" ] && [ -f "$CLASSES/SafepointBias.class" ] && [ -x "$JDK/bin/java" ] ||
	{ echo "jvm_safepoint_bias: needs $AGENT, $CLASSES/SafepointBias.class and $JDK"; exit 0; }
command -v go > /dev/null || { echo "jvm_safepoint_bias: needs go (go tool pprof)"; exit 0; }
T=$(mktemp -d /tmp/pd-bench.XXXXXX)
export HOME=${HOME:-$T} GOCACHE=${GOCACHE:-$T/gocache}
printf '[ratelimit]\nhour_app_cap = 100000\nhour_system_cap = 100000\nday_app_cap = 100000\nday_system_cap = 100000\nweek_app_cap = 100000\nweek_system_cap = 100000\n' > "$T/bench.conf"
getent passwd profilingd-redact > /dev/null || { echo "the redactor's user profilingd-redact does not exist: run ./quickstart.sh" >&2; exit 1; }
"$BUILD/service/profilingd" -f -d -c "$T/bench.conf" -S "$T/state" --client-socket "$T/c.sock" \
	--runtime-socket "$T/r.sock" > "$T/daemon.log" 2>&1 &
DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -S "$T/c.sock" ] && [ -S "$T/r.sock" ] && break; sleep 0.05; done
export PROFILINGD_SOCKET=$T/c.sock

# cum% of a function in go tool pprof -top (0 when absent).
cum() { awk -v f="$2" '$NF == f { sub("%", "", $5); print $5; found=1 } END { if (!found) print 0 }' "$1"; }

printf '%-24s %-30s %-7s %12s %10s %7s  %-26s %s\n' JDK "JVM flags" sampler countedLoop withCalls samples "top flat function" "measured by the workload"
for JDK in $JDKS; do
[ -x "$JDK/bin/java" ] || { echo "$JDK: not installed"; continue; }
for flags in "" "-XX:-UseCountedLoopSafepoints"; do
	declare -A share=()
	for sampler in async thread all; do
		"$JDK/bin/java" $flags "-agentpath:$AGENT=socket=$T/r.sock,sampler=$sampler" \
			-cp "$CLASSES" SafepointBias "$SECS" 1500 > "$T/out.txt" &
		JP=$!
		for _ in $(seq 300); do grep -q "runtime up: pid $JP " "$T/daemon.log" && break; sleep 0.05; done
		sleep 1 # past the JIT's first compilations
		res=$("$BUILD/tests/integration/apps/it_request" --pid "$JP" --type stack --hz 100 \
			--duration-ms $(( (SECS - 2) * 1000 ))) || res=
		wait "$JP"
		truth=$(sed -n 's/^truth //p' "$T/out.txt")
		if [ -z "$res" ]; then
			printf '%-24s %-30s %-7s capture failed\n' "$(basename "$JDK")" "${flags:-(default)}" "$sampler"
			continue
		fi
		go tool pprof -top "$res" > "$T/top.txt" 2>/dev/null
		n=$(grep -c . "$T/top.txt" || true)
		samples=$(go tool pprof -raw "$res" 2>/dev/null | awk '/^Samples:/ { on=1; next } on && /^ *[0-9]+ / { s += $1 } END { print s + 0 }')
		top=$(awk '/flat%/ { getline; print $2 " " $NF; exit }' "$T/top.txt")
		c=$(cum "$T/top.txt" SafepointBias.countedLoop)
		printf '%-24s %-30s %-7s %11s%% %9s%% %7s  %-26s %s\n' "$(basename "$JDK")" "${flags:-(default)}" "$sampler" \
			"$c" "$(cum "$T/top.txt" SafepointBias.withCalls)" \
			"$samples" "$top" "$truth"
		share[$sampler]=$c
		share[${sampler}_truth]=$(sed -n 's/^truth countedLoop=\([0-9.]*\)%.*/\1/p' "$T/out.txt")
	done
	# The new sampler beside the old one, against the workload's own split.
	summary "safepoint bias $(basename "$JDK") ${flags:-default flags}: countedLoop share, AsyncGetCallTrace vs GetStackTrace" \
		"${share[async]:-?} %" "GetStackTrace" "${share[thread]:-?} %" \
		"${share[async_truth]:-?} % +- 5 (the workload's own; ${share[thread_truth]:-?} % in the peer's run)"
	unset share
done
done
