#!/usr/bin/env bash
# Out of fds, every listener pauses instead of spinning. The daemon's fd
# limit is lowered (prlimit, from outside) to a few above what it holds;
# uid A then opens 64 idle client connections, which use up the rest and
# fill the backlog. uid B's profctl status waits on control.sock: accept
# there fails with EMFILE, and control.sock must pause (one log line per
# pause, as client.sock and runtime.sock do) rather than return at once
# and be called again in a loop. Once A's connections go, B's profctl is
# served.
. "$(dirname "$0")/lib.sh"
command -v prlimit > /dev/null || skip "prlimit (util-linux) is needed to lower the daemon's fd limit"
start_daemon
A=$(make_user fdhog)
B=$(make_user fdctl)
APID=
CTL=$T/state/control.sock
PROFCTL=$BUILD/tools/profctl/profctl
chmod o+rx "$BUILD/tools" "$BUILD/tools/profctl"
[ -S "$CTL" ] || fail "no control socket at $CTL"

held=$(ls "/proc/$DAEMON_PID/fd" | wc -l)
prlimit --pid "$DAEMON_PID" --nofile=$((held + 8)):$((held + 8)) || fail "prlimit"
echo "daemon: $held fds open, limit lowered to $((held + 8))"

as_uid "$A" "$HOSTILE/hostile_runtime" flood "$PROFILINGD_SOCKET" 64 0 > "$T/hog.out" 2>&1 &
for _ in $(seq 300); do
	grep -q '^connected ' "$T/hog.out" && break
	sleep 0.1
done
APID=$(awk '/^connected /{print $4}' "$T/hog.out")
[ -n "$APID" ] || { cat "$T/hog.out"; fail "uid $A could not connect"; }
echo "uid $A: $(awk '/^connected /{print $2}' "$T/hog.out") idle client connections"

as_uid "$B" timeout 60 "$PROFCTL" --socket "$CTL" status > "$T/status.out" 2>&1 &
ST=$!
for _ in $(seq 200); do
	grep -Eq "(accept|binding a peer) on $CTL: Too many open files; pausing" "$T/daemon.log" && break
	sleep 0.1
done
grep -Eq "(accept|binding a peer) on $CTL: Too many open files; pausing" "$T/daemon.log" ||
	fail "control.sock did not pause its accept when out of fds"
echo "ok: control.sock paused its accept out of fds"
# A goes (its backlog too: the daemon accepts and drops what it left).
kill -KILL "$APID"
APID=
wait "$ST" || { cat "$T/status.out"; fail "uid $B's profctl status was not served once fds were free"; }
echo "ok: uid $B's profctl status served once uid $A's connections were gone"
pauses=$(grep -Ec "(accept|binding a peer) on $CTL: Too many open files; pausing" "$T/daemon.log" || true)
echo "control.sock pauses: $pauses"
daemon_alive || fail "daemon died"
stop_daemon
pass "accept pauses out of fds"
