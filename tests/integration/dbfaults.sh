#!/usr/bin/env bash
# SQLite faults: another process holding a lock on profilingd.db or
# ratelimit.db, and a corrupt profilingd.db (ratelimit.sh covers a corrupt
# ratelimit.db). Documented behaviour (docs/ARCHITECTURE.md, RATELIMIT.md):
# - while the daemon runs, nobody else can lock its databases;
# - ratelimit.db held at start: the daemon runs and fails closed
#   (RATE_LIMIT_SYSTEM), the log names the file;
# - profilingd.db held at start: the daemon does not start, and says which
#   file and what to do; corrupt: the same, pointing at --reset-db, which
#   moves it aside and starts an empty one with ids above the old results.
. "$(dirname "$0")/lib.sh"
IT=$APPS/it_faults
command -v sqlite3 > /dev/null || skip "sqlite3 (the CLI) is not installed"
export PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET PROFILING_NO_AGENT=1
S=$T/state
HOLDER=
hold_stop() {
	[ -n "$HOLDER" ] || return 0
	echo "COMMIT;" >&3 2>/dev/null || true
	exec 3>&-
	wait "$HOLDER" 2>/dev/null || true
	HOLDER=
}
trap 'hold_stop; cleanup' EXIT
# hold DB: another process takes the write lock and keeps it until hold_stop.
hold() {
	rm -f "$T/fifo"
	mkfifo "$T/fifo"
	sqlite3 "$1" < "$T/fifo" > "$T/holder.out" 2>&1 &
	HOLDER=$!
	exec 3> "$T/fifo"
	# The probes below take the lock for an instant too: the holder waits
	# them out (without a busy timeout its BEGIN fails at once on one).
	printf '.timeout 10000\nBEGIN IMMEDIATE;\n' >&3
	for _ in $(seq 200); do
		sqlite3 "$1" "BEGIN IMMEDIATE; COMMIT" 2>/dev/null || return 0
		sleep 0.05
	done
	fail "the holder never took the lock on $1: $(cat "$T/holder.out")"
}
run_daemon() { "$PROFILINGD" -f -c "$T/profilingd.conf" >> "$T/daemon.log" 2>&1; }

start_daemon
"$IT" request-expect 0 || fail "first request"
# 1. The running daemon keeps its databases to itself, and goes on serving.
for db in profilingd ratelimit; do
	sqlite3 "$S/$db.db" "BEGIN IMMEDIATE; COMMIT" 2> "$T/outside.err" &&
		fail "another process locked $db.db under the daemon"
	grep -q "locked" "$T/outside.err" || fail "outside $db.db: $(cat "$T/outside.err")"
done
"$IT" request-expect 0 || fail "request while others try the databases"
stop_daemon

# 2. ratelimit.db held by another process at start: fails closed.
hold "$S/ratelimit.db"
start_daemon
"$IT" request-expect 1 || fail "request with ratelimit.db locked"
grep -q "ratelimit.db.*RATE_LIMIT_SYSTEM\|RATE_LIMIT_SYSTEM.*ratelimit.db" "$T/daemon.log" ||
	fail "the log does not name ratelimit.db"
stop_daemon
hold_stop
start_daemon
"$IT" request-expect 0 || fail "request once ratelimit.db is free"
stop_daemon

# 3. profilingd.db held by another process at start: no start, a clear line.
hold "$S/profilingd.db"
: > "$T/daemon.log"
run_daemon && fail "the daemon started on a locked profilingd.db"
grep -q "profilingd.db is locked by another process" "$T/daemon.log" || fail "lock not explained"
hold_stop
start_daemon
"$IT" request-expect 0 || fail "request once profilingd.db is free"
stop_daemon
maxid=$(ls "$S/results/$(id -u)" | sed -n 's/.*_\([0-9]*\)\..*/\1/p' | sort -n | tail -n 1)

# 4. A corrupt profilingd.db (garbage over its header): no start until repaired.
head -c 4096 /dev/urandom | dd of="$S/profilingd.db" conv=notrunc status=none
: > "$T/daemon.log"
run_daemon && fail "the daemon started on a corrupt profilingd.db"
grep -q "profilingd.db is corrupt" "$T/daemon.log" || fail "corruption not explained"
grep -q -- "--reset-db" "$T/daemon.log" || fail "the repair is not named"
[ -z "$(ls "$S" | grep broken)" ] || fail "the file was moved aside without being asked"
"$PROFILINGD" -c "$T/profilingd.conf" --reset-db > "$T/reset.out" 2>&1 || fail "--reset-db: $(cat "$T/reset.out")"
ls "$S" | qgrep '^profilingd.db.broken-' || fail "the corrupt file was not kept"
start_daemon
id=$("$IT" request-expect 0 | sed -n 's/^request \([0-9]*\):.*/\1/p')
[ -n "$id" ] && [ "$id" -gt "$maxid" ] || fail "new id $id does not exceed the old results' $maxid"
# --reset-db refuses under a live daemon.
"$PROFILINGD" -c "$T/profilingd.conf" --reset-db > "$T/reset2.out" 2>&1 &&
	fail "--reset-db ran under a live daemon"
stop_daemon

# 5. Damage inside the file (a page of garbage past the header): quick_check.
pages=$(( $(stat -c %s "$S/profilingd.db") / 4096 ))
[ "$pages" -ge 3 ] || fail "database of $pages pages"
head -c 4096 /dev/urandom | dd of="$S/profilingd.db" bs=4096 seek=1 conv=notrunc status=none
: > "$T/daemon.log"
run_daemon && fail "the daemon started on a damaged profilingd.db"
grep -q "profilingd.db is corrupt" "$T/daemon.log" || fail "damage not explained: $(tail -n 3 "$T/daemon.log")"
pass "database faults: locks held by others, a corrupt and a damaged profilingd.db"
