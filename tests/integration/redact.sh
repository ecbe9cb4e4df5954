#!/usr/bin/env bash
# The redactor's sandbox, checked on the real binary: a forbidden syscall
# after the filter is on kills it (or, in debug mode, is named); it refuses
# to run as root; a good pprof passes and a bad one is refused; a trace's
# kernel data is taken from --kernel-fd only.
. "$(dirname "$0")/lib.sh"
R=$BUILD/redact/profilingd-redact
[ -x "$R" ] || fail "no $R"
# The daemon runs the redactor with an empty environment; so does this test
# (a sanitizer's ASAN_OPTIONS would turn on its exit-time leak scan, which
# reads /proc and is rightly killed by the filter).
unset ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS

rc=0
"$R" --format pprof --pids 1 --allow-root --test-forbidden < /dev/null > /dev/null 2> "$T/err" || rc=$?
[ "$rc" -eq 159 ] || { cat "$T/err"; fail "openat under the sandbox: exit $rc, want 159 (killed by SIGSYS)"; }
grep -q "let openat through" "$T/err" && fail "openat was allowed"
echo "ok: forbidden openat kills the redactor (SIGSYS)"

rc=0
"$R" --format pprof --pids 1 --allow-root --test-forbidden --debug-seccomp < /dev/null > /dev/null 2> "$T/err" || rc=$?
[ "$rc" -eq 75 ] || fail "debug mode: exit $rc, want 75"
grep -q "forbidden syscall 257" "$T/err" || { cat "$T/err"; fail "debug mode does not name openat (257)"; }
echo "ok: debug mode traps and names the syscall: $(cat "$T/err")"

if command -v setpriv > /dev/null; then
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups "$R" --format pprof --pids 1 \
		--test-forbidden < /dev/null > /dev/null 2>&1 || rc=$?
	[ "$rc" -eq 159 ] || fail "as nobody: exit $rc, want 159"
	echo "ok: same as nobody"
	# The pprof redactor starts a gzip worker thread (clone with CLONE_THREAD);
	# a process (clone without it, as fork makes) is still killed.
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups "$R" --format pprof --pids 1 \
		--test-fork < /dev/null > /dev/null 2> "$T/err" || rc=$?
	[ "$rc" -eq 159 ] || { cat "$T/err"; fail "clone of a process under the sandbox: exit $rc, want 159 (SIGSYS)"; }
	echo "ok: a new process kills the redactor (SIGSYS); threads only"
	# Redactors share one uid: none may ptrace another or read its memory.
	mkfifo "$T/in"
	setpriv --reuid=65534 --regid=65534 --clear-groups "$R" --format pprof --pids 1 \
		< "$T/in" > /dev/null 2>&1 &
	rp=$!
	exec 7> "$T/in" # the redactor now waits for its input
	for _ in $(seq 100); do [ "$(awk '$1 == "Seccomp:" { print $2 }' "/proc/$rp/status")" = 2 ] && break; sleep 0.05; done
	owner=$(stat -c %u "/proc/$rp/mem")
	exec 7>&-
	wait "$rp" || true
	[ "$owner" = 0 ] || fail "the redactor is dumpable: /proc/$rp/mem belongs to uid $owner"
	echo "ok: the redactor is not dumpable"
else
	echo "skipped: setpriv (util-linux) not installed: no run as nobody"
fi

# stderr on a character device (a tty, /dev/null) must not trip the filter.
rc=0
"$R" --format pprof --pids 1 --allow-root < /dev/null > /dev/null 2> /dev/null || rc=$?
[ "$rc" -eq 65 ] || fail "stderr on /dev/null: exit $rc, want 65 (an empty input refused)"
echo "ok: a status line to a character device is allowed"

rc=0
"$R" --format pprof --pids 1 < /dev/null > /dev/null 2> "$T/err" || rc=$?
[ "$rc" -eq 70 ] && grep -q "refusing to redact as root" "$T/err" || fail "runs as root without --allow-root"
echo "ok: refuses to run as root"

# A trace's kernel half comes on its own fd (--kernel-fd): read under the
# filter (in debug mode too), while the same bytes on fd 0, the runtime's
# stream, lose their sched data (the app cannot speak for the kernel).
SEED=$(cd "$(dirname "$0")/../fuzz/corpus/perfetto" && pwd)/sched_tracks
for mode in "" --debug-seccomp; do
	rc=0
	"$R" --format perfetto --pids 100 --tids 100,101 --allow-root $mode --kernel-fd 3 \
		< /dev/null 3< "$SEED" > /dev/null 2> "$T/err" || rc=$?
	[ "$rc" -eq 0 ] || { cat "$T/err"; fail "kernel fd ${mode:-}: exit $rc"; }
	grep -Eq "^ok .* anonymised=[1-9]" "$T/err" || fail "kernel fd: no sched data redacted: $(cat "$T/err")"
done
"$R" --format perfetto --pids 100 --tids 100,101 --allow-root < "$SEED" > /dev/null 2> "$T/err" ||
	fail "runtime stream: $(cat "$T/err")"
grep -q "anonymised=0 " "$T/err" || fail "sched data from the runtime's stream was used: $(cat "$T/err")"
rc=0
"$R" --format perfetto --pids 100 --allow-root --kernel-fd 3 < "$SEED" > /dev/null 2> "$T/err" 3<&- || rc=$?
[ "$rc" -eq 70 ] && grep -q "kernel-fd 3 is not open" "$T/err" || fail "closed kernel fd: exit $rc"
rc=0
"$R" --format pprof --pids 100 --allow-root --kernel-fd 3 < /dev/null 3< "$SEED" > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 70 ] || fail "--kernel-fd with pprof: exit $rc, want 70 (usage)"
echo "ok: kernel data only from --kernel-fd, under the filter"

# A real capture through the daemon, then redacted again by hand: stable.
start_daemon
out=$("$DEMO" --duration-ms 300 2>/dev/null) || fail "capture failed"
stop_daemon
"$R" --format pprof --pids 999999 --allow-root < "$out" > "$T/none.pb.gz" 2> "$T/err" && fail "foreign pid kept samples"
grep -q "nothing of the app" "$T/err" || fail "empty result not refused: $(cat "$T/err")"
echo "ok: a profile with nothing of the app is refused, never written empty"
head -c 100 "$out" | "$R" --format pprof --pids 1 --allow-root > /dev/null 2> "$T/err" && fail "truncated pprof accepted"
grep -q "malformed" "$T/err" || fail "truncated pprof: $(cat "$T/err")"
echo "ok: truncated pprof refused"
pass "redactor sandbox"
