# The daemon's sandbox (docs/SANDBOX.md): after init the daemon runs under
# its seccomp filter with no_new_privs and a reduced capability set, and
# its spawner holds what the helpers need. Negative tests use the test-only
# build profilingd-testhooks, which tries a forbidden syscall right after
# the filter is on (PROFILINGD_TEST_FORBIDDEN_SYSCALL): in enforce mode it
# must die of SIGSYS, in debug mode it must name the call and exit 75.
source "$(dirname "$0")/lib.sh"

HOOKS=$BUILD/service/profilingd-testhooks
[ -x "$HOOKS" ] || fail "$HOOKS not built"
[ -e /proc/self/status ] && grep -q '^Seccomp:' /proc/self/status ||
	skip "the kernel has no seccomp (no Seccomp: line in /proc/self/status)"

# child_of PID: one child of PID (from /proc; no procps needed), or nothing.
child_of() {
	local f k v
	for f in /proc/[0-9]*/status; do
		{ while read -r k v; do
			[ "$k" = PPid: ] || continue
			[ "$v" = "$1" ] && { f=${f#/proc/}; echo "${f%/status}"; return 0; }
			break
		done < "$f"; } 2>/dev/null || true
	done
	return 0
}

status_field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }

# Capability masks: a set may only hold the bits of the documented list.
cap_bits() { local m=0; for b in "$@"; do m=$((m | (1 << b))); done; echo $m; }
# chown 0, dac_override 1, fowner 3, kill 5, sys_ptrace 19, sys_resource 24
DAEMON_CAPS=$(cap_bits 0 1 3 5 19 24)
# The spawner's bounding set: what helpers may get (svc_spawner.c).
SPAWNER_CAPS=$(cap_bits 0 1 2 3 4 5 6 7 14 19 21 23 24 38)
subset() { [ $(( 0x$1 & ~$2 )) -eq 0 ]; }

# 1. The real daemon: filter on, no_new_privs, caps reduced; a capture works.
start_daemon
pid=$DAEMON_PID
# The sockets exist before the sandbox goes on: wait for its log line.
for _ in $(seq 400); do grep -q "sandbox on:" "$T/daemon.log" && break; sleep 0.05; done
[ "$(status_field "$pid" Seccomp)" = 2 ] || fail "daemon: Seccomp is $(status_field "$pid" Seccomp), want 2 (filter)"
[ "$(status_field "$pid" NoNewPrivs)" = 1 ] || fail "daemon: no_new_privs is not set"
for f in CapEff CapPrm CapBnd; do
	v=$(status_field "$pid" $f)
	subset "$v" "$DAEMON_CAPS" || fail "daemon: $f $v holds more than the documented set"
done
for f in CapInh CapAmb; do
	[ $(( 0x$(status_field "$pid" $f) )) -eq 0 ] || fail "daemon: $f is not empty"
done
if [ "$(id -u)" = 0 ]; then
	# Root keeps chown (bit 0) at least, or results could not be handed over.
	[ $(( 0x$(status_field "$pid" CapEff) & 1 )) -eq 1 ] || fail "daemon: CAP_CHOWN was dropped"
fi
grep -q "sandbox on: [0-9]* seccomp rules" "$T/daemon.log" || fail "no 'sandbox on' line in the log"
spawner=$(sed -n 's/.*spawner started (pid \([0-9]*\)).*/\1/p' "$T/daemon.log" | tail -1)
[ -n "$spawner" ] || fail "no spawner pid in the log"
[ "$(cat /proc/$spawner/comm)" = pd-spawner ] || fail "pid $spawner is not the spawner"
[ "$(status_field "$spawner" PPid)" = "$pid" ] || fail "the spawner is not the daemon's child"
# The spawner has no filter: the helpers it execs would inherit it.
[ "$(status_field "$spawner" Seccomp)" = 0 ] || fail "the spawner has a seccomp filter"
v=$(status_field "$spawner" CapBnd)
subset "$v" "$SPAWNER_CAPS" || fail "spawner: CapBnd $v holds more than the helpers' set"
# Helpers start through the spawner under the filter: a whole capture.
out=$("$DEMO" --duration-ms 500 2>"$T/demo.err") || { cat "$T/demo.err" >&2; fail "a capture failed under the sandbox"; }
[ -s "$out" ] || fail "the demo's result '$out' is not a file"
daemon_alive || fail "the daemon died during a capture"
stop_daemon
for _ in $(seq 100); do [ -e /proc/$spawner ] || break; sleep 0.05; done
[ ! -e /proc/$spawner ] || fail "the spawner outlived the daemon"
echo "ok: daemon Seccomp=2 NoNewPrivs=1 caps within $(printf %x $DAEMON_CAPS); spawner unfiltered, ends with the daemon"

# run_hook MODE CALL [config lines...]: start the test build with the hook,
# wait for it to end, print its exit status.
run_hook() {
	local mode=$1 call=$2
	shift 2
	local conf=$T/hook.conf log=$T/hook-$mode-$call.log
	rm -rf "$T/hookstate"
	{
		echo "[daemon]"
		echo "state_dir = $T/hookstate"
		echo "client_socket = $T/hook-client.sock"
		echo "runtime_socket = $T/hook-runtime.sock"
		for l in "$@"; do echo "$l"; done
	} > "$conf"
	local args=(-f -c "$conf")
	[ "$mode" = debug ] && args+=(--seccomp-debug)
	local rc=0
	PROFILINGD_TEST_FORBIDDEN_SYSCALL=$call timeout 60 "$HOOKS" "${args[@]}" > "$log" 2>&1 || rc=$?
	HOOK_LOG=$log
	HOOK_RC=$rc
}

# 2. Enforce mode: each forbidden call kills the daemon with SIGSYS
# (shell status 128 + 31). Argument filters: kill() with a real signal and
# mmap() with PROT_EXEC are refused although kill(pid, 0) and mmap are listed.
for call in ptrace socket-inet kill-signal mmap-exec execve; do
	run_hook enforce "$call"
	grep -q "test hook: trying forbidden $call" "$HOOK_LOG" || fail "$call: the hook did not run: $(tail -3 "$HOOK_LOG")"
	[ "$HOOK_RC" -eq 159 ] || fail "$call: exit status $HOOK_RC, want 159 (SIGSYS): $(tail -3 "$HOOK_LOG")"
	sp=$(sed -n 's/.*spawner started (pid \([0-9]*\)).*/\1/p' "$HOOK_LOG")
	# The spawner dies with the daemon (PR_SET_PDEATHSIG, then EOF).
	for _ in $(seq 100); do [ -n "$sp" ] && [ -e /proc/$sp ] || break; sleep 0.05; done
	[ -z "$sp" ] || [ ! -e /proc/$sp ] || fail "$call: the spawner outlived the killed daemon"
	echo "ok: $call killed by SIGSYS"
done

# 2b. Soft refusals: connect() fails with EACCES and the daemon lives on; a
# user lookup that goes past /etc/passwd to libnss_systemd (loaded before
# the filter) survives too. Both then serve and stop cleanly.
for call in connect getpwuid; do
	log=$T/soft-$call.log
	rm -rf "$T/softstate"
	printf '[daemon]\nstate_dir = %s\nclient_socket = %s\nruntime_socket = %s\n' \
		"$T/softstate" "$T/soft-c.sock" "$T/soft-r.sock" > "$T/soft.conf"
	PROFILINGD_TEST_FORBIDDEN_SYSCALL=$call "$HOOKS" -f -c "$T/soft.conf" > "$log" 2>&1 &
	hp=$!
	for _ in $(seq 200); do grep -q "ready (state" "$log" && break; kill -0 $hp 2>/dev/null || break; sleep 0.05; done
	kill -0 $hp 2>/dev/null || { wait $hp || true; fail "$call: the daemon died: $(tail -3 "$log")"; }
	case $call in
	connect) grep -q "test hook: connect refused with EACCES" "$log" || fail "connect: $(tail -3 "$log")";;
	getpwuid) grep -q "test hook: getpwuid of an unknown uid survived" "$log" || fail "getpwuid: $(tail -3 "$log")";;
	esac
	kill -TERM $hp
	rc=0
	wait $hp || rc=$?
	[ "$rc" -eq 0 ] || fail "$call: exit $rc after SIGTERM: $(tail -3 "$log")"
	echo "ok: $call refused softly, the daemon lived on"
