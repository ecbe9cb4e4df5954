#!/usr/bin/env bash
# Method events, native (docs/METHOD_EVENTS.md): uprobes on a chosen
# function of apps/method_target, by profilingd-perf directly and through
# the daemon (PROF_METHOD_EVENTS). The function's hits equal its calls,
# the program computes the same with and without the probes, other
# functions get no hits, both call sites' stacks are there, and hostile
# targets are refused with a reason while the target keeps running.
# Skipped (77) where uprobes cannot be created.
. "$(dirname "$0")/lib.sh"

SRC=$(cd "$(dirname "$0")/../.." && pwd)
PERF=$BUILD/runtime/perf/profilingd-perf
TGT=$APPS/method_target
[ -x "$PERF" ] || fail "no $PERF"
[ -x "$TGT" ] || fail "no $TGT"
[ -r /sys/bus/event_source/devices/uprobe/type ] || skip "kernel without the uprobe PMU"
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed for the unprivileged case"
need_go
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"

N=400 M=100000
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; cleanup' EXIT

# The target's answer without probes: what it computes must not change.
want_sum=$("$TGT" $N $M | sed -n 's/^sum //p')
[ -n "$want_sum" ] || fail "method_target printed no sum"

# wait_probes PID [N]: the helper PID holds its first thread's ring (a
# dummy perf event, opened first) and N probes (default 1) after it.
wait_probes() {
	for _ in $(seq 500); do
		[ "$(ls -l "/proc/$1/fd" 2> /dev/null | grep -c 'perf_event')" -gt "${2:-1}" ] && return 0
		kill -0 "$1" 2> /dev/null || return 1
		sleep 0.02
	done
	return 1
}

# 1. profilingd-perf directly.
rm -f "$T/go"
"$TGT" $N $M "$T/go" > "$T/target.out" &
TP=$!
PIDS+=("$TP")
rc=0
"$PERF" --pid "$TP" --duration-ms 60000 --method "$TGT:target_fn" > "$T/m.pb.gz" 2> "$T/err" &
HP=$!
if ! wait_probes "$HP"; then
	wait "$HP" || rc=$?
	status=$(tail -n 1 "$T/err")
	case $status in
	*"not permitted"* | *"uprobes unavailable"*) skip "${status#error: }" ;;
	esac
	fail "profilingd-perf exited $rc before its probes were in: $status"
fi
touch "$T/go"
wait "$HP" || rc=$?
wait "$TP"
status=$(tail -n 1 "$T/err")
[ "$rc" -eq 0 ] || fail "profilingd-perf exited $rc: $status"
[[ $status =~ ^ok\ hits=([0-9]+)\ stacks=([0-9]+)\ lost=([0-9]+)\ threads=1$ ]] ||
	fail "status line: '$status'"
hits=${BASH_REMATCH[1]} stacks=${BASH_REMATCH[2]} lost=${BASH_REMATCH[3]}
[ "$hits" -eq $N ] || fail "hits=$hits, target_fn was called $N times"
[ "$(sed -n 's/^sum //p' "$T/target.out")" = "$want_sum" ] ||
	fail "the program computed $(cat "$T/target.out") under the probes, $want_sum without"
# One burst of 400 calls, unpaced: every stack is in the ring, or lost and
# counted as lost (a machine too loaded to drain it), never missing.
[ $((stacks + lost)) -eq "$hits" ] || fail "stacks=$stacks + lost=$lost != hits=$hits"
[ "$lost" -eq 0 ] || echo "note: the burst lost $lost of $hits stacks to a full ring (loaded machine)"
go tool pprof -traces "$T/m.pb.gz" > "$T/traces.txt" 2>&1 || { cat "$T/traces.txt"; fail "go tool pprof cannot read it"; }
grep -q "^Type: hits" "$T/traces.txt" || fail "sample type is not hits"
grep -q "hits=$N " "$T/traces.txt" || fail "the profile's comment does not say hits=$N"
! grep -q "other_fn" "$T/traces.txt" || fail "other_fn appears in the method events"
# Both call sites, under target_fn, up to main.
for site in site_a site_b; do
	awk -v s="$site" '/ target_fn$/ { t=1; next } t && $NF == s { ok=1 } /^-+\+/ { t=0 } END { exit !ok }' \
		"$T/traces.txt" || { head -n 40 "$T/traces.txt"; fail "no target_fn <- $site stack"; }
done
go tool pprof -tags "$T/m.pb.gz" 2> /dev/null | qgrep "thread_id:" || fail "no thread_id label"
echo "ok: profilingd-perf: hits=$N of $N, $stacks stacks, sum unchanged, other_fn untouched"

