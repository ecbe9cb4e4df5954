#!/usr/bin/env bash
# it_heap_perfetto: native heap profiles in Perfetto (issue #20). An
# unmodified workload under LD_PRELOAD=libprofiling_preload.so (64 MiB kept
# live by alloc_live_a, 16 MiB churned by churn_b):
#  1. asked for with format=perfetto, the result is a .perfetto-trace that
#     protoc decodes against proto/perfetto_heap.proto, of the workload's
#     pid, with alloc_live_a's 64 MiB in use (+-10 %);
#  2. a pprof result of the same kind, converted by profilingd-redact
#     --format heapprofile (the daemon's own converter), has per call site
#     (leaf function) the in-use bytes `go tool pprof` reads from the pprof,
#     within 1 %.
. "$(dirname "$0")/lib.sh"
need_go
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
[ -n "${PD_SANITIZE:-}" ] && skip "no heap interposition under sanitizers"
[ "$(id -u)" = 0 ] || skip "LD_PRELOAD mode needs root (target_pid)"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
WL_PLAIN=$APPS/heap_workload_plain
PRELOAD=$BUILD/client/libprofiling_preload.so
REDACT=$BUILD/redact/profilingd-redact
MIB=1048576
export PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET
start_daemon

# workload FORMAT: one capture of a fresh workload; prints the result path.
workload() {
	LD_PRELOAD=$PRELOAD PROFILING_HEAP_FROM_START=1 "$WL_PLAIN" --unmodified 6 \
		> "$T/plain-$1.out" 2> "$T/plain-$1.err" &
	wpid=$!
	for _ in $(seq 100); do
		grep -q "^ready" "$T/plain-$1.out" 2>/dev/null && break
		kill -0 "$wpid" 2>/dev/null || fail "$1: workload exited early: $(cat "$T/plain-$1.err")"
		sleep 0.05
	done
	"$APPS/it_request" --pid "$wpid" --type heap --duration-ms 1500 --format "$1" \
		2> "$T/req-$1.err" || fail "$1: it_request failed: $(cat "$T/req-$1.err")"
	wait "$wpid" || fail "$1: workload failed"
}

# 1. Through the daemon.
pt=$(workload perfetto)
case "$pt" in *.perfetto-trace) ;; *) fail "result is not a .perfetto-trace: $pt" ;; esac
protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_heap.proto \
	< "$pt" > "$T/pt.txt" || fail "protoc cannot decode the heap profile"
facts=$("$CHECKERS/heapgraph_check" "$pt") || fail "heapgraph_check cannot read it"
echo "$facts" | sed 's/^/perfetto: /'
ppid=$(grep -o '^ready [0-9]*' "$T/plain-perfetto.out" | awk '{ print $2 }')
echo "$facts" | qgrep -x "pids $ppid" || fail "perfetto: the profile is not of the workload's pid $ppid"
live=$(echo "$facts" | awk '$1 == "inuse" && $2 == "alloc_live_a" { print $3 }')
awk -v l="${live:-0}" -v m=$MIB 'BEGIN { exit !(l >= 0.9 * 64 * m && l <= 1.1 * 64 * m) }' ||
	fail "perfetto: alloc_live_a in use is ${live:-0} B, not 64 MiB +-10 %"
grep -q 'sampling_interval_bytes: [1-9]' "$T/pt.txt" || fail "perfetto: no sampling interval"
grep -q 'heap_name: "libc.malloc"' "$T/pt.txt" || fail "perfetto: no heap name"

# 2. The converter against go tool pprof, on one pprof.
pp=$(workload pprof)
wpid=$(grep -o '^ready [0-9]*' "$T/plain-pprof.out" | awk '{ print $2 }')
"$REDACT" --format heapprofile --pids "$wpid" --allow-root < "$pp" > "$T/conv.pt" 2> "$T/conv.err" ||
	fail "profilingd-redact --format heapprofile: $(cat "$T/conv.err")"
conv=$("$CHECKERS/heapgraph_check" "$T/conv.pt") || fail "cannot read the converted profile"
go tool pprof -sample_index=inuse_space -unit=B -nodefraction=0 -nodecount=100000 -top "$pp" \
	2> /dev/null | awk '$1 ~ /B$/ && $NF != "" { v = $1; sub("B$", "", v); if (v + 0 > 0) print $NF, v }' \
	> "$T/pprof.flat"
[ -s "$T/pprof.flat" ] || fail "go tool pprof shows no in-use bytes"
n=0
while read -r fn bytes; do
	got=$(echo "$conv" | awk -v f="$fn" '$1 == "inuse" && $2 == f { s += $3 } END { print s + 0 }')
	awk -v a="$got" -v b="$bytes" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.01 * b) }' ||
		fail "in use at $fn: pprof $bytes B, Perfetto $got B (more than 1 % apart)"
	echo "call site $fn: pprof $bytes B, Perfetto $got B"
	n=$((n + 1))
done < "$T/pprof.flat"
daemon_alive || fail "daemon died"
stop_daemon
pass "native heap profile in Perfetto: alloc_live_a $live B in use; $n call sites equal the pprof's within 1 %"
