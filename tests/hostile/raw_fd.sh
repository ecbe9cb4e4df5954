#!/usr/bin/env bash
# Attack: raw-fd read-back (issue 14 item 1). An unprivileged app, playing
# its own runtime, asks for a system trace of itself, keeps the capture fd
# and reads back from it after the daemon has the kernel's sched data,
# while another user's process with a distinctive name runs. It must get
# nothing but its own bytes: no foreign comm, no extra data. The friendly
# path (the same capture) must still deliver a result.
. "$(dirname "$0")/lib.sh"
attacker=$(make_user rawfd)
victim=$(make_user rawfdv)
vname=pdv$$x
vname=${vname:0:15}
mkdir -p "$T/victim"
printf '#!/bin/sh\nwhile :; do sleep 0.02; done\n' > "$T/victim/$vname"
chmod 755 "$T/victim" "$T/victim/$vname"

start_daemon "[capture]" "deadline_grace_ms = 60000"
as_uid "$victim" "$T/victim/$vname" > /dev/null 2>&1 &
VPID=$!
trap 'kill $VPID 2>/dev/null || true; hostile_cleanup' EXIT
sleep 0.2
kill -0 "$VPID" || fail "the victim process did not start"

as_uid "$attacker" PROFILING_NO_AGENT=1 PROFILINGD_RUNTIME_SOCKET="$RUNTIME_SOCKET" \
	"$HOSTILE/hostile_raw_fd" "$vname" > "$T/attack.out" 2>&1 && rc=0 || rc=$?
cat "$T/attack.out"
[ "$rc" -ne 2 ] || fail "the attacker could not run"
[ "$rc" -eq 0 ] || fail "raw-fd read-back: $(grep 'ATTACK WORKED' "$T/attack.out" | sed -n 1,2p)"
grep -q '^result: 0 ' "$T/attack.out" || fail "the capture itself failed: $(grep '^result' "$T/attack.out")"
daemon_alive || fail "daemon died"
if grep -q "no kernel sched data" "$T/daemon.log"; then
	skip "no kernel sched data on this machine: the read-back had nothing to find"
fi
pass "raw-fd read-back: nothing but the app's own bytes through its capture fd"
