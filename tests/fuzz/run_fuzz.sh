#!/usr/bin/env bash
# Run one libFuzzer target for a bounded time over its seed corpus. New
# inputs go to a scratch dir, never into the source tree.
set -euo pipefail
bin=$1 seeds=$2 secs=${3:-5}
scratch=$(mktemp -d /tmp/pd-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
"$bin" -max_total_time="$secs" -max_len=20000 -timeout=10 -rss_limit_mb=1024 \
	-artifact_prefix="$scratch/" "$scratch" "$seeds"