done

# 3. Debug mode (--seccomp-debug, or the config key): trapped, named, exit 75.
run_hook debug ptrace
[ "$HOOK_RC" -eq 75 ] || fail "debug ptrace: exit status $HOOK_RC, want 75: $(tail -3 "$HOOK_LOG")"
grep -q "seccomp: forbidden syscall 101 (ptrace)" "$HOOK_LOG" || fail "debug mode did not name ptrace: $(tail -3 "$HOOK_LOG")"
run_hook enforce socket-inet "[sandbox]" "seccomp = debug"
[ "$HOOK_RC" -eq 75 ] || fail "debug socket: exit status $HOOK_RC, want 75"
grep -q "seccomp: forbidden syscall 41 (socket)" "$HOOK_LOG" || fail "debug mode did not name socket: $(tail -3 "$HOOK_LOG")"
echo "ok: debug mode names the call: $(grep -h 'forbidden syscall' "$T"/hook-debug-ptrace.log)"

# 4. seccomp = off (debugging only): a loud warning, no filter; the hook's
# call then goes through and the hook itself reports it (exit 70). This
# shows the negative tests above fail for the filter's sake.
# (socket, not ptrace: PTRACE_TRACEME would stop LeakSanitizer at exit.)
run_hook enforce socket-inet "[sandbox]" "seccomp = off"
grep -q "SECCOMP SANDBOX DISABLED" "$HOOK_LOG" || fail "seccomp = off without the loud warning"
[ "$HOOK_RC" -eq 70 ] || fail "seccomp = off: exit status $HOOK_RC, want 70 (the call went through)"
grep -q "test hook: socket-inet was not refused" "$HOOK_LOG" || fail "seccomp = off: no hook report"

