#!/bin/bash
# ht_pid_reuse: a connection's identity is its process, not its pid.
# User A connects, hands the socket to a child and exits; the harness (root)
# makes user B's next process take A's old pid (ns_last_pid), and A's child
# asks for a capture "of myself". Three attacks, each must fail:
#   1. client.sock, B agentless (a plain spinner): perf must not sample B;
#   2. client.sock, B with an agent: B's agent must not be asked;
#   3. runtime.sock kept past the pid's reuse: B's own capture must not be
#      handed to A's stale runtime (and B's capture must work).
# Then A's own capture of itself still works (the friendly path).
. "$(dirname "$0")/lib.sh"

[ -w /proc/sys/kernel/ns_last_pid ] ||
	skip "no writable /proc/sys/kernel/ns_last_pid to force a pid's reuse"
PROG=$HOSTILE/hostile_pid_reuse
SPIN=$APPS/spinner
chmod o+rx "$BUILD"/tests/integration "$APPS"
A=$(make_user att)
B=$(make_user vic)
BGID=$(id -g "$B")
mkdir "$T/att"
chown "$A" "$T/att"

start_daemon "[capture]" "runtime_wait_ms = 300"

# spawn_at_pid PID OUT CMD...: start CMD as user B with exactly pid PID
# (the kernel hands out ns_last_pid + 1 next). Sets SPAWNED. No command
# substitution in the loop: every fork would take a pid.
spawn_at_pid() {
	local want=$1 out=$2 i
	shift 2
	for i in $(seq 300); do
		echo $((want - 1)) > /proc/sys/kernel/ns_last_pid
		setpriv --reuid="$B" --regid="$BGID" --clear-groups \
			env PROFILINGD_SOCKET="$PROFILINGD_SOCKET" "$@" > "$out" 2>&1 &
		SPAWNED=$!
		[ "$SPAWNED" -eq "$want" ] && return 0
		kill -KILL "$SPAWNED" 2>/dev/null || true
		wait "$SPAWNED" 2>/dev/null || true
	done
	skip "could not make pid $want come back in 300 tries (machine too busy)"
}

# wait_line FILE REGEX SECONDS
wait_line() {
	local i
	for i in $(seq $(($3 * 10))); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	fail "no '$2' in $1 within $3 s: $(cat "$1")"
}

# gone PID: the attacker's first process has exited and been reaped.
gone() {
	local i
	for i in $(seq 100); do
		[ -e "/proc/$1" ] || return 0
		sleep 0.05
	done
	fail "pid $1 did not go away"
}

# check_attack OUT WHAT: 0 when the attack failed. A successful attack is
# reported and counted; the later attacks still run, the test fails at the end.
BROKEN=0
check_attack() {
	local out=$1 what=$2
	cat "$out"
	if grep -q ATTACK-WORKED "$out"; then
		echo "ATTACK SUCCEEDED: $what: $(grep ATTACK-WORKED "$out")" >&2
		BROKEN=$((BROKEN + 1))
		return 1
	fi
}

# 1. client.sock, victim sampled without an agent.
as_uid "$A" "$PROG" client "$T/att/p1" "$T/att/go1" > "$T/a1.out" 2>&1 ||
	fail "attacker 1 did not start: $(cat "$T/a1.out")"
P=$(cat "$T/att/p1")
gone "$P"
spawn_at_pid "$P" "$T/v1.out" "$SPIN" 60
V1=$SPAWNED
echo "victim spinner (uid $B) has the attacker's old pid $P"
touch "$T/att/go1"
wait_line "$T/a1.out" "attacker-done" 60
check_attack "$T/a1.out" "A captured B's agentless process through a reused pid" &&
	! grep -q "no agent in pid $P:" "$T/daemon.log" &&
	pass "reused pid, agentless victim: nothing of B delivered, profilingd-perf never ran"
grep -q "no agent in pid $P:" "$T/daemon.log" &&
	echo "ATTACK SUCCEEDED: profilingd-perf was started on B's pid $P for A" >&2 &&
	BROKEN=$((BROKEN + 1))
kill -KILL "$V1" 2>/dev/null || true
wait "$V1" 2>/dev/null || true

# 2. client.sock, victim with an agent.
as_uid "$A" "$PROG" client "$T/att/p2" "$T/att/go2" > "$T/a2.out" 2>&1 ||
	fail "attacker 2 did not start: $(cat "$T/a2.out")"
P=$(cat "$T/att/p2")
gone "$P"
spawn_at_pid "$P" "$T/v2.out" "$PROG" victim 60
V2=$SPAWNED
wait_line "$T/daemon.log" "runtime up: pid $P uid $B" 20
echo "victim with an agent (uid $B) has the attacker's old pid $P"
touch "$T/att/go2"
wait_line "$T/a2.out" "attacker-done" 60
check_attack "$T/a2.out" "A captured B's agent through a reused pid" &&
	! grep -q "capture of pid $P for" "$T/daemon.log" &&
	pass "reused pid, victim with an agent: nothing of B delivered, B's agent never asked"
grep -q "capture of pid $P for" "$T/daemon.log" &&
	echo "ATTACK SUCCEEDED: B's agent (pid $P) was asked for a capture for A" >&2 &&
	BROKEN=$((BROKEN + 1))
kill -KILL "$V2" 2>/dev/null || true
wait "$V2" 2>/dev/null || true

# 3. runtime.sock kept past the pid's reuse.
as_uid "$A" env PROFILING_RUNTIME_SOCKET="$RUNTIME_SOCKET" "$PROG" runtime "$T/att/p3" \
	> "$T/a3.out" 2>&1 || fail "attacker 3 did not start: $(cat "$T/a3.out")"
P=$(cat "$T/att/p3")
gone "$P"
spawn_at_pid "$P" "$T/v3.out" "$PROG" victim-request
V3=$SPAWNED
echo "victim requesting its own capture (uid $B) has the stale runtime's pid $P"
wait_line "$T/v3.out" "victim result" 60
wait_line "$T/a3.out" "attacker-done" 60
cat "$T/v3.out"
if check_attack "$T/a3.out" "A's stale runtime took B's capture"; then
	grep -q "victim result error=0$" "$T/v3.out" ||
		fail "B's own capture failed beside A's stale runtime: $(cat "$T/v3.out")"
	pass "stale runtime connection: B's capture went to B's own agent"
fi
wait "$V3" 2>/dev/null || true

[ "$BROKEN" -eq 0 ] || fail "$BROKEN of 3 pid reuse attacks worked"

# The friendly path: A's capture of itself.
as_uid "$A" "$PROG" victim-request > "$T/f.out" 2>&1 || true
cat "$T/f.out"
grep -q "victim result error=0$" "$T/f.out" || fail "A's own capture failed"
daemon_alive || fail "daemon died"
stop_daemon
pass "pid reuse attacks refused, own captures work"
