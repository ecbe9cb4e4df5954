#!/usr/bin/env bash
# Out of fds, every listener pauses instead of spinning. The daemon's fd
# limit is lowered (prlimit, from outside) to a few above what it holds;
# uid A then opens 64 idle client connections, which use up the rest and
# fill the backlog. uid B's profctl status waits on control.sock: accept
# there fails with EMFILE, and control.sock must pause (one log line per
# pause, as client.sock and runtime.sock do) rather than return at once
# and be called again in a loop. Once A's connections go, B's profctl is
# served. Two rounds, with 7 and 8 fds of headroom: see round().
. "$(dirname "$0")/lib.sh"
command -v prlimit > /dev/null || skip "prlimit (util-linux) is needed to lower the daemon's fd limit"
A=$(make_user fdhog)
B=$(make_user fdctl)
APID=
PROFCTL=$BUILD/tools/profctl/profctl
chmod o+rx "$BUILD/tools" "$BUILD/tools/profctl"

# round HEADROOM: one daemon whose fd limit is HEADROOM above what it holds.
# Each client takes a socket and a pidfd, so the fds left once the hog has
# filled the table are odd or even with HEADROOM: both are tried, because
# an accept that leaves too few fds to bind its peer shows with one parity
# only (the peer is then reset rather than left waiting in the backlog).
round() {
	local room=$1
	# This round's pauses only: the log is appended across restarts.
	[ -f "$T/daemon.log" ] && : > "$T/daemon.log"
	start_daemon
	CTL=$T/state/control.sock
	[ -S "$CTL" ] || fail "no control socket at $CTL"
	: > "$T/hog.out"
	local held
	held=$(ls "/proc/$DAEMON_PID/fd" | wc -l)
	prlimit --pid "$DAEMON_PID" --nofile=$((held + room)):$((held + room)) || fail "prlimit"
	echo "daemon: $held fds open, limit lowered to $((held + room))"

	as_uid "$A" "$HOSTILE/hostile_runtime" flood "$PROFILINGD_SOCKET" 64 0 > "$T/hog.out" 2>&1 &
	for _ in $(seq 300); do
		grep -q '^connected ' "$T/hog.out" && break
		sleep 0.1
	done
	APID=$(awk '/^connected /{print $4}' "$T/hog.out")
	[ -n "$APID" ] || { cat "$T/hog.out"; fail "uid $A could not connect"; }
	echo "uid $A: $(awk '/^connected /{print $2}' "$T/hog.out") idle client connections"

	as_uid "$B" timeout 60 "$PROFCTL" --socket "$CTL" status > "$T/status.out" 2>&1 &
	local st=$!
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
	wait "$st" || { cat "$T/status.out"; fail "uid $B's profctl status was not served once fds were free (headroom $room)"; }
	echo "ok: uid $B's profctl status served once uid $A's connections were gone"
	local pauses
	pauses=$(grep -Ec "(accept|binding a peer) on $CTL: Too many open files; pausing" "$T/daemon.log" || true)
	echo "control.sock pauses: $pauses"
	daemon_alive || fail "daemon died"
	stop_daemon
}

for room in 7 8; do
	round "$room"
done
pass "accept pauses out of fds"
