#!/usr/bin/env bash
# The budget query (prof_get_budget, profctl budget; issue #21) against the
# real daemon: in every state its answer is the one the next real request
# gets (fresh, app window full, system window full, a trigger cooling down,
# the store failed closed), it changes once a request is admitted, and it
# charges nothing (two queries then a request leave the same budget as one
# request). Times are compared with the daemon's own clock in the answer,
# never with this script's.
. "$(dirname "$0")/lib.sh"
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run profctl as another uid"
QB=$APPS/it_budget
PROFCTL=$BUILD/tools/profctl/profctl
export PROFCTL_SOCKET=$T/state/control.sock
export PROFILING_NO_AGENT=1
A=61101 B_=61102 C=61103 D=61104

expect() { # expect LABEL "got" "want"
	[ "$2" = "$3" ] || fail "$1: got '$2', want '$3'"
	echo "ok: $1: $2"
}
field() { # field NAME LINE: the value of NAME=... in an it_budget line
	sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< "$2"
}
err() { awk '{print $2}' <<< "$1"; }
# agree LABEL UID WANT: a query then a request in one process; both WANT.
agree() {
	local out q r
	out=$("$QB" "$2" q r) || fail "$1: it_budget failed"
	q=$(sed -n 1p <<< "$out")
	r=$(sed -n 2p <<< "$out")
	expect "$1: the query" "$(err "$q")" "$3"
	expect "$1: the request" "$(err "$r")" "$3"
	LAST=$q
}

# Cost 1; hour caps 2 (app) and 3 (system); the day and week out of the way.
CONF=("[capture]" "runtime_wait_ms = 0" "[ratelimit]" "app_cost_stack_sampling = 1"
      "hour_app_cap = 2" "hour_system_cap = 3" "day_app_cap = 1000" "day_system_cap = 1000"
      "week_app_cap = 1000" "week_system_cap = 1000")
PD_REAL_LIMITS=1 start_daemon "${CONF[@]}"

# 1. Fresh: admitted now, the whole budget left.
out=$("$QB" $A q) || fail "fresh query"
expect "fresh: answer" "$(err "$out")" 0
expect "fresh: cost" "$(field cost "$out")" 1
expect "fresh: app left" "$(field app_left "$out")" 2
expect "fresh: system left" "$(field system_left "$out")" 3
expect "fresh: admitted now" "$(field waits "$out")/$(field ahead_ms "$out")" "1/0"
# Two queries, then a request: the request spends 1, the queries nothing.
out=$("$QB" $A q q r) || fail "two queries and a request"
expect "two queries: the same answer" "$(sed -n 1p <<< "$out")" "$(sed -n 2p <<< "$out")"
expect "two queries: the request" "$(sed -n 3p <<< "$out")" "request 0"
out=$("$QB" $A q) || fail "query after one request"
# 2. The answer changes once a request is admitted.
expect "after one request: app left" "$(field app_left "$out")" 1
expect "after one request: system left" "$(field system_left "$out")" 2
"$PROFCTL" --json ratelimit uid:$A | qgrep '"app":"uid:'$A'","windows":\[{"length_s":3600,"used":1,' ||
	fail "ratelimit.db holds more than the one request: $("$PROFCTL" --json ratelimit uid:$A)"
echo "ok: the queries charged nothing (used 1 after two queries and a request)"
agree "app window with room" $A 0
# 3. App window full: RATE_LIMIT_PROCESS, admitted again when the hour
# moves past the first entry (later than now, at most an hour away).
agree "app window full" $A 2
ahead=$(field ahead_ms "$LAST")
[ "$(field waits "$LAST")" = 1 ] && [ "$ahead" -gt 0 ] && [ "$ahead" -le 3600000 ] ||
	fail "app window full: the earliest admission is not within the hour: $LAST"
echo "ok: app window full: admitted again in $ahead ms"
# 4. System window full: B takes the last unit, then C meets the system cap.
agree "system window, last unit" $B_ 0
agree "system window full" $C 1
expect "system window full: system left" "$(field system_left "$LAST")" 0
[ "$(field waits "$LAST")" = 1 ] || fail "system window full: no earliest admission: $LAST"
# profctl budget: the same answer, for any app as root, own apps otherwise.
pj=$("$PROFCTL" --json budget --app $C --type stack) || fail "profctl budget --app $C"
grep -q '"app":"uid:'$C'","type":"stack","admitted":false,"error":1,' <<< "$pj" ||
	fail "profctl budget: $pj"