# The same function named by the executable's build id and file offset.
bid=$(readelf -nW "$TGT" | awk '/Build ID:/ && !d { print $NF; d = 1 }')
sym=$(nm "$TGT" | awk '$3 == "target_fn" && !d { print $1; d = 1 }')
off=
while read -r o v z; do
	if (( 16#$sym >= v && 16#$sym < v + z )); then off=$(printf '0x%x' $(( 16#$sym - v + o ))); fi
done < <(readelf -lW "$TGT" | awk '$1 == "LOAD" && / R E / { print $2, $3, $5 }')
[ -n "$bid" ] && [ -n "$off" ] || fail "no build id or offset for target_fn ($bid, $off)"
rm -f "$T/go"
"$TGT" 100 1000 "$T/go" > /dev/null &
TP=$!
PIDS+=("$TP")
# Its maps must be the program's, not the forking shell's: wait for the exec.
for _ in $(seq 500); do [ "$(readlink "/proc/$TP/exe" 2> /dev/null)" = "$(readlink -f "$TGT")" ] && break; sleep 0.01; done
rc=0
"$PERF" --pid "$TP" --duration-ms 60000 --method "buildid:$bid:+$off" > /dev/null 2> "$T/err" &
HP=$!
wait_probes "$HP" || fail "build id target: $(tail -n 1 "$T/err")"
touch "$T/go"
wait "$HP" || rc=$?
wait "$TP"
tail -n 1 "$T/err" | qgrep "^ok hits=100 " || fail "build id target: rc $rc: $(tail -n 1 "$T/err")"
echo "ok: buildid:$bid:+$off: hits=100"

# 1b. --format perfetto: a trace with one instant event per recorded hit on
# its thread's track, carrying its stack (docs/METHOD_EVENTS.md).
rm -f "$T/go"
"$TGT" $N $M "$T/go" > /dev/null &
TP=$!
PIDS+=("$TP")
for _ in $(seq 500); do [ "$(readlink "/proc/$TP/exe" 2> /dev/null)" = "$(readlink -f "$TGT")" ] && break; sleep 0.01; done
rc=0
"$PERF" --pid "$TP" --duration-ms 60000 --method "$TGT:target_fn" --format perfetto \
	> "$T/m.pftrace" 2> "$T/err" &
HP=$!
wait_probes "$HP" || fail "perfetto: $(tail -n 1 "$T/err")"
touch "$T/go"
wait "$HP" || rc=$?
wait "$TP"
status=$(tail -n 1 "$T/err")
[[ $status =~ ^ok\ hits=$N\ stacks=([0-9]+)\  ]] || fail "perfetto: rc $rc: '$status'"
stacks=${BASH_REMATCH[1]}
check_trace() { # check_trace FILE PID EVENTS: the trace's hits, all on PID's threads
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
		< "$1" > "$1.txt" || fail "protoc cannot decode $1"
	awk -v pid="$2" -v want="$3" '
		/^packet \{/ { inst = 0; trk = ""; clk = "" }
		/^ *uuid: / { u = $2 }
		/^ *thread \{/ { inth = 1 }
		inth && /^ *pid: / { if ($2 != pid) bad = bad " thread of pid " $2; inth = 0; thr[u] = 1 }
		/type: TYPE_INSTANT/ { inst = 1; n++ }
		/^ *track_uuid: / { trk = $2 }
		/^ *timestamp_clock_id: / { clk = $2 }
		/^}/ { if (inst && !(trk in thr)) bad = bad " event on track " trk;
		       if (inst && clk != 3) bad = bad " clock " clk }
		END { if (bad != "") { print "bad:" bad; exit 1 }
		      if (want != "" && n != want) { print "events " n ", want " want; exit 1 }
		      print n }' "$1.txt"
}
ev=$(check_trace "$T/m.pftrace" "$TP" "$stacks") || fail "perfetto trace: $ev"
for site in site_a site_b; do
	grep -q "str: \"target_fn\\\\n$site\\\\n" "$T/m.pftrace.txt" || fail "no target_fn <- $site stack in the trace"
done
grep -q 'name: "stack"' "$T/m.pftrace.txt" || fail "no stack annotation"
echo "ok: perfetto: $ev instant events for $stacks recorded hits of $N, both call sites"

# 1c. The overhead budget: a budget of 0 or 1 us is passed by every
# recorded hit (an unwind takes more), so after 16 hits the probes go,
# the target runs on and computes the same, and the status and the
# profile say why. The default (none here) let the 400 hits above through.
for budget in 0 1; do
	rm -f "$T/go"
	# It lingers: a helper that ends while it still runs ended by the budget.
	# Paced (2 ms a call): the budget needs 16 recorded hits, and a burst
	# of 400 can overflow a slow helper's ring (the ASan build recorded 49).
	"$TGT" $N $M "$T/go" 60 2000 > "$T/target_b.out" &
	TP=$!
	PIDS+=("$TP")
	for _ in $(seq 500); do [ "$(readlink "/proc/$TP/exe" 2> /dev/null)" = "$(readlink -f "$TGT")" ] && break; sleep 0.01; done
	rc=0
	"$PERF" --pid "$TP" --duration-ms 60000 --method "$TGT:target_fn" --budget-us $budget \
		> "$T/b.pb.gz" 2> "$T/err" &
	HP=$!
	wait_probes "$HP" || fail "budget $budget: $(tail -n 1 "$T/err")"
	touch "$T/go"
	wait "$HP" || rc=$?
	kill -0 "$TP" 2> /dev/null || fail "budget $budget: the helper ran until the target's end"
	for _ in $(seq 1000); do grep -q '^sum ' "$T/target_b.out" && break; sleep 0.02; done
	kill "$TP" 2> /dev/null || true
	wait "$TP" 2> /dev/null || true
	status=$(tail -n 1 "$T/err")
	[[ $status =~ ^ok\ hits=([0-9]+)\ .*\ over_budget=([0-9]+)/$((budget * 1000))$ ]] ||
		fail "budget $budget: rc $rc: '$status' does not say over_budget"
	bh=${BASH_REMATCH[1]}
	[ "$bh" -le $N ] || fail "budget $budget: $bh hits of $N calls"
	[ "$(sed -n 's/^sum //p' "$T/target_b.out")" = "$want_sum" ] ||
		fail "budget $budget: the program computed $(cat "$T/target_b.out"), $want_sum without probes"
	go tool pprof -traces "$T/b.pb.gz" 2>&1 | qgrep "overhead budget: [0-9]* ns per recorded hit on average, over the budget of $budget us" ||
		fail "budget $budget: the profile does not say the budget removed the probes"
	echo "ok: budget $budget us: probes removed after $bh of $N hits: $status"
done

# 1d. --max-hits is exact: the same unpaced burst of 400 calls with a cap
# of 50. Each probe may write 50 samples (PERF_EVENT_IOC_REFRESH), then the
# kernel disables it in the trap, and the helper disables every probe as
# soon as it has recorded 50: one thread, so exactly 50 hits.
rm -f "$T/go"
"$TGT" $N $M "$T/go" > /dev/null &
TP=$!
PIDS+=("$TP")
for _ in $(seq 500); do [ "$(readlink "/proc/$TP/exe" 2> /dev/null)" = "$(readlink -f "$TGT")" ] && break; sleep 0.01; done
rc=0
"$PERF" --pid "$TP" --duration-ms 60000 --method "$TGT:target_fn" --max-hits 50 \
	> "$T/x.pb.gz" 2> "$T/err" &
HP=$!
wait_probes "$HP" || fail "max hits: $(tail -n 1 "$T/err")"
touch "$T/go"
wait "$HP" || rc=$?
wait "$TP"
status=$(tail -n 1 "$T/err")
[[ $status =~ ^ok\ hits=([0-9]+)\ stacks=([0-9]+)\ lost=([0-9]+)\  ]] || fail "max hits: rc $rc: '$status'"
[ "${BASH_REMATCH[1]}" -eq 50 ] || fail "max hits 50: $status"
[ $((BASH_REMATCH[2] + BASH_REMATCH[3])) -eq 50 ] || fail "max hits 50: stacks + lost != 50: $status"
echo "ok: --max-hits 50 on a burst of $N calls: $status"

# 1e. Two targets: each sample names the target that fired (the pprof's
# `target` label), and the budget closes a target's probe alone. fn_a is
# called first; with a budget of 0 its probe goes after 16 recorded hits
# while fn_b's stays: only then (the helper holds one probe fewer) is
# fn_b called, and its hits are still counted, until its own budget ends
# the capture.
PAIR=$APPS/method_pair
rm -f "$T/go" "$T/go2"
"$PAIR" two "$T/go" "$T/go2" 100 > "$T/pair.out" &
TP=$!
PIDS+=("$TP")
for _ in $(seq 500); do [ "$(readlink "/proc/$TP/exe" 2> /dev/null)" = "$(readlink -f "$PAIR")" ] && break; sleep 0.01; done
rc=0
"$PERF" --pid "$TP" --duration-ms 60000 --method "$PAIR:fn_a" --method "$PAIR:fn_b" \
	--budget-us 0 > "$T/two.pb.gz" 2> "$T/err" &
HP=$!
wait_probes "$HP" 2 || fail "two targets: $(tail -n 1 "$T/err")"
touch "$T/go"
# fn_a's probe closed: the ring's owner and fn_b's probe are left.
for _ in $(seq 1500); do
	[ "$(ls -l "/proc/$HP/fd" 2> /dev/null | grep -c 'perf_event')" -eq 2 ] && break
	kill -0 "$HP" 2> /dev/null || break
	sleep 0.02
done
[ "$(ls -l "/proc/$HP/fd" 2> /dev/null | grep -c 'perf_event')" -eq 2 ] ||
	fail "two targets: fn_a's probe was not closed alone: $(tail -n 3 "$T/err")"
touch "$T/go2"
wait "$HP" || rc=$?
kill "$TP" 2> /dev/null || true
wait "$TP" 2> /dev/null || true
status=$(tail -n 1 "$T/err")
[[ $status =~ ^ok\ hits=([0-9]+)\ .*over_budget= ]] || fail "two targets: rc $rc: '$status'"
go tool pprof -traces "$T/two.pb.gz" > "$T/two.txt" 2>&1 || fail "two targets: pprof cannot read it"
for f in fn_a fn_b; do
	grep -q "overhead budget: target $PAIR:$f: [0-9]* ns per recorded hit on average, over the budget of 0 us: its probe was removed" "$T/two.txt" ||
		{ grep -i 'budget\|target' "$T/two.txt"; fail "two targets: $f not named over budget"; }
	fh=$(sed -n "s|.*method target: $PAIR:$f hits=\([0-9]*\)\$|\1|p" "$T/two.txt")
	[ -n "$fh" ] && [ "$fh" -ge 16 ] && [ "$fh" -le 100 ] || fail "two targets: $f hits='$fh' (16..100)"
	# Every sample whose leaf is $f says target $f, and only those.
	awk -v f="$f" -v p="$PAIR:$f" '
		/^-+\+/ { if (inb && leaf != "" && ((leaf == f) != (tg == p))) bad++; inb = 1; leaf = ""; tg = ""; next }
		inb && /target:/ { tg = $0; sub(/.*target: *\[?/, "", tg); sub(/\]$/, "", tg) }
		inb && leaf == "" && /^ +[0-9]/ { leaf = $NF }
		inb && leaf == "" && /^ +[a-z_]/ && !/:/ { leaf = $1 }
		END { exit bad > 0 }' "$T/two.txt" || { head -n 60 "$T/two.txt"; fail "two targets: a $f sample with the wrong target label"; }
	grep -Eq "target: +\\[?$PAIR:$f" "$T/two.txt" || { head -n 40 "$T/two.txt"; fail "two targets: no sample labelled $f"; }
done
echo "ok: two targets: fn_a's probe closed alone over budget, fn_b ran on, samples labelled by target: $status"

# 1f. A thread started after the probes are in: a rescan opens its probe
# (IOC_ID, IOC_REFRESH for --max-hits) under the helper's seccomp filter.
rm -f "$T/go"
"$PAIR" thread "$T/go" 100 > /dev/null &
TP=$!
PIDS+=("$TP")
for _ in $(seq 500); do [ "$(readlink "/proc/$TP/exe" 2> /dev/null)" = "$(readlink -f "$PAIR")" ] && break; sleep 0.01; done
rc=0
"$PERF" --pid "$TP" --duration-ms 60000 --method "$PAIR:fn_a" --max-hits 1000 \
	> /dev/null 2> "$T/err" &
HP=$!
wait_probes "$HP" || fail "new thread: $(tail -n 1 "$T/err")"
touch "$T/go"
for _ in $(seq 1500); do [ -n "$(ls "/proc/$TP/task" 2> /dev/null | sed -n 2p)" ] && break; sleep 0.01; done
for _ in $(seq 1500); do [ -z "$(ls "/proc/$TP/task" 2> /dev/null | sed -n 2p)" ] && break; sleep 0.02; done
kill "$TP" 2> /dev/null || true
wait "$TP" 2> /dev/null || true
wait "$HP" || rc=$?
status=$(tail -n 1 "$T/err")
[ "$rc" -eq 0 ] || fail "new thread: profilingd-perf exited $rc: $status"
[[ $status =~ ^ok\ hits=([0-9]+)\ stacks=([0-9]+)\  ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] &&
	[ "${BASH_REMATCH[1]}" -le 100 ] || fail "new thread: '$status'"
echo "ok: a thread started later is probed by a rescan: $status"

# 1h. A function that starts endbr64; push %rbp is probed on the push
# (one emulated trap instead of a single-stepped endbr64): its hits are
# still exactly its calls, in one unpaced burst, and its stacks' leaf is
# the function.
if objdump -d "$PAIR" | grep -A2 '<fn_cet>:' | qgrep 'push *%rbp' &&
	objdump -d "$PAIR" | grep -A1 '<fn_cet>:' | qgrep endbr64; then
	rm -f "$T/go"
	"$PAIR" cet "$T/go" $N > "$T/cet.out" &
	TP=$!
	PIDS+=("$TP")
	for _ in $(seq 500); do [ "$(readlink "/proc/$TP/exe" 2> /dev/null)" = "$(readlink -f "$PAIR")" ] && break; sleep 0.01; done
	rc=0
	"$PERF" --pid "$TP" --duration-ms 60000 --method "$PAIR:fn_cet" > "$T/cet.pb.gz" 2> "$T/err" &
	HP=$!
	wait_probes "$HP" || fail "endbr64: $(tail -n 1 "$T/err")"
	touch "$T/go"
	for _ in $(seq 1500); do grep -q done "$T/cet.out" && break; kill -0 "$TP" 2> /dev/null || break; sleep 0.02; done
	kill "$TP" 2> /dev/null || true
	wait "$TP" 2> /dev/null || true
	wait "$HP" || rc=$?
	status=$(tail -n 1 "$T/err")
	[[ $status =~ ^ok\ hits=$N\ stacks=([0-9]+)\ lost=([0-9]+)\  ]] || fail "endbr64: rc $rc: '$status'"
	[ $((BASH_REMATCH[1] + BASH_REMATCH[2])) -eq $N ] || fail "endbr64: stacks + lost != $N: $status"
	go tool pprof -traces "$T/cet.pb.gz" 2>&1 | qgrep -E '^ +[0-9]+ +fn_cet$' ||
		fail "endbr64: no stack with fn_cet as its leaf"
	echo "ok: endbr64; push %rbp: probed on the push, hits=$N exact: $status"
else
	echo "note: fn_cet does not start endbr64; push %rbp with this compiler: not checked"
fi

# 1g. Arguments: args_fn(int, const char *, long) called 30 times with
# (7, "hello, args", -5), then once with (8, an unmapped pointer, 3).
# "#args=is-": arg0 and arg1 exactly, no arg2; the pointer nothing maps
# gives <unreadable>. In pprof (labels) and in Perfetto (annotations).
# No suffix: no argument at all.
args_run() { # args_run SUFFIX OUT FORMAT: status line
	rm -f "$T/go"
	"$PAIR" args "$T/go" 30 > /dev/null &
	local tp=$! hp rc=0
	PIDS+=("$tp")
	for _ in $(seq 500); do [ "$(readlink "/proc/$tp/exe" 2> /dev/null)" = "$(readlink -f "$PAIR")" ] && break; sleep 0.01; done
	"$PERF" --pid "$tp" --duration-ms 60000 --method "$PAIR:args_fn$1" --max-hits 31 \
		--format "$3" > "$2" 2> "$T/err" &
	hp=$!
	wait_probes "$hp" || fail "args$1: $(tail -n 1 "$T/err")"
	touch "$T/go"
	wait "$hp" || rc=$?
	kill "$tp" 2> /dev/null || true
	wait "$tp" 2> /dev/null || true
	[ "$rc" -eq 0 ] || fail "args$1: exit $rc: $(tail -n 1 "$T/err")"
	tail -n 1 "$T/err"
}
st=$(args_run "#args=is-" "$T/args.pb.gz" pprof)
[[ $st =~ ^ok\ hits=31\ stacks=31\  ]] || fail "args: '$st'"
go tool pprof -raw "$T/args.pb.gz" > "$T/args.raw" 2>&1 || fail "args: pprof cannot read it"
go tool pprof -traces "$T/args.pb.gz" > "$T/args.txt" 2>&1
# Two samples: (7, "hello, args") x30 and (8, <unreadable>) x1.
awk '
	/^-+\+/ { if (n) flush(); n = 1; a0 = a1 = a2 = ""; c = ""; next }
	/^ +arg0: / { sub(/^ +arg0: +/, ""); a0 = $0 }
	/^ +arg1: / { sub(/^ +arg1: +/, ""); a1 = $0 }
	/^ +arg2: / { a2 = "x" }
	/^ +[0-9]+ +args_fn$/ { c = $1 }
	function flush() { if (c != "") got[a0 "|" a1 "|" a2 "|" c] = 1 }
	END { flush(); if (!(("7|hello, args||30") in got) || !(("8|<unreadable>||1") in got)) exit 1 }
' "$T/args.txt" || { cat "$T/args.txt"; fail "args: not arg0=7 arg1='hello, args' x30 and arg0=8 arg1=<unreadable> x1, no arg2"; }
st=$(args_run "#args=is-" "$T/args.pftrace" perfetto)
protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
	< "$T/args.pftrace" > "$T/args.pftrace.txt" || fail "args: protoc cannot decode the trace"
# Names of debug annotations are interned: arg0 and arg1, never arg2.
grep -q '"arg0"' "$T/args.pftrace.txt" && grep -q '"arg1"' "$T/args.pftrace.txt" ||
	fail "args: no arg0/arg1 annotation in the trace"
! grep -q '"arg2"' "$T/args.pftrace.txt" || fail "args: arg2 in the trace, its type was '-'"
[ "$(grep -c 'string_value: "hello, args"' "$T/args.pftrace.txt")" -eq 30 ] ||
	fail "args: not 30 'hello, args' in the trace"
grep -q 'string_value: "<unreadable>"' "$T/args.pftrace.txt" || fail "args: no <unreadable> in the trace"
grep -q 'int_value: 7$' "$T/args.pftrace.txt" && grep -q 'int_value: 8$' "$T/args.pftrace.txt" ||
	fail "args: arg0 7 and 8 not in the trace"
st=$(args_run "" "$T/noargs.pb.gz" pprof)
go tool pprof -traces "$T/noargs.pb.gz" > "$T/noargs.txt" 2>&1
! grep -q ' arg[0-9]:' "$T/noargs.txt" || fail "no #args suffix, but arguments recorded"
echo "ok: arguments: #args=is- gives arg0=7, arg1='hello, args' (30) and <unreadable> (1), no arg2, in pprof and Perfetto; none without the suffix"

# 2. Hostile targets: refused with a reason (exit 70), the target runs on.
sleep 600 &
SP=$!
PIDS+=("$SP")
refuse() { # refuse WHAT EXPECTED ARGS...
	local what=$1 expect=$2 rc=0
	shift 2
	"$PERF" --pid "$SP" --duration-ms 200 "$@" > /dev/null 2> "$T/herr" || rc=$?
	[ "$rc" -eq 70 ] || fail "$what: exit $rc, expected 70"
	tail -n 1 "$T/herr" | qgrep "$expect" || fail "$what: '$(tail -n 1 "$T/herr")' lacks '$expect'"
	kill -0 "$SP" || fail "$what: the target died"
	echo "ok: $what refused: $(tail -n 1 "$T/herr")"
}
refuse "unknown symbol" "no function named 'no_such_fn'" --method "$TGT:no_such_fn"
refuse "missing file" "No such file" --method "/nonexistent/lib.so:f"
refuse "relative path" "expected /PATH:SYMBOL" --method "lib.so:f"
refuse "not ELF" "not an ELF file" --method "/etc/hostname:f"
refuse "offset outside code" "no executable segment" --method "$TGT:+0x7fffffff"
refuse "#args without TYPES" "native arguments need #args=TYPES" --method "$TGT:target_fn#args"
refuse "#args= empty" "1..6 letters" --method "$TGT:target_fn#args="
refuse "#args, 7 types" "1..6 letters" --method "$TGT:target_fn#args=iiiiiii"
refuse "#args, unknown type" "'x' is not one of i, u, p, s, -" --method "$TGT:target_fn#args=ix"
refuse "#args, all skipped" "every argument skipped" --method "$TGT:target_fn#args=--"
many=()
for i in $(seq 9); do many+=(--method "$TGT:target_fn"); done
refuse "9 targets" "at most 8 targets" "${many[@]}"
refuse "unknown build id" "has build id 00112233" --method "buildid:00112233:+0x1000"
refuse "malformed build id" "expected buildid:HEX:+0xOFFSET" --method "buildid:xyz:+0x10"

# A file the target's user cannot read, asked for as that user's process.
U=61919
cp "$TGT" "$T/private_target"
chmod 0700 "$T/private_target"
setpriv --reuid=$U --regid=$U --clear-groups sleep 30 &
UP=$!
PIDS+=("$UP")
for _ in $(seq 100); do [ "$(stat -c %u /proc/$UP 2> /dev/null)" = $U ] && break; sleep 0.01; done
rc=0
"$PERF" --pid "$UP" --duration-ms 200 --method "$T/private_target:target_fn" > /dev/null 2> "$T/herr" || rc=$?
[ "$rc" -eq 70 ] || fail "unreadable file: exit $rc, expected 70"
tail -n 1 "$T/herr" | qgrep "Permission denied (opened as the target's user)" ||
	fail "unreadable file: $(tail -n 1 "$T/herr")"
kill -0 "$UP" || fail "unreadable file: the target died"
echo "ok: a file uid $U cannot read is refused: $(tail -n 1 "$T/herr")"

# 3. Through the daemon: PROF_METHOD_EVENTS from root for another process.
start_daemon
rm -f "$T/go"
# It lingers: a capture whose process is gone by its end is not delivered.
"$TGT" $N $M "$T/go" 60 > "$T/target2.out" &
TP2=$!
PIDS+=("$TP2")
# A budget no helper reaches: these cases count exactly, and the default
# (50 us a recorded hit) trips in the sanitizer build, whose helper is slow.
"$APPS/it_request" --pid "$TP2" --type methods --duration-ms 15000 --budget-us 1000000 --method "$TGT:target_fn" \
	> "$T/path" 2> "$T/req.err" &
RQ=$!
hp=
for _ in $(seq 500); do
	hp=$(pgrep -f "^profilingd-perf --pid $TP2 " | sed -n 1p || true)
	[ -n "$hp" ] && break
	sleep 0.02
done
[ -n "$hp" ] || fail "the daemon started no profilingd-perf for pid $TP2: $(cat "$T/req.err")"
wait_probes "$hp" || fail "profilingd-perf $hp ended before its probes were in"
touch "$T/go"
wait "$RQ" || fail "method events through the daemon failed: $(cat "$T/req.err")"
out=$(cat "$T/path")
[ -f "$out" ] || fail "no result file '$out'"
go tool pprof -traces "$out" > "$T/d.txt" 2>&1 || { cat "$T/d.txt"; fail "the delivered result is not pprof"; }
grep -q "hits=$N " "$T/d.txt" || { head -n 20 "$T/d.txt"; fail "delivered result: not hits=$N"; }
grep -q " target_fn$" "$T/d.txt" || fail "delivered result has no target_fn stack"
case $(basename "$out") in methods_*) ;; *) fail "result name '$out' does not start with methods_" ;; esac
grep -q "method events" "$T/daemon.log" || true
echo "ok: through the daemon: $out, hits=$N"
kill "$TP2" 2> /dev/null || true
wait "$TP2" 2> /dev/null || true

# Arguments through the daemon: the #args suffix is admitted, passed to
# the helper as spelt, and the delivered (redacted) pprof has them.
rm -f "$T/go"
"$PAIR" args "$T/go" 30 > /dev/null &
TPA=$!
PIDS+=("$TPA")
for _ in $(seq 500); do [ "$(readlink "/proc/$TPA/exe" 2> /dev/null)" = "$(readlink -f "$PAIR")" ] && break; sleep 0.01; done
"$APPS/it_request" --pid "$TPA" --type methods --duration-ms 15000 --max-hits 31 --budget-us 1000000 \
	--method "$PAIR:args_fn#args=is-" > "$T/patha" 2> "$T/reqa.err" &
RQ=$!
hp=
for _ in $(seq 500); do
	hp=$(pgrep -f "^profilingd-perf --pid $TPA " | sed -n 1p || true)
	[ -n "$hp" ] && break
	sleep 0.02
done
[ -n "$hp" ] || fail "args: the daemon started no profilingd-perf for pid $TPA: $(cat "$T/reqa.err")"
wait_probes "$hp" || fail "args: profilingd-perf $hp ended before its probes were in"
touch "$T/go"
wait "$RQ" || fail "args through the daemon failed: $(cat "$T/reqa.err")"
go tool pprof -traces "$(cat "$T/patha")" > "$T/da.txt" 2>&1 || fail "args: the delivered result is not pprof"
grep -Eq '^ +arg1: +hello, args$' "$T/da.txt" && grep -Eq '^ +arg0: +7$' "$T/da.txt" ||
	{ head -n 30 "$T/da.txt"; fail "args: the delivered result lacks arg0=7 arg1='hello, args'"; }
kill "$TPA" 2> /dev/null || true
wait "$TPA" 2> /dev/null || true
echo "ok: arguments through the daemon: arg0=7 arg1='hello, args' in the delivered result"

# The same through the daemon in Perfetto format: redacted as a trace
# (only the target's tracks), delivered as .perfetto-trace.
rm -f "$T/go"
"$TGT" $N $M "$T/go" 60 > /dev/null &
TP3=$!
PIDS+=("$TP3")
"$APPS/it_request" --pid "$TP3" --type methods --format perfetto --duration-ms 15000 --budget-us 1000000 \
	--method "$TGT:target_fn" > "$T/path3" 2> "$T/req3.err" &
RQ=$!
hp=
for _ in $(seq 500); do
	hp=$(pgrep -f "^profilingd-perf --pid $TP3 " | sed -n 1p || true)
	[ -n "$hp" ] && break
	sleep 0.02
done
[ -n "$hp" ] || fail "perfetto: no profilingd-perf for pid $TP3: $(cat "$T/req3.err")"
wait_probes "$hp" || fail "perfetto: profilingd-perf $hp ended before its probes were in"
touch "$T/go"
wait "$RQ" || fail "perfetto method events through the daemon failed: $(cat "$T/req3.err")"
out=$(cat "$T/path3")
case $out in *.perfetto-trace) ;; *) fail "perfetto result named '$out'" ;; esac
ev=$(check_trace "$out" "$TP3" "") || fail "delivered perfetto trace: $ev"
[ "$ev" -ge 1 ] && [ "$ev" -le $N ] || fail "delivered trace has $ev events for $N hits"
grep -q 'str: "target_fn' "$out.txt" || fail "delivered trace has no target_fn stack"
echo "ok: through the daemon, perfetto: $out, $ev instant events"
kill "$TP3" 2> /dev/null || true
wait "$TP3" 2> /dev/null || true

