#!/usr/bin/env bash
# Two real apps under two uids. B runs with a distinctive name and command
# line; A asks for a stack sample of itself. A's result must not hold B's
# pid, name or command line: checked on the raw decompressed bytes and on
# go tool pprof's own reading, not only on our decoder.
. "$(dirname "$0")/lib.sh"
need_go
A=61011
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run app A as uid $A"
start_daemon

# App B: the demo binary under a distinctive name, burning CPU, no request.
ln -s "$DEMO" "$T/zzsecretb"
(exec -a "zzsecretb-cmdline-MARKER" "$T/zzsecretb" --no-request --threads 1 --duration-ms 20000) &
BPID=$!
sleep 0.3
grep -q zzsecretb "/proc/$BPID/comm" || fail "B's comm is $(cat /proc/$BPID/comm)"

# App A, as another uid.
chmod 755 "$BUILD" "$BUILD/client" 2>/dev/null || true
out=$(setpriv --reuid=$A --regid=$A --clear-groups env PROFILINGD_SOCKET="$PROFILINGD_SOCKET" \
	"$DEMO" --duration-ms 1000 2> "$T/a.err") || { cat "$T/a.err"; fail "app A's capture failed"; }
# And a system trace, while B keeps running (its sched events are in the
# kernel data, to be anonymised).
tout=$(setpriv --reuid=$A --regid=$A --clear-groups env PROFILINGD_SOCKET="$PROFILINGD_SOCKET" \
	"$APPS/trace_app" 2> "$T/t.err") || { cat "$T/t.err"; fail "app A's trace failed"; }
kill "$BPID" 2>/dev/null || true
case "$out" in "$T/state/results/$A/"*) ;; *) fail "A's result is not in its own directory: $out";; esac
[ "$(stat -c %u "$out")" = "$A" ] || fail "A's result is not owned by uid $A"
[ "$(stat -c %a "$out")" = 600 ] || fail "A's result mode is not 0600"

gzip -dc < "$out" > "$T/a.raw"
for needle in zzsecretb MARKER; do
	grep -aq "$needle" "$T/a.raw" && fail "A's result contains B's '$needle'"
done
go tool pprof -raw "$out" > "$T/a.txt" 2>&1 || fail "go tool pprof cannot read A's result"
grep -q "zzsecretb\|MARKER" "$T/a.txt" && fail "pprof's view of A's result names B"
grep -Eq "pid:\[$BPID\]|\b$BPID\b" "$T/a.txt" && fail "A's result carries B's pid $BPID"
grep -q "hot_function" "$T/a.txt" || fail "A's own samples are missing"
echo "ok: A's result ($(stat -c %s "$out") bytes) holds none of B's pid $BPID, name or cmdline"

[ "$(stat -c %u "$tout")" = "$A" ] || fail "A's trace is not owned by uid $A"
for needle in zzsecretb MARKER; do
	grep -aq "$needle" "$tout" && fail "A's trace contains B's '$needle'"
done
if command -v protoc > /dev/null; then
	SRC=$(cd "$(dirname "$0")/../.." && pwd)
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
		< "$tout" > "$T/t.txt" || fail "protoc cannot decode A's trace"
	grep -Eq "(pid|tid|prev_pid|next_pid): $BPID\$" "$T/t.txt" && fail "A's trace names B's pid $BPID"
	grep -q "zzsecretb" "$T/t.txt" && fail "A's decoded trace names B"
	n=$(grep -c "sched_switch" "$T/t.txt" || true)
	echo "ok: A's trace ($n sched_switch events kept for CPU occupancy) holds none of B's pid, name or cmdline"
else
	echo "ok: A's trace bytes hold none of B's name or cmdline (protoc missing: pid not checked)"
fi
stop_daemon
pass "cross-app isolation"
