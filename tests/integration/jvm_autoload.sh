#!/usr/bin/env bash
# it_jvm_autoload: stack samples of an unmodified JVM (no -agentpath, run
# as another uid). The daemon detects it as a JVM, loads the JVMTI agent
# through the attach protocol (profilingd-jattach load, as the JVM's user),
# waits for the agent's hello and takes the capture: Java method names in
# the delivered pprof, hot above cold.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run the JVM as another uid"
need_go
U=61023
# The JVM runs as another uid: the agent and the classes must be reachable
# by it wherever the build tree is (a clone under /root is not).
mkdir -p "$T/jvmti" "$T/classes"
cp "$AGENT" "$T/jvmti/" && cp "$CLASSES"/*.class "$T/classes/"
chmod -R a+rX "$T/jvmti" "$T/classes"
AGENT=$T/jvmti/$(basename "$AGENT") CLASSES=$T/classes
start_daemon "[jvm]" "agent = $AGENT"
for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	setpriv --reuid=$U --regid=$U --clear-groups "$jdk/bin/java" -cp "$CLASSES" HotCold 60 \
		> "$T/hc-$name.out" 2> "$T/hc-$name.err" &
	JPID=$!
	JPIDS="$JPIDS $JPID"
	# Started: its perf data file is there (what the daemon detects too).
	for _ in $(seq 100); do [ -e /tmp/hsperfdata_*/$JPID ] 2>/dev/null && break; sleep 0.1; done
	out=$("$APPS/it_request" --pid "$JPID" --type stack --duration-ms 3000 --hz 100) ||
		fail "$name: stack capture of an unmodified JVM failed"
	grep -q "session .*: JVMTI agent loaded into pid $JPID" "$T/daemon.log" ||
		fail "$name: the daemon did not load the agent"
	grep "runtime up: pid $JPID " "$T/daemon.log" | qgrep "kind jvm" || fail "$name: no jvm hello"
	hot=$(pprof_flat "$out" HotCold.hot)
	cold=$(pprof_flat "$out" HotCold.cold)
	awk -v h="$hot" -v c="$cold" 'BEGIN { exit !(h > 0 && c > 0 && h > c) }' ||
		{ go tool pprof -top "$out"; fail "$name: want HotCold.hot above HotCold.cold"; }
	kill "$JPID"; wait "$JPID" 2>/dev/null || true
	pass "$name: agent loaded live by the daemon; HotCold.hot ${hot}%, HotCold.cold ${cold}%"
done
stop_daemon