# The budget through the daemon ([capture] method_budget_us = 1, a
# reload): the capture ends early and its result's note says why.
reload() { # reload: SIGHUP, and wait for its "reload done"
	local n
	n=$(grep -c "reload done" "$T/daemon.log" || true)
	kill -HUP "$DAEMON_PID"
	for _ in $(seq 500); do [ "$(grep -c "reload done" "$T/daemon.log" || true)" -gt "$n" ] && return 0; sleep 0.02; done
	fail "no reload"
}
printf '[capture]\nmethod_budget_us = 1\n' >> "$T/profilingd.conf"
reload
rm -f "$T/go"
"$TGT" $N $M "$T/go" 60 2000 > /dev/null & # paced: see 1c
TP4=$!
PIDS+=("$TP4")
"$APPS/it_request" --pid "$TP4" --type methods --duration-ms 15000 --method "$TGT:target_fn" \
	> "$T/path4" 2> "$T/req4.err" &
RQ=$!
hp=
for _ in $(seq 500); do
	hp=$(pgrep -f "^profilingd-perf --pid $TP4 " | sed -n 1p || true)
	[ -n "$hp" ] && break
	sleep 0.02
done
[ -n "$hp" ] || fail "budget: no profilingd-perf for pid $TP4: $(cat "$T/req4.err")"
tr '\0' ' ' < "/proc/$hp/cmdline" | qgrep -- "--budget-us 1 " || fail "the helper has no --budget-us 1: $(tr '\0' ' ' < "/proc/$hp/cmdline")"
wait_probes "$hp" || fail "budget: profilingd-perf $hp ended before its probes were in"
touch "$T/go"
wait "$RQ" || fail "budget: the capture was not delivered: $(cat "$T/req4.err")"
grep -q "note: method events disabled over budget: [0-9]* ns per recorded hit on average, the budget is 1 us" \
	"$T/req4.err" || fail "budget: the result's note: $(cat "$T/req4.err")"
