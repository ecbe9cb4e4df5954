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
APP=$BUILD/tests/integration/apps/oom_app
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
	for l in "$@"; do echo "$l" >> $S/profilingd.conf; done
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

# wait_log PATTERN: the daemon handles the kill a moment after the app's
# exit reaches the shell (its exit event, inotify, a look 200 ms later):
# up to 10 s for PATTERN in its log.
wait_log() {
	for i in $(seq 100); do
		grep -q "$1" $S/daemon.log && return 0
		sleep 0.1
	done
	return 1
}

# The delivered heap profile names the leaking function.
heap_ok() {
	[ -n "$1" ] && [ -f "$1" ] && zcat "$1" | grep -q leak_here
}

# killed_after_heap RC OUT: the app was OOM-killed (exit 137) after its heap
# profile OUT was delivered; else one FAIL line for case $name, and 1.
killed_after_heap() {
	if [ "$1" -ne 137 ]; then
		result $name FAIL "the app was not OOM-killed (exit $1)"
		return 1
	fi
	heap_ok "$2" && return 0
	result $name FAIL "no heap profile with leak_here delivered before the kill ($2)"
	return 1
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
	if ! killed_after_heap "$rc" "$out"; then
		: # said why
	elif ! wait_log "OOM-killed by the kernel's cgroup OOM killer (memory.max [0-9]* of $where)"; then
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
# recorded for that SIGKILL. Config lines after LABEL go to the daemon's.
case_soft() { # NAME CGROUP BYTES WHY(a grep pattern) LABEL [CONF_LINE...]
	name=$1 cg=$2 bytes=$3 why=$4 label=$5
	shift 5
	start_daemon "$@" || { result $name FAIL "daemon did not start"; return; }
	run_app $cg $bytes &
	apid=$!
	for i in $(seq 600); do
		[ -s $S/run.out ] && break
		sleep 0.1
	done
	out=$(head -n 1 $S/run.out)
	# Past the first warning the app stays over the line (or stalled):
	# that is one episode, one warning, not one per look or PSI window.
	sleep 3
	kill -9 $(cat $cg/cgroup.procs) 2>/dev/null
	wait $apid
	sleep 1
	nwarn=$(grep -c "OOM warning from" $S/daemon.log)
	if ! heap_ok "$out"; then
		result $name FAIL "no heap profile with leak_here delivered ($out)"
	elif [ "$nwarn" -ne 1 ]; then
		result $name FAIL "$nwarn OOM warnings in one episode, want 1"
	elif ! grep -q "OOM warning from .*: $why" $S/daemon.log; then
		result $name FAIL "the warning did not come from: $label"
	elif grep -q "OOM-killed" $S/daemon.log; then
		result $name FAIL "a SIGKILL by the test was recorded as an OOM kill"
	else
		grep "OOM warning from" $S/daemon.log | head -n 1
		result $name PASS "warned by $label, no false kill"
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
	# memory stall of the cgroup. The app is all the VM runs, so its stall
	# is the machine's too: the system-wide trigger ([memory]
	# stall_percent) is off here, or it races the cgroup's for the one
	# warning of the episode (it won a suite run here: "memory stalls
	# system-wide").
	mkdir $CG/pd-psi
	echo $((16 << 20)) > $CG/pd-psi/memory.high
	case_soft psi $CG/pd-psi $((1 << 30)) "memory stalls in the cgroup" \
		"a PSI trigger on the cgroup's memory.pressure" "[memory]" "stall_percent = 0"
}

# systemd-oomd's way, played by the test: the cgroup is marked
# (user.oomd_ooms, as oomd does) and its process SIGKILLed; the kill is
# linked to the capture with "killed by systemd-oomd".
case_oomd() {
	name=oomd cg=$CG/pd-oomd
	mkdir $cg
	echo $((64 << 20)) > $cg/memory.high
	start_daemon || { result $name FAIL "daemon did not start"; return; }
	run_app $cg &
	apid=$!
	for i in $(seq 600); do
		[ -s $S/run.out ] && break
		sleep 0.1
	done
	out=$(head -n 1 $S/run.out)
	$APP xattr $cg user.oomd_ooms 1 || { result $name FAIL "cannot set user.oomd_ooms"; stop_daemon; return; }
	kill -9 $(cat $cg/cgroup.procs) 2>/dev/null
	wait $apid
	sleep 1
	if ! heap_ok "$out"; then
		result $name FAIL "no heap profile with leak_here delivered ($out)"
	elif ! wait_log "killed by systemd-oomd"; then
		result $name FAIL "the SIGKILL of a cgroup marked by systemd-oomd was not named so"
	elif ! $APP collect > $S/collect.out 2> $S/collect.err; then
		# collect wants "OOM-killed" in the note; this one names oomd
		grep -q "note: killed by systemd-oomd" $S/collect.err &&
			{ grep "note:" $S/collect.err; result $name PASS "oomd's kill named and linked"; } ||
			result $name FAIL "the linked capture was not offered again"
	else
		result $name FAIL "the note does not name systemd-oomd"
	fi
	stop_daemon
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
	if ! killed_after_heap "$rc" "$out"; then
		: # said why
	elif ! wait_log "OOM-killed by the kernel's global OOM killer"; then
		result $name FAIL "the kill was not recorded as a global OOM kill"
	elif ! $APP collect > $S/collect.out 2> $S/collect.err; then
		result $name FAIL "the linked capture was not offered again"
	else
		grep "note:" $S/collect.err
		result $name PASS "heap before the global OOM kill, kill linked"
	fi
	stop_daemon
}

# No cgroup limit and a byte threshold out of reach: the warning can only
# come from the whole machine's MemAvailable (25 % here), then the global
# OOM kill is recorded.
case_avail() {
	name=avail
	mkdir -p $CG/pd-avail
	start_daemon "[memory]" "available_percent = 25" "stall_percent = 0" ||
		{ result $name FAIL "daemon did not start"; return; }
	echo -1000 > /proc/$DPID/oom_score_adj
	rc=0
	run_app $CG/pd-avail $((1 << 30)) || rc=$?
	out=$(head -n 1 $S/run.out)
	if ! killed_after_heap "$rc" "$out"; then
		: # said why
	elif ! grep -q "OOM warning: MemAvailable" $S/daemon.log; then
		result $name FAIL "the warning did not come from MemAvailable"
	elif ! wait_log "OOM-killed by the kernel's global OOM killer"; then
		result $name FAIL "the kill was not recorded as a global OOM kill"
	else
		grep "OOM warning: MemAvailable" $S/daemon.log | head -n 1
		result $name PASS "warned by MemAvailable, global OOM kill recorded"
	fi
	stop_daemon
}

# The app in the root cgroup (no cgroup count of its kills): the global OOM
# kill is taken from the kernel log (/dev/kmsg) with its SIGKILL exit.
case_kmsg() {
	name=kmsg
	start_daemon || { result $name FAIL "daemon did not start"; return; }
	echo -1000 > /proc/$DPID/oom_score_adj
	rc=0
	run_app $CG || rc=$?
	out=$(head -n 1 $S/run.out)
	if ! killed_after_heap "$rc" "$out"; then
		: # said why
	elif ! wait_log "OOM-killed by the kernel's global OOM killer (kernel log)"; then
		result $name FAIL "the kill was not recorded from the kernel log"
	elif ! $APP collect > $S/collect.out 2> $S/collect.err; then
		result $name FAIL "the linked capture was not offered again"
	else
		grep "note:" $S/collect.err
		result $name PASS "global OOM kill of a root-cgroup app from /dev/kmsg, linked"
	fi
	stop_daemon
}

# A JVM whose -Xmx (1 GiB) is far above its cgroup's memory.max (256 MiB):
# the kernel kills it long before Java's OutOfMemoryError. A system OOM
# trigger by main class fires at 30 % of the limit (77 MiB: the JVM's own
# ~25 MiB and ~50 MiB of live chunks); the heap dump it takes is written by
# the JVM to its /tmp, a tmpfs charged to the JVM's cgroup, so at its end
# the cgroup holds about twice the live set: ~130 MiB plus what the app
# grew meanwhile (12.5 MiB/s), well under the line. The JVM runs as its own
# user; the dump, redacted, is stored for that uid before the kill, and the
# kill is linked to it.
case_jvm() {
	name=jvm
	[ -z "$JVM_SKIP" ] || { result $name SKIP "$JVM_SKIP"; return; }
	cg=$CG/pd-jvm
	mkdir $cg
	echo $((256 << 20)) > $cg/memory.max
	start_daemon "[trigger.jvmoom]" "type = oom" "java_main = OomGrow" "memory_percent = 30" ||
		{ result $name FAIL "daemon did not start"; return; }
	t0=$(cut -d ' ' -f 1 /proc/uptime)
	# SerialGC and C1 only: one CPU under TCG, no compiler or GC threads to feed.
	rc=0
	sh -c "echo \$\$ > $cg/cgroup.procs && exec su -s /bin/sh pdjava -c 'exec $JRT/bin/java \
		-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx1g \
		-agentpath:$BUILD/runtime/jvmti/libprofiling_jvmti.so=socket=$S/runtime.sock \
		-cp $BUILD/tests/integration/apps/java OomGrow 256 20'" > $S/run.out 2> $S/run.err || rc=$?
	t1=$(cut -d ' ' -f 1 /proc/uptime)
	jpid=$(sed -n 's/^pid //p' $S/run.out)
	echo "jvm: pid $jpid ran $(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%.1f", b - a }') s," \
		"$(grep grown $S/run.out | tail -n 1), exit $rc; pd-jvm: $(tr '\n' ' ' < $cg/memory.events)"
	dump=$(ls $S/state/results/61023/*.hprof 2>/dev/null | head -n 1)
	facts=
	[ -n "$dump" ] && facts=$($BUILD/tests/integration/check/hprof_check $dump 'OomGrow$Chunk' 2>&1)
	chunks=$(echo "$facts" | awk '$1 == "instances" { print $3 }')
	# The heap dump's line must come before the kill's: the VM wrote it alive.
	ldump=$(grep -n "JVM heap dump of pid $jpid: ok" $S/daemon.log | head -n 1 | cut -d : -f 1)
	wait_log "OOM-killed by the kernel's cgroup OOM killer (memory.max [0-9]* of /pd-jvm)"
	lkill=$(grep -n "OOM-killed by the kernel's cgroup OOM killer (memory.max [0-9]* of /pd-jvm)" \
		$S/daemon.log | head -n 1 | cut -d : -f 1)
	if [ "$rc" -ne 137 ]; then
		result $name FAIL "the JVM was not SIGKILLed (exit $rc)"
	elif ! grep -q "^oom_kill [1-9]" $cg/memory.events; then
		result $name FAIL "no oom_kill in pd-jvm's memory.events"
	elif grep -q OutOfMemoryError $S/run.err; then
		result $name FAIL "Java's own OutOfMemoryError came first"
	elif ! grep -q "oom trigger of sys:jvmoom fired for pid $jpid" $S/daemon.log; then
		result $name FAIL "the OOM trigger did not fire for JVM pid $jpid"
	elif [ -z "$ldump" ]; then
		result $name FAIL "no heap dump of pid $jpid was taken"
	elif [ -z "$lkill" ]; then
		result $name FAIL "the kill was not recorded as a cgroup OOM kill at /pd-jvm"
	elif [ "$ldump" -gt "$lkill" ]; then
		result $name FAIL "the heap dump came after the kill"
	elif [ -z "$dump" ]; then
		result $name FAIL "no .hprof stored for uid 61023"
	elif [ "${chunks:-0}" -lt 100 ]; then
		result $name FAIL "the dump holds ${chunks:-no} OomGrow\$Chunk (want >= 100): $facts"
	elif ! echo "$facts" | grep -q "^nonzero_primitive_arrays 0$"; then
		result $name FAIL "the stored dump is not redacted: $facts"
	elif ! echo "$facts" | grep -q "^thread grower .*OomGrow"; then
		result $name FAIL "no stack of the grower thread in the dump"
	elif ! wait_log "OOM-killed .*; its heap capture is queued again for the app"; then
		result $name FAIL "the kill was not linked to the heap dump"
	else
		grep -E "oom trigger of sys:jvmoom fired|JVM heap dump of pid|; its heap capture is queued" \
			$S/daemon.log
		secs=$(awk -v a=$t0 -v b=$t1 'BEGIN { printf "%.1f", b - a }')
		result $name PASS "heap dump ($(stat -c %s $dump) bytes, $chunks chunks, redacted) before the cgroup's OOM kill, linked; JVM start to kill $secs s"
	fi
	stop_daemon
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

# Not a test: figures for bench/oom_v2_bench.sh, "VMBENCH key value" lines.
# 1. the usage crossing 50 % of memory.max -> the OOM trigger's fire, per
# process (trg_bench_app oom: 256 KiB a millisecond, stamps the step that
# crossed), split at the watcher's "OOM warning" line; BENCH_N processes
# under one daemon, then BENCH_N under a second one started afresh (new
# process, new state dir): the VM's first crossing runs code qemu has not
# translated yet, the second daemon's first runs the same code translated
# but with the daemon's own state cold, which tells the two causes apart;
# 2. the daemon's CPU watching none, then 100 idle processes each in its
# own cgroup with a memory.max (one trg_bench_app forking them, over 4
# uids: the daemon takes at most 64 connections and 32 v2 cgroups per uid).

# cpu_share NAME SECONDS: the daemon's CPU share, "VMBENCH NAME_cpu_pct N".
cpu_share() {
	t0=$(awk '{ print $14 + $15 }' /proc/$DPID/stat)
	u0=$(awk '{ print $1 }' /proc/uptime)
	sleep $2
	t1=$(awk '{ print $14 + $15 }' /proc/$DPID/stat)
	u1=$(awk '{ print $1 }' /proc/uptime)
	awk -v a=$t0 -v b=$t1 -v u=$u0 -v w=$u1 -v n=$1 \
		'BEGIN { printf "VMBENCH %s_cpu_pct %.2f\n", n, (b - a) / 100 / (w - u) * 100 }'
}

# bench_cross RUN: BENCH_N crossings under the running daemon; one line
# "VMBENCH v2_cross RUN K FIRE_MS WARN_MS STEP_MS" each (K: its order;
# FIRE_MS: the daemon's fire stamp - the app's stamp after the crossing
# step; WARN_MS: the same for the watcher's warning line; "none" when the
# line is missing; STEP_MS: the crossing step's own length, after - before,
# the stamps between which usage crossed).
bench_cross() {
	: > $S/bench.out
	for i in $(seq ${BENCH_N:-9}); do
		mkdir $CG/pd-b$1-$i
		echo $((96 << 20)) > $CG/pd-b$1-$i/memory.max
		sh -c "echo \$\$ > $CG/pd-b$1-$i/cgroup.procs && exec $B oom $CG/pd-b$1-$i" >> $S/bench.out 2>&1
	done
	awk -v run=$1 -v dl=$S/daemon.log 'function pidof(   i, p) { for (i = 1; i <= NF; i++) if ($i == "pid") {
			p = $(i + 1); sub(":", "", p); return p } }
		function stamp(   h) { split($1, h, ":"); return h[1] * 3600 + h[2] * 60 + h[3] }
	FILENAME == dl && / OOM warning from / { p = pidof(); if (!(p in w)) w[p] = stamp(); next }
	FILENAME == dl && / oom trigger of .* fired for pid / { p = pidof(); if (!(p in f)) f[p] = stamp(); next }
	/^cross/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
		p = v["pid"]; a = v["after"] % 86400; k++
		fi = p in f ? sprintf("%.3f", (f[p] - a) * 1000) : "none"
		wa = p in w ? sprintf("%.3f", (w[p] - a) * 1000) : "none"
		print "VMBENCH v2_cross", run, k, fi, wa, sprintf("%.3f", (a - v["before"] % 86400) * 1000) }' \
		$S/daemon.log $S/bench.out
}

case_bench() {
	B=$BUILD/bench/trg_bench_app
	[ -x $B ] || { result bench SKIP "no $B in the image"; return; }
	start_daemon || { result bench FAIL "daemon did not start"; return; }
	bench_cross 1
	stop_daemon
	start_daemon || { result bench FAIL "daemon did not start"; return; }
	bench_cross 2
	stop_daemon
	start_daemon || { result bench FAIL "daemon did not start"; return; }
	sleep 2
	cpu_share base 20
	for i in $(seq 100); do
		mkdir $CG/pd-i$i
		echo $((1 << 30)) > $CG/pd-i$i/memory.max
	done
	u0=$(awk '{ print $1 }' /proc/uptime)
	$B oom-swarm 100 2000 4 $CG/pd-i > $S/swarm.out 2>&1 &
	SW=$!
	for i in $(seq 3000); do
		grep -q "oom-swarm ready" $S/swarm.out && break
		sleep 0.1
	done
	u1=$(awk '{ print $1 }' /proc/uptime)
	cat $S/swarm.out
	echo "VMBENCH idle_start_s $(awk -v a=$u0 -v b=$u1 'BEGIN { printf "%.1f", b - a }')"
	# (not the "registered" lines: the log limits a uid's lines)
	echo "VMBENCH idle_watched $(sed -n 's/.* \([0-9]*\) registered .*/\1/p' $S/swarm.out)"
	echo "VMBENCH idle_v2 $(grep -c 'cg_get: /pd-i[0-9]*: watched' $S/daemon.log)"
	echo "VMBENCH idle_rss $(grep -c 'its memory by RSS' $S/daemon.log)"
	sleep 2
	cpu_share idle 20
	kill -TERM $SW 2>/dev/null
	wait $SW 2>/dev/null
	stop_daemon
	result bench PASS "figures printed"
}

for c in $CASES; do
	case_$c
done
echo "VMDONE"
poweroff -f
