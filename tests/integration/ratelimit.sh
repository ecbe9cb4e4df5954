#!/usr/bin/env bash
# Rate limiting against the real daemon: exact admitted/refused counts for
# bursts from several apps (uids), a kill -9 mid-burst that loses nothing,
# a kill -9 under a flood of admissions from 16 connections,
# the fail-closed store and its repair, the test exemption, the disk quota.
. "$(dirname "$0")/lib.sh"
B=$APPS/it_burst
export PROFILING_NO_AGENT=1
A=61001 B_=61002 C=61003 X=61004

expect() { # expect LABEL "got" "want"
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
	echo "ok: $1: $2"
}

# 1. The shipped defaults: app cost 10, hour caps 10 (app) / 20 (system).
PD_REAL_LIMITS=1 start_daemon "[capture]" "runtime_wait_ms = 0"
expect "defaults, app A" "$("$B" $A 3)" "admitted=1 process=2 system=0 disk=0 other=0"
# B fills the system cap (20): its next requests hit the system cap first.
expect "defaults, app B" "$("$B" $B_ 3)" "admitted=1 process=0 system=2 disk=0 other=0"
expect "defaults, app C" "$("$B" $C 2)" "admitted=0 process=0 system=2 disk=0 other=0"
stop_daemon
rm -rf "$T/state"

# 2. Cost 1, hour caps 10 (app) / 15 (system); kill -9 in the middle of A's burst.
CONF=("[capture]" "runtime_wait_ms = 0" "[ratelimit]" "app_cost_stack_sampling = 1"
      "hour_app_cap = 10" "hour_system_cap = 15" "day_app_cap = 1000" "day_system_cap = 1000"
      "week_app_cap = 1000" "week_system_cap = 1000")
PD_REAL_LIMITS=1 start_daemon "${CONF[@]}"
mkdir -p "$T/sync"
"$B" $A 20 --pause-after 6 "$T/sync" > "$T/burstA.txt" &
BPID=$!
for _ in $(seq 500); do [ -f "$T/sync/paused" ] && break; sleep 0.02; done
[ -f "$T/sync/paused" ] || fail "burst did not reach its pause"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=
entries=$(sqlite3 "$T/state/ratelimit.db" "select count(*) from entries" 2>/dev/null || echo "?")
expect "entries on disk after kill -9 (6 admitted)" "$entries" 6
PD_REAL_LIMITS=1 start_daemon "${CONF[@]}"
grep -q "cut short\|previous run" "$T/daemon.log" || true
touch "$T/sync/go"
wait "$BPID" || fail "burst A failed"
expect "app A across kill -9" "$(cat "$T/burstA.txt")" "admitted=10 process=10 system=0 disk=0 other=0"
expect "app B" "$("$B" $B_ 10)" "admitted=5 process=0 system=5 disk=0 other=0"
stop_daemon
PD_REAL_LIMITS=1 start_daemon "${CONF[@]}"
expect "app C after a clean restart" "$("$B" $C 2)" "admitted=0 process=0 system=2 disk=0 other=0"
stop_daemon

# 2b. kill -9 under a flood of admissions from 16 connections (group commit,
# svc_request.c): every request whose reply said admitted is in
# profilingd.db after the restart, and charged in ratelimit.db.
rm -rf "$T/state" "$T/flood"
mkdir -p "$T/flood"
chmod 0777 "$T/flood"
start_daemon "[capture]" "runtime_wait_ms = 0" "[limits]" "max_sessions = 256"
"$APPS/it_flood_admit" 61005 16 "$T/flood" 2> "$T/flood.err" &
FPID=$!
for _ in $(seq 400); do
	[ -f "$T/flood/started" ] && [ "$(cat "$T/flood/"*.ids 2>/dev/null | wc -l)" -ge 300 ] && break
	sleep 0.05
done
[ -f "$T/flood/started" ] || fail "the flood did not start: $(cat "$T/flood.err")"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=
wait "$FPID" || fail "flood clients: $(cat "$T/flood.err")"
start_daemon "[capture]" "runtime_wait_ms = 0"
stop_daemon
cat "$T/flood/"*.ids | sort -n > "$T/flood.admitted"
nadm=$(wc -l < "$T/flood.admitted")
[ "$nadm" -gt 0 ] || fail "no request admitted before the kill"
sqlite3 "$T/state/profilingd.db" "SELECT id FROM sessions WHERE tag='flood' ORDER BY id" \
	> "$T/flood.rows"