go tool pprof -traces "$(cat "$T/path4")" 2>&1 | qgrep "over the budget of 1 us" ||
	fail "budget: the delivered profile does not say so"
kill "$TP4" 2> /dev/null || true
wait "$TP4" 2> /dev/null || true
sed -i '$d' "$T/profilingd.conf"
sed -i '$d' "$T/profilingd.conf"
reload
echo "ok: through the daemon, method_budget_us = 1: probes removed, the note says why"
# The request's own budget (Params.method_budget_us, prof_params) over the default.
rm -f "$T/go"
"$TGT" $N $M "$T/go" 60 2000 > /dev/null & # paced: see 1c
TP4=$!
PIDS+=("$TP4")
"$APPS/it_request" --pid "$TP4" --type methods --duration-ms 15000 --method "$TGT:target_fn" \
	--budget-us 2 > "$T/path4" 2> "$T/req4.err" &
RQ=$!
hp=
for _ in $(seq 500); do
	hp=$(pgrep -f "^profilingd-perf --pid $TP4 " | sed -n 1p || true)
	[ -n "$hp" ] && break
	sleep 0.02
done
[ -n "$hp" ] || fail "request budget: no profilingd-perf for pid $TP4: $(cat "$T/req4.err")"
tr '\0' ' ' < "/proc/$hp/cmdline" | qgrep -- "--budget-us 2 " || fail "the helper has no --budget-us 2"
wait_probes "$hp" || fail "request budget: profilingd-perf $hp ended before its probes were in"
touch "$T/go"
wait "$RQ" || fail "request budget: not delivered: $(cat "$T/req4.err")"
grep -q "note: method events disabled over budget: .* the budget is 2 us" "$T/req4.err" ||
	fail "request budget: the result's note: $(cat "$T/req4.err")"
