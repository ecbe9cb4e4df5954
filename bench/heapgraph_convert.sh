#!/usr/bin/env bash
# bench/heapgraph_convert.sh [BUILD_DIR] [OBJECTS] [ROUNDS]
# Heap formats (issue #20): the HPROF -> Perfetto heap graph converter on
# a real dump. A JVM holds OBJECTS (1M) small objects (HeapGraphCounts:
# 2/3 Alpha, 1/3 Beta -> Alpha); `jcmd GC.heap_dump` writes its HPROF; then
# profilingd-redact converts it (--format heapgraph) and, for comparison,
# redacts it as HPROF (--format hprof, the default format's path). Prints
# the conversion's throughput in MB/s of HPROF, its peak RSS, and the
# output's size against the redacted HPROF's; the best of ROUNDS (3).
# A benchmark: it prints, never fails a build.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
if [ -n "${PD_BENCH_QUICK:-}" ]; then N=${2:-300000} ROUNDS=${3:-1}; else N=${2:-1000000} ROUNDS=${3:-3}; fi
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
J=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
[ -x "$J/bin/java" ] || { echo "no JDK at $J (set JAVA_HOME)"; exit 0; }
[ -x /usr/bin/time ] || { echo "no /usr/bin/time (package time)"; exit 0; }
REDACT=$BUILD/redact/profilingd-redact
T=$(mktemp -d /tmp/pd-bench-hg.XXXXXX)
JP=
cleanup() {
	[ -n "$JP" ] && kill "$JP" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
"$J/bin/javac" -d "$T" "$ROOT/tests/integration/apps/java/HeapGraphCounts.java" || exit 1
A=$((N * 2 / 3)) B=$((N - N * 2 / 3))
"$J/bin/java" -Xmx1g -cp "$T" HeapGraphCounts $A $B benchsecret 600 > "$T/app.out" 2>&1 &
JP=$!
for _ in $(seq 600); do grep -q ready "$T/app.out" && break; sleep 0.1; done
grep -q ready "$T/app.out" || { echo "the JVM did not start"; exit 1; }
"$J/bin/jcmd" $JP GC.heap_dump "$T/dump.hprof" > /dev/null || exit 1
kill $JP; wait $JP 2>/dev/null; JP=
in=$(stat -c %s "$T/dump.hprof")

# run FORMAT OUT: "seconds maxrss_kb" of one conversion.
run() {
	/usr/bin/time -f '%e %M' -o "$T/time" "$REDACT" --format "$1" --pids 1 --allow-root \
		< "$T/dump.hprof" > "$2" 2> /dev/null || return 1
	cat "$T/time"
}
best_s= best_kb= hbest_s= hbest_kb=
for _ in $(seq "$ROUNDS"); do
	read -r s kb < <(run heapgraph "$T/out.pt") || { echo "conversion failed"; exit 1; }
	[ -z "$best_s" ] || awk -v a="$s" -v b="$best_s" 'BEGIN { exit !(a < b) }' && best_s=$s best_kb=$kb
	read -r s kb < <(run hprof "$T/out.hprof") || { echo "HPROF redaction failed"; exit 1; }
	[ -z "$hbest_s" ] || awk -v a="$s" -v b="$hbest_s" 'BEGIN { exit !(a < b) }' && hbest_s=$s hbest_kb=$kb
done
out=$(stat -c %s "$T/out.pt") hout=$(stat -c %s "$T/out.hprof")
objs=$("$BUILD/tests/integration/check/heapgraph_check" "$T/out.pt" 2> /dev/null |
	awk '$1 == "objects" { print $2 }')
mbs=$(awk -v b="$in" -v s="$best_s" 'BEGIN { printf "%.0f", (s > 0 ? b / 1e6 / s : 0) }')
hmbs=$(awk -v b="$in" -v s="$hbest_s" 'BEGIN { printf "%.0f", (s > 0 ? b / 1e6 / s : 0) }')
ratio=$(awk -v a="$out" -v b="$hout" 'BEGIN { printf "%.2f", a / b }')
echo "heap dump: $N objects asked, ${objs:-?} in the graph; HPROF $in B"
echo "heapgraph: ${best_s} s, $mbs MB/s of HPROF, peak RSS $((best_kb / 1024)) MiB, output $out B"
echo "hprof redaction: ${hbest_s} s, $hmbs MB/s, peak RSS $((hbest_kb / 1024)) MiB, output $hout B"
echo "heap graph / redacted HPROF size: $ratio"
summary "heap graph conversion ($N objects)" "$mbs MB/s" "HPROF redaction" "$hmbs MB/s" "-"
summary "heap graph conversion peak RSS" "$((best_kb / 1024)) MiB" "HPROF redaction" \
	"$((hbest_kb / 1024)) MiB" "-"
summary "heap graph size vs redacted HPROF" "$ratio x" "-" "-" "-"
