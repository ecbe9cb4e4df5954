#!/usr/bin/env bash
# it_jvm_mem_oom: a JVM whose -Xmx (1 GiB) is far above its memory cgroup's
# limit (cgroup v1 here, 256 MiB): the kernel kills it before Java's
# OutOfMemoryError, so the agent's ResourceExhausted never comes. The
# memory watcher's warning (a system OOM trigger by main class at 30 % of
# the limit) must take a heap dump, not an allocation sample: stored for
# the JVM's uid, redacted, made before the kill, and linked to the kill.
# tests/vm/init.sh (case jvm) runs the same on cgroup v2.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run the JVM as another uid"
[ -f "$CLASSES/OomGrow.class" ] || skip "OomGrow.class was not built"
V1=/sys/fs/cgroup/memory
[ -w "$V1/cgroup.procs" ] || skip "no writable cgroup v1 memory controller at $V1 (tests/vm covers v2)"
U=61024
mkdir -p "$T/jvmti" "$T/classes"
cp "$AGENT" "$T/jvmti/" && cp "$CLASSES"/OomGrow*.class "$T/classes/"
chmod -R a+rX "$T/jvmti" "$T/classes"
AGENT=$T/jvmti/$(basename "$AGENT") CLASSES=$T/classes
CG=$V1/pd-jvm-oom-$$
mkdir "$CG"
trap 'rmdir "$CG" 2>/dev/null; jvm_cleanup' EXIT
echo $((256 << 20)) > "$CG/memory.limit_in_bytes"
echo 0 > "$CG/memory.swappiness" 2>/dev/null || true

# log_times PATTERN...: the daemon log's stamps (HH:MM:SS.mmm) of each
# PATTERN's first line, as the seconds from the first, "0 / 1.2 / 7.9 s".
log_times() {
	local p
	for p in "$@"; do grep -m 1 "$p" "$T/daemon.log" | cut -d ' ' -f 1; done |
		awk -F : '{ t = $1 * 3600 + $2 * 60 + $3; if (NR == 1) t0 = t
			printf("%s%.1f", (NR > 1 ? " / " : ""), t - t0) } END { print " s" }'
}

# The cgroup too: a daemon of another test run sees this test's JVMs.
start_daemon "[trigger.jvmoom]" "type = oom" "java_main = OomGrow" "cgroup = pd-jvm-oom-$$" \
	"memory_percent = 30"
for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	before=$(ls "$T/state/results/$U" 2>/dev/null | grep -c '\.hprof$' || true)
	# 256 KiB every 10 ms (25 MiB/s): past the warning the limit leaves
	# room for the dump (its file is charged to the cgroup too) and some
	# 5 s of growth before it, against about a second for the dump here.
	rc=0
	sh -c "echo \$\$ > $CG/cgroup.procs && exec setpriv --reuid=$U --regid=$U --clear-groups \
		$jdk/bin/java -XX:+UseSerialGC -Xmx1g -agentpath:$AGENT=socket=$RUNTIME_SOCKET \
		-cp $CLASSES OomGrow 256 10" > "$T/grow-$name.out" 2> "$T/grow-$name.err" || rc=$?
	jpid=$(sed -n 's/^pid //p' "$T/grow-$name.out")
	[ "$rc" -eq 137 ] || fail "$name: the JVM was not SIGKILLed (exit $rc)"
	rm -f "/tmp/.java_pid$jpid" # the killed VM's attach socket stays (ht_attach_sock)
	grep -q OutOfMemoryError "$T/grow-$name.err" && fail "$name: Java's own OutOfMemoryError came first"
	grep -q "oom trigger of sys:jvmoom fired for pid $jpid" "$T/daemon.log" ||
		fail "$name: the OOM trigger did not fire for JVM pid $jpid"
	ldump=$(grep -n "JVM heap dump of pid $jpid: ok" "$T/daemon.log" | sed -n 1p | cut -d : -f 1 || true)
	[ -n "$ldump" ] || fail "$name: no heap dump of pid $jpid was taken at the warning"
	link="OOM-killed .* after this capture (pid $jpid); its heap capture is queued again"
	for _ in $(seq 100); do
		grep -q "$link" "$T/daemon.log" && break
		sleep 0.1
	done
	grep -q "$link" "$T/daemon.log" || fail "$name: the OOM kill of pid $jpid was not linked to the dump"
	lkill=$(grep -n "$link" "$T/daemon.log" | sed -n 1p | cut -d : -f 1 || true)
	[ "$ldump" -lt "$lkill" ] || fail "$name: the heap dump came after the kill"
	f=$(ls -t "$T/state/results/$U"/*.hprof 2>/dev/null | sed -n 1p || true)
	[ -n "$f" ] && [ "$(ls "$T/state/results/$U" | grep -c '\.hprof$')" -gt "$before" ] ||
		fail "$name: no heap dump stored for uid $U"
	facts=$("$CHECKERS/hprof_check" "$f" 'OomGrow$Chunk') || fail "$name: the dump does not parse"
	chunks=$(echo "$facts" | awk '$1 == "instances" { print $3 }')
	# 30 % of 256 MiB less the JVM's own: some 40 MiB of 256 KiB chunks.
	[ "${chunks:-0}" -ge 80 ] || fail "$name: only ${chunks:-no} OomGrow\$Chunk in the dump"
	echo "$facts" | qgrep '^nonzero_primitive_arrays 0$' || fail "$name: the stored dump is not redacted"
	echo "$facts" | qgrep '^thread grower .*OomGrow' || fail "$name: no stack of the grower thread"
	pass "$name: heap dump at 30 % of the cgroup's limit ($(stat -c %s "$f") bytes, $chunks chunks," \
		"redacted), then the OOM kill, linked; warning to dump to kill: $(log_times \
		"oom trigger of sys:jvmoom fired for pid $jpid" "JVM heap dump of pid $jpid: ok" \
		"after this capture (pid $jpid)")"
done
stop_daemon