kill "$TP4" 2> /dev/null || true
wait "$TP4" 2> /dev/null || true
echo "ok: the request's method_budget_us = 2 over the default: probes removed, the note says why"

# Refusals through the daemon, each with its reason in the log.
req_refused() { # req_refused WHAT EXPECTED ARGS...
	local what=$1 expect=$2
	shift 2
	! "$APPS/it_request" --pid "$SP" --type methods --duration-ms 500 "$@" > /dev/null 2> "$T/rerr" ||
		fail "$what: accepted"
	grep -q "$expect" "$T/daemon.log" || fail "$what: no '$expect' in the daemon's log"
	kill -0 "$SP" || fail "$what: the target died"
	echo "ok: daemon refuses $what"
}
req_refused "no targets" "method events need 1..8 method_targets, got 0"
many=()
for i in $(seq 20); do many+=(--method "$TGT:target_fn"); done
req_refused "a budget over 1 s" "method_budget_us must be 0..1000000" --method "$TGT:target_fn" \
	--budget-us 1000001
req_refused "20 targets" "method events need 1..8 method_targets, got 20" "${many[@]}"
req_refused "a target of neither kind" "expected /PATH:SYMBOL" --method "com.example.Target.register"
req_refused "a bad #args=TYPES" "#args=TYPES: 'q' is not one of i, u, p, s, -" \
	--method "$TGT:target_fn#args=iq"
