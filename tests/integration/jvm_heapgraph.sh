#!/usr/bin/env bash
# it_jvm_heapgraph: heap dumps as Perfetto heap graphs (issue #20). A JVM
# with exact counts (HeapGraphCounts: A Alpha, B Beta, each Beta referring
# to an Alpha, and a secret string) is dumped with format=perfetto through
# the attach protocol, on each JDK present (OpenJDK 17, Temurin 25), as an
# unprivileged uid. The delivered .perfetto-trace decodes with protoc
# against proto/perfetto_heap.proto; heapgraph_check's per-class counts
# equal A, B and `jcmd GC.class_histogram`; the references are there; the
# secret is absent in ASCII and in UTF-16; every thread's stack is a
# PerfSample, main's ending in HeapGraphCounts.main; the process metadata
# (pid, cmdline, uid) is there, with no OOM fields.
. "$(dirname "$0")/lib.sh"

command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run the JVM as another uid"
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
JDKS=()
for j in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
	[ -x "$j/bin/java" ] && [ -x "$j/bin/javac" ] && [ -x "$j/bin/jcmd" ] && JDKS+=("$j")
done
[ ${#JDKS[@]} -gt 0 ] || skip "no JDK (OpenJDK 17 or Temurin 25) under /usr/lib/jvm"
U=61120
A=12345 B=6789
SECRET=Hg20SecretQ7Zx

start_daemon
for J in "${JDKS[@]}"; do
	name=$(basename "$J")
	cls=$T/classes-$name
	mkdir -p "$cls"
	"$J/bin/javac" --release 11 -d "$cls" "$(dirname "$0")/apps/java/HeapGraphCounts.java" ||
		fail "$name: javac"
	chmod -R a+rX "$cls"
	out=$T/hg-$name.out
	# The secret through the environment: the cmdline is the process
	# metadata the graph keeps (the app's own), the heap's values are not.
	HG_SECRET=$SECRET setpriv --reuid=$U --regid=$U --clear-groups "$J/bin/java" -Xmx256m \
		-cp "$cls" HeapGraphCounts $A $B env 300 > "$out" 2>&1 &
	JP=$!
	for _ in $(seq 300); do grep -q ready "$out" && break; sleep 0.1; done
	grep -q ready "$out" || fail "$name: HeapGraphCounts did not start: $(cat "$out")"

	path=$("$APPS/it_request" --pid $JP --type heapdump --format perfetto) ||
		fail "$name: heap dump request (format perfetto) failed"
	hist=$(setpriv --reuid=$U --regid=$U --clear-groups "$J/bin/jcmd" $JP GC.class_histogram) ||
		fail "$name: jcmd GC.class_histogram"
	case "$path" in *.perfetto-trace) ;; *) fail "$name: result is not a .perfetto-trace: $path" ;; esac
	[ "$(stat -c %u "$path")" = $U ] || fail "$name: result not owned by the app's uid"
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_heap.proto \
		< "$path" > "$T/hg-$name.txt" || fail "$name: protoc cannot decode the heap graph"
	facts=$("$CHECKERS/heapgraph_check" "$path") || fail "$name: heapgraph_check cannot read it"
	echo "$facts" | grep -v '^count ' | sed "s/^/$name: /"

	count() { echo "$facts" | awk -v c="$1" '$1 == "count" && $2 == c { print $3 }'; }
	hcount() { echo "$hist" | awk -v c="$1" '$4 == c { print $2 }'; }
	ga=$(count 'HeapGraphCounts$Alpha') gb=$(count 'HeapGraphCounts$Beta')
	ha=$(hcount 'HeapGraphCounts$Alpha') hb=$(hcount 'HeapGraphCounts$Beta')
	echo "$name: Alpha graph $ga histogram $ha; Beta graph $gb histogram $hb"
	[ "$ga" = $A ] && [ "$ha" = $A ] || fail "$name: Alpha: graph $ga, histogram $ha, expected $A"
	[ "$gb" = $B ] && [ "$hb" = $B ] || fail "$name: Beta: graph $gb, histogram $hb, expected $B"
	echo "$facts" | qgrep -x "pids $JP" || fail "$name: the graph is not of pid $JP"
	refs=$(echo "$facts" | awk '$1 == "refs" { print $2 }')
	# Each Beta -> its Alpha, and the two lists' arrays -> every element.
	[ "$refs" -ge $((A + 2 * B)) ] || fail "$name: $refs references, want >= $((A + 2 * B))"
	grep -q 'str: "HeapGraphCounts\$Beta.alpha"' "$T/hg-$name.txt" ||
		fail "$name: the field name Beta.alpha is not interned"
	grep -c 'root_type: ROOT_' "$T/hg-$name.txt" > /dev/null || fail "$name: no roots"
	# The threads' stacks at the dump: one PerfSample per thread, main's
	# stack ending in HeapGraphCounts.main, the thread named.
	samples=$(grep -c 'perf_sample {' "$T/hg-$name.txt")
	[ "$samples" -ge 1 ] || fail "$name: no thread stacks (perf_sample)"
	grep -q 'str: "HeapGraphCounts.main"' "$T/hg-$name.txt" ||
		fail "$name: HeapGraphCounts.main is not among the stacks' functions"
	grep -q 'name: "main"' "$T/hg-$name.txt" || fail "$name: the main thread is not named"
	# Process metadata (issue #20): the process's pid, cmdline and uid in
	# its ProcessTree entry, and ArtProcessMetadata without OOM fields (no
	# OOM caused this dump).
	grep -qx "    uid: $U" "$T/hg-$name.txt" || fail "$name: no uid $U in the process metadata"
	grep -qx "      cmdline: \"HeapGraphCounts\"" "$T/hg-$name.txt" ||
		fail "$name: the cmdline is not in the process tree"
	grep -qx "    process_name: \"$J/bin/java\"" "$T/hg-$name.txt" ||
		fail "$name: ArtProcessMetadata.process_name is not $J/bin/java"
	grep -q "oom_" "$T/hg-$name.txt" && fail "$name: OOM fields in a dump no OOM caused"
	# No values: the secret's characters in any encoding.
	grep -qa "$SECRET" "$path" && fail "$name: the secret is in the graph (ASCII)"
	u16=$(printf '%s' "$SECRET" | iconv -f ascii -t utf-16le | od -An -tx1 | tr -d ' \n')
	od -An -tx1 -v "$path" | tr -d ' \n' | qgrep "$u16" &&
		fail "$name: the secret is in the graph (UTF-16)"
	kill $JP; wait $JP 2>/dev/null || true
	pass "$name: heap graph: Alpha $ga, Beta $gb = histogram, $refs references, $samples thread stacks, no values"
