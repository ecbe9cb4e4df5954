#!/usr/bin/env bash
# Triggers with real signals against the real daemon: an app anomaly
# across a daemon restart, a cooldown, excessive CPU (a short burst does
# not fire), a hang (heartbeats stop), a cold start seen by the proc
# connector that ends at fully drawn.
. "$(dirname "$0")/lib.sh"
need_go
APP=$APPS/trigger_app
start_daemon

# First, with a fresh budget: a second firing inside the period is refused.
out=$("$APP" cooldown) || fail "cooldown"
grep -q "refused: trigger is cooling down" "$T/daemon.log" || fail "cooldown refusal not logged"
echo "ok: second anomaly inside the cooldown made no capture"

# Registering again replaces the trigger (now with no cooldown); it persists.
"$APP" anomaly-register || fail "anomaly-register"
stop_daemon
start_daemon
out=$("$APP" anomaly-fire) || fail "anomaly after a restart"
grep -q "trigger(s) loaded" "$T/daemon.log" || fail "triggers not reloaded"
echo "ok: anomaly trigger survived a restart: $out"


out=$("$APP" cpu) || fail "excessive cpu"
go tool pprof -top "$out" 2>/dev/null > "$T/cpu.txt"
top=$(awk '/flat%/ { getline; print $NF; exit }' "$T/cpu.txt")
[ "$top" = spin_hot ] || { cat "$T/cpu.txt"; fail "top function of the excessive-cpu capture is '$top'"; }
echo "ok: excessive cpu: capture while spinning, top function $top"
# The kernel counted it where perf events are allowed (paranoid <= 2 lets
# the sandboxed daemon count user time of any task)...
if [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -le 2 ]; then
	grep -q "cpu watch of pid [0-9]*: [0-9]* task-clock counters" "$T/daemon.log" ||
		fail "the cpu watcher did not use perf counters"
	echo "ok: excessive cpu counted by task-clock perf counters"
fi
# ...and the /proc polling fallback still fires when they are off.
stop_daemon
start_daemon "[cpu]" "perf_events = false"
grep -q "cpu: /proc/<pid>/stat every 250 ms (0 processes): no perf counters: off" "$T/daemon.log" ||
	fail "the cpu watcher's status does not say it polls"
out=$("$APP" cpu) || fail "excessive cpu, polled"
grep -q "cpu watch of pid [0-9]*: /proc polled" "$T/daemon.log" || fail "the cpu watch was not polled"
echo "ok: excessive cpu with [cpu] perf_events = false: polled /proc, fired"
stop_daemon
start_daemon

"$APP" hang > "$T/hang.out" || fail "hang"
out=$(sed -n 1p "$T/hang.out")
tr=$(sed -n 2p "$T/hang.out")
case "$tr" in *hang-trace*.perfetto-trace) ;; *) fail "no trace snapshot after the hang ($tr)";; esac
go tool pprof -top "$out" 2>/dev/null > "$T/hang.txt"
grep -q "blocked_here" "$T/hang.txt" || { cat "$T/hang.txt"; fail "hang capture does not show blocked_here"; }
grep -q "Type: wall" "$T/hang.txt" || fail "hang capture is not wall-clock"
echo "ok: hang: wall-clock stacks show blocked_here, then a trace-ring snapshot: $tr"

if grep -q "fallback: /proc scan" "$T/daemon.log"; then
	echo "note: process events use the /proc fallback here"
fi
"$APP" cold-register || fail "cold-register"
out=$("$APP" cold-run 2> "$T/cold.err") || { cat "$T/cold.err"; fail "cold start"; }
grep -q "trigger=1 error=0" "$T/cold.err" || fail "cold start result has no trigger"
ms=$(sed -n 's/.*(\([0-9]*\) ms).*/\1/p' "$T/cold.err" | tail -1)
[ "${ms:-99999}" -lt 4000 ] || fail "cold start did not end at fully drawn (${ms} ms)"
go tool pprof -top "$out" 2>/dev/null | qgrep spin_hot || fail "cold start capture misses the start-up work"
echo "ok: cold start from exec, ended at fully drawn after ${ms} ms"
"$APP" clear || fail "clear triggers"
if [ -r /proc/pressure/cpu ]; then
	out=$("$APP" pressure 2> "$T/psi.err") || { cat "$T/psi.err"; fail "pressure stall"; }
	echo "ok: pressure stall (PSI cpu some 50 ms / 1 s): trace $out"
	"$APP" clear || fail "clear triggers"
else
	echo "skipped: pressure stall: no /proc/pressure (kernel without PSI)"
fi
# A crash: the fatal-signal handler dumps the flight recorder; the daemon
# turns it into a trace result, collected by the app's next run.
rc=0
"$APP" crash 2> "$T/crash.err" || rc=$?
# Under sanitizers their SEGV handler reports and aborts: SIGABRT (134).
[ "$rc" -eq 139 ] || { [ -n "${PD_SANITIZE:-}" ] && [ "$rc" -eq 134 ]; } ||
	fail "the crash run ended with $rc, want 139 (SIGSEGV)"
out=$("$APP" crash-collect 2> "$T/collect.err") || { cat "$T/collect.err" "$T/daemon.log" | tail -20; fail "no crash result"; }
if command -v protoc > /dev/null; then
	SRC=$(cd "$(dirname "$0")/../.." && pwd)
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto < "$out" > "$T/crash.txt" ||
		fail "protoc cannot decode the crash trace"
	grep -q '"before-crash"' "$T/crash.txt" && grep -q '"about-to-fault"' "$T/crash.txt" ||
		fail "the crash trace lacks the events emitted before the fault"
fi
echo "ok: crash: the flight recorder before the SIGSEGV delivered as $out"
stop_daemon
pass "triggers"
