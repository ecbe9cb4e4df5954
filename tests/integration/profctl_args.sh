#!/usr/bin/env bash
# profctl's spellings and durations, no daemon needed: every alias of each
# capture type (common/names.c) and every duration unit (common/duration.h)
# gets past the parser, which then fails only to connect (exit 3); an
# unknown type or a bad duration is a usage error (exit 2) that names the
# valid spellings.
. "$(dirname "$0")/lib.sh"
PROFCTL=$BUILD/tools/profctl/profctl
NOSOCK=$T/no-such.sock

# try WANT_EXIT ARGS...: profctl request with ARGS exits WANT_EXIT.
try() {
	local want=$1 rc=0
	shift
	"$PROFCTL" --socket "$NOSOCK" request --pid 1 "$@" > "$T/out" 2> "$T/err" || rc=$?
	[ "$rc" -eq "$want" ] || fail "profctl request $*: exit $rc, want $want: $(cat "$T/err")"
}

n=0
for t in heap-dump heapdump heap_dump HEAP_DUMP PROF_HEAP_DUMP Heap-Dump \
	heap-profile heap heapprofile heap_profile HEAP_PROFILE PROF_HEAP_PROFILE \
	stack stack-sampling stack_sampling STACK_SAMPLING PROF_STACK_SAMPLING \
	trace system-trace system_trace SYSTEM_TRACE PROF_SYSTEM_TRACE \
	prof_heap_dump Prof-Stack_Sampling prof-system-trace; do
	try 3 --type "$t"
	# budget takes the same option through the same parser.
	rc=0
	"$PROFCTL" --socket "$NOSOCK" budget --type "$t" > "$T/out" 2> "$T/err" || rc=$?
	[ "$rc" -eq 3 ] || fail "profctl budget --type $t: exit $rc, want 3: $(cat "$T/err")"
	n=$((n + 1))
done
pass "$n type spellings accepted by request and budget"

# Method events name a type a request cannot carry (no targets): refused
# with the list, every spelling of it.
for t in methods method-events METHOD_EVENTS PROF_METHOD_EVENTS; do
	try 2 --type "$t"
	grep -q "method events need targets (profctl methods add); request takes one of heap-dump, heap-profile, stack, trace" "$T/err" ||
		fail "request --type $t: $(cat "$T/err")"
done
pass "request --type methods refused with the valid types"

n=0
for d in 500ms 5s 2m 1.5s 0.25m 1h 5 100ms 60m; do
	try 3 --type stack --duration "$d"
	n=$((n + 1))
done
pass "$n durations accepted (bare number: seconds)"

try 2 --type heapx
grep -q "bad --type 'heapx': one of heap-dump, heap-profile, stack, trace" "$T/err" ||
	fail "unknown type message: $(cat "$T/err")"
for d in 5x 1d -1s "" 5. 1.2345s 0.5ms 61m 0; do
	try 2 --type stack --duration "$d"
	grep -q -- "--duration" "$T/err" || fail "bad duration '$d': $(cat "$T/err")"
done
pass "unknown type and bad durations refused with the valid spellings"

try 3 --type trace --fill discard
try 3 --type trace --fill ring
try 3 --type heap --java-allocs off
try 2 --type trace --fill sometimes
grep -q "bad --fill 'sometimes': ring or discard" "$T/err" || fail "--fill: $(cat "$T/err")"
try 2 --type heap --java-allocs maybe
grep -q "bad --java-allocs 'maybe': on or off" "$T/err" || fail "--java-allocs: $(cat "$T/err")"
pass "--fill and --java-allocs take their values and refuse others"
