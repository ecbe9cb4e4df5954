#!/usr/bin/env bash
# it_heap_context: a heap capture with kernel context in one file (issue
# #20, "Kernel context"). With the background ring on ([trace] background),
# a JVM heap dump asked for with format perfetto and background 1 s
# (profctl request --background, as root for an unprivileged JVM) is one
# Perfetto trace: the heap graph's packets, then the ring's sched data
# from 1 s before the admission, redacted by the trace rules. It decodes
# with protoc against both schemas (perfetto_heap.proto for the graph,
# perfetto_trace.proto for the sched data); the graph still counts its
# objects; the sched data holds the JVM's own tasks by pid and no foreign
# task's name (a loop of pdforeignproc runs beside it); the daemon read the
# ring. Without background_ms the same dump has no sched data. First, the
# redactor alone: a kernel context that fails is cut back.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

# The redactor alone, under its seccomp filter: a kernel context that
# fails (nothing of the app's in it: an empty stream, a stream of another
# pid's only, garbage) is cut back off the output, and the heap graph is
# delivered exactly as without it.
R=$BUILD/redact/profilingd-redact
H=$SRC/tests/fuzz/corpus/hprof/heapdump-id8.hprof
"$R" --format heapgraph --pids 4242 --allow-root < "$H" > "$T/alone.pt" 2> /dev/null ||
	fail "heapgraph of $H failed"
head -c 4096 /dev/urandom > "$T/garbage.ftrace"
: > "$T/empty.ftrace"
for k in empty garbage; do
	rc=0
	"$R" --format heapgraph --pids 4242 --allow-root --kernel-fd 3 < "$H" > "$T/with-$k.pt" \
		3< "$T/$k.ftrace" 2> "$T/with-$k.err" || rc=$?
	[ $rc -eq 0 ] || fail "$k kernel context: the redactor failed ($rc): $(cat "$T/with-$k.err")"
	cmp -s "$T/alone.pt" "$T/with-$k.pt" || fail "$k kernel context: not cut back to the heap graph"
	grep -q ' kernel_kept=0$' "$T/with-$k.err" || fail "$k kernel context: status $(cat "$T/with-$k.err")"
done
pass "a failed kernel context is cut back: the heap graph alone ($(stat -c %s "$T/alone.pt") bytes)"

command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run the JVM as another uid"
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
FT=$BUILD/runtime/ftrace/profilingd-ftrace
PROFCTL=$BUILD/tools/profctl/profctl
J=
for j in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
	[ -x "$j/bin/java" ] && [ -x "$j/bin/javac" ] && J=$j && break
done
[ -n "$J" ] || skip "no JDK (OpenJDK 17 or Temurin 25) under /usr/lib/jvm"
BGDIR=
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	[ -d "$d/instances" ] && BGDIR=$d/instances/profilingd-bg && break
done
[ -n "$BGDIR" ] || skip "no tracefs with instances here (test in tests/vm)"
U=61126

# A real kernel stream with no task of the "app" (a pid no process has)
# fails after the redactor has written part of it: cut back all the same.
"$FT" --duration-ms 200 > "$T/foreign.ftrace" 2> "$T/ft.err" || fail "profilingd-ftrace: $(cat "$T/ft.err")"
[ -s "$T/foreign.ftrace" ] || fail "profilingd-ftrace recorded nothing"
NOPID=$(($(cat /proc/sys/kernel/pid_max) - 1))
[ -d /proc/$NOPID ] && skip "pid $NOPID exists: no pid is free of sched events"
"$R" --format heapgraph --pids $NOPID --allow-root < "$H" > "$T/alone-np.pt" 2> /dev/null ||
	fail "heapgraph of $H failed"
"$R" --format heapgraph --pids $NOPID --allow-root --kernel-fd 3 < "$H" > "$T/with-foreign.pt" \
	3< "$T/foreign.ftrace" 2> "$T/with-foreign.err" || fail "foreign kernel context: $(cat "$T/with-foreign.err")"
cmp -s "$T/alone-np.pt" "$T/with-foreign.pt" || fail "a foreign-only kernel context was not cut back"
grep -q ' kernel_kept=0$' "$T/with-foreign.err" || fail "foreign: status $(cat "$T/with-foreign.err")"
pass "a foreign-only kernel stream ($(stat -c %s "$T/foreign.ftrace") bytes) is cut back too"

cp "$(command -v sleep)" "$T/pdforeignproc"
( while :; do "$T/pdforeignproc" 0.005; done ) &
FOREIGN=$!
JP=
trap '[ -n "$JP" ] && kill $JP 2>/dev/null; kill $FOREIGN 2>/dev/null || true; "$FT" --background off 2>/dev/null || true; cleanup' EXIT

