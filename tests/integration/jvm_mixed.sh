#!/usr/bin/env bash
# Mixed Java and native stacks, wall-clock samples, and the fallback of the
# JVMTI agent's signal sampler (docs/JVMTI.md), on each JDK present.
#  - JniMixed: main -> native nativeWork() (tests/integration/apps/java/jni_mixed.c), which
#    spins in C (pd_native_spin) and calls back into Java (javaCallback).
#    CPU samples must hold the stack pd_native_spin <- Java_JniMixed_nativeWork
#    <- JniMixed.nativeWork <- JniMixed.main (native frames above the Java
#    ones) and JniMixed.javaCallback <- JniMixed.nativeWork <- JniMixed.main
#    (Java -> native -> Java), and no sample of the sleeping thread.
#  - Wall clock: the thread "sleeper", blocked in Thread.sleep, is sampled.
#  - asgct=0 (a VM without AsyncGetCallTrace): the hello lists
#    async_stacks as missing and stack samples come from GetStackTrace.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
need_go
[ -f "$CLASSES/JniMixed.class" ] && [ -f "$CLASSES/libpd_jni_mixed.so" ] ||
	skip "JniMixed.class or libpd_jni_mixed.so was not built"
start_daemon

# has_trace FILE FRAME...: some sample's stack is exactly these frames, leaf first.
has_trace() {
	local f=$1
	shift
	go tool pprof -traces "$f" 2>/dev/null | awk -v want="$*" '
		function check() { if (got == want) found = 1; got = "" }
		/^-+\+-+$/ { check(); next }
		/^ *[a-z_]+: / { next }
		NF == 0 { next }
		{ fn = ($1 ~ /^[0-9.]+(ms|s|us|ns)?$/) ? $2 : $1; got = got == "" ? fn : got " " fn }
		END { check(); exit !found }'
}

for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	jvm_start "$jdk" jni-$name "-Djava.library.path=$CLASSES" \
		"-agentpath:$AGENT=socket=$RUNTIME_SOCKET" -cp "$CLASSES" JniMixed 60
	wait_runtime "$JPID"
	sleep 1
	out=$("$APPS/it_request" --pid "$JPID" --type stack --hz 200 \
		--duration-ms 3000) || fail "$name: CPU capture failed"
	go tool pprof -traces "$out" > "$T/traces.txt" 2>&1 || fail "$name: pprof cannot read $out"
	has_trace "$out" pd_native_spin Java_JniMixed_nativeWork JniMixed.nativeWork JniMixed.main ||
		{ cat "$T/traces.txt"; fail "$name: no native frames above the Java ones"; }
	has_trace "$out" JniMixed.javaCallback JniMixed.nativeWork JniMixed.main ||
		{ cat "$T/traces.txt"; fail "$name: no Java -> native -> Java stack"; }
	go tool pprof -tags "$out" > "$T/tags.txt" 2>&1
	echo "$name cpu: native frames above Java, and Java -> native -> Java"
	! grep -q "sleeper" "$T/tags.txt" ||
		{ cat "$T/tags.txt"; fail "$name: CPU samples of a thread that only sleeps"; }

	out=$("$APPS/it_request" --pid "$JPID" --type stack --hz 100 \
		--duration-ms 2000 --clock wall) || fail "$name: wall capture failed"
	go tool pprof -top -tagfocus thread_name=sleeper "$out" > "$T/wall.txt" 2>&1
	grep -q "java.lang.Thread.sleep" "$T/wall.txt" ||
		{ cat "$T/wall.txt"; fail "$name: wall clock: no sample of the sleeping thread"; }
	echo "$name wall: the sleeping thread is sampled in Thread.sleep"
	kill "$JPID"; wait "$JPID" 2>/dev/null || true
	# JDK 22+ warn about System.loadLibrary (restricted methods); nothing else.
	! grep -v '^WARNING: ' "$T/jni-$name.err" | grep -q . ||
		{ cat "$T/jni-$name.err"; fail "$name: the JVM or agent printed"; }

	# Without AsyncGetCallTrace: said in the hello, GetStackTrace samples.
	jvm_start "$jdk" noagct-$name "-agentpath:$AGENT=socket=$RUNTIME_SOCKET,asgct=0" \
		-cp "$CLASSES" HotCold 60
	wait_runtime "$JPID"
	line=$(grep "runtime up: pid $JPID " "$T/daemon.log" | head -1)
	[[ $line =~ missing\ ([a-z_,-]+) ]] && [[ ,${BASH_REMATCH[1]}, == *,async_stacks,* ]] ||
		fail "$name asgct=0: the hello does not list async_stacks as missing: $line"
	out=$("$APPS/it_request" --pid "$JPID" --type stack --hz 100 \
		--duration-ms 2000) || fail "$name asgct=0: capture failed"
	go tool pprof -comments "$out" 2>/dev/null | grep -q "GetStackTrace" ||
		fail "$name asgct=0: the profile is not from the GetStackTrace sampler"
	[ "$(pprof_flat "$out" HotCold.hot)" != 0 ] || fail "$name asgct=0: no HotCold.hot samples"
	echo "$name asgct=0: $line; GetStackTrace samples"
	kill "$JPID"; wait "$JPID" 2>/dev/null || true
done
stop_daemon
pass "mixed Java/native stacks, wall clock, and the GetStackTrace fallback on:$JDKS"
