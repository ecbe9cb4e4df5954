# Helpers for the JVM tests (source after lib.sh): the agent, the compiled
# Java test programs, and the JDKs to run them on.
AGENT=$BUILD/runtime/jvmti/libprofiling_jvmti.so
CLASSES=$APPS/java
JDK_CANDIDATES="/usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64"
JPIDS=

[ -f "$AGENT" ] || skip "libprofiling_jvmti.so was not built (no JDK headers at configure time)"
[ -f "$CLASSES/HotCold.class" ] || skip "Java test programs were not built (no javac)"
JDKS=
for d in $JDK_CANDIDATES; do
	if [ -x "$d/bin/java" ]; then JDKS="$JDKS $d"; else echo "note: $d is not installed: not tested"; fi
done
[ -n "$JDKS" ] || skip "no JDK under /usr/lib/jvm (wanted: $JDK_CANDIDATES)"

jvm_cleanup() {
	# A VM killed by SIGKILL leaves its attach socket; a later VM of
	# another uid given the pid could not replace it (ht_attach_sock).
	for p in $JPIDS; do
		kill -9 "$p" 2>/dev/null && rm -f "/tmp/.java_pid$p"
	done
	cleanup
}
trap jvm_cleanup EXIT

# jvm_start JDK LOGNAME ARGS...: start a JVM in the background; JPID is its pid.
jvm_start() {
	local jdk=$1 log=$2
	shift 2
	"$jdk/bin/java" "$@" > "$T/$log.out" 2> "$T/$log.err" &
	JPID=$!
	JPIDS="$JPIDS $JPID"
	# bash forks, then the child execs java: a request sent before the exec
	# names a shell, which the daemon rightly says is no JVM (seen under
	# load in it_method_events_jvm's live case). Wait for the exec.
	local want _
	want=$(readlink -f "$jdk/bin/java")
	for _ in $(seq 1200); do
		[ "$(readlink "/proc/$JPID/exe" 2>/dev/null)" = "$want" ] && break
		kill -0 "$JPID" 2>/dev/null || break
		sleep 0.05
	done
}

# wait_runtime PID [SECONDS]: until the daemon logged the JVM's hello.
wait_runtime() {
	local pid=$1 secs=${2:-60}
	for _ in $(seq $((secs * 10))); do
		grep -q "runtime up: pid $pid " "$T/daemon.log" && return 0
		kill -0 "$pid" 2>/dev/null || fail "JVM $pid exited before its agent said hello"
		sleep 0.1
	done
	fail "no runtime hello from JVM $pid within ${secs}s"
}

jdk_name() { basename "$1"; }
