#!/bin/busybox sh
# /init of the test VM (tests/vm/vm_oom_v2.sh builds the initramfs around
# it): a cgroup v2 hierarchy with the memory controller, the real daemon,
# and the OOM cases of /vm.env's CASES. Each case ends with one line
# "VMCASE <name> PASS|FAIL|SKIP <why>" on the console, which the host
# script checks; then the VM powers off.
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /run
mount -t tmpfs run /run
mkdir -p /sys/fs/cgroup
mount -t cgroup2 none /sys/fs/cgroup
echo +memory > /sys/fs/cgroup/cgroup.subtree_control
. /vm.env
CG=/sys/fs/cgroup
APP=$BUILD/tests/integration/oom_app
PROFCTL=$BUILD/tools/profctl/profctl
S=/run/pd
echo "vm: kernel $(uname -r), $(grep MemTotal /proc/meminfo), controllers: $(cat $CG/cgroup.controllers)"

start_daemon() {
	rm -rf $S
	mkdir -p $S/state
	cat > $S/profilingd.conf <<EOF
[daemon]
state_dir = $S/state
client_socket = $S/client.sock
runtime_socket = $S/runtime.sock
[ratelimit]
hour_system_cap = 1000000
hour_app_cap = 1000000
day_system_cap = 1000000
day_app_cap = 1000000
week_system_cap = 1000000
week_app_cap = 1000000
EOF
	$BUILD/service/profilingd -f -d -c $S/profilingd.conf > $S/daemon.log 2>&1 &
	DPID=$!
	export PROFILINGD_SOCKET=$S/client.sock
	for i in $(seq 200); do
		grep -q ' ready (state ' $S/daemon.log 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

stop_daemon() {
	kill -TERM $DPID 2>/dev/null
	wait $DPID 2>/dev/null
}

result() { # NAME PASS|FAIL|SKIP why
	echo "VMCASE $1 $2 $3"
	if [ "$2" = FAIL ]; then
		echo "--- $1: daemon log (last lines)"
		tail -n 25 $S/daemon.log
		echo "--- $1: app stderr"
		cat $S/run.err 2>/dev/null | tail -n 5
	fi
}

# The delivered heap profile names the leaking function.
heap_ok() {
	[ -n "$1" ] && [ -f "$1" ] && zcat "$1" | grep -q leak_here
}

# run_app CGROUP [BYTES]: the leaking app in CGROUP until the kernel kills it.
run_app() {
	sh -c "echo \$\$ > $1/cgroup.procs && exec $APP run $2" > $S/run.out 2> $S/run.err
}

# case_kill NAME CGROUP WHERE: killed at a memory.max (WHERE: the cgroup
# named in the note); heap before the kill, kill recorded and linked.
case_kill() {
	name=$1 cg=$2 where=$3
	start_daemon || { result $name FAIL "daemon did not start"; return; }
	rc=0
	run_app $cg || rc=$?
	out=$(head -n 1 $S/run.out)
	if [ $rc -ne 137 ]; then
		result $name FAIL "the app was not OOM-killed (exit $rc)"
	elif ! heap_ok "$out"; then
		result $name FAIL "no heap profile with leak_here delivered before the kill ($out)"
	elif ! grep -q "OOM-killed by the kernel's cgroup OOM killer (memory.max [0-9]* of $where)" $S/daemon.log; then
		result $name FAIL "the kill was not recorded as a cgroup OOM kill at $where"
	elif ! $APP collect > $S/collect.out 2> $S/collect.err; then
		result $name FAIL "the linked capture was not offered again"
	else
		grep "OOM warning from" $S/daemon.log | head -n 1
		grep "note:" $S/collect.err
		result $name PASS "heap before the kill at $where, kill linked"
	fi
	stop_daemon
}

case_max() {
	mkdir $CG/pd-max
	echo $((96 << 20)) > $CG/pd-max/memory.max
	case_kill max $CG/pd-max /pd-max
}

case_parent() {
	mkdir -p $CG/pd-par
	echo $((96 << 20)) > $CG/pd-par/memory.max
	echo +memory > $CG/pd-par/cgroup.subtree_control
	mkdir $CG/pd-par/app
	case_kill parent $CG/pd-par/app /pd-par
}

# A line the kernel throttles at but does not kill at: the warning comes
# from WHY's signal, then the test ends the app itself; no OOM kill may be
# recorded for that SIGKILL.
case_soft() { # NAME CGROUP BYTES WHY(a grep pattern) LABEL
	name=$1 cg=$2
	start_daemon || { result $name FAIL "daemon did not start"; return; }
	run_app $cg $3 &
	apid=$!
	for i in $(seq 600); do
		[ -s $S/run.out ] && break
		sleep 0.1
	done
	out=$(head -n 1 $S/run.out)
	kill -9 $(cat $cg/cgroup.procs) 2>/dev/null
	wait $apid
	sleep 1
	if ! heap_ok "$out"; then
		result $name FAIL "no heap profile with leak_here delivered ($out)"
	elif ! grep -q "OOM warning from .*: $4" $S/daemon.log; then
		result $name FAIL "the warning did not come from: $5"
	elif grep -q "OOM-killed" $S/daemon.log; then
		result $name FAIL "a SIGKILL by the test was recorded as an OOM kill"
	else
		grep "OOM warning from" $S/daemon.log | head -n 1
		result $name PASS "warned by $5, no false kill"
	fi
	stop_daemon
}

case_high() {
	mkdir $CG/pd-high
	echo $((64 << 20)) > $CG/pd-high/memory.high
	case_soft high $CG/pd-high "" "usage over the warning line .*memory.high" \
		"usage over 50 % of memory.high"
}

case_psi() {
	# Only the stall can warn: the byte threshold is out of reach, and
	# memory.high (no memory.max) throttles the leak, which counts as a
	# memory stall of the cgroup.
	mkdir $CG/pd-psi
	echo $((16 << 20)) > $CG/pd-psi/memory.high
	case_soft psi $CG/pd-psi $((1 << 30)) "memory stalls in the cgroup" \
		"a PSI trigger on the cgroup's memory.pressure"
}

# No cgroup limit, a 256 MiB VM: the global OOM killer, counted in the
# oom_kill of the app's own cgroup.
case_global() {
	name=global
	mkdir $CG/pd-glob
	start_daemon || { result $name FAIL "daemon did not start"; return; }
	echo -1000 > /proc/$DPID/oom_score_adj
	rc=0
	run_app $CG/pd-glob || rc=$?
	echo "pd-glob: $(tr '\n' ' ' < $CG/pd-glob/memory.events.local)"
	out=$(head -n 1 $S/run.out)
	if [ $rc -ne 137 ]; then
		result $name FAIL "the app was not OOM-killed (exit $rc)"
	elif ! heap_ok "$out"; then
		result $name FAIL "no heap profile with leak_here delivered before the kill ($out)"
	elif ! grep -q "OOM-killed by the kernel's global OOM killer" $S/daemon.log; then
		result $name FAIL "the kill was not recorded as a global OOM kill"
	elif ! $APP collect > $S/collect.out 2> $S/collect.err; then
		result $name FAIL "the linked capture was not offered again"
	else
		grep "note:" $S/collect.err
		result $name PASS "heap before the global OOM kill, kill linked"
	fi
	stop_daemon
}

case_jvm() {
	result jvm SKIP "no JDK is packed into the VM image (a JDK is ~200 MiB: too slow to pack and boot under TCG)"
}

case_status() {
	start_daemon || { result status FAIL "daemon did not start"; return; }
	st=$($PROFCTL -s $S/state/control.sock status 2>&1 | grep -i "memory")
	echo "$st"
	case "$st" in
	*"memory.events by inotify"*"per-cgroup PSI triggers"*"memory.current"*)
		result status PASS "the status names inotify, PSI and memory.current" ;;
	*) result status FAIL "the status does not name the v2 signals" ;;
	esac
	stop_daemon
}

for c in $CASES; do
	case_$c
done
echo "VMDONE"
poweroff -f
