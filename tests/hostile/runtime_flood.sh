#!/usr/bin/env bash
# runtime.sock flood: uid A opens 1,100 idle runtime connections (past the
# per-uid cap, up to the old global cap of 1,024) and never says hello.
# Meanwhile uid B's app, with libprofiling's agent, captures itself: its
# agent must still be accepted (its hello logged) and the capture succeed.
# A holds no more than max_runtimes_per_uid (64 by default), and the hello
# timeout (5 s by default) closes the ones it holds.
. "$(dirname "$0")/lib.sh"
start_daemon
A=$(make_user rtflood)
B=$(make_user rtfriend)

as_uid "$A" "$HOSTILE/hostile_runtime" flood "$RUNTIME_SOCKET" 1100 8000 > "$T/flood.out" 2>&1 &
FLOOD=$!
for _ in $(seq 600); do
	grep -q '^connected ' "$T/flood.out" && break
	kill -0 "$FLOOD" 2>/dev/null || break
	sleep 0.1
done
grep -q '^connected ' "$T/flood.out" || { cat "$T/flood.out"; fail "the flood did not connect"; }
APID=$(awk '/^connected /{print $4}' "$T/flood.out")
echo "uid $A: $(awk '/^connected /{print $2}' "$T/flood.out") runtime connections, no hello"

out=$(as_uid "$B" "$HOSTILE/hostile_runtime" self 2> "$T/self.err") ||
	{ cat "$T/self.err"; fail "uid $B's agent could not capture its own process while uid $A floods runtime.sock: $out"; }
vpid=$(echo "$out" | awk '{print $2}')
grep -q "runtime up: pid $vpid uid $B " "$T/daemon.log" ||
	fail "uid $B's agent (pid $vpid) was not accepted while uid $A floods runtime.sock"
echo "ok: uid $B captured itself through its agent: $out"

# B's agent connected after all of A's connections (the backlog is FIFO):
# the daemon has accepted, or closed, every one of them by now.
kill -USR1 "$APID"
for _ in $(seq 100); do
	grep -q '^held ' "$T/flood.out" && break
	sleep 0.1
done
held=$(awk '/^held /{print $2}' "$T/flood.out")
[ -n "$held" ] || { cat "$T/flood.out"; fail "the flood did not report"; }

[ "$held" -le 64 ] || fail "uid $A holds $held idle runtime connections, past max_runtimes_per_uid (64)"
echo "ok: uid $A held $held (cap 64)"

wait "$FLOOD" || true
after=$(awk '/^open_after /{print $2}' "$T/flood.out")
[ "${after:-x}" = 0 ] || fail "$after idle runtime connections of uid $A outlived the hello timeout"
echo "ok: the hello timeout closed every idle connection of uid $A"
daemon_alive || fail "daemon died"
stop_daemon
pass "runtime flood"