# 5. A bad mode is a config error at start.
run_hook enforce ptrace "[sandbox]" "seccomp = maybe"
[ "$HOOK_RC" -eq 1 ] || fail "seccomp = maybe: exit status $HOOK_RC, want 1"

# 6. kill -9 of the daemon while a helper runs: the spawner and the helper
# (profilingd-perf sampling a process without an agent) go with it.
# helper_capture: a 30 s agentless stack capture of a sleeping process
# through the running daemon; sets spawner, helper (profilingd-perf under
# the spawner), target and req.
helper_capture() {
	spawner=$(sed -n 's/.*spawner started (pid \([0-9]*\)).*/\1/p' "$T/daemon.log" | tail -1)
	sleep 60 &
	target=$!
	"$APPS/it_request" --pid "$target" --type stack --duration-ms 30000 \
		> /dev/null 2>&1 &
	req=$!
	helper=
	for _ in $(seq 400); do
		helper=$(child_of "$spawner")
		[ -n "$helper" ] && break
		sleep 0.05
	done
	[ -n "$helper" ] || fail "no helper started under the spawner"
}
start_daemon "[capture]" "runtime_wait_ms = 100"
helper_capture
hcomm=$(cat /proc/$helper/comm 2>/dev/null || true)
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null || true
DAEMON_PID=
for _ in $(seq 200); do [ -e /proc/$helper ] || [ -e /proc/$spawner ] || break; sleep 0.05; done
[ ! -e /proc/$spawner ] || fail "the spawner outlived a SIGKILLed daemon"
[ ! -e /proc/$helper ] || fail "helper $helper ($(cat /proc/$helper/comm 2>/dev/null)) outlived a SIGKILLed daemon"
kill "$target" "$req" 2>/dev/null || true
wait "$req" 2>/dev/null || true
echo "ok: kill -9 of the daemon ended its spawner and helper $helper ($hcomm)"

# 7. Each helper installs a filter of its own once its setup is done
# (policy/seccomp/{perf,ftrace,jattach}.policy). Caught while it works, it
# shows Seccomp: 2, and a call none of them may make, socket(AF_INET),
# injected with gdb, kills it with SIGSYS (status 159).
# helper_sandboxed NAME PID: wait for its filter, inject the call, reap it.
helper_sandboxed() {
	local name=$1 hp=$2 rc=0
	for _ in $(seq 200); do
		[ "$(status_field "$hp" Seccomp 2>/dev/null)" = 2 ] && break
		kill -0 "$hp" 2>/dev/null || break
		sleep 0.05
	done
	[ "$(status_field "$hp" Seccomp 2>/dev/null)" = 2 ] || fail "$name: no seccomp filter (Seccomp: $(status_field "$hp" Seccomp 2>/dev/null))"
	[ "$(status_field "$hp" NoNewPrivs)" = 1 ] || fail "$name: no_new_privs is not set"
	if [ -z "$GDB" ]; then
		kill "$hp" 2>/dev/null || true
		wait "$hp" 2>/dev/null || true
		echo "ok: $name runs under its filter (skipped the forbidden call: no gdb)"
		return 0
	fi
	timeout 60 "$GDB" -p "$hp" -batch -nx -ex 'call (long)syscall(41, 2, 1, 0)' \
		> "$T/gdb-$name.out" 2>&1 || true
	wait "$hp" 2>/dev/null || rc=$?
	[ "$rc" -eq 159 ] || fail "$name: socket(AF_INET) injected by gdb: exit status $rc, want 159 (SIGSYS); $(tail -3 "$T/gdb-$name.out")"
	echo "ok: $name runs under its filter; an injected socket(AF_INET) killed it (SIGSYS)"
}
GDB=$(command -v gdb || true)
SPIN=$APPS/spinner
[ -x "$SPIN" ] || fail "$SPIN not built"
# The perf helper samples as the target's user with CAP_IPC_LOCK only, plus
# CAP_PERFMON (CAP_SYS_ADMIN on kernels before 5.8) where
# perf_event_paranoid > 2 keeps the user from opening its own events; it is
# not dumpable, so its /proc files stay root's.
if command -v setpriv > /dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups "$SPIN" 60 > /dev/null &
else
	"$SPIN" 60 > /dev/null &
