#!/usr/bin/env bash
# Method events (docs/METHOD_EVENTS.md): what a uprobe costs.
#   bench/method_events [BUILD] [ROUNDS] [HITS] [WORK] [EVERY] [FLAVOR] [WHERE]
# Per round, bench/method_bench runs twice, without probes and with
# profilingd-perf --method on bench_target (the stack of every EVERY-th
# hit, default 1; the others are only counted),
# and times HITS calls of bench_target and WORK calls of bench_other
# (probed by nobody) on its own CPU clock. Prints the median cost per
# hit (goal < 10 us) and the non-target throughput ratio (goal >= 0.99).
# FLAVOR: both (default: plain, then distro, one after the other),
# plain (-O2, bench_target starts with an instruction the
# kernel single-steps) or distro (method_bench_distro: -fcf-protection
# -fno-omit-frame-pointer, it starts endbr64; push %rbp, and the probe
# goes on the push, which the kernel emulates). bench/uprobe_cost breaks
# the cost down by part. WHERE: bench_target (default; the helper moves a
# probe past a leading endbr64 onto push %rbp) or an explicit +0xOFFSET
# (probed where it says: the function's entry, for the A/B).
# Needs root (uprobes). Never a test: it asserts nothing. With
# PD_BENCH_SUMMARY set (bench/run_all.sh) it writes both figures as
# summary lines; PD_BENCH_QUICK=1: 3 rounds.
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-$([ -n "${PD_BENCH_QUICK:-}" ] && echo 3 || echo 5)}
HITS=${3:-20000}
WORK=${4:-50000000}
EVERY=${5:-1}
FLAVOR=${6:-both}
WHERE=${7:-bench_target}
if [ "$FLAVOR" = both ]; then
	bash "$0" "$BUILD" "$ROUNDS" "$HITS" "$WORK" "$EVERY" plain "$WHERE" &&
		exec bash "$0" "$BUILD" "$ROUNDS" "$HITS" "$WORK" "$EVERY" distro "$WHERE"
	exit 1
fi
PERF=$BUILD/runtime/perf/profilingd-perf
APP=$BUILD/bench/method_bench
[ "$FLAVOR" = plain ] || APP=$BUILD/bench/method_bench_$FLAVOR
T=$(mktemp -d /tmp/pd-mbench.XXXXXX)
trap 'rm -rf "$T"' EXIT

run() { # run probe|plain -> "work_ns=W hit_ns=H"
	rm -f "$T/go"
	"$APP" "$T/go" "$HITS" "$WORK" > "$T/out" &
	local ap=$! hp=
	if [ "$1" = probe ]; then
		"$PERF" --pid "$ap" --duration-ms 600000 --method "$(readlink -f "$APP"):$WHERE" --every "$EVERY" \
			> /dev/null 2> "$T/perr" &
		hp=$!
		for _ in $(seq 500); do ls -l "/proc/$hp/fd" 2> /dev/null | grep -c perf_event | grep -v '^[01]$' > /dev/null && break; sleep 0.02; done
	fi
	touch "$T/go"
	wait "$ap"
	if [ -n "$hp" ]; then
		wait "$hp" || true
		tail -n 1 "$T/perr" >&2
	fi
	cat "$T/out"
}

med() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

: > "$T/plain" ; : > "$T/probe"
for r in $(seq "$ROUNDS"); do
	run plain >> "$T/plain"
	run probe >> "$T/probe"
done
w0=$(sed 's/.*work_ns=\([0-9]*\).*/\1/' "$T/plain" | med)
h0=$(sed 's/.*hit_ns=\([0-9]*\).*/\1/' "$T/plain" | med)
w1=$(sed 's/.*work_ns=\([0-9]*\).*/\1/' "$T/probe" | med)
h1=$(sed 's/.*hit_ns=\([0-9]*\).*/\1/' "$T/probe" | med)
echo "method_events ($FLAVOR build): median of $ROUNDS rounds, $HITS hits (a stack every $EVERY), $WORK non-target calls"
awk -v h0="$h0" -v h1="$h1" -v n="$HITS" 'BEGIN {
	printf "  cost per hit: %.2f us (probed %.1f ms, plain %.3f ms for %d calls; goal < 10 us)\n",
	       (h1 - h0) / n / 1000, h1 / 1e6, h0 / 1e6, n }'
awk -v w0="$w0" -v w1="$w1" 'BEGIN {
	printf "  non-target throughput with the probe in / without: %.4f (goal >= 0.99)\n", w0 / w1 }'
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
summary "uprobe method event cost per hit, stack every $EVERY, $FLAVOR build (profilingd-perf --method)" \
	"$(awk -v a="$h0" -v b="$h1" -v n="$HITS" 'BEGIN { printf "%.2f us", (b - a) / n / 1000 }')" \
	"-" "-" "< 10 us"
summary "uprobe non-target throughput, probe in / none" \
	"$(awk -v a="$w0" -v b="$w1" 'BEGIN { printf "%.4f", a / b }')" "-" "-" ">= 0.99"