req_refused "a JVM target in a native process" "java: method targets need a JVM" \
	--method "java:com.example.Target.register"
# A symbol that is not there fails the capture with profilingd-perf's reason.
! "$APPS/it_request" --pid "$SP" --type methods --duration-ms 500 --method "$TGT:no_such_fn" \
	> /dev/null 2> "$T/rerr" || fail "unknown symbol accepted by the daemon"
grep -q "no function named 'no_such_fn'" "$T/rerr" || fail "unknown symbol: $(cat "$T/rerr")"
kill -0 "$SP" || fail "the target died"
# An app (uid 61919, no privilege) asking for its own process may name
# only files its uid can read: the helper opens them as that uid.
out=0
setpriv --reuid=$U --regid=$U --clear-groups env PROFILINGD_SOCKET="$PROFILINGD_SOCKET" \
	sh -c 'exec "$1" --pid $$ --type methods --duration-ms 500 --method "$2:target_fn"' \
	sh "$APPS/it_request" "$T/private_target" > /dev/null 2> "$T/app.err" || out=$?
[ "$out" -ne 0 ] || fail "uid $U's method events on a file it cannot read were delivered"
grep -q "Permission denied (opened as the target's user)" "$T/app.err" ||
	fail "uid $U: $(cat "$T/app.err")"
