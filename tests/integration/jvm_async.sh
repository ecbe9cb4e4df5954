#!/usr/bin/env bash
# Java stack samples without safepoint bias (the JVMTI agent's
# AsyncGetCallTrace sampler, docs/JVMTI.md): SafepointBias alternates a
# counted loop with no calls and a loop of calls at about 80/20 and measures
# its own split. On each JDK, with the default flags and with
# -XX:-UseCountedLoopSafepoints (no poll inside the loop: GetStackTrace read
# 0 % / 0 % there), the profile's shares of the two methods must be within 5
# points of the workload's own; then the same with two CPU spinners beside
# the JVM. Compared to the workload's measured split only, never to a clock.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
need_go
[ -f "$CLASSES/SafepointBias.class" ] || skip "SafepointBias.class was not built"
SPIN=$APPS/spinner
[ -x "$SPIN" ] || skip "tests/integration/apps/spinner was not built"
start_daemon

CAPTURE_MS=8000 HZ=250 # 250 Hz is the tick rate here: ~1000+ samples, a 5-point window is > 3 sigma
SPINPIDS=
spin_cleanup() { for p in $SPINPIDS; do kill "$p" 2>/dev/null || true; done; jvm_cleanup; }
trap spin_cleanup EXIT

# cum% of a function in go tool pprof -top (0 when absent).
cum() { awk -v f="$2" '$NF == f { sub("%", "", $5); print $5; found=1 } END { if (!found) print 0 }' "$1"; }

# run JDK WHAT FLAGS...: one capture of SafepointBias; checks the shares.
run() {
	local jdk=$1 what=$2
	shift 2
	jvm_start "$jdk" sb "$@" "-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$CLASSES" \
		SafepointBias $((CAPTURE_MS / 1000 + 4)) 1500 # its split from about when the capture starts
	wait_runtime "$JPID"
	local line
	line=$(grep "runtime up: pid $JPID " "$T/daemon.log" | sed -n 1p)
	[[ $line =~ missing\ ([a-z_,-]+) ]] && [[ ,${BASH_REMATCH[1]}, != *,async_stacks,* ]] ||
		fail "$what: the hello says AsyncGetCallTrace is missing: $line"
	sleep 1 # past the JIT's first compilations
	local out
	out=$("$APPS/it_request" --pid "$JPID" --type stack --hz $HZ \
		--duration-ms $CAPTURE_MS) || fail "$what: capture failed"
	wait "$JPID" || fail "$what: SafepointBias exited with $?"
	local truth
	truth=$(sed -n 's/^truth countedLoop=\([0-9.]*\)%.*/\1/p' "$T/sb.out")
	[ -n "$truth" ] || { cat "$T/sb.out" "$T/sb.err"; fail "$what: no split from the workload"; }
	go tool pprof -top "$out" > "$T/top.txt" 2>&1 || fail "$what: go tool pprof cannot read $out"
	go tool pprof -comments "$out" 2>/dev/null | qgrep AsyncGetCallTrace ||
		fail "$what: the profile does not come from the AsyncGetCallTrace sampler"
	local c w
	c=$(cum "$T/top.txt" SafepointBias.countedLoop)
	w=$(cum "$T/top.txt" SafepointBias.withCalls)
	echo "$what: countedLoop ${c}% withCalls ${w}% of all samples; the workload measured ${truth}%"
	# The two loops are nearly all of the profile, and split as measured.
	awk -v c="$c" -v w="$w" -v t="$truth" 'BEGIN {
		if (c + w < 80) exit 1
		s = 100 * c / (c + w); d = s - t; if (d < 0) d = -d
		printf "  countedLoop share %.1f%%, %.1f points from the workload'"'"'s\n", s, d
		exit !(d <= 5) }' || { cat "$T/top.txt"; fail "$what: shares off by more than 5 points"; }
}

for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	run "$jdk" "$name (default)"
	run "$jdk" "$name -XX:-UseCountedLoopSafepoints" -XX:-UseCountedLoopSafepoints
	# Under contention: two spinners on this 2-core machine's CPUs.
	"$SPIN" 60 & SPINPIDS="$SPINPIDS $!"
	"$SPIN" 60 & SPINPIDS="$SPINPIDS $!"
	run "$jdk" "$name -XX:-UseCountedLoopSafepoints, two spinners" -XX:-UseCountedLoopSafepoints
	for p in $SPINPIDS; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	SPINPIDS=
done
stop_daemon
pass "Java samples without safepoint bias, within 5 points, on:$JDKS"
