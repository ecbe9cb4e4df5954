#!/usr/bin/env bash
# The running background trace ([trace] background, docs/PERFETTO.md): a
# system trace asked for with background_ms N, admitted by boot time T,
# starts at or before T - N, holds the app's sched events from before T,
# and of other tasks only what §6 keeps (anonymous switch sides: no names,
# synthetic pids, none of their wakeups, forks, exits or renames); for a
# request and for an ANOMALY trigger. profctl request --background reaches
# back too. N above [trace] background_max_s is refused, and a restart
# with the ring off removes the one a run with it on left behind. Decoded
# with protoc against proto/perfetto_trace.proto (trace.sh's schema check).
. "$(dirname "$0")/lib.sh"
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
FT=$BUILD/runtime/ftrace/profilingd-ftrace
BGDIR=
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	[ -d "$d/instances" ] && BGDIR=$d/instances/profilingd-bg && break
done
[ -n "$BGDIR" ] || skip "no tracefs with instances here (test in tests/vm)"
# T: a request's synchronous answer, or for a trigger the answer to a
# request sent after the anomaly on the same connection (trace_app.c).
# The ring holds what fits: on this shared machine the default 4 MiB per
# CPU held 1.3 s under others' builds (docs/PERFETTO.md has the figures),
# so the test's ring is 32 MiB per CPU and asks for 2 s.
BG_MS=2000
PRE_MS=4000

# A foreign task with a name of its own, running before and during the
# capture: its name must never appear, nor its pids.
cp "$(command -v sleep)" "$T/pdforeignproc"
( while :; do "$T/pdforeignproc" 0.005; done ) &
FOREIGN=$!
trap 'kill $FOREIGN 2>/dev/null || true; "$FT" --background off 2>/dev/null || true; cleanup' EXIT

wait_log() { # wait_log PATTERN: up to 20 s for a daemon log line
	for _ in $(seq 400); do
		grep -q "$1" "$T/daemon.log" && return 0
		sleep 0.05
	done
	fail "no log line like '$1'"
}

start_daemon "[trace]" "background = on" "background_buffer_kb = 32768" "background_max_s = 10"
wait_log "background trace: ok background on"
[ -d "$BGDIR" ] || fail "the daemon said the ring is on, but $BGDIR is missing"
echo "ring: $(cat "$BGDIR/buffer_size_kb") KiB per CPU, $(cat "$BGDIR/buffer_total_size_kb") KiB in all"

# Over the cap: refused at once, with the key named.
"$APPS/trace_app" 11000 0 > /dev/null 2> "$T/refused.err" && fail "background_ms 11000 over a 10 s cap was admitted"
grep -q "invalid request" "$T/refused.err" || { cat "$T/refused.err"; fail "not refused as an invalid request"; }
grep -q "background_ms must be 0..10000" "$T/daemon.log" || fail "the refusal does not name background_ms"

# check_case MODE: a request ("") or an ANOMALY trigger ("trigger").
check_case() {
	local mode=$1 out T_NS B_NS tids path n
	n=$(grep -c 'kernel sched data: ok' "$T/daemon.log" || true)
	out=$("$APPS/trace_app" "$BG_MS" "$PRE_MS" $mode 2> "$T/app.err") || { cat "$T/app.err"; fail "${mode:-request}: trace capture failed"; }
	read -r T_NS B_NS tids path <<< "$out"
	tids=${tids//,/ }
	case "$path" in *.perfetto-trace) ;; *) fail "unexpected result line $out";; esac
	[ "$(grep -c 'kernel sched data: ok' "$T/daemon.log")" -gt "$n" ] || fail "${mode:-request}: no kernel half"
	grep -o 'kernel sched data: .*' "$T/daemon.log" | tail -1
	grep 'kernel sched data: ok' "$T/daemon.log" | tail -1 | qgrep 'background=read' || fail "the recorder did not read the ring"
	grep 'kernel sched data: ok' "$T/daemon.log" | tail -1 | qgrep 'bg_short_ms=0' || fail "the ring did not reach back $BG_MS ms (a 32 MiB ring per CPU is too small for this load?)"
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
		< "$path" > "$T/trace.txt" || fail "protoc cannot decode the trace"
	echo "${mode:-request} trace: $(stat -c %s "$path") bytes, $(grep -c '^packet {' "$T/trace.txt") packets"
	grep -q 'pdforeignproc' "$T/trace.txt" && fail "a foreign task's name (pdforeignproc) is in the trace"
	grep -q 'comm: "profilingd' "$T/trace.txt" && fail "another process's name (profilingd) is in the trace"
	echo "app tasks at T: $tids"
	# Per ftrace event: its time, its type and the pids it names.
	awk -v tids="$tids" -v t="$T_NS" -v n="$BG_MS" '
	BEGIN { split(tids, a, " "); for (i in a) app[a[i]] = 1; first = 0 }
	/^    event \{/ { ev = 1; ts = 0; type = ""; next }
	ev && /^      timestamp: / { ts = $2; if (!first || ts < first) first = ts; next }
	ev && /^      [a-z_]+ \{/ { type = $1; next }
	ev && /^        (prev_pid|next_pid): / {
		p = $2
		if (p in app) { if (ts < t - 1000000000) before++ }
		else if (p != 0 && p < 1000000000) { print "foreign pid " p " kept in " type " at " ts; bad = 1 }
		next
	}
	ev && /^        (pid|child_pid|parent_pid): / && type != "sched_switch" {
		if (!($2 in app)) { print "foreign " type " of pid " $2 " at " ts; bad = 1 }
		next
	}
	/^    \}/ { ev = 0 }
	END {
		printf "T %s, first kernel event at T - %.3f s, %d switch sides of app threads before T - 1 s\n", t, (t - first) / 1e9, before
		if (!first || first > t - n * 1000000) { print "the trace starts after T - " n " ms"; bad = 1 }
		if (before < 1) { print "no sched events of the app from before T"; bad = 1 }
		exit bad
	}' "$T/trace.txt" || fail "${mode:-request}: the background part is missing or keeps another task's data"
}
check_case ""
check_case trigger