# The same app on a file it can read: delivered to it (an empty profile:
# it_request never calls target_fn).
setpriv --reuid=$U --regid=$U --clear-groups env PROFILINGD_SOCKET="$PROFILINGD_SOCKET" \
	sh -c 'exec "$1" --pid $$ --type methods --duration-ms 500 --method "$2:main"' \
	sh "$APPS/it_request" "$APPS/it_request" > "$T/app.path" 2> "$T/app.err" ||
	fail "uid $U's method events on its own program: $(cat "$T/app.err")"
[ "$(stat -c %u "$(cat "$T/app.path")")" = $U ] || fail "the result is not uid $U's"
echo "ok: an unprivileged app: refused for a file it cannot read, served for its own program"
daemon_alive || fail "the daemon died"
stop_daemon
echo "ok: method events: exact hits, call sites, refusals"

# 4. Production controls (profctl methods): a 50 % canary over 20
# processes of one executable, stable across a restart; the kill switch.
PROFCTL=$BUILD/tools/profctl/profctl
export PROFCTL_SOCKET=$T/state/control.sock
start_daemon "[limits]" "max_sessions = 64"
CP=()
for i in $(seq 20); do
	"$TGT" 0 0 "$T/never" 300 > /dev/null &
	CP+=("$!")
	PIDS+=("$!")
done
for p in "${CP[@]}"; do
	for _ in $(seq 200); do [ "$(readlink /proc/$p/exe 2> /dev/null)" = "$(readlink -f "$TGT")" ] && break; sleep 0.01; done
done
hooked_set() { # the pids the daemon's log says config canary hooked, from line $1 on
	tail -n +"$1" "$T/daemon.log" | sed -n 's/.*method events canary v[0-9]*: pid \([0-9]*\) hooked.*/\1/p' | sort -n | tr '\n' ' '
}
from=$(($(wc -l < "$T/daemon.log") + 1))
"$PROFCTL" methods add canary --exe "$(readlink -f "$TGT")" --method "$(readlink -f "$TGT"):target_fn" \
	--canary 50 --expiry 10m > "$T/add.out" || fail "methods add: $(cat "$T/add.out")"
set1=$(hooked_set "$from")
k=$(echo $set1 | wc -w)
echo "canary 50 % of 20: $k hooked: $set1"
# Binomial(20, 0.5): outside 3..17 with probability 0.0004; a fixed hash
# of these processes, so a retry would give the same answer anyway.
[ "$k" -ge 3 ] && [ "$k" -le 17 ] || fail "canary hooked $k of 20"
"$PROFCTL" --json methods list > "$T/list.json"
grep -q "\"hooked\":$k," "$T/list.json" || fail "methods list: $(cat "$T/list.json")"
grep -q '"matched":20,' "$T/list.json" || fail "methods list does not count 20 processes: $(cat "$T/list.json")"
# Wait for every hooked process's probes (its helper's perf-event fds).
for p in $set1; do
	hp=
	for _ in $(seq 500); do hp=$(pgrep -f "^profilingd-perf --pid $p " | sed -n 1p || true); [ -n "$hp" ] && break; sleep 0.02; done
	[ -n "$hp" ] && wait_probes "$hp" || fail "no probes for hooked pid $p"
done

# The kill switch: every probe gone (no helper holds one), said in the log.
"$PROFCTL" methods disable canary > "$T/dis.out" || fail "methods disable: $(cat "$T/dis.out")"
grep -q "disabled canary: $k captures stopped" "$T/dis.out" || fail "disable: $(cat "$T/dis.out")"
grep -q "method events disabled: canary; $k captures stopped, their probes removed" "$T/daemon.log" ||
	fail "no kill-switch line in the daemon's log"
# The helpers are SIGKILLed at once; a generous bound for a loaded machine.
left=
for _ in $(seq 500); do
	left=
	for p in $set1; do pgrep -f "^profilingd-perf --pid $p " > /dev/null && left="$left $p"; done
	[ -z "$left" ] && break
	sleep 0.02
done
[ -z "$left" ] || fail "probes still held for pids$left after the kill switch"
"$PROFCTL" --json methods list | qgrep '"disabled":1' || fail "the config is not shown disabled"
for p in "${CP[@]}"; do kill -0 "$p" || fail "pid $p died under the canary or the kill switch"; done
echo "ok: kill switch: $k captures stopped, no probe left"

# A restart forgets the config; the same config hooks the same processes.
stop_daemon
start_daemon "[limits]" "max_sessions = 64"
from=$(($(wc -l < "$T/daemon.log") + 1))
"$PROFCTL" methods add canary --exe "$(readlink -f "$TGT")" --method "$(readlink -f "$TGT"):target_fn" \
	--canary 50 --expiry 10m > "$T/add.out" || fail "methods add after restart: $(cat "$T/add.out")"
set2=$(hooked_set "$from")
[ "$set1" = "$set2" ] || fail "canary not stable across a restart: '$set1' then '$set2'"
# A replacement needs a higher version; an unknown id is refused.
! "$PROFCTL" methods add canary --exe "$(readlink -f "$TGT")" --method "$(readlink -f "$TGT"):target_fn" \
	> "$T/re.out" 2>&1 || fail "same version accepted"
grep -q "needs a higher version" "$T/re.out" || fail "same version: $(cat "$T/re.out")"
! "$PROFCTL" methods disable nosuch > "$T/re.out" 2>&1 || fail "unknown id accepted"
# A process that execs the executable after the add is hooked too.
"$PROFCTL" methods add late --exe "$(readlink -f "$TGT")" --method "$(readlink -f "$TGT"):target_fn" \
	> /dev/null || fail "methods add late"
"$TGT" 0 0 "$T/never" 300 > /dev/null &
NP=$!
PIDS+=("$NP")
# (The canary config may pick it first: one capture per process.)
for _ in $(seq 500); do grep -Eq "method events (late|canary) v1: pid $NP hooked" "$T/daemon.log" && break; sleep 0.02; done
grep -Eq "method events (late|canary) v1: pid $NP hooked" "$T/daemon.log" ||
	fail "a process exec'd after the add was not hooked: $(grep -E "late|pid $NP|proc|lost" "$T/daemon.log" | tail -n 8)"
