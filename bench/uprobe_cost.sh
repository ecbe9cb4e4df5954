#!/usr/bin/env bash
# Method events (docs/METHOD_EVENTS.md): a uprobe's cost per hit, part by
# part (bench/uprobe_cost.c: counting only by first instruction, then the
# sample's identity, callchain, registers and user stack).
#   bench/uprobe_cost [BUILD] [HITS] [ROUNDS]
# Needs root (the uprobe PMU); exits 77 without it. Never a test: it
# asserts nothing. With PD_BENCH_SUMMARY set (bench/run_all.sh) it writes
# one summary line per sampled variant; PD_BENCH_QUICK=1: 3 rounds.
set -euo pipefail
BUILD=${1:-build}
HITS=${2:-20000}
ROUNDS=${3:-$([ -n "${PD_BENCH_QUICK:-}" ] && echo 3 || echo 5)}
exec "$BUILD/bench/uprobe_cost" "$HITS" "$ROUNDS"
