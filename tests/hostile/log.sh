#!/usr/bin/env bash
# Log injection and flood. uid A sends peer strings holding a newline and a
# journal priority ("\n<0>FAKE..."), a carriage return, an ESC sequence and
# bytes that are not UTF-8: as a runtime's name, a request's tag and a
# CaptureDone message. No raw line of its own may reach the log: every
# line that holds FAKE is one of the daemon's lines (timestamp first), and
# no CR or ESC byte is written. Then A floods refused requests for a few
# seconds: its lines stay within the per-uid budget (LOG_PEER_BURST 40 at
# once, then 5 a second) plus "uid A: N lines suppressed", while uid B's
# line still appears.
. "$(dirname "$0")/lib.sh"
start_daemon
A=$(make_user logflood)
B=$(make_user logfriend)
L=$T/daemon.log

out=$(as_uid "$A" "$HOSTILE/hostile_log" inject "$PROFILINGD_SOCKET" "$RUNTIME_SOCKET" 2>&1) ||
	fail "the injection run failed: $out"
sleep 0.3
bad=$(grep -a 'FAKE' "$L" | grep -avE '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} profilingd ' || true)
[ -z "$bad" ] || fail "a peer string started a log line of its own: $(echo "$bad" | sed -n 1,3p)"
! grep -aq $'\r' "$L" || fail "a raw carriage return reached the log"
! grep -aq $'\e' "$L" || fail "a raw ESC reached the log"
grep -aqF 'native\n<0>FAKE-runtime line' "$L" || fail "the runtime's name is not in the log, escaped"
grep -aqF 'boom\n<0>FAKE-done line\r\e[31mred\xff\xfe' "$L" ||
	fail "the CaptureDone message is not in the log, escaped"
echo "ok: runtime name, tag and CaptureDone message logged escaped"

SECS=4
before=$(wc -l < "$L")
t0=$(date +%s)
out=$(as_uid "$A" "$HOSTILE/hostile_log" flood "$PROFILINGD_SOCKET" "$SECS" 8) || fail "flood: $out"
sleep 1.5 # a token comes back: the next peer line brings A's summary
vpid=$(as_uid "$B" "$HOSTILE/hostile_log" refuse "$PROFILINGD_SOCKET" | awk '{print $2}') ||
	fail "uid $B's request got no answer"
sleep 0.3
tail -n +"$((before + 1))" "$L" > "$T/flood.log"
t1=$(date +%s)
lines=$(grep -acE "uid[: ]$A([^0-9]|$)" "$T/flood.log" || true)
echo "uid $A: $out refused requests in $SECS s; $lines log lines name it"
# The budget over the window the lines were written in (summaries draw
# from it too), and one more second of tokens: far from the 341,000 lines
# the same flood wrote before the budget.
max=$((40 + 5 * (t1 - t0 + 1)))
[ "$lines" -le "$max" ] || fail "uid $A wrote $lines log lines in $SECS s (budget $max)"
grep -aqE "uid $A: [0-9]+ lines suppressed" "$T/flood.log" || fail "no 'uid $A: N lines suppressed' line"
grep -aq "refused request from pid $vpid " "$T/flood.log" || fail "uid $B's line is missing"
echo "ok: uid $A's lines bounded ($lines <= $max) with a suppressed count; uid $B's line is there"
daemon_alive || fail "daemon died"
stop_daemon
pass "log injection and flood"
