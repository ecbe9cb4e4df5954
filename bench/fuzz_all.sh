#!/usr/bin/env bash
# Run every libFuzzer target for a while and print a table of execs/s,
# coverage (libFuzzer's "cov" edges and "ft" features) and corpus size.
# A benchmark: it prints and never fails on figures; a crash is reported
# with the path of its reproducer (kept in the work dir) and the exit
# status is 1 then.
#
#   bench/fuzz_all.sh [BUILD_DIR] [TARGET...]
#	BUILD_DIR   a PROFILINGD_FUZZ=ON build (default build-asan)
#	FUZZ_SECS   seconds per target (default 600)
#	FUZZ_JOBS   targets run at once (default 1)
#	FUZZ_WORK   where corpora grow and crashes land (default a temp dir, kept)
#
# Each target starts from tests/fuzz/corpus/<target> (copied: the tree is
# never written); new inputs worth keeping can be minimised into it with
# "<target> -merge=1 tests/fuzz/corpus/<name> $FUZZ_WORK/<name>/corpus".
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-asan}
shift || true
secs=${FUZZ_SECS:-600}
jobs=${FUZZ_JOBS:-1}
work=${FUZZ_WORK:-$(mktemp -d /tmp/pd-fuzz-all.XXXXXX)}
fdir=$build/tests/fuzz
[ -d "$fdir" ] || { echo "no fuzz targets in $fdir (configure with -DPROFILINGD_FUZZ=ON)" >&2; exit 2; }

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
	for f in "$fdir"/fuzz_*; do
		[ -x "$f" ] && [ "$(basename "$f")" != fuzz_seedgen ] && targets+=("$(basename "$f")")
	done
fi

# corpus dir of a target: fuzz_<name> -> corpus/<name>
run_one() {
	local t=$1 name=${1#fuzz_} d=$work/${1#fuzz_}
	mkdir -p "$d/corpus" "$d/artifacts"
	[ -d "$here/tests/fuzz/corpus/$name" ] && cp -r "$here/tests/fuzz/corpus/$name/." "$d/corpus/"
	"$fdir/$t" -max_total_time="$secs" -max_len=20000 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$d/artifacts/" "$d/corpus" > "$d/log" 2>&1
	echo $? > "$d/rc"
}

echo "fuzzing ${#targets[@]} targets for ${secs}s each, $jobs at a time; work dir $work"
running=0
for t in "${targets[@]}"; do
	run_one "$t" &
	running=$((running + 1))
	if [ "$running" -ge "$jobs" ]; then
		wait -n
		running=$((running - 1))
	fi
done
wait

status=0
printf '\n| target | seconds | runs | execs/s | cov | ft | corpus | result |\n|---|---|---|---|---|---|---|---|\n'
for t in "${targets[@]}"; do
	d=$work/${t#fuzz_}
	last=$(grep -E '^#[0-9]+.*cov:' "$d/log" | tail -n 1)
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$d/log")
	eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$d/log")
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
	corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<< "$last")
	rc=$(cat "$d/rc" 2>/dev/null || echo '?')
	result=ok
	if [ "$rc" != 0 ]; then
		result="CRASH (rc $rc): $(ls "$d"/artifacts/* 2>/dev/null | sed -n 1p)"
		status=1
	fi
	printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$secs" "${runs:-?}" "${eps:-?}" \
		"${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
done
printf '\nmachine: %s, %s cores; logs in %s\n' "$(uname -srm)" "$(nproc)" "$work"
exit $status