fi
spin=$!
# setpriv switches ids, then execs: wait for the spinner itself (bounded
# by tries; a loaded machine may take seconds), or the helper would be
# aimed at setpriv, which changes under it.
spinning() { [ "$(readlink "/proc/$spin/exe" 2>/dev/null)" = "$(readlink -f "$SPIN")" ]; }
for _ in $(seq 1000); do
	spinning && break
	sleep 0.02
done
spinning || fail "the spinner $spin did not start: /proc/$spin/exe is '$(readlink "/proc/$spin/exe" 2>/dev/null)'"
"$BUILD/runtime/perf/profilingd-perf" --pid "$spin" --hz 99 --duration-ms 30000 > /dev/null 2> "$T/perf.err" &
hp=$!
for _ in $(seq 200); do [ "$(status_field "$hp" Seccomp 2>/dev/null)" = 2 ] && break; sleep 0.05; done
# (wait's status read with ||: a bare failing wait here would end the test
# under set -e without saying why.)
if ! kill -0 "$hp" 2>/dev/null; then
	hrc=0
	wait "$hp" || hrc=$?
	fail "profilingd-perf ended at once ($hrc): $(tail -n 3 "$T/perf.err")"
fi
if command -v setpriv > /dev/null; then
	[ "$(status_field "$hp" Uid)" = 65534 ] || fail "profilingd-perf samples a uid-65534 target as uid $(status_field "$hp" Uid)"
	if [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -le 2 ]; then
		subset "$(status_field "$hp" CapEff)" "$(cap_bits 14)" ||
			fail "profilingd-perf keeps capabilities $(status_field "$hp" CapEff) (want ipc_lock only)"
	else
		subset "$(status_field "$hp" CapEff)" "$(cap_bits 14 21 38)" ||
			fail "profilingd-perf keeps capabilities $(status_field "$hp" CapEff) (want ipc_lock, perfmon)"
	fi
	[ "$(stat -c %u "/proc/$hp/mem")" = 0 ] || fail "profilingd-perf is dumpable: /proc/$hp/mem is uid $(stat -c %u "/proc/$hp/mem")"
	echo "ok: profilingd-perf samples as the target's uid 65534 with CapEff $(status_field "$hp" CapEff)"
fi
helper_sandboxed profilingd-perf "$hp"
kill "$spin" 2>/dev/null || true
wait "$spin" 2>/dev/null || true

inst=profilingd-it-sandbox-$$
"$BUILD/runtime/ftrace/profilingd-ftrace" --duration-ms 30000 --buffer-kb 64 --instance "$inst" \
	> /dev/null 2> "$T/ftrace.err" &
fpid=$!
sleep 0.2
frc=
if ! kill -0 "$fpid" 2>/dev/null; then wait "$fpid" && frc=0 || frc=$?; fi
if [ "$frc" = 69 ]; then
	echo "skipped: profilingd-ftrace: $(tail -1 "$T/ftrace.err")"
elif [ -n "$frc" ]; then
	fail "profilingd-ftrace exited at once ($frc): $(tail -1 "$T/ftrace.err")"
else
	helper_sandboxed profilingd-ftrace "$fpid"
