#!/usr/bin/env bash
# The ABI of libprofiling.so.1 (docs/ABI.md):
#  1. a program built against the first header (tests/abi/v1) runs unchanged
#     against today's library with a real daemon, and its unversioned
#     references bind to the PROFILING_1.0 entry points;
#  2. today's size field: size 0 refused, a newer header's zero tail taken,
#     a set one refused, a shorter struct's missing fields defaults;
#  3. the reverse: a program built now is refused at load by a library
#     without the PROFILING_1.1 version, instead of misreading its structs;
#  4. the dynamic symbol table is the prof_* API, versioned, and the
#     allocator, unversioned (it must interpose libc's malloc@GLIBC).
. "$(dirname "$0")/lib.sh"
LIB=$BUILD/client
STUB=$APPS/v1stub
command -v readelf > /dev/null || skip "readelf (binutils) is not installed"

# 4. Exports, before any daemon.
readelf --dyn-syms -W "$LIB/libprofiling.so.1" |
	awk '$1 ~ /^[0-9]+:$/ && $5 != "LOCAL" && $7 != "UND" && $8 != "" { print $8 }' |
	sort > "$T/exports"
{
	for f in prof_cancel prof_clear_triggers prof_close prof_connect prof_dispatch prof_fd \
		prof_heartbeat prof_remove_trigger prof_report_anomaly prof_report_fully_drawn \
		prof_set_result_listener prof_strerror prof_trace_begin prof_trace_counter \
		prof_trace_end prof_trace_instant; do
		echo "$f@@PROFILING_1.0"
	done
	echo "prof_request@PROFILING_1.0"; echo "prof_request@@PROFILING_1.1"
	echo "prof_add_trigger@PROFILING_1.0"; echo "prof_add_trigger@@PROFILING_1.1"
	echo "prof_get_budget@@PROFILING_1.1"
	echo "PROFILING_1.0"; echo "PROFILING_1.1"
	# The allocator interposers (unversioned); a sanitizer build has none
	# (heap.c is built with HEAP_NO_INTERPOSE: ASan owns malloc there).
	[ -n "${PD_SANITIZE:-}" ] ||
		for f in malloc free calloc realloc reallocarray posix_memalign aligned_alloc \
			memalign valloc pvalloc; do
			echo "$f"
		done
} | sort > "$T/want"
diff -u "$T/want" "$T/exports" > "$T/exports.diff" ||
	{ cat "$T/exports.diff"; fail "libprofiling.so.1 exports differ from the ABI (docs/ABI.md)"; }
pass "exports: $(wc -l < "$T/exports") symbols, prof_* versioned, allocator unversioned"

# 1. The old binary has unversioned references and no PROFILING_ need.
if readelf --dyn-syms -W "$APPS/abi_v1_app" | qgrep 'prof_.*@PROFILING'; then
	fail "abi_v1_app was linked with versioned references: it must be linked with the v1 stand-in"
fi
start_daemon
out=$(LD_LIBRARY_PATH=$LIB "$APPS/abi_v1_app" 2> "$T/v1.err") ||
	{ cat "$T/v1.err"; fail "a program built against the first header fails on today's library"; }
[ -s "$out" ] || fail "abi_v1_app: no delivered file at '$out'"
# The daemon saw the old struct's fields at their old offsets.
grep -q "stack capture of pid [0-9]* for 300 ms at 211 Hz" "$T/daemon.log" ||
	fail "the old binary's parameters did not reach the daemon as written"
pass "v1 binary on today's library: capture $(stat -c %s "$out") bytes, old layout read"

# 2. The size field.
out=$("$APPS/abi_v2_app" 2> "$T/v2.err") || { cat "$T/v2.err"; fail "size rules"; }
[ -s "$out" ] || fail "abi_v2_app: no delivered file at '$out'"
pass "size field: size 0 and a set unknown tail refused, shorter struct read as defaults"

# 3. The reverse: today's program against a library without PROFILING_1.1.
if LD_LIBRARY_PATH=$STUB "$APPS/abi_v2_app" > "$T/rev.out" 2> "$T/rev.err"; then
	fail "a program built now ran against a library without PROFILING_1.1"
fi
grep -qi "version" "$T/rev.err" || { cat "$T/rev.err"; fail "the loader did not refuse over symbol versions"; }
[ ! -s "$T/rev.out" ] || fail "the program ran before being refused: $(cat "$T/rev.out")"
pass "today's binary refused at load by the first library: $(head -n 1 "$T/rev.err")"
