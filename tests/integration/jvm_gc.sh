#!/usr/bin/env bash
# GC pauses in a system trace: GcLoop calls System.gc() every 200 ms; the
# agent's GarbageCollectionStart/Finish ring becomes "GC" slices on the
# JVM's GC thread track, which survive the daemon's redaction. Decoded with
# protoc against proto/perfetto_trace.proto; on each JDK present.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
start_daemon

for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	jvm_start "$jdk" "gc-$name" "-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$CLASSES" GcLoop 60
	wait_runtime "$JPID"
	out=$("$APPS/it_request" --pid "$JPID" --type trace --duration-ms 2000) ||
		fail "$name: system trace through the daemon failed"
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
		< "$out" > "$T/trace.txt" || fail "$name: protoc cannot decode the trace"
	# GC slices: begins named "GC" and their ends, on a thread track of the JVM.
	res=$(awk -v pid="$JPID" '
	/^  track_descriptor \{/ { in_td = 1; u = ""; p = "" }
	in_td && /^    uuid: / { u = $2 }
	in_td && /^      pid: / { p = $2 }
	in_td && /^  \}/ { in_td = 0; if (p == pid) jvm[u] = 1 }
	/^  track_event \{/ { in_te = 1; type = ""; tr = ""; nm = "" }
	in_te && /^    type: / { type = $2 }
	in_te && /^    track_uuid: / { tr = $2 }
	in_te && /^    name: / { nm = $2 }
	in_te && /^  \}/ { in_te = 0
		if (!(tr in jvm)) next
		if (type == "TYPE_SLICE_BEGIN" && nm == "\"GC\"") { b++; d[tr]++ }
		else if (type == "TYPE_SLICE_END" && d[tr] > 0) { e++; d[tr]-- } }
	END { printf "%d %d\n", b, e }' "$T/trace.txt")
	begins=${res% *} ends=${res#* }
	echo "$name: $begins GC slices begun, $ends ended on the JVM's tracks"
	[ "$begins" -ge 3 ] || { head -60 "$T/trace.txt"; fail "$name: fewer than 3 GC slices"; }
	[ "$ends" -ge $((begins - 1)) ] || fail "$name: GC slices are not closed ($begins begun, $ends ended)"
	grep -q "thread_name: \"VM Thread\"" "$T/trace.txt" || qgrep "thread_name: \"GC" "$T/trace.txt" ||
		echo "note: GC thread track name: $(grep thread_name "$T/trace.txt" | sort -u | sed -n 1,3p)"
	kill "$JPID"; wait "$JPID" 2>/dev/null || true
done
stop_daemon
pass "GC slices in Java system traces on:$JDKS"