echo "ok: a process started after the add is hooked"
"$PROFCTL" methods disable all > /dev/null || fail "methods disable all"

# The config key: a reload to method_events = false stops every method
# capture (a config's and an app's own request alike) and refuses new ones.
"$PROFCTL" methods add quarter --exe "$(readlink -f "$TGT")" --method "$(readlink -f "$TGT"):target_fn" \
	--canary 25 > /dev/null || fail "methods add quarter"
# The app's own request goes to a process the quarter did not hook (one capture per process).
own=
for p in "${CP[@]}"; do
	grep -q "method events quarter v1: pid $p hooked" "$T/daemon.log" || { own=$p; break; }
done
[ -n "$own" ] || fail "the 25 % canary hooked all 20"
"$APPS/it_request" --pid "$own" --type methods --duration-ms 60000 --method "$TGT:other_fn" \
	> /dev/null 2> "$T/own.err" &
RQ2=$!
for _ in $(seq 500); do
	n=$(pgrep -fc "^profilingd-perf --pid $own .*other_fn" || true)
	[ "${n:-0}" -ge 1 ] && break
	sleep 0.02
done
q=$(grep -c "method events quarter v1: pid [0-9]* hooked" "$T/daemon.log" || true)
printf '[capture]\nmethod_events = false\n' >> "$T/profilingd.conf"
kill -HUP "$DAEMON_PID"
for _ in $(seq 500); do grep -q "method_events = false: [0-9]* method-event captures stopped" "$T/daemon.log" && break; sleep 0.02; done
grep -q "method_events = false: $((q + 1)) method-event captures stopped" "$T/daemon.log" ||
	fail "the config key did not stop $q + 1 captures: $(grep 'method_events = false' "$T/daemon.log")"
! wait "$RQ2" || fail "the app's own method capture was not stopped"
grep -q "switched off" "$T/own.err" || fail "the app was not told why: $(cat "$T/own.err")"
for _ in $(seq 500); do pgrep -f "^profilingd-perf " > /dev/null || break; sleep 0.02; done
! pgrep -f "^profilingd-perf --pid $own " > /dev/null || fail "probes left after method_events = false"
! "$PROFCTL" methods add again --exe "$(readlink -f "$TGT")" --method "$(readlink -f "$TGT"):target_fn" \
	> "$T/re.out" 2>&1 || fail "methods add accepted while switched off"
grep -q "switched off" "$T/re.out" || fail "switched off: $(cat "$T/re.out")"
echo "ok: method_events = false stopped $((q + 1)) captures and refuses new ones"
stop_daemon

# 5. A config from the system config file ([methods.ID]), loaded at start.
start_daemon "[limits]" "max_sessions = 64" "[methods.sys]" "exe = $(readlink -f "$TGT")" \
	"method = $(readlink -f "$TGT"):target_fn" "canary_percent = 100" "expiry_s = 600"
grep -Eq "method events sys v1 on .*: 21 processes, 21 in the 100 % canary, 21 hooked" "$T/daemon.log" ||
	fail "[methods.sys] not applied: $(grep 'method events sys' "$T/daemon.log" | tail -n 3)"
"$PROFCTL" methods list | qgrep "^sys " || fail "methods list does not show [methods.sys]"
echo "ok: [methods.sys] from the config hooked all 21 processes"
stop_daemon

# 6. profctl's configs are saved in the state database: a restart brings
# them back with their version and expiry time; an expired one and a
# disabled one stay gone.
start_daemon "[limits]" "max_sessions = 64"
EXE=$(readlink -f "$TGT")
"$PROFCTL" methods add kept --exe "$EXE" --method "$EXE:target_fn" --config-version 4 --canary 100 \
	--expiry 10m --budget-us 7 > "$T/add.out" || fail "methods add kept: $(cat "$T/add.out")"
"$PROFCTL" methods add brief --exe /nonexistent/brief --method "$EXE:target_fn" --expiry 1s \
	> "$T/add.out" || fail "methods add brief: $(cat "$T/add.out")"
"$PROFCTL" methods add dropped --exe /nonexistent/dropped --method "$EXE:target_fn" \
	> "$T/add.out" || fail "methods add dropped: $(cat "$T/add.out")"
"$PROFCTL" methods disable dropped > /dev/null || fail "methods disable dropped"
stop_daemon
sleep 2 # past brief's expiry
start_daemon "[limits]" "max_sessions = 64"
grep -q "method events: 1 saved config(s) restored, 1 expired ones dropped" "$T/daemon.log" ||
	fail "restore: $(grep 'saved config' "$T/daemon.log" | tail -n 3)"
"$PROFCTL" methods list > "$T/list.txt" || fail "methods list after a restart"
grep -q "^kept " "$T/list.txt" || fail "kept not listed after a restart: $(cat "$T/list.txt")"
! grep -Eq "^(brief|dropped) " "$T/list.txt" || fail "an expired or disabled config came back: $(cat "$T/list.txt")"
grep -Eq "method events kept v4 on $EXE: [0-9]+ processes, [0-9]+ in the 100 % canary, [1-9][0-9]* hooked" \
	"$T/daemon.log" || fail "the restored config hooked nothing: $(grep 'method events kept' "$T/daemon.log" | tail -n 2)"
# Its budget came back too, and its captures' helpers have it.
"$PROFCTL" --json methods list | qgrep '"id":"kept","version":4,.*"budget_us":7,' ||
	fail "kept's budget after a restart: $("$PROFCTL" --json methods list)"
hp=$(pgrep -f "^profilingd-perf --pid .*target_fn" | sed -n 1p || true)
[ -n "$hp" ] && tr '\0' ' ' < "/proc/$hp/cmdline" | qgrep -- "--budget-us 7 " ||
	fail "the restored config's helper has no --budget-us 7"
# It is the saved one (version 4): the same version is refused, a higher one replaces it.
! "$PROFCTL" methods add kept --exe "$EXE" --method "$EXE:target_fn" --config-version 4 > "$T/re.out" 2>&1 ||
	fail "version 4 accepted again after the restart"
grep -q "at version 4" "$T/re.out" || fail "restored version: $(cat "$T/re.out")"
"$PROFCTL" methods disable kept > /dev/null || fail "methods disable kept"
stop_daemon
start_daemon "[limits]" "max_sessions = 64"
! "$PROFCTL" methods list | qgrep "^kept " || fail "a disabled config came back after a restart"
stop_daemon
echo "ok: profctl configs: restored after a restart (version, expiry); expired and disabled ones not"
pass "method events: canary $k of 20, stable across a restart; kill switch; configs saved"
