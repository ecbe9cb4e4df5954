#!/usr/bin/env bash
# End to end: the real daemon, the demo app (2 threads, hot:cold = 3:1),
# a delivered pprof that `go tool pprof` reads with the right shares.
. "$(dirname "$0")/lib.sh"
need_go
start_daemon

out=$("$DEMO" --threads 2 --duration-ms 2000 --frequency 100 2>"$T/demo.err") ||
	{ cat "$T/demo.err" >&2; fail "demo failed"; }
[ -f "$out" ] || fail "demo printed '$out', which is not a file"
case "$out" in "$T/state/results/$(id -u)/stack_demo_"*.pb.gz) ;; *) fail "unexpected result path $out";; esac
mode=$(stat -c %a "$out")
[ "$mode" = 600 ] || fail "result mode is $mode, want 600"
[ "$(stat -c %a "$(dirname "$out")")" = 700 ] || fail "result dir is not 0700"
ls "$T/state/raw" | qgrep . && fail "raw capture files left behind"

go tool pprof -top "$out" > "$T/top.txt" 2>&1 || { cat "$T/top.txt"; fail "go tool pprof cannot read the result"; }
cat "$T/top.txt"
hot=$(pprof_flat "$out" hot_function)
cold=$(pprof_flat "$out" cold_function)
echo "hot_function ${hot}%  cold_function ${cold}%"
awk -v h="$hot" -v c="$cold" 'BEGIN { exit !(h > c && h >= 65 && h <= 85) }' ||
	fail "hot_function share ${hot}% is not 75% +-10 points (cold ${cold}%)"

threads=$(go tool pprof -tags "$out" 2>/dev/null | awk '/thread_id:/ { on=1; next } on && /^ *$/ { on=0 } on && /%\)/ { n++ } END { print n+0 }')
echo "threads with samples: $threads"
[ "$threads" -ge 2 ] || fail "samples from $threads thread(s), want >= 2"

daemon_alive || fail "daemon died"
stop_daemon
[ -S "$PROFILINGD_SOCKET" ] && fail "client socket not removed at exit"
grep -q "delivered\|-> $out" "$T/daemon.log" || fail "daemon did not log the delivery"
pass "demo capture delivered and read by go tool pprof (hot ${hot}%, ${threads} threads)"
