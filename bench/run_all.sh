#!/usr/bin/env bash
# bench/run_all.sh: every benchmark in one run, and bench/RESULTS.md with
# the figures, the peers' figures measured in the same run, their ratio,
# the goals, and the machine. Benchmarks print; they never assert.
#   usage: bench/run_all.sh [--quick] [--out FILE] [BUILD_DIR]
#   --quick   shorter runs (about 10 minutes on 2 cores); default: full
#   --out     where the table goes (default: bench/RESULTS.md)
#
# The convention a benchmark script bench/NAME.sh follows to be picked up:
#   - $1 is the build dir (the default when it is missing: ../build);
#   - it prints its figures for people, and asserts nothing;
#   - PD_BENCH_QUICK=1 in its environment asks for its short defaults;
#   - when PD_BENCH_SUMMARY names a file, it appends one line per headline
#     figure:  figure|value|peer|peer_value|goal
#     values carry their unit ("1.25 s", "0.40 %", "3.1x"); "-" where there
#     is no peer or no goal. The ratio column is value / peer_value, from
#     the first number in each.
#   - when PD_BENCH_WHY names a file and a goal was missed in this run, it
#     appends one line per miss:  figure|why
#     the reason in figures measured in the same run (not a constant
#     written down once); RESULTS.md lists them under the table.
#   - a non-zero exit means it could not run: reported in the table, and the
#     suite goes on.
# Every bench/*.sh except run_all.sh and fuzz_all.sh (fuzzing, not a
# measurement; it runs for 10 minutes per target) is run, in name order, so
# bench/jvm_*.sh and later ones join by following the convention. A script
# that writes no summary line is listed with the last lines of its output.
# Compiled benchmarks without a script (trace_cost, ident_check) are run here.
# The peers (ProcDump, perf, heaptrack) are installed with apt when missing.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
QUICK= OUTFILE=$HERE/RESULTS.md BUILD=
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1 ;;
	--out) OUTFILE=$2; shift ;;
	-h|--help) sed -n '2,30p' "$0"; exit 0 ;;
	*) BUILD=$1 ;;
	esac
	shift
done
BUILD=$(cd "${BUILD:-$HERE/../build}" && pwd) || { echo "no build dir" >&2; exit 1; }
[ -x "$BUILD/service/profilingd" ] || { echo "$BUILD has no service/profilingd: build first" >&2; exit 1; }
T=$(mktemp -d /tmp/pd-runall.XXXXXX)
trap 'rm -rf "$T"' EXIT
LIMIT=$([ -n "$QUICK" ] && echo 600 || echo 1800) # seconds per benchmark, then it is stopped

# The peers, and what the scripts need around them.
if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
	need=
	command -v procdump > /dev/null || need="$need procdump"
	command -v perf > /dev/null || need="$need linux-perf"
	command -v heaptrack > /dev/null || need="$need heaptrack"
	command -v earlyoom > /dev/null || need="$need earlyoom"   # triggers_bench: its VmRSS
	[ -x /usr/bin/time ] || need="$need time"
	if [ -n "$need" ]; then
		echo "installing the peers:$need"
		apt-get install -y $need > "$T/apt.log" 2>&1 ||
			{ echo "apt-get failed:"; tail -n 3 "$T/apt.log"; }
	fi
fi
version() { "$@" 2>&1 | sed -n 1p; }
PEERS="ProcDump: $(command -v procdump > /dev/null && dpkg-query -W -f '${Version}' procdump 2>/dev/null || echo missing);"
PEERS="$PEERS perf: $(command -v perf > /dev/null && version perf --version || echo missing);"
PEERS="$PEERS heaptrack: $(command -v heaptrack > /dev/null && version heaptrack --version || echo missing)"
PEERS="$PEERS; earlyoom: $(command -v earlyoom > /dev/null && version earlyoom -v || echo missing)"

export PD_BENCH_SUMMARY=$T/summary PD_BENCH_QUICK=$QUICK PD_BENCH_WHY=$T/why
: > "$PD_BENCH_SUMMARY"
: > "$PD_BENCH_WHY"
STATUS=()
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)

# run NAME CMD...: one benchmark, its output in $T/NAME.log, its summary lines tagged.
run() {
	local name=$1 s rc
	shift
	echo "=== $name"
	s=$(date +%s)
	: > "$T/$name.sum"
	: > "$T/$name.why"
	PD_BENCH_SUMMARY=$T/$name.sum PD_BENCH_WHY=$T/$name.why timeout -k 10 "$LIMIT" "$@" 2>&1 |
		tee "$T/$name.log"
	rc=${PIPESTATUS[0]}
	sed "s/^/$name|/" "$T/$name.sum" >> "$PD_BENCH_SUMMARY"
	sed "s/^/$name|/" "$T/$name.why" >> "$PD_BENCH_WHY"
	STATUS+=("$name|$rc|$(($(date +%s) - s))|$(wc -l < "$T/$name.sum")")
}

