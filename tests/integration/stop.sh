#!/usr/bin/env bash
# A stop (SIGTERM) under running captures is clean. main.c stops its
# modules in the reverse of their init order (docs/ARCHITECTURE.md, "The
# daemon's modules"); this holds it to what that order must give:
# - the daemon exits 0 (under the ASan build: no leak, no UB reported);
# - nothing it started is left: the spawner, and the helper that was
#   sampling a process with no agent (when perf_event_open is permitted);
# - the state db is consistent: no session left active, each cut capture
#   failed once with a queued failure result ("profilingd stopped during
#   the capture", DESIGN's failure results), raw/ and .tmp-* emptied;
# - at the next start nothing is recovered (the stop closed the sessions),
#   and the app's result listener gets its failure once.
. "$(dirname "$0")/lib.sh"
IT=$APPS/it_faults
REQ=$APPS/it_request
SPIN=$APPS/spinner
command -v sqlite3 > /dev/null || skip "sqlite3 (the CLI) is not installed"
export PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET IT_STATE=$T/state PROFILING_NO_AGENT=1
S=$T/state
MSG="profilingd stopped during the capture"
q() { sqlite3 "$S/$1.db" "$2"; }

SPID= APP= RQ=
trap '[ -z "$SPID" ] || kill "$SPID" 2>/dev/null || true; cleanup' EXIT