wait_log() { # wait_log PATTERN: up to 20 s for a daemon log line
	for _ in $(seq 400); do
		grep -q "$1" "$T/daemon.log" && return 0
		sleep 0.05
	done
	fail "no log line like '$1'"
}

cls=$T/classes
mkdir -p "$cls"
"$J/bin/javac" --release 11 -d "$cls" "$(dirname "$0")/apps/java/HeapGraphCounts.java" || fail "javac"
chmod -R a+rX "$cls"

start_daemon "[trace]" "background = on" "background_buffer_kb = 32768" "background_max_s = 10"
wait_log "background trace: ok background on"
HG_SECRET=x setpriv --reuid=$U --regid=$U --clear-groups "$J/bin/java" -Xmx128m -cp "$cls" \
	HeapGraphCounts 3000 1000 env 300 > "$T/app.out" 2>&1 &
JP=$!
for _ in $(seq 300); do grep -q ready "$T/app.out" && break; sleep 0.1; done
grep -q ready "$T/app.out" || fail "HeapGraphCounts did not start: $(cat "$T/app.out")"
sleep 1.2 # the JVM's own tasks in the ring's window (no time is asserted)

# dump ARGS...: a heap dump of the JVM through profctl; sets path.
dump() {
	timeout 120 "$PROFCTL" -s "$T/state/control.sock" request --pid $JP --type heap-dump \
		--format perfetto "$@" --wait > "$T/ctl.out" 2>&1 || { cat "$T/ctl.out"; fail "profctl request $*"; }
	path=$(grep -o '/[^ ]*\.perfetto-trace' "$T/ctl.out" | sed -n 1p)
	[ -f "$path" ] || fail "no result file: $(cat "$T/ctl.out")"
}

# The ring is one tracefs instance for the whole machine, and any daemon
# started with [trace] background off removes it (another test's, on a
# shared machine): when it is gone at the dump, the daemon is restarted
# (which makes it again) and the dump retried, twice; then "skipped".
for try in 1 2 3; do
	dump --background 1s
	line=$(grep 'kernel sched data: ok' "$T/daemon.log" | tail -1)
	grep -q 'background=read' <<< "$line" && break
	grep -q 'background=absent' <<< "$line" && [ ! -d "$BGDIR" ] ||
		fail "the recorder did not read the ring: $line"
	[ $try -lt 3 ] || skip "another daemon removed the shared background ring during each try"
	echo "note: the ring was removed by another daemon during try $try; again"
	stop_daemon
	start_daemon "[trace]" "background = on" "background_buffer_kb = 32768" "background_max_s = 10"
	wait_log "background trace: ok background on"
	sleep 1.2
done
kept=$(grep -o 'kernel_kept=[0-9]*' "$T/daemon.log" | tail -1 | cut -d= -f2)
[ "${kept:-0}" -gt 0 ] || fail "the redactor kept no kernel context"
protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_heap.proto \
	< "$path" > "$T/heap.txt" || fail "protoc cannot decode the heap half (perfetto_heap.proto)"
protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
	< "$path" > "$T/sched.txt" || fail "protoc cannot decode the sched half (perfetto_trace.proto)"
facts=$("$CHECKERS/heapgraph_check" "$path") || fail "heapgraph_check cannot read the file"
count() { echo "$facts" | awk -v c="$1" '$1 == "count" && $2 == c { print $3 }'; }
[ "$(count 'HeapGraphCounts$Alpha')" = 3000 ] || fail "the graph lost its objects: $(count 'HeapGraphCounts$Alpha') Alpha"
grep -q 'ftrace_events {' "$T/sched.txt" || fail "no sched data in the file"
grep -q 'heap_graph {' "$T/heap.txt" || fail "no heap graph in the file"
# The JVM's tasks by pid in the sched data; no foreign name anywhere.
tids=$(ls /proc/$JP/task)
hit=0
for t in $tids; do
	grep -Eq "(pid|next_pid|prev_pid): $t\$" "$T/sched.txt" && hit=$((hit + 1))
done
[ "$hit" -gt 0 ] || fail "none of the JVM's $(echo $tids | wc -w) threads is in the sched data"
grep -qa pdforeignproc "$path" && fail "a foreign task's name is in the file"
pass "heap dump + kernel context: graph intact, $kept sched records kept, $hit JVM threads seen, no foreign name"

dump
protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
	< "$path" > "$T/sched-none.txt" || fail "protoc cannot decode the plain dump"
grep -q 'ftrace_events {' "$T/sched-none.txt" && fail "a dump without background_ms has sched data"
pass "without background_ms: the heap graph alone"
kill $JP; wait $JP 2>/dev/null || true
JP=
stop_daemon
# The ring outlives the daemon: the trap takes it down (profilingd-ftrace
# --background off, as trace_bg.sh's does).