for f in "$HERE"/*.sh; do
	name=$(basename "$f" .sh)
	case $name in run_all|fuzz_all) continue ;; esac
	run "$name" bash "$f" "$BUILD"
done
# trace_cost is a program: its summary line is made here, the same way.
if [ -x "$BUILD/bench/trace_cost" ]; then
	run trace_cost bash -c '"$1" | tee /dev/stderr | sed -n "s/^  1 thread *\([0-9.]*\) ns\/pair.*/'\
'trace events: prof_trace_begin+end, 1 thread, no capture|\1 ns|-|-|-/p" >> "$PD_BENCH_SUMMARY"' \
		_ "$BUILD/bench/trace_cost"
fi
# ident_check too: the identity re-check per capture, against its 5 us limit.
if [ -x "$BUILD/bench/ident_check" ]; then
	run ident_check bash -c '"$1" | tee /dev/stderr | sed -n "s/^  \([a-zA-Z+_ -]*[a-zA-Z]\) *\([0-9.]*\) us\/check.*limit.*/'\
'identity re-check per capture (\1)|\2 us|-|-|< 5 us/p" >> "$PD_BENCH_SUMMARY"' \
		_ "$BUILD/bench/ident_check"
fi
total=$(($(date +%s) - t0))

# the number a value starts with, or empty ("not fired ..." has no ratio)
num() { printf "%s" "$1" | grep -oE -- '^-?[0-9]+(\.[0-9]+)?' | sed -n 1p; }
{
	echo "# Benchmark results"
	echo
	echo "Written by \`bench/run_all.sh${QUICK:+ --quick}\` (see its header for the"
	echo "convention every bench script follows). Benchmarks print figures and"
	echo "never assert; the ratio is profilingd's figure over the peer's, both"
	echo "measured in this run. Figures on a shared, loaded machine move between"
	echo "runs: read them as orders of magnitude and against their goals."
	echo
	echo "- date: $started, $total s in all ($([ -n "$QUICK" ] && echo "quick mode" || echo "full mode"))"
	echo "- machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | sed -n 1p)," \
		"$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM"
	echo "- kernel: $(uname -r); load average at the start: $load0, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- build: $BUILD ($(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)," \
		"$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$BUILD/CMakeCache.txt" 2>/dev/null | xargs -r basename))"
	echo "- peers: $PEERS"
	echo
	echo "| benchmark | figure | profilingd | peer | peer's figure | ratio | goal |"
	echo "|---|---|---|---|---|---|---|"
	while IFS='|' read -r b fig val peer pval goal; do
		a=$(num "$val") p=$(num "${pval:-}")
		ratio=-
		if [ "${peer:--}" != - ] && [ -n "$a" ] && [ -n "$p" ]; then
			ratio=$(awk -v a="$a" -v p="$p" 'BEGIN { if (p != 0) printf "%.2f", a / p; else print "-" }')
		fi
		echo "| $b | $fig | $val | ${peer:--} | ${pval:--} | $ratio | ${goal:--} |"
	done < "$PD_BENCH_SUMMARY"
	if [ -s "$PD_BENCH_WHY" ]; then
		echo
		echo "## Goals missed in this run, and why (measured in the same run)"
		echo
		while IFS='|' read -r b fig why; do
			echo "- **$b: $fig.** $why"
		done < "$PD_BENCH_WHY"
	fi
	echo
	echo "## Runs"
	echo
	echo "| benchmark | exit | seconds | summary lines |"
	echo "|---|---|---|---|"
	for s in "${STATUS[@]}"; do
		IFS='|' read -r b rc secs n <<< "$s"
		note=$rc
		[ "$rc" = 124 ] || [ "$rc" = 137 ] && note="$rc (stopped after $LIMIT s)"
		echo "| $b | $note | $secs | $n |"
	done
	for s in "${STATUS[@]}"; do
		IFS='|' read -r b rc secs n <<< "$s"
		[ "$n" -eq 0 ] || [ "$rc" -ne 0 ] || continue
		echo
		echo "### $b: last lines of its output"
		echo
		echo '```'
		tail -n 25 "$T/$b.log"
		echo '```'
	done
} > "$T/RESULTS.md"
cp "$T/RESULTS.md" "$OUTFILE"
echo
echo "=== $OUTFILE"
cat "$OUTFILE"