# "PID STARTTIME" of each child of $1 (/proc/PID/stat: ppid is field 4,
# the start time field 22; the comm before them may hold spaces). Builtins
# only: a loaded machine runs many processes, and this runs in a loop.
children_of() {
	local st line f
	for st in /proc/[0-9]*/stat; do
		read -r line 2> /dev/null < "$st" || continue
		f=(${line##*) })
		[ "${f[1]}" = "$1" ] && echo "${st//[^0-9]/} ${f[19]}"
	done
	return 0
}
comm_of() { cat "/proc/$1/comm" 2> /dev/null || true; }

# The spinner gets an app id of its own ([apps]), so that its capture's
# failure is queued apart from it_faults' app (uid:0).
spin_exe=$(readlink -f "$SPIN")
CONF=("[capture]" "runtime_wait_ms = 200" "[apps]" "$spin_exe = spinner")
# LeakSanitizer's exit-time scan cannot run under the daemon's seccomp
# filter (common/sandbox.c scans once before the filter goes on instead):
# under the sanitizers the stop is run without the filter, so that what the
# stop itself leaves behind is scanned. The normal build keeps it on.
[ -n "${PD_SANITIZE:-}" ] && CONF+=("[sandbox]" "seccomp = off")
start_daemon "${CONF[@]}"

# 1. A capture of a process with no agent: profilingd-perf runs under the
#    spawner for the whole (long) duration. It goes first: the runtime's
#    capture below is stopped well within its own duration.
"$SPIN" 120 &
SPID=$!
for _ in $(seq 200); do [ "$(readlink -f /proc/$SPID/exe 2> /dev/null)" = "$spin_exe" ] && break; sleep 0.01; done
"$REQ" --pid "$SPID" --type stack --duration-ms 120000 > "$T/req.out" 2>&1 &
RQ=$!

# Everything the daemon started, as "PID STARTTIME" (a pid reused later is
# another process).
spawner=$(children_of "$DAEMON_PID")
[ "$(echo "$spawner" | grep -c .)" -eq 1 ] || fail "want one child of the daemon, got: $spawner"
spid=${spawner%% *}
[ "$(comm_of "$spid")" = pd-spawner ] || fail "the daemon's child $spid is '$(comm_of "$spid")'"
perf=
for _ in $(seq 300); do
	perf=$(children_of "$spid" | while read -r p s; do
		[ "$(comm_of "$p")" = profilingd-perf ] && echo "$p $s"; done)
	[ -n "$perf" ] && break
	kill -0 "$RQ" 2> /dev/null || break # refused or failed: no helper runs
	sleep 0.05
done
if [ -n "$perf" ]; then
	echo "ok: profilingd-perf ${perf%% *} runs under the spawner $spid"
	# It samples for the whole duration: the stop must find it running.
	kill -0 "${perf%% *}" 2> /dev/null || fail "profilingd-perf ended before the stop"
else
	echo "note: no profilingd-perf ran ($(tail -n 1 "$T/req.out")); checking the spawner only"
fi
helpers=$(children_of "$spid")

# 2. A capture a runtime holds (it_faults plays the app and its runtime).
"$IT" inflight > "$T/inflight.out" &
APP=$!
for _ in $(seq 600); do grep -q '^inflight ' "$T/inflight.out" && break; sleep 0.05; done
held=$(sed -n 's/^inflight //p' "$T/inflight.out")
[ -n "$held" ] || fail "the runtime's capture did not start"

stop_daemon
grep -q "signal 15: shutting down" "$T/daemon.log" || fail "no shutdown line"
grep -q "stopped$" "$T/daemon.log" || fail "the daemon did not log its clean stop"
if grep -Eq "Sanitizer|runtime error:" "$T/daemon.log"; then
	grep -E -A20 "Sanitizer|runtime error:" "$T/daemon.log" | sed -n 1,40p >&2
	fail "a sanitizer reported at the stop"
fi
wait "$APP" || fail "the runtime's app failed"
APP=
wait "$RQ" 2> /dev/null || true # its capture ended with the daemon
RQ=

# Nothing left running: the spawner reaps its helpers before it exits and
# the daemon reaps the spawner before it does.
while read -r p start; do
	[ -n "$p" ] || continue
	line=$(cat "/proc/$p/stat" 2> /dev/null) || continue
	f=(${line##*) })
	[ "${f[19]}" != "$start" ] || fail "pid $p ($(comm_of "$p"), state ${f[0]}) is left after the stop"
done <<< "$spawner
$helpers"

# The state db: each cut capture failed once, with its failure result queued.
[ "$(q ratelimit "PRAGMA integrity_check")" = ok ] || fail "ratelimit.db integrity"
[ "$(q profilingd "PRAGMA integrity_check")" = ok ] || fail "profilingd.db integrity"
[ "$(q profilingd "SELECT COUNT(*) FROM sessions WHERE state='active'")" -eq 0 ] ||
	fail "sessions left active: $(q profilingd "SELECT id FROM sessions WHERE state='active'")"
cut=$held
if [ -n "$perf" ]; then
	agentless=$(q profilingd "SELECT id FROM sessions WHERE pid=$SPID ORDER BY id DESC LIMIT 1")
	[ -n "$agentless" ] || fail "no session of the agentless capture"
	cut="$cut $agentless"
fi
for id in $cut; do
	row=$(q profilingd "SELECT state, error, message FROM sessions WHERE id=$id")
	[ "$row" = "failed|8|$MSG" ] || fail "session $id: '$row'"
	res=$(q profilingd "SELECT COUNT(*), MAX(path), MAX(error), MAX(message), MAX(delivered)
		FROM results WHERE session_id=$id")
	[ "$res" = "1||8|$MSG|0" ] || fail "session $id's failure result: '$res'"
done
ls "$S/raw" | qgrep . && fail "raw/ not emptied: $(ls "$S/raw")"
find "$S/results" -name '.tmp-*' | qgrep . && fail "a .tmp- result is left"

# 3. The next start recovers nothing and reports the runtime's capture once.
start_daemon "${CONF[@]}"
grep -q "cut short by the previous run" "$T/daemon.log" &&
	fail "the stop left sessions active for the next start to recover"
"$IT" cut-check "$held" "$MSG" || fail "cut-check after the stop"
stop_daemon
[ "$(q profilingd "SELECT delivered FROM results WHERE session_id=$held")" -eq 1 ] ||
	fail "the failure of $held was not acknowledged"
if [ -n "$perf" ]; then
	# Its app (the spinner's id) had no listener: still queued for it.
	[ "$(q profilingd "SELECT app || '|' || delivered FROM results WHERE session_id=$agentless")" = \
		"uid:$(id -u)/spinner|0" ] || fail "the agentless failure is not queued for its app"
fi

pass "SIGTERM under captures $cut: exit 0, spawner${perf:+ and profilingd-perf} gone, each failed once"
