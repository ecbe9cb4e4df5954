#!/usr/bin/env bash
# bench/jvm_heapdump.sh [BUILD_DIR] [OBJECTS] [ROUNDS]
# Heap dump of a JVM holding OBJECTS (1M) small objects, three ways, in one
# run: `jcmd GC.heap_dump` directly (the peer), through profilingd's attach
# path (GC.heap_dump + Thread.print + redaction + delivery), and through
# the profilingd JVMTI agent ([jvm] heap_dump_via_agent: dumpHeap over JNI,
# then redaction + delivery). Prints the end-to-end time, the VM's pause
# (the longest stall of a 1 ms ticker thread), and the dump's size, median
# of ROUNDS (3). A benchmark: it prints, never fails a build.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
if [ -n "${PD_BENCH_QUICK:-}" ]; then N=${2:-300000} ROUNDS=${3:-1}; else N=${2:-1000000} ROUNDS=${3:-3}; fi
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
J=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
[ -x "$J/bin/java" ] || { echo "no JDK at $J (set JAVA_HOME)"; exit 0; }
T=$(mktemp -d /tmp/pd-bench-jvm.XXXXXX)
chmod 755 "$T"
DPID= JP=
cleanup() {
	[ -n "$JP" ] && kill "$JP" 2>/dev/null
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
"$J/bin/javac" -d "$T" "$ROOT/bench/java/HeapBench.java" || exit 0
export PROFILINGD_SOCKET=$T/client.sock
cat > "$T/pd.conf" <<CONF
[daemon]
state_dir = $T/state
client_socket = $T/client.sock
runtime_socket = $T/runtime.sock
[limits]
max_result_bytes = 8589934592
[ratelimit]
exempt_app = uid:0
CONF
start_pd() { # extra config lines
	[ -n "$DPID" ] && kill "$DPID" 2>/dev/null && wait "$DPID" 2>/dev/null
	{ cat "$T/pd.conf"; printf '%s\n' "$@"; } > "$T/pd-run.conf"
	rm -f "$T/client.sock"
	getent passwd profilingd-redact > /dev/null || { echo "the redactor's user profilingd-redact does not exist: run ./quickstart.sh" >&2; exit 1; }
	"$BUILD/service/profilingd" -f -c "$T/pd-run.conf" >> "$T/daemon.log" 2>&1 &
	DPID=$!
	for _ in $(seq 100); do [ -S "$T/client.sock" ] && break; sleep 0.05; done
}
start_pd

ms() { date +%s%3N; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
maxgap() { awk -v from="$1" 'NR > from && $1 == "gap" && $2 > m { m = $2 } END { print m + 0 }' "$T/vm.out"; }

start_vm() { # extra JVM options
	"$J/bin/java" -Xmx2g "$@" -cp "$T" HeapBench "$N" > "$T/vm.out" 2>&1 &
	JP=$!
	for _ in $(seq 600); do grep -q ready "$T/vm.out" && return 0; sleep 0.1; done
	echo "the JVM did not start"; exit 0
}

# run NAME CMD...: ROUNDS timings of CMD; prints "NAME time pause size".
run() {
	local name=$1; shift
	local times=() pauses=() size=0
	for _ in $(seq "$ROUNDS"); do
		local lines t0 t1 out
		lines=$(wc -l < "$T/vm.out")
		t0=$(ms)
		out=$("$@" 2>>"$T/errors") || { echo "$name: failed ($(tail -1 "$T/errors"))"; return; }
		t1=$(ms)
		sleep 0.2
		times+=($((t1 - t0)))
		pauses+=("$(maxgap "$lines")")
		[ -f "$out" ] && size=$(stat -c %s "$out") && rm -f "$out"
	done
	TIME=$(printf '%s\n' "${times[@]}" | median) PAUSE=$(printf '%s\n' "${pauses[@]}" | median)
	printf '%-34s %8s ms %8s ms %10s MB\n' "$name" "$TIME" "$PAUSE" "$((size / 1000000))"
}

jcmd_dump() {
	local f=$T/jcmd-$RANDOM.hprof
	"$J/bin/jcmd" "$JP" GC.heap_dump "$f" > /dev/null && echo "$f"
}
pd_dump() { "$BUILD/tests/integration/apps/it_request" --pid "$JP" --type heapdump; }

echo "JVM heap dump, $N objects, $("$J/bin/java" -version 2>&1 | sed -n 1p), median of $ROUNDS"
echo "$(nproc) cores, $(uname -r)"
printf '%-34s %11s %11s %13s\n' "" "time" "VM pause" "size"
start_vm
TIME=- PAUSE=-
run "jcmd GC.heap_dump (peer)" jcmd_dump
JT=$TIME JP_PAUSE=$PAUSE
TIME=- PAUSE=-
run "profilingd (attach, redacted)" pd_dump
summary "JVM heap dump of $N objects via attach, end to end" "$TIME ms" "jcmd $JT ms" "-"
summary "JVM pause during that dump" "$PAUSE ms" "jcmd $JP_PAUSE ms" "-"
kill "$JP"; wait "$JP" 2>/dev/null
AGENT=$BUILD/runtime/jvmti/libprofiling_jvmti.so
if [ -f "$AGENT" ]; then
	start_pd "[jvm]" "heap_dump_via_agent = true"
	start_vm "-agentpath:$AGENT=socket=$T/runtime.sock"
	for _ in $(seq 100); do grep -q "runtime up: pid $JP " "$T/daemon.log" && break; sleep 0.1; done
	TIME=- PAUSE=-
	run "profilingd (JVMTI agent, redacted)" pd_dump
	summary "JVM heap dump of $N objects via the agent, end to end" "$TIME ms" "jcmd $JT ms" "-"
	summary "JVM pause during the agent's dump" "$PAUSE ms" "jcmd $JP_PAUSE ms" "-"
else
	echo "profilingd (JVMTI agent)           n/a (no $AGENT)"
fi
grep -o "dump_ms=[0-9]* print_ms=[0-9]*" "$T/daemon.log" | tail -3 | sed 's/^/helper: /'
