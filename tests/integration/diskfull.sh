#!/usr/bin/env bash
# Disk full: a 16 MiB tmpfs is the state dir. A capture whose result does
# not fit ends with NO_DISK_SPACE, the databases stay intact, nothing is
# half-written (no .tmp-*, no partial result, raw/ empty), and once space
# is back captures work again.
. "$(dirname "$0")/lib.sh"
IT=$APPS/it_faults
command -v sqlite3 > /dev/null || skip "sqlite3 (the CLI) is not installed"
S=$T/state
mkdir -p "$S"
mount -t tmpfs -o size=16m,mode=755 pd-it-diskfull "$S" 2> "$T/mount.err" ||
	skip "cannot mount a tmpfs: $(cat "$T/mount.err")"
cleanup_full() {
	if [ -n "$DAEMON_PID" ] && kill -0 "$DAEMON_PID" 2>/dev/null; then
		kill -TERM "$DAEMON_PID" 2>/dev/null || true
		wait "$DAEMON_PID" 2>/dev/null || true
	fi
	DAEMON_PID=
	umount "$S" 2>/dev/null || umount -l "$S" 2>/dev/null || true
	cleanup
}
trap cleanup_full EXIT
export PROFILINGD_RUNTIME_SOCKET=$RUNTIME_SOCKET IT_STATE=$S
q() { sqlite3 "$S/$1" "$2"; }

check_clean() {
	ls "$S/raw" | qgrep . && fail "raw/ not empty after $1: $(ls "$S/raw")"
	ls -a "$S/results/"* 2>/dev/null | qgrep '^\.tmp-' && fail "temp result left after $1"
	[ ! -e "$S/filler" ] || fail "filler left"
	return 0
}

# The default min_free_bytes (64 MiB) is more than this filesystem has.
start_daemon
"$IT" nospace-refused || fail "nospace-refused"
stop_daemon

start_daemon "[limits]" "min_free_bytes = 0" "[capture]" "runtime_wait_ms = 20000"
PROFILING_NO_AGENT=1 "$IT" diskfull-redact > "$T/redact.out" || fail "diskfull-redact"
cat "$T/redact.out"
full=$(sed -n 's/.*; session \([0-9]*\)$/\1/p' "$T/redact.out")
check_clean "a redaction that did not fit"
ls "$S/results/"*/ | qgrep "_$full\." && fail "a result file of the failed session $full"
PROFILING_NO_AGENT=1 "$IT" diskfull-before || fail "diskfull-before"
check_clean "a request on a full disk"
"$IT" diskfull-agent || fail "diskfull-agent"
check_clean "an agent write that did not fit"
daemon_alive || fail "daemon died"
stop_daemon

for db in profilingd ratelimit; do
	[ "$(q $db.db "PRAGMA integrity_check")" = ok ] || fail "$db.db integrity"
done
# The failed session's end was written once the disk had room again.
[ "$(q profilingd.db "SELECT state, error FROM sessions WHERE id=$full")" = "failed|6" ] ||
	fail "session $full: $(q profilingd.db "SELECT state, error, message FROM sessions WHERE id=$full")"
[ "$(q profilingd.db "SELECT COUNT(*) FROM sessions WHERE state='active'")" -eq 0 ] ||
	fail "sessions left active"
# Every result row has its file, and every file its row.
rows=$(q profilingd.db "SELECT path FROM results WHERE path != ''" | sort)
files=$(ls -d "$S/results/"*/* | sort)
[ "$rows" = "$files" ] || fail "results table and files differ: rows [$rows] files [$files]"
pass "disk full: NO_DISK_SPACE at admission, redaction, request and agent write; databases intact; nothing half-written"
