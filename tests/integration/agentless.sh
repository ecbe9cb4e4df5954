#!/usr/bin/env bash
# Agentless stack samples: profilingd-perf samples an unmodified program built
# without frame pointers (spinner.c), so only DWARF CFI can unwind it. The
# profile must name spin_here as the top function with its callers, carry the
# pid label the redactor keeps samples by, and say "unwinder=dwarf".
# Skipped (77) where perf_event_open is not permitted.
. "$(dirname "$0")/lib.sh"

PERF=$BUILD/runtime/perf/profilingd-perf
SPIN=$APPS/spinner
[ -x "$PERF" ] || fail "no $PERF (is runtime/perf added to the build?)"
[ -x "$SPIN" ] || fail "no $SPIN"
[ -r /proc/sys/kernel/perf_event_paranoid ] || skip "kernel without perf events"
need_go

SPID= SLEEPER=
# A helper that already exited must not fail the trap (set -e).
trap '[ -z "$SPID" ] || kill "$SPID" 2>/dev/null || true; [ -z "$SLEEPER" ] || kill "$SLEEPER" 2>/dev/null || true; cleanup' EXIT

"$SPIN" 10 &
SPID=$!
# Sample the spinner, not the shell that forks it: wait for the exec.
want=$(readlink -f "$SPIN")
for _ in $(seq 200); do
	[ "$(readlink "/proc/$SPID/exe" 2>/dev/null)" = "$want" ] && break
	sleep 0.01
done

rc=0
"$PERF" --pid "$SPID" --hz 99 --duration-ms 1000 > "$T/out.pb.gz" 2> "$T/err" || rc=$?
status=$(tail -n 1 "$T/err")
if [ "$rc" -eq 70 ]; then
	case $status in
	*"not permitted"* | *"perf events unavailable"*) skip "${status#error: }" ;;
	esac
fi
[ "$rc" -eq 0 ] || { cat "$T/err" >&2; fail "profilingd-perf exited $rc: $status"; }

# ok samples=N short=M unwinder=dwarf threads=1
[[ $status =~ ^ok\ samples=([0-9]+)\ short=([0-9]+)\ unwinder=(dwarf|fp)\ threads=([0-9]+)$ ]] ||
	fail "status line: '$status'"
samples=${BASH_REMATCH[1]} short=${BASH_REMATCH[2]} unwinder=${BASH_REMATCH[3]} threads=${BASH_REMATCH[4]}
[ "$unwinder" = dwarf ] || fail "unwinder $unwinder, expected dwarf: $status"
[ "$threads" -eq 1 ] || fail "threads=$threads, expected 1: $status"
# 99 Hz for 1 s of a busy thread; a loaded machine may give it less CPU.
[ "$samples" -ge 20 ] || fail "only $samples samples: $status"
[ $((short * 10)) -le "$samples" ] || fail "$short of $samples samples unwound short: $status"

go tool pprof -top "$T/out.pb.gz" > "$T/top.txt" 2>&1 || { cat "$T/top.txt"; fail "go tool pprof cannot read the profile"; }
top=$(awk '/flat%/ { getline; print $NF; exit }' "$T/top.txt")
[ "$top" = spin_here ] || { cat "$T/top.txt"; fail "top flat function is '$top', not spin_here"; }
flat=$(pprof_flat "$T/out.pb.gz" spin_here)
awk -v f="$flat" 'BEGIN { exit !(f >= 80) }' || { cat "$T/top.txt"; fail "spin_here has only $flat% flat"; }

# Through frames without a frame pointer: spin_here's callers up to main.
go tool pprof -traces "$T/out.pb.gz" > "$T/traces.txt" 2>&1
awk '/spin_here$/ { s=1; next } s && /spin_inner$/ { i=1; next } i && /spin_outer$/ { o=1; next }
	o && /[ \t]main$/ { ok=1; exit } /^-+\+/ { s=i=o=0 } END { exit !ok }' "$T/traces.txt" ||
	{ head -n 40 "$T/traces.txt"; fail "no spin_here <- spin_inner <- spin_outer <- main stack"; }

go tool pprof -tags "$T/out.pb.gz" > "$T/tags.txt" 2>&1
awk -v p="$SPID" '/^ *pid:/ { on=1; next } on && /^ *$/ { on=0 } on && $NF == p { ok=1 } END { exit !ok }' \
	"$T/tags.txt" || { cat "$T/tags.txt"; fail "samples do not carry pid=$SPID"; }
grep -q "thread_id:" "$T/tags.txt" || fail "no thread_id label"
grep -q "thread_name:" "$T/tags.txt" || fail "no thread_name label"

