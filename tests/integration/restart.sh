#!/usr/bin/env bash
# kill -9 of the daemon mid-capture, then a restart (it_faults plays the
# app and its runtime). Afterwards: no rate-limit entry lost, no delivered
# result lost or duplicated (results table, files, what the app receives),
# and the capture that was cut short comes to the app's result listener as
# a failure, once.
. "$(dirname "$0")/lib.sh"
IT=$APPS/it_faults
command -v sqlite3 > /dev/null || skip "sqlite3 (the CLI) is not installed"
export PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET IT_STATE=$T/state PROFILING_NO_AGENT=1
S=$T/state
q() { sqlite3 "$1" "$2"; }

# 1. One result delivered and acknowledged, one stored while its app is away.
start_daemon
acked=$("$IT" capture-acked | sed -n 's/^acked //p')
queued=$("$IT" capture-queued | sed -n 's/^queued //p')
[ -n "$acked" ] && [ -n "$queued" ] || fail "setup captures"
stop_daemon
rl0=$(q "$S/ratelimit.db" "SELECT COUNT(*) FROM entries")
[ "$rl0" -eq 2 ] || fail "expected 2 rate-limit entries after two captures, got $rl0"

# 2. A capture in flight when the daemon is killed.
start_daemon
"$IT" inflight > "$T/inflight.out" &
APP=$!
for _ in $(seq 600); do grep -q '^inflight ' "$T/inflight.out" && break; sleep 0.05; done
inflight=$(sed -n 's/^inflight //p' "$T/inflight.out")
[ -n "$inflight" ] || fail "the in-flight capture did not start"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=
wait "$APP" || fail "the in-flight app failed"
rl1=$(q "$S/ratelimit.db" "SELECT COUNT(*) FROM entries")
[ "$rl1" -eq $((rl0 + 1)) ] || fail "rate-limit entries after kill -9: $rl1, want $((rl0 + 1))"
st=$(q "$S/profilingd.db" "SELECT state FROM sessions WHERE id=$inflight")
[ "$st" = active ] || fail "the killed daemon's session is '$st', not active"
ls "$S/raw" | qgrep . || fail "no partial capture in raw/ (the kill came too late?)"
# Had it died between renaming a result into place and indexing it, that
# file would be here: the restart must remove it (the app is told "failed").
orphan=$S/results/$(id -u)/stack_inflight_20260101T000000Z_$inflight.pb.gz
echo partial > "$orphan"
# The dead daemon's sockets stay behind; wait for the new ones.
rm -f "$PROFILINGD_SOCKET" "$RUNTIME_SOCKET"

# 3. Restart: the app's listener gets the queued result and the failure, once.
start_daemon
grep -q "cut short by the previous run" "$T/daemon.log" || fail "recovery not logged"
[ ! -e "$orphan" ] || fail "the unindexed result file of the cut session was kept"
"$IT" restart-check "$acked" "$queued" "$inflight" || fail "restart-check"
stop_daemon

rl2=$(q "$S/ratelimit.db" "SELECT COUNT(*) FROM entries")
[ "$rl2" -eq "$rl1" ] || fail "rate-limit entries after the restart: $rl2, want $rl1"
[ "$(q "$S/profilingd.db" "SELECT COUNT(*) FROM results")" -eq 3 ] || fail "results rows"
[ "$(q "$S/profilingd.db" "SELECT COUNT(*) FROM results WHERE delivered=0")" -eq 0 ] ||
	fail "a result is still undelivered"
row=$(q "$S/profilingd.db" "SELECT error, path, message FROM results WHERE session_id=$inflight")
[ "$row" = "8||profilingd restarted during the capture" ] || fail "failure row: '$row'"
[ "$(q "$S/profilingd.db" "SELECT state, error FROM sessions WHERE id=$inflight")" = "failed|8" ] ||
	fail "session not failed"
files=$(ls "$S/results/$(id -u)")
[ "$(echo "$files" | wc -l)" -eq 2 ] || fail "result files: $files"
echo "$files" | qgrep "_$acked\." && echo "$files" | qgrep "_$queued\." || fail "files: $files"
ls "$S/raw" | qgrep . && fail "raw/ not cleaned"
ls -a "$S/results/$(id -u)" | qgrep '^\.tmp-' && fail "temp result left"
for db in profilingd ratelimit; do
	[ "$(q "$S/$db.db" "PRAGMA integrity_check")" = ok ] || fail "$db.db integrity"
done
# 4. SIGTERM with a capture running: the same, with "stopped".
start_daemon
"$IT" inflight > "$T/inflight2.out" &
APP=$!
for _ in $(seq 600); do grep -q '^inflight ' "$T/inflight2.out" && break; sleep 0.05; done
stopped=$(sed -n 's/^inflight //p' "$T/inflight2.out")
[ -n "$stopped" ] || fail "the second in-flight capture did not start"
stop_daemon
wait "$APP" || fail "the second in-flight app failed"
start_daemon
"$IT" cut-check "$stopped" "profilingd stopped during the capture" || fail "cut-check after a stop"
stop_daemon
[ "$(q "$S/profilingd.db" "SELECT COUNT(*) FROM results WHERE delivered=0")" -eq 0 ] ||
	fail "a result is still undelivered after the stop"

pass "kill -9 mid-capture: $rl1 rate-limit entries kept, results $acked (acked) and $queued (queued) once, session $inflight reported failed once"