grep -q '"admit_ms":[0-9]' <<< "$pj" || fail "profctl budget: no admit_ms: $pj"
echo "ok: profctl budget --app $C: RATE_LIMIT_SYSTEM with a time"
"$PROFCTL" budget --app $C > "$T/pb.txt" || fail "profctl budget (table)"
grep -q "would be refused: " "$T/pb.txt" || fail "profctl budget table: $(cat "$T/pb.txt")"
grep -q "earliest admission: 20" "$T/pb.txt" || fail "profctl budget table: $(cat "$T/pb.txt")"
rc=0
setpriv --reuid=$A --regid=$A --clear-groups "$PROFCTL" budget --app uid:$B_ 2> "$T/perm.err" || rc=$?
expect "profctl budget of another uid's app" "$rc" 1
grep -qi "permission\|may only see" "$T/perm.err" || fail "no permission error: $(cat "$T/perm.err")"
own=$(setpriv --reuid=$A --regid=$A --clear-groups "$PROFCTL" --json budget) ||
	fail "profctl budget of one's own app"
# The system window is checked before the app's: A meets the system cap first.
grep -q '"app":"uid:'$A'"' <<< "$own" && grep -q '"error":1,' <<< "$own" ||
	fail "own budget: $own"
echo "ok: profctl budget: own app without --app, another uid's refused"
stop_daemon

# 5. A trigger's cooldown: listed with its end, and the app's own request
# still answered as the query says (cooldowns bind triggers, not requests).
# The capture's own outcome is not the point (an agentless sample of a
# process that dropped root may fail): the fire was admitted and recorded.
start_daemon "[capture]" "runtime_wait_ms = 0"
# "s q": the query's round trip on the same connection means the daemon
# has handled the signal before this process exits.
out=$("$QB" $D t a q r s q) || fail "cooldown run"
expect "cooldown: trigger added" "$(sed -n 1p <<< "$out")" "trigger 0"
[ "$(sed -n 2p <<< "$out")" != "anomaly -1" ] || fail "cooldown: the anomaly's capture never ended"
q=$(sed -n 3p <<< "$out")
expect "cooldown: triggers/cooling" "$(field triggers "$q")/$(field cooling "$q")" "1/1"
expect "cooldown: the query" "$(err "$q")" 0
expect "cooldown: the request" "$(sed -n 4p <<< "$out")" "request 0"
# The next fire, as the query said, meets the cooldown.
"$PROFCTL" --json triggers uid:$D | qgrep '"fired":1,"coalesced":0,"refused":1' ||
	fail "the second anomaly was not refused: $("$PROFCTL" --json triggers uid:$D)"
grep -q "anomaly trigger of uid:$D.*refused: trigger is cooling down" "$T/daemon.log" ||
	fail "the refusal is not the cooldown's"
echo "ok: cooldown: the next fire was refused"
pj=$("$PROFCTL" --json budget --app $D) || fail "profctl budget, cooldown"
grep -q '"trigger":"anomaly","capture":"stack","period_s":3600,"cooling_down":true' \
	<<< "$pj" || fail "profctl budget does not show the cooldown: $pj"
echo "ok: profctl budget shows the cooldown"
stop_daemon

# 6. The process is no longer the one that connected (root switched to
# another uid on the same connection): the query itself is refused with
# PERMISSION (104) through libprofiling's RequestReply branch, as a
# request would be, and the daemon closes the connection.
start_daemon "[capture]" "runtime_wait_ms = 0"
out=$("$QB" 0 q u61105 q) || fail "ids changed: it_budget failed: $out"
expect "ids changed: the query before" "$(err "$(sed -n 1p <<< "$out")")" 0
expect "ids changed: the query after" "$(err "$(sed -n 3p <<< "$out")")" 104
grep -q "closing client peer pid [0-9]* uid 0: .*" "$T/daemon.log" ||
	fail "the connection of the changed process was not closed"
stop_daemon

# 7. The store failed closed: RATE_LIMIT_SYSTEM, no windows, no time.
head -c 8192 /dev/urandom > "$T/state/ratelimit.db"
rm -f "$T/state/ratelimit.db-wal" "$T/state/ratelimit.db-shm"
start_daemon "[capture]" "runtime_wait_ms = 0"
agree "store failed closed" $A 1
expect "failed closed: windows/waits" "$(field windows "$LAST")/$(field waits "$LAST")" "0/0"
stop_daemon
pass "budget query"
