#!/usr/bin/env bash
# System trace end to end: an app's flight recorder (3 threads of nested
# slices) merged with kernel sched data from tracefs, redacted, delivered.
# Checked by decoding with protoc against proto/perfetto_trace.proto, a
# schema written from Perfetto's field numbers.
. "$(dirname "$0")/lib.sh"
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
start_daemon
out=$("$APPS/trace_app" 2> "$T/app.err") || { cat "$T/app.err"; fail "trace capture failed"; }
case "$out" in *.perfetto-trace) ;; *) fail "unexpected result name $out";; esac
protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
	< "$out" > "$T/trace.txt" || fail "protoc cannot decode the trace"
echo "trace: $(stat -c %s "$out") bytes, $(grep -c '^packet {' "$T/trace.txt") packets"

# Threads of the app, by descriptor.
threads=$(grep -c 'thread_name: "trace-w' "$T/trace.txt" || true)
[ "$threads" -eq 3 ] || fail "want 3 thread descriptors trace-w1..3, got $threads"

# Slices per thread track: in order, properly nested, names as emitted.
awk '
/^  track_descriptor \{/ { in_td = 1 }
in_td && /^    uuid: / { uuid = $2 }
in_td && /thread_name: "trace-w/ { app[uuid] = 1 }
in_td && /^  \}/ { in_td = 0 }
/^  timestamp: / { ts = $2 }
/^  track_event \{/ { in_te = 1; type = ""; tr = ""; name = "" }
in_te && /^    type: / { type = $2 }
in_te && /^    track_uuid: / { tr = $2 }
in_te && /^    name: / { name = $2; gsub(/"/, "", name) }
in_te && /^  \}/ {
	in_te = 0
	if (!(tr in app)) next
	if (tr in last && ts < last[tr]) { print "timestamps go back on track " tr; bad = 1 }
	last[tr] = ts
	if (type == "TYPE_SLICE_BEGIN") {
		want = depth[tr] == 0 ? "outer-" : "inner-"
		if (index(name, want) != 1 && seen[tr]) { print "track " tr ": " name " at depth " depth[tr]; bad = 1 }
		stack[tr, depth[tr]++] = name; seen[tr] = 1
	} else if (type == "TYPE_SLICE_END") {
		if (depth[tr] > 0) { depth[tr]--; if (depth[tr] == 0) outer[tr]++ }
		else if (seen[tr]) { print "unmatched end on track " tr; bad = 1 }
	} else if (type == "TYPE_INSTANT") {
		if (seen[tr] && depth[tr] != 2) { print "instant outside inner on " tr; bad = 1 }
	}
}
END {
	n = 0
	for (t in app) { n++; printf "thread track %s: %d complete outer slices\n", t, outer[t]; if (outer[t] < 50) bad = 1 }
	if (n != 3) bad = 1
	exit bad
}' "$T/trace.txt" || fail "slices are missing, out of order or badly nested"

# Kernel data: sched slices of the app's threads are there, others are anonymous.
tids=$(awk '/^      tid: / { print $2 }' "$T/trace.txt" | sort -u | tr '\n' ' ')
app_sw=0
for t in $tids; do
	n=$(grep -cE "^ +(next|prev)_pid: $t\$" "$T/trace.txt" || true)
	app_sw=$((app_sw + n))
done
echo "sched_switch sides naming app threads ($tids): $app_sw"
[ "$app_sw" -gt 0 ] || {
	grep -q "no kernel sched data" "$T/daemon.log" && skip "tracefs not usable here: $(grep 'no kernel sched data' "$T/daemon.log" | tail -1)"
	fail "no sched events of the app's threads"; }
grep -q 'comm: "profilingd' "$T/trace.txt" && fail "another process's name (profilingd) is in the trace"
grep -q 'comm: "swapper' "$T/trace.txt" && fail "the idle task's name is in the trace"
grep -q 'sched_waking' "$T/trace.txt" && ! grep -A3 'sched_waking' "$T/trace.txt" | qgrep "pid: ${tids%% *}" &&
	echo "(wakings present are the app's)"
stop_daemon
pass "system trace: 3 threads of nested slices, sched data, foreign tasks anonymised"
