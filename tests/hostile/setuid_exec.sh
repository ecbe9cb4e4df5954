#!/bin/bash
# ht_setuid_exec: a connection does not follow its process into a setuid
# exec. User A connects, then execs a setuid-root copy of the attacker that
# keeps the socket and asks for a capture of itself: refused with
# PERMISSION (104), and profilingd-perf never samples it for A. Both orders:
# exec then request (refused at once), and request then exec while the
# daemon waits for a runtime (refused when the capture would start). Then
# A's own capture of itself still works, and root's capture of the setuid
# process by pid is delivered to root, never to A.
. "$(dirname "$0")/lib.sh"

PROG=$HOSTILE/hostile_setuid_exec
A=$(make_user suid)
# A setuid-root copy the attacker can reach; removed with $T at exit.
D=$T/suid
mkdir "$D"
cp "$PROG" "$D/copy"
chown root:root "$D/copy"
chmod 4755 "$D/copy"

start_daemon "[capture]" "runtime_wait_ms = 1000"

# check OUT WHAT EXPECTED: 0 when the attack failed the expected way. A
# successful attack is reported and counted; the next one still runs, and
# the test fails at the end.
BROKEN=0
check() {
	local out=$1 what=$2 want=$3
	cat "$out"
	grep -q "not running setuid root" "$out" && skip "the setuid copy does not run setuid (nosuid?)"
	if grep -q ATTACK-WORKED "$out"; then
		echo "ATTACK SUCCEEDED: $what: $(grep ATTACK-WORKED "$out")" >&2
		BROKEN=$((BROKEN + 1))
		return 1
	fi
	grep -qE "$want" "$out" || fail "$what: not refused with PERMISSION"
}

as_uid "$A" "$PROG" exec-then-request "$D/copy" > "$T/s1.out" 2>&1 || true
check "$T/s1.out" "exec, then a request of itself" "setuid: reply error=104" &&
	pass "exec then request: refused with PERMISSION"

as_uid "$A" "$PROG" request-then-exec "$D/copy" > "$T/s2.out" 2>&1 || true
check "$T/s2.out" "a request, then exec while the daemon waits" \
	"setuid: (result error=104|connection closed)" &&
	pass "request then exec: refused with PERMISSION"
[ "$BROKEN" -eq 0 ] || fail "$BROKEN of 2 setuid exec attacks worked"

# profilingd-perf never started for the setuid process.
if grep -q "sampling it with perf_event_open" "$T/daemon.log"; then
	fail "profilingd-perf sampled the setuid process: $(grep 'sampling it with' "$T/daemon.log")"
fi

# Root may capture a setuid process (by pid), and the result is root's:
# never filed under, nor delivered to, the real uid that started it.
# setpriv itself, not as_uid (a function: $! would be its subshell).
setpriv --reuid="$A" --regid="$(id -g "$A")" --clear-groups "$D/copy" spin 30 \
	> "$T/spin.out" 2>&1 &
SPID=$!
# Running as the setuid copy: real uid A, effective 0.
for _ in $(seq 100); do
	[ "$(awk '/^Uid:/ { print $2 " " $3 }' "/proc/$SPID/status" 2>/dev/null)" = "$A 0" ] && break
	sleep 0.05
done
[ "$(awk '/^Uid:/ { print $2 " " $3 }' "/proc/$SPID/status" 2>/dev/null)" = "$A 0" ] ||
	fail "the setuid copy did not start: $(cat "$T/spin.out")"
res=$("$APPS/it_request" --pid "$SPID" --type stack --duration-ms 1000) ||
	fail "root's capture of the setuid process failed"
kill "$SPID" 2>/dev/null || true
wait "$SPID" 2>/dev/null || true
case $res in
"$T/state/results/0/"*) ;;
*) fail "root's capture of a setuid process was filed as $res, not under results/0/" ;;
esac
[ "$(stat -c %u "$res")" = 0 ] || fail "root's capture of a setuid process is owned by uid $(stat -c %u "$res")"
[ -z "$(ls -A "$T/state/results/$A" 2>/dev/null)" ] ||
	fail "a result reached the setuid process's real uid $A: $(ls "$T/state/results/$A")"
pass "root's capture of the setuid process: delivered to root ($res)"

# The friendly path: A's own agentless capture of itself.
as_uid "$A" "$PROG" friendly > "$T/f.out" 2>&1 || true
cat "$T/f.out"
grep -q "friendly capture delivered" "$T/f.out" || fail "A's own capture of itself failed"
daemon_alive || fail "daemon died"
stop_daemon
pass "setuid exec attacks refused, own capture works"
