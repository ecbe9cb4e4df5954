#!/usr/bin/env bash
# Mixed Java and native stacks, wall-clock samples, and the fallback of the
# JVMTI agent's signal sampler (docs/JVMTI.md), on each JDK present.
#  - JniMixed: main -> native nativeWork() (tests/integration/apps/java/jni_mixed.c), which
#    spins in C (pd_native_spin) and calls back into Java (javaCallback).
#    CPU samples must hold the stack pd_native_spin <- Java_JniMixed_nativeWork
#    <- JniMixed.nativeWork <- JniMixed.main (native frames above the Java
#    ones) and JniMixed.javaCallback <- JavaCalls::call_helper <- ... <-
#    jni_CallStaticLongMethod <- Java_JniMixed_nativeWork <-
#    JniMixed.nativeWork <- JniMixed.main (Java -> native -> Java with the C
#    frames between the segments), each followed by the native frames below
#    JniMixed.main (JavaCalls::call_helper ... jni_CallStaticVoidMethod ...
#    JavaMain ... libc), and no sample of the sleeping thread.
#  - vmstructs=0 (a VM without gHotSpotVMStructs): the hello lists
#    mixed_stacks as missing and the Java -> native -> Java stack is the
#    Java frames only, as AsyncGetCallTrace gives them.
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

# has_stack FILE ERE: some sample's stack, its frames leaf first joined by
# spaces, matches the extended regular expression.
has_stack() {
	go tool pprof -traces "$1" 2>/dev/null | awk -v want="$2" '
		function check() { if (got != "" && got ~ want) found = 1; got = "" }
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
	# Below main: HotSpot's JNI call from the launcher's thread (libjli.so's
	# JavaMain), started by libc (whose own symbols are stripped here).
	# libjvm.so and libjli.so keep a .symtab: their functions are named.
	below='JniMixed[.]main JavaCalls::call_helper( [^ ]+)* jni_CallStaticVoidMethod( [^ ]+)* JavaMain( [^ ]+)* (libc[.]so[^ ]*|start_thread|clone[0-9]*)$'
	has_stack "$out" "^pd_native_spin Java_JniMixed_nativeWork JniMixed[.]nativeWork $below" ||
		{ cat "$T/traces.txt"; fail "$name: no native frames above and below the Java ones"; }
	has_stack "$out" "^JniMixed[.]javaCallback JavaCalls::call_helper( [^ ]+)* jni_CallStaticLongMethod Java_JniMixed_nativeWork JniMixed[.]nativeWork $below" ||
		{ cat "$T/traces.txt"; fail "$name: no Java -> C -> Java stack with the C frames between"; }
	go tool pprof -comments "$out" 2>/dev/null | qgrep "mixed stacks: [1-9][0-9]* native runs" ||
		{ go tool pprof -comments "$out"; fail "$name: the comment does not count the native runs"; }
	go tool pprof -tags "$out" > "$T/tags.txt" 2>&1
	echo "$name cpu: native frames above, between and below the Java ones"
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
	! grep -v '^WARNING: ' "$T/jni-$name.err" | qgrep . ||
		{ cat "$T/jni-$name.err"; fail "$name: the JVM or agent printed"; }

	# Without VMStructs: said in the hello, AGCT's Java frames only below the top.
	jvm_start "$jdk" novms-$name "-Djava.library.path=$CLASSES" \
		"-agentpath:$AGENT=socket=$RUNTIME_SOCKET,vmstructs=0" -cp "$CLASSES" JniMixed 60
	wait_runtime "$JPID"
	line=$(grep "runtime up: pid $JPID " "$T/daemon.log" | sed -n 1p)
	[[ $line =~ missing\ ([a-z_,-]+) ]] && [[ ,${BASH_REMATCH[1]}, == *,mixed_stacks,* ]] ||
		fail "$name vmstructs=0: the hello does not list mixed_stacks as missing: $line"
	out=$("$APPS/it_request" --pid "$JPID" --type stack --hz 200 \
		--duration-ms 2000) || fail "$name vmstructs=0: capture failed"
	go tool pprof -traces "$out" > "$T/traces.txt" 2>&1
	has_trace "$out" JniMixed.javaCallback JniMixed.nativeWork JniMixed.main ||
		{ cat "$T/traces.txt"; fail "$name vmstructs=0: no Java -> native -> Java stack"; }
	has_trace "$out" pd_native_spin Java_JniMixed_nativeWork JniMixed.nativeWork JniMixed.main ||
		{ cat "$T/traces.txt"; fail "$name vmstructs=0: no native frames above the Java ones"; }
	go tool pprof -comments "$out" 2>/dev/null | qgrep "mixed stacks: off (no VMStructs" ||
		fail "$name vmstructs=0: the comment does not say mixed stacks are off"
	echo "$name vmstructs=0: mixed_stacks missing; Java -> native -> Java as AGCT gives it"
	kill "$JPID"; wait "$JPID" 2>/dev/null || true

	# Without AsyncGetCallTrace: said in the hello, GetStackTrace samples.
	jvm_start "$jdk" noagct-$name "-agentpath:$AGENT=socket=$RUNTIME_SOCKET,asgct=0" \
		-cp "$CLASSES" HotCold 60
	wait_runtime "$JPID"
	line=$(grep "runtime up: pid $JPID " "$T/daemon.log" | sed -n 1p)
	[[ $line =~ missing\ ([a-z_,-]+) ]] && [[ ,${BASH_REMATCH[1]}, == *,async_stacks,* ]] &&
		[[ ,${BASH_REMATCH[1]}, == *,mixed_stacks,* ]] ||
		fail "$name asgct=0: the hello does not list async_stacks, mixed_stacks as missing: $line"
	out=$("$APPS/it_request" --pid "$JPID" --type stack --hz 100 \
		--duration-ms 2000) || fail "$name asgct=0: capture failed"
	go tool pprof -comments "$out" 2>/dev/null | qgrep "GetStackTrace" ||
		fail "$name asgct=0: the profile is not from the GetStackTrace sampler"
	[ "$(pprof_flat "$out" HotCold.hot)" != 0 ] || fail "$name asgct=0: no HotCold.hot samples"
	echo "$name asgct=0: $line; GetStackTrace samples"
	kill "$JPID"; wait "$JPID" 2>/dev/null || true
done
stop_daemon
pass "mixed Java/native stacks, wall clock, the VMStructs and GetStackTrace fallbacks on:$JDKS"
