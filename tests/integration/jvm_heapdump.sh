# it_jvm_heapdump: heap dumps of unmodified HotSpot JVMs through the attach
# protocol, delivered redacted, checked with the tests' own HPROF reader
# (hprof_check) against `jcmd GC.class_histogram` taken right after.
# Runs once per JDK under /usr/lib/jvm (OpenJDK 17, Temurin 25), with the
# JVM as an unprivileged uid so that the helper's user switch is exercised.
. "$(dirname "$0")/lib.sh"

command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run the JVM as another uid"
JDKS=()
for j in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
	[ -x "$j/bin/java" ] && [ -x "$j/bin/javac" ] && [ -x "$j/bin/jcmd" ] && JDKS+=("$j")
done
[ ${#JDKS[@]} -gt 0 ] || skip "no JDK (OpenJDK 17 or Temurin 25) under /usr/lib/jvm"
U=61021
VVJAR=/usr/share/visualvm/visualvm/modules/org-graalvm-visualvm-lib-jfluid-heap.jar
N=100000 M=50000

start_daemon
for J in "${JDKS[@]}"; do
	name=$(basename "$J")
	cls=$T/classes-$name
	mkdir -p "$cls"
	"$J/bin/javac" --release 11 -d "$cls" "$(dirname "$0")/apps/java/Leak.java" ||
		fail "$name: javac"
	chmod -R a+rX "$cls"
	out=$T/leak-$name.out
	setpriv --reuid=$U --regid=$U --clear-groups "$J/bin/java" -Xmx512m -cp "$cls" Leak $N $M 300 \
		> "$out" 2>&1 &
	JP=$!
	for _ in $(seq 300); do grep -q ready "$out" && break; sleep 0.1; done
	grep -q ready "$out" || fail "$name: Leak did not start: $(cat "$out")"

	path=$("$APPS/it_request" --pid $JP --type heapdump) ||
		fail "$name: heap dump request failed"
	hist=$(setpriv --reuid=$U --regid=$U --clear-groups "$J/bin/jcmd" $JP GC.class_histogram) ||
		fail "$name: jcmd GC.class_histogram"
	case "$path" in *.hprof) ;; *) fail "$name: result is not an .hprof: $path" ;; esac
	[ "$(stat -c %u "$path")" = $U ] || fail "$name: result not owned by the app's uid"
	grep -q "JVM heap dump of pid $JP: ok" "$T/daemon.log" || fail "$name: no helper status in the log"
	facts=$("$CHECKERS/hprof_check" "$path" 'Leak$Node' '[B') ||
		fail "$name: the delivered HPROF does not parse"
	echo "$facts" | sed "s/^/$name: /" | grep -v '^.*: thread ' || true

	fact() { echo "$facts" | awk -v k="$1" -v c="$2" '$1 == k && $2 == c { print $NF }'; }
	hcount() { echo "$hist" | awk -v c="$1" '$4 == c { print $2 }'; }
	nodes=$(fact instances 'Leak$Node') hnodes=$(hcount 'Leak$Node')
	bytes=$(fact instances '[B') hbytes=$(hcount '[B')
	echo "$name: histogram Leak\$Node $hnodes [B $hbytes"
	[ "$nodes" = $N ] && [ "$hnodes" = $N ] ||
		fail "$name: Leak\$Node: dump $nodes, histogram $hnodes, expected $N"
	# byte[] of the JVM itself come and go between two commands (the
	# histogram's own strings): the 1024-byte ones are exactly ours.
	[ "$(fact arrays_len '[B')" -ge $M ] || fail "$name: fewer than $M byte[1024] in the dump"
	d=$((bytes - hbytes)); d=${d#-}
	[ "$d" -le 64 ] || fail "$name: [B: dump $bytes vs histogram $hbytes"
	[ "$(echo "$facts" | awk '$1 == "nonzero_primitive_arrays" { print $2 }')" = 0 ] ||
		fail "$name: primitive array contents survived redaction"
	[ "$(echo "$facts" | awk '$1 == "max_refs_to" { print $3 }')" -ge $N ] ||
		fail "$name: no object array holds the $N references to the nodes"
	echo "$facts" | qgrep '^thread main state TIMED_WAITING frames .*Leak.sleepHere,Leak.main' ||
		fail "$name: the main thread's stack (Thread.print) is not in the dump"
	# The real reader: VisualVM's own HPROF library (Debian's visualvm).
	if [ -f "$VVJAR" ]; then
		"$J/bin/javac" -cp "$VVJAR" -d "$T/vv-$name" "$(dirname "$0")/check/VisualVMCheck.java" ||
			fail "$name: javac VisualVMCheck"
		cp "$path" "$T/vv-$name/dump.hprof"
		vv=$("$J/bin/java" -cp "$VVJAR:$T/vv-$name" VisualVMCheck "$T/vv-$name/dump.hprof" \
			'Leak$Node' 'byte[]' 2>&1) || { echo "$vv"; fail "$name: VisualVM cannot open the dump"; }
		echo "$vv" | grep -v visualvm_stack | sed "s/^/$name: /"
		vfact() { echo "$vv" | awk -v k="$1" -v c="$2" '$1 == k && $2 == c { print $3 }'; }
		[ "$(vfact visualvm_instances 'Leak$Node')" = $N ] || fail "$name: VisualVM counts other nodes"
		[ "$(vfact visualvm_instances 'byte[]')" = "$bytes" ] || fail "$name: VisualVM counts other byte[]"
		[ "$(vfact visualvm_max_refs_to 'Leak$Node')" -ge $N ] || fail "$name: VisualVM sees no list->node edges"
		echo "$vv" | qgrep '^visualvm_stack Leak.main(Leak.java' ||
			fail "$name: VisualVM shows no stack for the main thread"
	else
		echo "$name: skipped: VisualVM check: $VVJAR not installed (Debian package visualvm)"
	fi
	kill $JP; wait $JP 2>/dev/null || true
	pass "$name: heap dump delivered, $nodes Leak\$Node = histogram, [B $bytes vs $hbytes, values zeroed, stacks attached"
done

# [jvm] heap_dump_via_agent: the connected agent takes the dump over JNI
# (HotSpotDiagnosticMXBean) instead of the attach protocol.
stop_daemon
start_daemon "[jvm]" "heap_dump_via_agent = true"
J=${JDKS[0]}
AGENT=$BUILD/runtime/jvmti/libprofiling_jvmti.so
if [ -f "$AGENT" ]; then
	"$J/bin/java" "-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$T/classes-$(basename "$J")" \
		Leak $N $M 300 > "$T/leak-agent.out" 2>&1 &
	JP=$!
	for _ in $(seq 300); do grep -q ready "$T/leak-agent.out" && break; sleep 0.1; done
	for _ in $(seq 100); do grep -q "runtime up: pid $JP " "$T/daemon.log" && break; sleep 0.1; done
	path=$("$APPS/it_request" --pid $JP --type heapdump) ||
		fail "agent heap dump request failed"
	grep -q "start_jvm_dump: session .*pid $JP" "$T/daemon.log" &&
		fail "heap_dump_via_agent: the daemon used the attach protocol"
	facts=$("$CHECKERS/hprof_check" "$path" 'Leak$Node') ||
		fail "the agent's HPROF does not parse"
	echo "$facts" | qgrep "^instances Leak\$Node $N$" || fail "agent dump: $facts"
	[ "$(echo "$facts" | awk '$1 == "nonzero_primitive_arrays" { print $2 }')" = 0 ] ||
		fail "agent dump: values survived redaction"
	kill $JP; wait $JP 2>/dev/null || true
	pass "heap dump by the JVMTI agent (heap_dump_via_agent): $N Leak\$Node, values zeroed"
else
	echo "skipped: agent heap dump: $AGENT not built"
fi

# Not a JVM: a heap dump is refused with a reason, not attempted.
sleep 30 & NP=$!
if "$APPS/it_request" --pid $NP --type heapdump 2> "$T/nonjvm.err"; then
	fail "a heap dump of a non-JVM process succeeded"
fi
kill $NP 2>/dev/null || true
grep -q "invalid request" "$T/nonjvm.err" || fail "non-JVM heap dump: $(cat "$T/nonjvm.err")"
pass "non-JVM heap dump refused at once: $(cat "$T/nonjvm.err")"
stop_daemon
