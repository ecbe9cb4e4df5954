#!/usr/bin/env bash
# bench/heap_overhead: malloc_bench (many small allocations and frees, sizes
# 16 B..16 KiB) unprofiled, with libprofiling_preload.so loaded but idle,
# sampling from start under LD_PRELOAD (PROFILING_HEAP_FROM_START=1, no
# daemon needed), and under heaptrack. Runs alternate within each round;
# medians of wall and CPU time (user+sys, children included: heaptrack's
# interpreter process counts). Goals: sampling < 1.5x unprofiled, and at
# most a third of heaptrack's slowdown. Not a test: it asserts nothing.
#   usage: bench/heap_overhead [BUILD_DIR] [ROUNDS] [OPS] [THREADS] [INTERVAL]
set -euo pipefail
# One machine-readable figure for bench/run_all.sh (see its header).
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
BUILD=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[ -x "$BUILD/bench/malloc_bench" ] || BUILD=$(cd "$BUILD/build" && pwd)
ROUNDS=${2:-${PD_BENCH_QUICK:+2}}
ROUNDS=${ROUNDS:-5}
OPS=${3:-${PD_BENCH_QUICK:+2000000}}
OPS=${OPS:-5000000}
THREADS=${4:-1}
INTERVAL=${5:-4096}
BENCH=$BUILD/bench/malloc_bench
PRELOAD=$BUILD/client/libprofiling_preload.so
[ -x "$BENCH" ] && [ -f "$PRELOAD" ] || { echo "build malloc_bench and profiling_preload first" >&2; exit 1; }
HEAPTRACK=$(command -v heaptrack || true)
if [ -z "$HEAPTRACK" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	apt-get install -y heaptrack > /dev/null 2>&1 || true
	HEAPTRACK=$(command -v heaptrack || true)
fi
T=$(mktemp -d /tmp/pd-heapbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
# No daemon: the agent finds no socket and leaves; sampling goes on.
export PROFILINGD_RUNTIME_SOCKET=$T/none.sock

# run NAME CMD...: append "wall cpu" of one run to $T/NAME.
run() {
	local name=$1
	shift
	/usr/bin/time -f "%e %U %S" -o "$T/time" "$@" --threads "$THREADS" --ops "$OPS" > "$T/out" 2> "$T/err" ||
		{ cat "$T/err" >&2; echo "$name failed" >&2; exit 1; }
	awk '{ printf "%s %.3f\n", $1, $2 + $3 }' "$T/time" >> "$T/$name"
}

configs="plain idle sampling"
[ -n "$HEAPTRACK" ] && configs="$configs heaptrack"
for i in $(seq "$ROUNDS"); do
	run plain "$BENCH"
	run idle env LD_PRELOAD="$PRELOAD" "$BENCH"
	run sampling env LD_PRELOAD="$PRELOAD" PROFILING_HEAP_FROM_START=1 \
		PROFILING_HEAP_INTERVAL="$INTERVAL" "$BENCH"
	if [ -n "$HEAPTRACK" ]; then
		run heaptrack "$HEAPTRACK" -o "$T/ht" "$BENCH"
		rm -f "$T"/ht*
	fi
	echo "round $i: $(for c in $configs; do printf '%s %ss  ' "$c" "$(tail -n 1 "$T/$c" | cut -d' ' -f1)"; done)"
done

# median FILE COLUMN
median() { cut -d' ' -f"$2" "$1" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "heap_overhead: malloc_bench, $THREADS thread(s) x $OPS ops, interval $INTERVAL B, median of $ROUNDS"
printf '  %-10s %8s %8s %8s %8s\n' config wall_s cpu_s wall_x cpu_x
pw=$(median "$T/plain" 1)
pc=$(median "$T/plain" 2)
for c in $configs; do
	w=$(median "$T/$c" 1)
	u=$(median "$T/$c" 2)
	awk -v c="$c" -v w="$w" -v u="$u" -v pw="$pw" -v pc="$pc" 'BEGIN {
		printf "  %-10s %8.3f %8.3f %7.2fx %7.2fx\n", c, w, u, w / pw, u / pc }'
	printf '%s\n' "$(awk -v w="$w" -v pw="$pw" 'BEGIN { print w / pw }')" > "$T/$c.wx"
	printf '%s\n' "$(awk -v u="$u" -v pc="$pc" 'BEGIN { print u / pc }')" > "$T/$c.cx"
done
s=$(cat "$T/sampling.cx")
awk -v s="$s" 'BEGIN { printf "  sampling: %.2fx CPU (goal < 1.5x)\n", s }'
if [ -n "$HEAPTRACK" ]; then
	h=$(cat "$T/heaptrack.cx")
	awk -v s="$s" -v h="$h" 'BEGIN {
		printf "  slowdown (x - 1): sampling %.2f, heaptrack %.2f: %.1f%% of heaptrack'"'"'s (goal <= 33%%)\n",
			s - 1, h - 1, (h > 1 ? (s - 1) / (h - 1) * 100 : 0) }'
else
	echo "  heaptrack not installed: no comparison"
fi
summary "heap profiling: CPU of malloc_bench ($THREADS thread, $OPS ops, 1 in $INTERVAL B), x unprofiled" \
	"$(awk -v s="$s" 'BEGIN { printf "%.2fx", s }')" heaptrack \
	"$([ -n "$HEAPTRACK" ] && awk -v h="$(cat "$T/heaptrack.cx")" 'BEGIN { printf "%.2fx", h }' || echo -)" \
	"< 1.5x, and <= 1/3 of heaptrack's slowdown"