missing=$(comm -23 "$T/flood.admitted" "$T/flood.rows" | wc -l)
expect "admitted ids missing from profilingd.db after kill -9 ($nadm admitted)" "$missing" 0
nrows=$(wc -l < "$T/flood.rows")
# A batch's charges are one row per app (rl.c, struct pend): count cost,
# 10 units an app's heap profile by default.
charged=$(sqlite3 "$T/state/ratelimit.db" "SELECT COALESCE(SUM(cost), 0) / 10 FROM entries")
# A kill between the two commits leaves a charge without its session, never
# the other way round; every session is charged, every admitted id a row.
[ "$charged" -ge "$nrows" ] || fail "ratelimit.db has $charged charges for $nrows sessions"
# A failure result leaves only once the end it reports is on disk (session
# ends join the turn's group commit, svc_db.c): none of them is found
# active after the kill and reported again at the restart as cut short.
# (A listener also gets copies of refusals: only admitted ids count.)
# (comm wants the order of sort, not sort -n.)
sort "$T/flood.admitted" > "$T/flood.admitted.lex"
cat "$T/flood/"*.failed | sort -u | comm -12 - "$T/flood.admitted.lex" > "$T/flood.failed"
nfail=$(wc -l < "$T/flood.failed")
[ "$nfail" -gt 0 ] || fail "no failure result reached the flood's clients"
sqlite3 "$T/state/profilingd.db" "SELECT id FROM sessions WHERE tag='flood' AND state='failed'
	AND message NOT LIKE 'profilingd restarted%' ORDER BY id" | sort > "$T/flood.ended"
unended=$(comm -23 "$T/flood.failed" "$T/flood.ended" | wc -l)
expect "failure results received whose end was not on disk after kill -9 ($nfail)" "$unended" 0
echo "ok: kill -9 under a flood: $nadm admitted replies, $nrows sessions, $charged charges," \
	"$nfail failure results, each end on disk"

# 3. A corrupt store fails closed, names the file and the repair; the repair works.
head -c 8192 /dev/urandom > "$T/state/ratelimit.db"
rm -f "$T/state/ratelimit.db-wal" "$T/state/ratelimit.db-shm"
PD_REAL_LIMITS=1 start_daemon "${CONF[@]}"
grep -q "ratelimit.db" "$T/daemon.log" || fail "the log does not name the store"
grep -q -- "--reset-ratelimit" "$T/daemon.log" || fail "the log does not name the repair"
expect "corrupt store, app X" "$("$B" $X 3)" "admitted=0 process=0 system=3 disk=0 other=0"
# The repair refuses while the daemon holds the store.
"$PROFILINGD" -c "$T/profilingd.conf" --reset-ratelimit > "$T/reset.txt" 2>&1 &&
	fail "--reset-ratelimit succeeded while the daemon runs"
stop_daemon
"$PROFILINGD" -c "$T/profilingd.conf" --reset-ratelimit || fail "--reset-ratelimit failed"
ls "$T/state/" | qgrep "ratelimit.db.broken-" || fail "the broken store was not kept aside"
PD_REAL_LIMITS=1 start_daemon "${CONF[@]}"
expect "after repair, app X" "$("$B" $X 3)" "admitted=3 process=0 system=0 disk=0 other=0"
stop_daemon

# 4. The test exemption: off by default, a warning when on.
grep -q "rate limits are OFF" "$T/daemon.log" && fail "exemption warning without exempt_app"
PD_REAL_LIMITS=1 start_daemon "${CONF[@]}" "exempt_app = uid:$X"
grep -q "rate limits are OFF for app uid:$X" "$T/daemon.log" || fail "no exemption warning"
expect "exempt app X" "$("$B" $X 12)" "admitted=12 process=0 system=0 disk=0 other=0"
stop_daemon

# 5. Disk quota: a free-space floor no filesystem has refuses with NO_DISK_SPACE.
start_daemon "[capture]" "runtime_wait_ms = 0" "[limits]" "min_free_bytes = 1125899906842624"
expect "free-space floor" "$("$B" $A 2)" "admitted=0 process=0 system=0 disk=2 other=0"
stop_daemon
# Per-app result bytes. One stored result first, with no quota to speak of.
unset PROFILING_NO_AGENT
start_daemon
first=$("$DEMO" --duration-ms 300 2>/dev/null) || fail "first capture failed"
size=$(stat -c %s "$first")
stop_daemon
# At or over the quota already: refused synchronously.
start_daemon "[limits]" "max_app_result_bytes = $size"
"$DEMO" --duration-ms 300 > /dev/null 2> "$T/demo2.err" && fail "capture over the quota was admitted"
grep -q "request refused: no disk space" "$T/demo2.err" || { cat "$T/demo2.err"; fail "quota refusal is not a synchronous NO_DISK_SPACE"; }
stop_daemon
# Under the quota, but the new result would cross it: the capture fails with NO_DISK_SPACE.
start_daemon "[limits]" "max_app_result_bytes = $((size + 1))"
"$DEMO" --duration-ms 300 > /dev/null 2> "$T/demo3.err" && fail "capture crossing the quota was delivered"
grep -q "capture failed: no disk space" "$T/demo3.err" || { cat "$T/demo3.err"; fail "crossing the quota is not NO_DISK_SPACE"; }
[ "$(ls "$T/state/results/$(id -u)" | wc -l)" = 1 ] || fail "a result over the quota was kept"
ls "$T/state/raw" | qgrep . && fail "raw file of the refused result left behind"
stop_daemon
echo "ok: result quota ($size-byte result; sync refusal and store-time refusal)"
pass "rate limiting and admission"
