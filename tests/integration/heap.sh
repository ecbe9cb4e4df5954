#!/usr/bin/env bash
# Heap profiles end to end, for an app linked with libprofiling and for an
# unmodified one under LD_PRELOAD=libprofiling_preload.so: the delivered
# pprof read by `go tool pprof` shows alloc_live_a's 64 MiB in use (+-10 %)
# and nothing in use from churn_b, which freed its 16 MiB.
. "$(dirname "$0")/lib.sh"
need_go
# A sanitizer runtime owns malloc: heap.c is built without interposition.
[ -n "${PD_SANITIZE:-}" ] && skip "no heap interposition under sanitizers"
WL=$APPS/heap_workload
WL_PLAIN=$APPS/heap_workload_plain
PRELOAD=$BUILD/client/libprofiling_preload.so
IT_REQUEST=$APPS/it_request
[ -f "$PRELOAD" ] || fail "no $PRELOAD"
MIB=1048576
ALLOCATOR="malloc free calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc pvalloc"

# check_exports LIB ALLOWED_RE: the allocator is exported unversioned (a
# versioned malloc would not interpose the malloc@GLIBC_* references), and
# nothing but ALLOWED_RE and the allocator leaks.
check_exports() {
	nm -D --defined-only "$1" | awk '$2 ~ /^[TWiV]$/ { print $3 }' > "$T/exports"
	for f in $ALLOCATOR; do
		grep -qx "$f" "$T/exports" || fail "$1 does not export $f unversioned"
	done
	local bad
	bad=$(grep -Ev "$2" "$T/exports" | grep -Evx "$(echo "$ALLOCATOR" | tr ' ' '|')" || true)
	[ -z "$bad" ] || fail "$1 exports internal symbols: $(echo $bad)"
}
check_exports "$(readlink -f "$BUILD/client/libprofiling.so")" '^prof_[a-z_]+(@@?PROFILING_1\.[0-9]+)?$'
check_exports "$PRELOAD" '^$'

export PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET
start_daemon

# pprof_bytes FILE SAMPLE_INDEX FUNC: FUNC's flat value in bytes (0 if absent).
pprof_bytes() {
	go tool pprof -sample_index="$2" -unit=B -nodefraction=0 -nodecount=100000 -top "$1" 2>/dev/null |
		awk -v f="$3" '$NF == f { v = $1; sub("B$", "", v); print v; found = 1 }
			END { if (!found) print 0 }'
}

# check_profile FILE WHAT: the in-use figures of both functions.
check_profile() {
	go tool pprof -sample_index=inuse_space -top "$1" > "$T/top.txt" 2>&1 ||
		{ cat "$T/top.txt"; fail "$2: go tool pprof cannot read $1"; }
	cat "$T/top.txt"
	local live churn
	live=$(pprof_bytes "$1" inuse_space alloc_live_a)
	churn=$(pprof_bytes "$1" inuse_space churn_b)
	echo "$2: alloc_live_a in use $live B, churn_b in use $churn B"
	awk -v l="$live" -v m=$MIB 'BEGIN { exit !(l >= 0.9 * 64 * m && l <= 1.1 * 64 * m) }' ||
		fail "$2: alloc_live_a in use is $live B, not 64 MiB +-10 %"
	awk -v c="$churn" -v m=$MIB 'BEGIN { exit !(c < m) }' ||
		fail "$2: churn_b in use is $churn B, want < 1 MiB"
}

# 1. Linked: the app asks for a heap profile of itself.
out=$("$WL" --duration-ms 1500 2> "$T/wl.err") || { cat "$T/wl.err" >&2; fail "heap_workload failed"; }
[ -f "$out" ] || fail "heap_workload printed '$out', which is not a file"
case "$out" in "$T/state/results/$(id -u)/heapprofile_heap_"*.pb.gz) ;; *) fail "unexpected result path $out";; esac
check_profile "$out" linked
# churn_b was sampled too: its 16 MiB show in alloc_space.
churn_alloc=$(pprof_bytes "$out" alloc_space churn_b)
echo "linked: churn_b allocated $churn_alloc B"
awk -v c="$churn_alloc" -v m=$MIB 'BEGIN { exit !(c >= 0.9 * 16 * m && c <= 1.1 * 16 * m) }' ||
	fail "linked: churn_b alloc_space is $churn_alloc B, not 16 MiB +-10 %"
linked_live=$(pprof_bytes "$out" inuse_space alloc_live_a)

# 2. Unmodified, under LD_PRELOAD, sampling from start; root asks for its profile.
[ -x "$IT_REQUEST" ] || fail "no $IT_REQUEST"
[ "$(id -u)" = 0 ] || { pass "linked mode (LD_PRELOAD mode needs root: target_pid)"; exit 0; }
LD_PRELOAD=$PRELOAD PROFILING_HEAP_FROM_START=1 "$WL_PLAIN" --unmodified 6 \
	> "$T/plain.out" 2> "$T/plain.err" &
wpid=$!
for _ in $(seq 100); do
	grep -q "^ready" "$T/plain.out" 2>/dev/null && break
	kill -0 "$wpid" 2>/dev/null || { cat "$T/plain.err" >&2; fail "unmodified workload exited early"; }
	sleep 0.05
done
grep -q "^ready $wpid" "$T/plain.out" || fail "unmodified workload not ready"
out2=$("$IT_REQUEST" --pid "$wpid" --type heap --duration-ms 1500 2> "$T/req.err") ||
	{ cat "$T/req.err" >&2; fail "it_request failed"; }
[ -f "$out2" ] || fail "it_request printed '$out2', which is not a file"
check_profile "$out2" preload
wait "$wpid" || { cat "$T/plain.err" >&2; fail "unmodified workload failed"; }

daemon_alive || fail "daemon died"
stop_daemon
pass "heap profiles: linked ($linked_live B live) and LD_PRELOAD"