# An idle process takes no CPU samples: a valid empty profile, exit 0.
sleep 30 &
SLEEPER=$!
rc=0
"$PERF" --pid "$SLEEPER" --hz 99 --duration-ms 300 > "$T/idle.pb.gz" 2> "$T/err" || rc=$?
[ "$rc" -eq 0 ] || fail "idle target: exit $rc, expected 0: $(tail -n 1 "$T/err")"
tail -n 1 "$T/err" | qgrep "^ok samples=0 " || fail "idle target status: $(tail -n 1 "$T/err")"
go tool pprof -raw "$T/idle.pb.gz" > "$T/idle.txt" 2>&1 || { cat "$T/idle.txt"; fail "idle target: not a valid profile"; }
grep -q "^Samples:" "$T/idle.txt" || fail "idle target: no Samples section"
awk '/^Samples:/ { s=1; next } /^Locations/ { s=0 } s && /^ *[0-9]+ / { n++ } END { exit n != 0 }' "$T/idle.txt" ||
	fail "idle target: the profile has samples"
echo "ok: an idle target gives an empty profile"

# A process that does not exist: exit 70 with a reason.
rc=0
"$PERF" --pid 999999999 --hz 99 --duration-ms 100 > /dev/null 2> "$T/err" || rc=$?
[ "$rc" -eq 70 ] || fail "missing target: exit $rc, expected 70"
tail -n 1 "$T/err" | qgrep "^error: " || fail "missing target status: $(tail -n 1 "$T/err")"

# Through the daemon: a root request for a process with no agent is taken
# with profilingd-perf, redacted and delivered. The process has no
# connection to the daemon, so no runtime can come: the capture starts at
# once, not after runtime_wait_ms (the longest the config allows here).
start_daemon "[capture]" "runtime_wait_ms = 60000"
"$SPIN" 5 &
SP2=$!
for _ in $(seq 100); do [ "$(readlink -f /proc/$SP2/exe 2>/dev/null)" = "$want" ] && break; sleep 0.01; done
out=$("$APPS/it_request" --pid "$SP2" --type stack --duration-ms 800) ||
	fail "daemon capture of an agentless process failed"
kill "$SP2" 2>/dev/null || true
go tool pprof -top "$out" 2>/dev/null > "$T/d.txt"
dtop=$(awk '/flat%/ { getline; print $NF; exit }' "$T/d.txt")
[ "$dtop" = spin_here ] || { cat "$T/d.txt"; fail "daemon's agentless capture top is '$dtop'"; }
grep -q "no agent in pid $SP2: sampling it with perf_event_open" "$T/daemon.log" || fail "daemon did not go agentless"
grep -q "pid $SP2 has no connection to the daemon, so no runtime: not waiting 60000 ms" "$T/daemon.log" ||
	fail "the daemon waited runtime_wait_ms for a process that cannot have a runtime"
# The profile covers the requested 800 ms (profilingd-perf's own window).
dur=$(go tool pprof -raw "$out" 2>/dev/null | sed -n 's/^Duration: //p' | sed -n 1p)
echo "agentless capture through the daemon: Duration: $dur"
# go prints it as e.g. "800m" or "801.2ms"; at least the 800 ms asked for.
case $dur in 8[0-9][0-9]m* | 9[0-9][0-9]m* | [1-9].*s | [1-9]s) ;;
*) fail "profile duration '$dur', not the requested 800 ms" ;;
esac
# An idle process through the daemon: an empty profile, with a note.
"$APPS/it_request" --pid "$SLEEPER" --type stack --duration-ms 300 \
	> "$T/idle.path" 2> "$T/idle.err" || fail "idle target through the daemon: $(cat "$T/idle.err")"
grep -q "it_request: note: no samples: the process used no CPU in the window" "$T/idle.err" ||
	fail "idle target through the daemon: no note: $(cat "$T/idle.err")"
stop_daemon
echo "ok: through the daemon too, started at once: $out; an idle process: an empty profile with a note"

# A system trigger from the config: an unmodified program is matched by its
# executable on exec, watched, and sampled agentless when it spins.
# A low bar, so a loaded test machine's share of a core still crosses it.
start_daemon "[trigger.spinner]" "type = excessive-cpu" "exe = $want" "cpu_percent = 15" \
	"cpu_window_ms = 1000" "duration_ms = 800"
grep -q "system trigger spinner: excessive-cpu of $want" "$T/daemon.log" || fail "system trigger not loaded"
"$SPIN" 8 &
SP3=$!
res=
for _ in $(seq 150); do
	res=$(ls "$T/state/results/$(id -u)"/stack_excessive-cpu_*.pb.gz 2>/dev/null | sed -n 1p || true)
	[ -n "$res" ] && break
	sleep 0.1
done
kill "$SP3" 2>/dev/null || true
[ -n "$res" ] || { tail -20 "$T/daemon.log"; fail "the system trigger made no capture"; }
stop_daemon
stop=$(go tool pprof -top "$res" 2>/dev/null | awk '/flat%/ && !d { getline; print $NF; d = 1 }')
[ "$stop" = spin_here ] || fail "system-trigger capture top is '$stop'"
echo "ok: a [trigger.*] system trigger captured the unmodified spinner: $res"

pass "agentless capture of a frame-pointer-less program: $status, spin_here ${flat}% flat"
