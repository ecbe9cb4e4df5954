#!/usr/bin/env bash
# OOM captured before the kill: an app in a memory cgroup with a limit leaks
# steadily; the warning sign (a cgroup v1 usage threshold) makes the daemon
# take a heap profile, delivered while the app still runs; the OOM kill is
# then recorded (memory.oom_control) and linked to that capture.
. "$(dirname "$0")/lib.sh"
need_go
APP=$APPS/oom_app
V1=/sys/fs/cgroup/memory
[ -w "$V1/cgroup.procs" ] || skip "no writable cgroup v1 memory controller at $V1"
v2=$(cat /sys/fs/cgroup/unified/cgroup.controllers /sys/fs/cgroup/cgroup.controllers 2>/dev/null || true)
case "$v2" in *memory*) echo "note: cgroup v2 has a memory controller here, not covered by this test";;
*) echo "skipped: cgroup v2 part: the v2 hierarchy here has no memory controller (controllers: ${v2:-none})";; esac
CG=$V1/pd-oom-$$
mkdir "$CG"
trap 'rmdir "$CG" 2>/dev/null; cleanup' EXIT
echo $((96 << 20)) > "$CG/memory.limit_in_bytes"
echo 0 > "$CG/memory.swappiness" 2>/dev/null || true
start_daemon

rc=0
sh -c "echo \$\$ > $CG/cgroup.procs && exec $APP run" > "$T/run.out" 2> "$T/run.err" || rc=$?
cat "$T/run.err"
[ "$rc" -eq 137 ] || fail "the app was not OOM-killed (exit $rc)"
out=$(head -n 1 "$T/run.out")
[ -f "$out" ] || fail "no heap capture was delivered before the kill"
go tool pprof -sample_index=inuse_space -top "$out" 2>/dev/null > "$T/heap.txt"
cat "$T/heap.txt" | sed -n 1,12p
top=$(awk '/flat%/ { getline; print $NF; exit }' "$T/heap.txt")
case "$top" in leak_here|leak_here.*) ;; *) false;; esac || fail "the heap capture's top allocator is '$top', want leak_here"
grep -q "OOM-killed" "$T/daemon.log" || fail "the kill was not recorded"
grep "OOM-killed" "$T/daemon.log" | tail -1
"$APP" collect 2> "$T/collect.err" > "$T/collect.out" || { cat "$T/collect.err"; fail "the linked capture was not offered again"; }
grep "note:" "$T/collect.err"
stop_daemon
pass "OOM: heap captured before the kill, kill recorded and linked (cgroup v1)"
