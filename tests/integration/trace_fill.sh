#!/usr/bin/env bash
# buffer_fill_policy of the app's flight recorder (client/trace.h): an app
# (apps/trace_fill.c) writes numbered instants n<k> in bursts, far more than
# one ring (4096 events a thread) in any window, while a system trace of
# itself runs, once per policy.
#  - discard: the trace holds the window's first 4096 events, contiguous,
#    none written before the capture started; the result's note says how
#    many were dropped, and all of those come after the kept ones.
#  - ring (the default): the trace holds the window's last events,
#    contiguous, up to one written before the window closed; no note.
# Every bound comes from the app's own counts (A, B, L, U in trace_fill.c),
# never from how long anything took.
. "$(dirname "$0")/lib.sh"
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
start_daemon
RING=4096

# run POLICY: sets A B L U path note, and min max count of the kept n<k>.
run() {
	"$APPS/trace_fill" "$1" "${2:-1000}" > "$T/$1.out" 2> "$T/$1.err" ||
		{ cat "$T/$1.err"; fail "$1: the capture failed"; }
	read -r A B L U < "$T/$1.out"
	path=$(sed -n 2p "$T/$1.out")
	note=$(sed -n 3p "$T/$1.out")
	[ -s "$path" ] || fail "$1: no trace at '$path'"
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
		< "$path" > "$T/$1.txt" || fail "$1: protoc cannot decode the trace"
	grep -oE '^    name: "n[0-9]+"' "$T/$1.txt" | grep -oE '[0-9]+' | sort -n > "$T/$1.k"
	count=$(wc -l < "$T/$1.k")
	[ "$count" -gt 0 ] || fail "$1: no event of the writer in the trace"
	min=$(head -1 "$T/$1.k")
	max=$(tail -1 "$T/$1.k")
	[ "$(sort -un "$T/$1.k" | wc -l)" -eq "$count" ] || fail "$1: an event is in the trace twice"
	echo "$1: A=$A B=$B L=$L U=$U kept $count: n$min..n$max; note: '$note'"
	[ $((max - min + 1)) -eq "$count" ] || fail "$1: the kept events n$min..n$max have holes"
}

# A window that did not fill (the writer starved on a loaded machine: fewer
# than 4096 events in it, so nothing to drop) proves nothing either way:
# again, longer.
for dur in 1000 4000 10000; do
	run discard "$dur"
	[ -n "$note" ] || [ "$count" -ge "$RING" ] || { echo "discard: the window did not fill in $dur ms; again"; continue; }
	break
done
case "$note" in
*"flight recorder full (buffer_fill_policy discard): "*" events dropped"*) ;;
*) fail "discard: the note does not say how many events were dropped: '$note'" ;;
esac
D=$(echo "$note" | sed -E 's/.*discard\): ([0-9]+) events dropped.*/\1/')
[ "$count" -eq "$RING" ] || fail "discard: kept $count events, want a full ring ($RING)"
[ "$min" -ge "$A" ] && [ "$min" -ge "$L" ] ||
	fail "discard: n$min was written before the capture started (A=$A, L=$L)"
[ "$D" -gt 0 ] || fail "discard: 0 events dropped from a window of more than a ring"
# The dropped ones are the window's later events: all after the kept ones.
[ $((max + D)) -lt "$B" ] ||
	fail "discard: n$max + $D dropped reaches past the $B events ever written"
pass "discard: the window's first $RING events kept (n$min..n$max), $D later ones dropped and noted"

run ring
case "$note" in *"flight recorder full"*) fail "ring: a discard note: '$note'" ;; esac
[ "$count" -le "$RING" ] || fail "ring: $count events kept, more than a ring"
# The window closed after every burst that ended before start + duration:
# the ring keeps up to the newest of them.
[ "$max" -ge $((U - 1)) ] ||
	fail "ring: the newest kept event n$max is older than n$((U - 1)), written before the end"
[ "$max" -lt "$B" ] || fail "ring: n$max was never written before the result"
pass "ring: the window's last events kept (n$min..n$max, newest before the end n$((U - 1)))"
stop_daemon
