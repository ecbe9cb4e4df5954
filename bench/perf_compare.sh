#!/usr/bin/env bash
# bench/perf_compare: profilingd-perf against Linux perf on the demo workload
# (2 threads burning CPU in hot_function:cold_function at 3:1), both at
# 100 Hz from outside the process. Prints each tool's hot/cold shares and
# how far apart they are (goal: within 5 points), the work rate unprofiled
# and under each tool (the overhead on the workload), and each sampler's
# own CPU time. Runs alternate, ROUNDS times; medians are reported.
# Not a test: it asserts nothing.
#   usage: bench/perf_compare [BUILD_DIR] [SECONDS] [ROUNDS]
set -euo pipefail
# One machine-readable figure for bench/run_all.sh (see its header).
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
BUILD=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[ -x "$BUILD/runtime/perf/profilingd-perf" ] || BUILD=$(cd "$BUILD/build" && pwd)
SECS=${2:-${PD_BENCH_QUICK:+4}}
SECS=${SECS:-6}
ROUNDS=${3:-${PD_BENCH_QUICK:+1}}
ROUNDS=${ROUNDS:-3}
DEMO=$BUILD/client/profiling-demo
PERF_HELPER=$BUILD/runtime/perf/profilingd-perf
for x in "$DEMO" "$PERF_HELPER"; do [ -x "$x" ] || { echo "missing $x" >&2; exit 1; }; done
if ! command -v perf > /dev/null && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
	apt-get install -y linux-perf > /dev/null 2>&1 || true
fi
command -v perf > /dev/null || { echo "perf (linux-perf) is not installed" >&2; exit 1; }
command -v go > /dev/null || { echo "go (for go tool pprof) is not installed" >&2; exit 1; }
T=$(mktemp -d /tmp/pd-perfcmp.XXXXXX)
trap 'rm -rf "$T"' EXIT
export HOME=${HOME:-$T} GOCACHE=${GOCACHE:-$T/gocache}
ms=$((SECS * 1000))
# The samplers attach once the workers run and stop before the workload ends.
settle=0.3
sample_ms=$((ms - 800))

rate() { sed -n 's/^work_rate=//p' "$1"; }
demo() { "$DEMO" --no-request --rate --threads 2 --duration-ms "$ms" 2> "$1" & }
# pprof_flat FILE FUNC: flat% of FUNC
pprof_flat() {
	go tool pprof -top "$1" 2> /dev/null |
		awk -v f="$2" '$NF == f { sub("%", "", $2); print $2; found=1 } END { if (!found) print 0 }'
}
# perf_self DATA FUNC: self% of FUNC
perf_self() {
	perf report -i "$1" --stdio --no-children --sort sym -g none 2> /dev/null |
		awk -v f="$2" '$NF == f { sub("%", "", $1); print $1; found=1 } END { if (!found) print 0 }'
}
# cpu_of FILE CMD...: run CMD; FILE gets `times` of a shell whose only children
# are CMD's, so a workload reaped meanwhile is not counted.
cpu_of() { local f=$1; shift; bash -c '"$@"; times >&9' _ "$@" 9> "$f"; }
# cpu_s FILE: user + sys seconds of those children
cpu_s() {
	awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/)
		printf "%.3f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$1"
}

base=() pfr=() pef=() pfh=() pfc=() peh=() pec=() pfcpu=() pecpu=()
for i in $(seq "$ROUNDS"); do
	demo "$T/u.txt"; wait
	base+=("$(rate "$T/u.txt")")

	demo "$T/a.txt"; DP=$!; sleep "$settle"
	cpu_of "$T/a.time" "$PERF_HELPER" --pid "$DP" --hz 100 --duration-ms "$sample_ms" \
		> "$T/a.pb.gz" 2> "$T/a.status"
	wait "$DP"
	pfr+=("$(rate "$T/a.txt")")
	pfh+=("$(pprof_flat "$T/a.pb.gz" hot_function)")
	pfc+=("$(pprof_flat "$T/a.pb.gz" cold_function)")
	pfcpu+=("$(cpu_s "$T/a.time")")

	demo "$T/p.txt"; DP=$!; sleep "$settle"
	# perf record stops cleanly on SIGINT (with "-- sleep" it records nothing on -p).
	cpu_of "$T/p.time" timeout -s INT "$(awk -v m="$sample_ms" 'BEGIN { print m / 1000 }')" \
		perf record -q -F 100 -g -p "$DP" -o "$T/perf.data" > /dev/null 2>&1
	wait "$DP"
	pef+=("$(rate "$T/p.txt")")
	peh+=("$(perf_self "$T/perf.data" hot_function)")
	pec+=("$(perf_self "$T/perf.data" cold_function)")
	pecpu+=("$(cpu_s "$T/p.time")")

	echo "round $i: rate unprofiled ${base[-1]}, profilingd-perf ${pfr[-1]}, perf ${pef[-1]} rounds/s;" \
		"hot/cold profilingd-perf ${pfh[-1]}/${pfc[-1]} %, perf ${peh[-1]}/${pec[-1]} %;" \
		"$(tail -n 1 "$T/a.status")"
done

median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
awk -v n="$ROUNDS" -v s="$SECS" -v sm="$sample_ms" \
	-v u="$(median "${base[@]}")" -v a="$(median "${pfr[@]}")" -v p="$(median "${pef[@]}")" \
	-v ah="$(median "${pfh[@]}")" -v ac="$(median "${pfc[@]}")" \
	-v ph="$(median "${peh[@]}")" -v pc="$(median "${pec[@]}")" \
	-v acpu="$(median "${pfcpu[@]}")" -v pcpu="$(median "${pecpu[@]}")" 'BEGIN {
	d = ah - ph; if (d < 0) d = -d
	e = ac - pc; if (e < 0) e = -e
	printf "perf_compare: median of %d rounds, %d s demo, 2 threads, 100 Hz for %d ms\n", n, s, sm
	printf "  shares (flat %%)   hot_function  cold_function  hot/(hot+cold)\n"
	printf "    profilingd-perf  %6.2f        %6.2f         %5.1f %%\n", ah, ac, 100 * ah / (ah + ac)
	printf "    perf record -g   %6.2f        %6.2f         %5.1f %%\n", ph, pc, 100 * ph / (ph + pc)
	printf "    expected         75            25\n"
	printf "  agreement: hot %.2f points, cold %.2f points apart (goal <= 5): %s\n", d, e,
		(d <= 5 && e <= 5) ? "met" : "NOT met"
	printf "  work rate: unprofiled %.1f, profilingd-perf %.1f (%+.2f %%), perf %.1f (%+.2f %%) rounds/s\n",
		u, a, (a / u - 1) * 100, p, (p / u - 1) * 100
	printf "  sampler CPU time: profilingd-perf %.3f s, perf record %.3f s\n", acpu, pcpu
}'
m() { median "$@"; }
summary "agentless stacks: hot_function share, demo at 100 Hz (expected 75 %)" "$(m "${pfh[@]}") %" \
	"perf record -g" "$(m "${peh[@]}") %" "within 5 points of perf"
summary "agentless stacks: sampler CPU time for ${sample_ms} ms at 100 Hz" "$(m "${pfcpu[@]}") s" \
	"perf record -g" "$(m "${pecpu[@]}") s" "-"
summary "agentless stacks: work rate of the demo while sampled (unprofiled $(m "${base[@]}"))" \
	"$(m "${pfr[@]}") rounds/s" "perf record -g" "$(m "${pef[@]}") rounds/s" "-"
