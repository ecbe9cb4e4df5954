#!/usr/bin/env bash
# One variable for both libraries: libprofiling_preload.so finds the daemon
# from PROFILINGD_SOCKET (the client socket, as libprofiling does) and asks
# it for the runtime socket; the old PROFILINGD_RUNTIME_SOCKET still works.
# A preload agent that cannot register says why in its debug output (only
# with PROFILING_DEBUG=1: nothing on stderr otherwise), and the agentless
# capture that follows carries a note that says so.
. "$(dirname "$0")/lib.sh"
PRELOAD=$BUILD/client/libprofiling_preload.so
SPIN=$APPS/spinner
REQ=$APPS/it_request
[ -f "$PRELOAD" ] || fail "no $PRELOAD"
[ -x "$SPIN" ] || skip "no spinner (runtime/perf is not built)"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; cleanup' EXIT
unset PROFILINGD_RUNTIME_SOCKET PROFILING_DEBUG
start_daemon "[capture]" "runtime_wait_ms = 5000"

# wait_line FILE PATTERN: up to 10 s for a line in FILE.
wait_line() {
	for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}

# 1. PROFILINGD_SOCKET alone: the preload agent registers.
env LD_PRELOAD="$PRELOAD" "$SPIN" 20 2> "$T/s1.err" &
P1=$!
PIDS+=("$P1")
wait_line "$T/daemon.log" "runtime up: pid $P1 " || fail "the preload agent did not register from PROFILINGD_SOCKET"
out=$("$REQ" --pid "$P1" --type stack --duration-ms 300 2> "$T/r1.err") || fail "capture: $(cat "$T/r1.err")"
grep -q "stack capture of pid $P1 " "$T/daemon.log" || fail "the capture was not the agent's"
[ ! -s "$T/s1.err" ] || fail "the library printed without PROFILING_DEBUG: $(cat "$T/s1.err")"
echo "ok: PROFILINGD_SOCKET: the preload agent registered and took the capture"

# 2. The old name, alone.
env -u PROFILINGD_SOCKET PROFILINGD_RUNTIME_SOCKET="$RUNTIME_SOCKET" LD_PRELOAD="$PRELOAD" "$SPIN" 20 &
P2=$!
PIDS+=("$P2")
wait_line "$T/daemon.log" "runtime up: pid $P2 " || fail "the preload agent did not register from PROFILINGD_RUNTIME_SOCKET"
echo "ok: PROFILINGD_RUNTIME_SOCKET (the old name) still works"

# 3. A wrong socket: quiet without PROFILING_DEBUG ...
env PROFILINGD_SOCKET="$T/nowhere.sock" LD_PRELOAD="$PRELOAD" "$SPIN" 20 2> "$T/s3.err" &
P3=$!
PIDS+=("$P3")
# ... and with it, it says why.
env PROFILINGD_SOCKET="$T/nowhere.sock" PROFILING_DEBUG=1 LD_PRELOAD="$PRELOAD" "$SPIN" 20 2> "$T/s4.err" &
P4=$!
PIDS+=("$P4")
wait_line "$T/s4.err" "not registered with profilingd" ||
	fail "no debug line for an agent that could not register: $(cat "$T/s4.err")"
grep "not registered" "$T/s4.err"
sleep 0.2
[ ! -s "$T/s3.err" ] || fail "the library printed without PROFILING_DEBUG: $(cat "$T/s3.err")"
grep -q "runtime up: pid $P3 " "$T/daemon.log" && fail "an agent with a wrong socket registered"
# The capture goes agentless, at once, and its note says why.
if [ -r /proc/sys/kernel/perf_event_paranoid ]; then
	if out=$("$REQ" --pid "$P3" --type stack --duration-ms 300 2> "$T/r3.err"); then
		cat "$T/r3.err"
		grep -q "it_request: note: sampled agentless: libprofiling_preload.so is loaded in pid $P3 but its agent did not register" "$T/r3.err" ||
			fail "no note on the agentless capture of a preloaded process"
		echo "ok: the agentless capture says the preload agent did not register"
	elif grep -q "not permitted\|perf events unavailable" "$T/r3.err"; then
		echo "perf_event_open not permitted here: the note is not checked"
	else
		fail "capture of the unregistered process: $(cat "$T/r3.err")"
	fi
fi
stop_daemon
pass "one variable (PROFILINGD_SOCKET) for both libraries, the old name an alias, an unregistered agent says so"
