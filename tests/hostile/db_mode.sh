#!/usr/bin/env bash
# Database mode: the state files (profilingd.db and its -wal/-shm,
# ratelimit.db, the lock) name every app's result paths, tags, pids and
# trigger executables, which control.sock hides from other uids. An
# unprivileged user must not read them, whether the daemon created them or
# found them from an older run with a looser mode.
. "$(dirname "$0")/lib.sh"

ATT=$(make_user dbmode)

# An older run left a world-readable database, lock file and WAL behind.
mkdir -p "$T/state"
chmod 755 "$T/state"
# (An empty file is an empty SQLite database.)
for f in profilingd.db profilingd.db-wal profilingd.lock ratelimit.db; do
	: > "$T/state/$f"
	chmod 644 "$T/state/$f"
done

start_daemon
# Some rows in every table an attacker would want: a capture of root's own.
out=$("$DEMO" --threads 1 --duration-ms 300 --frequency 100 2> "$T/demo.err") ||
	{ cat "$T/demo.err" >&2; fail "the friendly capture failed"; }
[ -f "$out" ] || fail "the demo printed '$out', which is not a file"

leaks=()
for f in "$T"/state/*; do
	[ -f "$f" ] || continue
	name=${f##*/}
	mode=$(stat -c %a "$f")
	[ "$mode" = 600 ] || leaks+=("$name is mode $mode")
	if as_uid "$ATT" cat "$f" > /dev/null 2>&1; then
		leaks+=("uid $ATT read $name")
	fi
done
# The database through SQLite itself, in case a copy of a page is readable.
for db in profilingd.db ratelimit.db; do
	if as_uid "$ATT" sqlite3 -readonly "$T/state/$db" "SELECT count(*) FROM sqlite_master;" \
		> "$T/sq.out" 2>&1; then
		leaks+=("uid $ATT queried $db: $(head -c 100 "$T/sq.out")")
	fi
done
for f in profilingd.db profilingd.db-wal; do
	[ -e "$T/state/$f" ] || leaks+=("$f missing: the test expected the daemon to use it")
done
if [ "${#leaks[@]}" -gt 0 ]; then
	printf '  %s\n' "${leaks[@]}" >&2
	fail "state files readable by another user: ${leaks[0]}"
fi
grep -q "profilingd.db was mode 0644, now 0600" "$T/daemon.log" ||
	fail "no log line for the fixed mode of profilingd.db"
stop_daemon

# A state dir the daemon makes from nothing: 0600 from creation.
rm -rf "$T/state"
fixed=$(grep -c " was mode 0" "$T/daemon.log" || true)
start_daemon
out=$("$DEMO" --threads 1 --duration-ms 300 --frequency 100 2> "$T/demo.err") ||
	{ cat "$T/demo.err" >&2; fail "the friendly capture failed on a new state dir"; }
for f in "$T"/state/*; do
	[ -f "$f" ] || continue
	mode=$(stat -c %a "$f")
	[ "$mode" = 600 ] || fail "new state file ${f##*/} is mode $mode, want 600"
done
[ "$(grep -c " was mode 0" "$T/daemon.log" || true)" = "$fixed" ] ||
	fail "a mode was fixed on a fresh state dir: created loose"
stop_daemon
pass "state files are 0600 from creation and fixed from an older run; uid $ATT reads none"