fi
# The killed recorder left its instance NAME.PID; the next run removes it.
# Every recorder removes every dead one's instance, so a recorder of a test
# running beside this one (ctest -j) may get there first, and the count is
# then its, not ours: a fresh killed recorder is tried, 3 times at most.
stale_check() { # PID of a killed recorder: 0 when ours removed its instance
	local tfs= d
	for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		[ -d "$d/instances/$inst.$1" ] && tfs=$d
	done
	# gone already: another recorder removed it (or none was left: 3 tries)
	[ -n "$tfs" ] || { echo "no instance $inst.$1 left" > "$T/ftrace2.err"; return 1; }
	"$BUILD/runtime/ftrace/profilingd-ftrace" --duration-ms 100 --buffer-kb 64 > /dev/null \
		2> "$T/ftrace2.err" || fail "profilingd-ftrace after a killed one: $(tail -1 "$T/ftrace2.err")"
	[ ! -d "$tfs/instances/$inst.$1" ] || fail "the stale instance $inst.$1 was not removed"
	grep -q "stale_removed=[1-9]" "$T/ftrace2.err"
}
if [ -z "$frc" ]; then
	try=1
	until stale_check "$fpid"; do
		[ "$try" -lt 3 ] || fail "no stale_removed count in 3 tries: $(tail -1 "$T/ftrace2.err")"
		echo "another recorder removed instance $inst.$fpid first (try $try); again"
		try=$((try + 1))
		"$BUILD/runtime/ftrace/profilingd-ftrace" --duration-ms 30000 --buffer-kb 64 \
			--instance "$inst" > /dev/null 2> "$T/ftrace.err" &
		fpid=$!
		for _ in $(seq 200); do
			ls -d /sys/kernel/tracing/instances/"$inst.$fpid" /sys/kernel/debug/tracing/instances/"$inst.$fpid" \
				> /dev/null 2>&1 && break
			sleep 0.05
		done
		kill -KILL "$fpid"
		wait "$fpid" 2>/dev/null || true
	done
	echo "ok: the next profilingd-ftrace removed the instance the killed one left"
fi

if command -v setpriv > /dev/null; then
	setpriv --reuid=65534 --regid=65534 --clear-groups sleep 60 &
	notjvm=$!
	# setpriv is root until it has switched: the helper takes its target's
	# user from /proc, so wait for the switch.
	for _ in $(seq 200); do [ "$(status_field "$notjvm" Uid)" = 65534 ] && break; sleep 0.05; done
	"$BUILD/runtime/jvm/profilingd-jattach" --pid "$notjvm" --timeout-ms 30000 listen \
		> /dev/null 2> "$T/jattach.err" &
	hj=$!
	for _ in $(seq 200); do [ "$(status_field "$hj" Seccomp 2>/dev/null)" = 2 ] && break; sleep 0.05; done
	# As the target's user it is not dumpable: its /proc files stay root's.
	[ "$(status_field "$hj" Uid)" = 65534 ] && [ "$(stat -c %u "/proc/$hj/mem")" = 0 ] ||
		fail "profilingd-jattach: uid $(status_field "$hj" Uid), /proc/$hj/mem of uid $(stat -c %u "/proc/$hj/mem"): dumpable"
	echo "ok: profilingd-jattach runs as uid 65534, not dumpable"
	helper_sandboxed profilingd-jattach "$hj"
	kill "$notjvm" 2>/dev/null || true
	wait "$notjvm" 2>/dev/null || true
else
	echo "skipped: profilingd-jattach: setpriv (util-linux) is needed to run a target as nobody"
fi

# 8. In debug mode the daemon starts its helpers with --debug-seccomp: a
# forbidden call then traps, is named, and the helper exits 75.
start_daemon "[capture]" "runtime_wait_ms = 100" "[sandbox]" "seccomp = debug"
helper_capture
tr '\0' ' ' < "/proc/$helper/cmdline" | qgrep -- '--debug-seccomp' ||
	fail "helper $helper started without --debug-seccomp: $(tr '\0' ' ' < "/proc/$helper/cmdline")"
if [ -n "$GDB" ]; then
	for _ in $(seq 200); do
		[ "$(status_field "$helper" Seccomp 2>/dev/null)" = 2 ] && break
		sleep 0.05
	done
	timeout 60 "$GDB" -p "$helper" -batch -nx -ex 'call (long)syscall(41, 2, 1, 0)' \
		> "$T/gdb-debug.out" 2>&1 || true
	for _ in $(seq 200); do
		grep -q "helper exited with status 75\|forbidden syscall 41" "$T/daemon.log" && break
		sleep 0.05
	done
	grep -q "forbidden syscall 41 (socket)" "$T/daemon.log" ||
		fail "debug mode: the helper's trapped call is not named in the daemon's log"
	echo "ok: debug mode: the daemon's helper named its forbidden call (socket)"
else
	echo "ok: debug mode: helpers get --debug-seccomp (skipped the forbidden call: no gdb)"
fi
kill "$target" "$req" 2>/dev/null || true
wait "$req" 2>/dev/null || true
stop_daemon

pass "sandbox: filter, no_new_privs and caps on the daemon; 5 forbidden calls killed; debug mode names them; off warns; helpers filtered"