done

# profctl request --format: the same through control.sock, and refused
# where the type has no such format.
PROFCTL=$BUILD/tools/profctl/profctl
export PROFCTL_SOCKET=$T/state/control.sock
J=${JDKS[0]}
setpriv --reuid=$U --regid=$U --clear-groups "$J/bin/java" -cp "$T/classes-$(basename "$J")" \
	HeapGraphCounts 100 50 $SECRET 300 > "$T/hg-ctl.out" 2>&1 &
JP=$!
for _ in $(seq 300); do grep -q ready "$T/hg-ctl.out" && break; sleep 0.1; done
timeout 120 "$PROFCTL" request --pid $JP --type heap-dump --format perfetto --wait > "$T/ctl.txt" ||
	{ cat "$T/ctl.txt"; fail "profctl request --format perfetto failed"; }
grep -Eq "done: result [0-9]+ at .*\.perfetto-trace" "$T/ctl.txt" || fail "profctl: $(cat "$T/ctl.txt")"
if "$PROFCTL" request --pid $JP --type stack --format perfetto > "$T/ctl-bad.txt" 2>&1; then
	fail "a stack capture in Perfetto format was accepted"
fi
grep -q "format" "$T/ctl-bad.txt" || fail "refusal does not name the format: $(cat "$T/ctl-bad.txt")"
"$PROFCTL" request --pid $JP --type heap-dump --format json > /dev/null 2>&1 &&
	fail "profctl accepted --format json"
kill $JP; wait $JP 2>/dev/null || true
pass "profctl request --format perfetto: $(grep -o '[^ ]*\.perfetto-trace' "$T/ctl.txt" | xargs basename)"
stop_daemon