# A process younger than the window: nothing from before it began (its
# pid may have been another process's then), so the trace starts after B.
out=$("$APPS/trace_app" 9000 200 2> "$T/app.err") || { cat "$T/app.err"; fail "young: trace capture failed"; }
read -r T_NS B_NS tids path <<< "$out"
grep -q "the background part starts when pid" "$T/daemon.log" || fail "young: the window was not cut at the process's start"
protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
	< "$path" > "$T/trace.txt" || fail "young: protoc cannot decode the trace"
awk -v b="$B_NS" '/^      timestamp: / { if (!first || $2 < first) first = $2 }
END { printf "young process: first kernel event %.3f s after it began\n", (first - b) / 1e9; exit !(first >= b) }' \
	"$T/trace.txt" || fail "young: kernel events from before the process began"

# profctl request --background: root's capture of a running app.
# trace_app with PRE_MS 30000 is connected and waits before its own request.
"$APPS/trace_app" 0 30000 > /dev/null 2>&1 &
DEMO_PID=$!
wait_log "runtime up: pid $DEMO_PID "
sleep 1.2 # the demo's own tasks in the window (no time is asserted)
n=$(grep -c 'kernel sched data: ok' "$T/daemon.log")
"$BUILD/tools/profctl/profctl" -s "$T/state/control.sock" request --pid "$DEMO_PID" --type trace \
	--duration 500ms --background 1s --wait > "$T/ctl.out" 2>&1 || { cat "$T/ctl.out"; fail "profctl request --background failed"; }
kill "$DEMO_PID" 2>/dev/null || true
wait "$DEMO_PID" 2>/dev/null || true
[ "$(grep -c 'kernel sched data: ok' "$T/daemon.log")" -gt "$n" ] || fail "profctl: no kernel half"
line=$(grep 'kernel sched data: ok' "$T/daemon.log" | tail -1)
from=$(sed -n 's/.* bg_from_ms=\([0-9]*\).*/\1/p' <<< "$line")
echo "profctl request --background 1s: $(grep -o 'background=.*' <<< "$line")"
[ "${from:-0}" -ge 1000 ] || fail "profctl request --background 1s: the ring part reaches back ${from:-0} ms"
stop_daemon

# The ring outlived the daemon; a start with it off takes it down.
[ -d "$BGDIR" ] || fail "the ring is gone after a stop (it should outlive the daemon)"
start_daemon
wait_log "background trace: ok background off removed=1"
[ -d "$BGDIR" ] && fail "a start with [trace] background off left $BGDIR"
stop_daemon

# The systemd unit's ExecStopPost takes it down after any stop (here a
# kill -9, which no code in the daemon sees): the command line of the
# generated unit, with this build's helper for the installed one.
UNIT=$BUILD/policy/systemd/profilingd.service
post=$(sed -n 's/^ExecStopPost=-//p' "$UNIT")
[ -n "$post" ] || fail "$UNIT has no ExecStopPost"
post=${post/#*\/profilingd-ftrace /$BUILD/runtime/ftrace/profilingd-ftrace }
start_daemon "[trace]" "background = on"
wait_log "background trace: ok background on"
kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2> /dev/null || true
DAEMON_PID=
[ -d "$BGDIR" ] || fail "no ring after a kill -9: nothing for ExecStopPost to remove"
# The ring is machine-wide: a trace capture of a test running beside this
# one (ctest -j) reads it while it lasts, and removing it then is EBUSY
# (seen once under ASan). No reader outlives its capture: retry on busy.
for try in $(seq 40); do
	$post 2> "$T/post.err" && break
	grep -q "busy" "$T/post.err" && [ "$try" -lt 40 ] || { cat "$T/post.err"; fail "ExecStopPost ($post) failed"; }
	sleep 0.5
done
grep -q "ok background off removed=1" "$T/post.err" || { cat "$T/post.err"; fail "ExecStopPost: $(cat "$T/post.err")"; }
[ -d "$BGDIR" ] && fail "the unit's ExecStopPost ($post) left $BGDIR"
echo "ExecStopPost ($post) removed the ring a kill -9 left"
pass "background trace (request, trigger, profctl): starts by T - ${BG_MS} ms, app sched data before T, foreign tasks anonymised; cap refused; ring removed when off and by the unit's ExecStopPost"
