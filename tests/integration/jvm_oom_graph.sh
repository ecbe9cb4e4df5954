#!/usr/bin/env bash
# it_jvm_oom_graph: an OOM-caused heap dump as a Perfetto heap graph
# (issue #20). OomThread (-Xmx64m, as an unprivileged uid) fills its heap
# on a thread named hg-oom-filler while two others sleep; a system OOM
# trigger with format = perfetto matches it by main class. The agent names
# the failing thread's OS tid in its OOM event, the daemon keeps it (one of
# the JVM's threads) and passes it to the redactor, and the delivered trace:
# - decodes with protoc against proto/perfetto_heap.proto;
# - has upstream's ArtProcessMetadata with the JVM's pid, uid and argv[0],
#   the OOME marker, and an oom_thread_java_stack that is the filler's
#   (OomThread.fillHeap, leaf first) and no other thread's (no
#   OomThread.idle, no OomThread.main);
# - names that tid "hg-oom-filler" in its ProcessTree, whose process entry
#   has the JVM's pid, uid and cmdline (ending in OomThread).
# On every JDK present (OpenJDK 17, Temurin 25).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run the JVM as another uid"
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
[ -f "$CLASSES/OomThread.class" ] || skip "OomThread.class was not built"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
U=61124
mkdir -p "$T/jvmti" "$T/classes"
cp "$AGENT" "$T/jvmti/" && cp "$CLASSES"/*.class "$T/classes/"
chmod -R a+rX "$T/jvmti" "$T/classes"
AGENT=$T/jvmti/$(basename "$AGENT") CLASSES=$T/classes

# The block of protoc's text output that opens with the line matching $1.
block() {
	awk -v open="$1" '
		!on && $0 ~ open { on = 1; depth = 0 }
		on && !done { print; depth += gsub(/{/, "{"); depth -= gsub(/}/, "}"); if (depth == 0) done = 1 }'
}

start_daemon "[trigger.javaoom]" "type = oom" "java_main = OomThread" "format = perfetto"
for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	go=$T/go-$name
	setpriv --reuid=$U --regid=$U --clear-groups "$jdk/bin/java" -Xmx64m \
		"-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$CLASSES" OomThread "$go" \
		> "$T/oom-$name.out" 2> "$T/oom-$name.err" &
	JPID=$!
	JPIDS="$JPIDS $JPID"
	wait_runtime "$JPID"
	touch "$go"; chmod 666 "$go"
	for _ in $(seq 1200); do kill -0 "$JPID" 2>/dev/null || break; sleep 0.1; done
	wait "$JPID" || true
	kill -0 "$JPID" 2>/dev/null && fail "$name: the JVM did not exit after its OOM"
	grep -q "oom trigger of sys:javaoom fired for pid $JPID" "$T/daemon.log" ||
		fail "$name: the system OOM trigger did not fire"
	sid=$(sed -n "s/.*oom trigger of sys:javaoom fired for pid $JPID: session \([0-9]*\)\$/\1/p" "$T/daemon.log")
	grep -q "pid $JPID has no OOM trigger" "$T/daemon.log" && fail "$name: the OOM was also seen as untriggered"
	tid=$(sed -n "s/.*the OOM's failing thread is \([0-9]*\) of pid $JPID\$/\1/p" "$T/daemon.log" | tail -1)
	[ -n "$tid" ] || fail "$name: the daemon kept no failing thread for pid $JPID"
	# The session's own result (its id ends the name).
	f=
	for _ in $(seq 300); do
		f=$(ls "$T/state/results/$U"/*_"$sid".perfetto-trace 2>/dev/null | sed -n 1p || true)
		[ -n "$f" ] && break
		sleep 0.1
	done
	[ -n "$f" ] || fail "$name: no heap graph stored for uid $U (session $sid)"
	txt=$T/oom-$name.txt
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_heap.proto \
		< "$f" > "$txt" || fail "$name: protoc cannot decode the OOM heap graph"

	apm=$(block '^ *art_process_metadata {' < "$txt")
	[ -n "$apm" ] || fail "$name: no art_process_metadata"
	echo "$apm" | qgrep -x "    pid: $JPID" || fail "$name: metadata pid is not $JPID: $apm"
	echo "$apm" | qgrep -x "    uid: $U" || fail "$name: metadata uid is not $U"
	echo "$apm" | qgrep -x "    process_name: \"$jdk/bin/java\"" ||
		fail "$name: metadata process_name is not $jdk/bin/java"
	echo "$apm" | qgrep -x "    oom_allocation_size: 0" || fail "$name: no OOME marker"
	stack=$(echo "$apm" | block '^ *oom_thread_java_stack {')
	[ -n "$stack" ] || fail "$name: no oom_thread_java_stack"
	echo "$stack" | qgrep 'method_name: "OomThread.fillHeap"' ||
		fail "$name: the OOM stack is not the filler's: $stack"
	echo "$stack" | qgrep -E 'method_name: "OomThread\.(idle|main)"' &&
		fail "$name: the OOM stack holds another thread's frames: $stack"
	echo "$stack" | qgrep 'source_file: "OomThread.java"' || fail "$name: no source file in the OOM stack"
	leaf=$(echo "$stack" | sed -n 's/.*method_name: //p' | sed -n 1p)

	tree=$(block '^ *process_tree {' < "$txt")
	proc=$(echo "$tree" | block '^ *processes {')
	echo "$proc" | qgrep -x "      pid: $JPID" || fail "$name: process_tree pid is not $JPID"
	echo "$proc" | qgrep -x "      uid: $U" || fail "$name: process_tree uid is not $U"
	echo "$proc" | qgrep -x "      cmdline: \"$jdk/bin/java\"" || fail "$name: cmdline[0] is not the java binary"
	echo "$proc" | qgrep "cmdline: \"OomThread\"" || fail "$name: cmdline lacks OomThread"
	thr=$(echo "$tree" | awk -v t="      tid: $tid" '$0 == "    threads {" { b = "" } { b = b $0 "\n" } $0 == t { hit = 1 } $0 == "    }" && hit && !done { printf "%s", b; done = 1 }')
	echo "$thr" | qgrep 'name: "hg-oom-filler"' ||
		fail "$name: thread $tid (the failing one) is not hg-oom-filler in the tree: $thr"
	pass "$name: OOM heap graph: failing thread $tid hg-oom-filler, stack leaf $leaf, pid/uid/cmdline of $JPID"
done
stop_daemon
