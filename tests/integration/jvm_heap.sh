#!/usr/bin/env bash
# Java heap profile through the real daemon: HeapHog allocates 8 KiB arrays
# in makeChunk() nine times as often as small objects elsewhere. The
# SampledObjectAlloc profile must put makeChunk on top of alloc_space, label
# its samples byte[] and the JVM's pid, on each JDK present.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
need_go
start_daemon

for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	jvm_start "$jdk" "hh-$name" "-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$CLASSES" HeapHog 60
	wait_runtime "$JPID"
	grep "runtime up: pid $JPID " "$T/daemon.log" | qgrep "caps 0x[0-9a-f]*[2367abef]" ||
		echo "note: caps line: $(grep "runtime up: pid $JPID " "$T/daemon.log")"
	out=$("$APPS/it_request" --pid "$JPID" --type heap --duration-ms 2000 \
		--interval 65536) || fail "$name: heap profile through the daemon failed"
	go tool pprof -top -sample_index=alloc_space "$out" > "$T/top.txt" 2>&1 ||
		{ cat "$T/top.txt"; fail "$name: go tool pprof cannot read $out"; }
	top=$(awk '/flat%/ { getline; print $NF; exit }' "$T/top.txt")
	flat=$(go tool pprof -top -sample_index=alloc_space "$out" 2>/dev/null |
		awk '$NF == "HeapHog.makeChunk" { sub("%", "", $2); print $2 }')
	echo "$name: top alloc_space site $top (${flat:-0}% flat)"
	[ "$top" = HeapHog.makeChunk ] || { cat "$T/top.txt"; fail "$name: top allocation site is '$top'"; }
	awk -v f="${flat:-0}" 'BEGIN { exit !(f >= 70) }' || { cat "$T/top.txt"; fail "$name: makeChunk only ${flat}%"; }
	grep -q "every 65536 bytes" "$T/top.txt" || { cat "$T/top.txt"; fail "$name: the interval asked for was not used"; }
	go tool pprof -tags -sample_index=alloc_space "$out" > "$T/tags.txt" 2>&1
	grep -q "byte\[\]" "$T/tags.txt" || { cat "$T/tags.txt"; fail "$name: no object_class byte[]"; }
	awk -v p="$JPID" '/^ *pid:/ { on=1; next } on && /^ *$/ { on=0 } on && $NF == p { ok=1 }
		END { exit !ok }' "$T/tags.txt" || { cat "$T/tags.txt"; fail "$name: samples lack pid=$JPID"; }
	kill "$JPID"; wait "$JPID" 2>/dev/null || true
done
stop_daemon
pass "Java heap profiles by allocation site on:$JDKS"
