#!/usr/bin/env bash
# JIT frames named from /tmp/perf-<pid>.map: a Node program run with
# --perf-basic-prof (its JS compiled to machine code in anonymous memory,
# in no mapped file) has its JS function names in the profile, both when
# the daemon samples it agentless (profilingd-perf) and when the
# in-process agent samples it (libprofiling_preload.so). A map that is not
# the target's user's own names nothing. Skipped where node is absent.
. "$(dirname "$0")/lib.sh"
NODE=$(command -v node || command -v nodejs || true)
[ -n "$NODE" ] || skip "node (Debian's nodejs) is not installed"
need_go
JS=$(cd "$(dirname "$0")" && pwd)/apps/jit_workload.js
PRELOAD=$BUILD/client/libprofiling_preload.so
REQ=$APPS/it_request
PIDS=() MAPS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -f "${MAPS[@]}"; cleanup' EXIT
start_daemon "[capture]" "runtime_wait_ms = 5000"

# wait_warm PID: until V8 has written the optimised hotLoopFunction.
wait_warm() {
	for _ in $(seq 200); do
		grep -q '[*]hotLoopFunction' "/tmp/perf-$1.map" 2>/dev/null && return 0
		sleep 0.05
	done
	fail "node wrote no optimised hotLoopFunction to /tmp/perf-$1.map"
}

# has_js FILE: the profile names hotLoopFunction (JIT code); prints its flat %.
js_flat() {
	go tool pprof -top "$1" 2>/dev/null | awk '/hotLoopFunction/ { sub("%", "", $2); s += $2 } END { print s + 0 }'
}

# 1. Agentless: no agent in node; profilingd-perf reads the map as node's user.
"$NODE" --perf-basic-prof "$JS" 20 > /dev/null &
P1=$!
PIDS+=("$P1") MAPS+=("/tmp/perf-$P1.map")
wait_warm "$P1"
out=$("$REQ" --pid "$P1" --type stack --duration-ms 1500 2> "$T/r1.err") ||
	fail "agentless capture of node: $(cat "$T/r1.err")"
grep -q "no agent in pid $P1: sampling it with perf_event_open" "$T/daemon.log" || fail "not agentless"
go tool pprof -top "$out" > "$T/top1.txt" 2>&1 || { cat "$T/top1.txt"; fail "pprof cannot read it"; }
f1=$(js_flat "$out")
head -n 12 "$T/top1.txt"
awk -v f="$f1" 'BEGIN { exit !(f >= 30) }' ||
	fail "agentless: JS hotLoopFunction has ${f1}% flat, expected most of the samples"
go tool pprof -raw "$out" 2>/dev/null | qgrep "JIT names: /tmp/perf-$P1.map" || fail "no JIT-names comment"
echo "ok: agentless: hotLoopFunction ${f1}% flat"

# 2. In process: node under libprofiling_preload.so; the agent's symboliser
# reads the map.
# Not under sanitizers: the instrumented preload library needs the ASan
# runtime in the process, and node is not built with it.
f2=skipped
if [ -n "${PD_SANITIZE:-}" ]; then
	echo "skipped: in process: node cannot load the sanitizer-built libprofiling_preload.so"
else
	LD_PRELOAD="$PRELOAD" "$NODE" --perf-basic-prof "$JS" 20 > /dev/null &
	P2=$!
	PIDS+=("$P2") MAPS+=("/tmp/perf-$P2.map")
	wait_warm "$P2"
	for _ in $(seq 200); do grep -q "runtime up: pid $P2 " "$T/daemon.log" && break; sleep 0.05; done
	grep -q "runtime up: pid $P2 " "$T/daemon.log" || fail "the preload agent in node did not register"
	out=$("$REQ" --pid "$P2" --type stack --duration-ms 1500 2> "$T/r2.err") ||
		fail "in-process capture of node: $(cat "$T/r2.err")"
	grep -q "stack capture of pid $P2 " "$T/daemon.log" || fail "not the in-process agent's capture"
	f2=$(js_flat "$out")
	go tool pprof -top "$out" 2>/dev/null | sed -n 1,12p
	awk -v f="$f2" 'BEGIN { exit !(f >= 30) }' ||
		fail "in process: JS hotLoopFunction has ${f2}% flat, expected most of the samples"
	echo "ok: in process: hotLoopFunction ${f2}% flat"
fi

# 3. A map another user owns names nothing: node as root, its map chowned.
"$NODE" --perf-basic-prof "$JS" 20 > /dev/null &
P3=$!
PIDS+=("$P3") MAPS+=("/tmp/perf-$P3.map")
wait_warm "$P3"
chown 65534 "/tmp/perf-$P3.map"
out=$("$REQ" --pid "$P3" --type stack --duration-ms 800 2> "$T/r3.err") ||
	fail "agentless capture of node: $(cat "$T/r3.err")"
f3=$(js_flat "$out")
[ "$f3" = 0 ] || fail "a map owned by another user named frames (${f3}%)"
echo "ok: a map that is not the target's user's is not read"
stop_daemon
pass "JIT frames named from /tmp/perf-PID.map: agentless ${f1}%, in process ${f2}%"
