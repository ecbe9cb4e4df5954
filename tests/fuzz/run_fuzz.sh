#!/usr/bin/env bash
# Run one libFuzzer target for SECS seconds over a copy of its seed corpus:
# the seeds are read-only input, new inputs and crash artifacts go to a
# scratch dir, so ctest never grows the tree. A crash fails the test and
# the reproducer is printed (base64) before the scratch dir goes.
#   run_fuzz.sh TARGET SEED_DIR [SECS]
set -euo pipefail
bin=$1 seeds=$2 secs=${3:-3}
scratch=$(mktemp -d /tmp/pd-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/corpus" "$scratch/artifacts"
cp -r "$seeds"/. "$scratch/corpus/"
rc=0
"$bin" -max_total_time="$secs" -max_len=20000 -timeout=10 -rss_limit_mb=1024 \
	-print_final_stats=1 -artifact_prefix="$scratch/artifacts/" "$scratch/corpus" || rc=$?
if [ "$rc" -ne 0 ]; then
	for f in "$scratch"/artifacts/*; do
		[ -f "$f" ] || continue
		echo "reproducer $(basename "$f") (base64):"
		base64 -w0 "$f"
		echo
	done
fi
exit "$rc"
