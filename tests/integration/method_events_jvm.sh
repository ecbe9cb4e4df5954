#!/usr/bin/env bash
# JVM method events through the real daemon (issue #19; docs/METHOD_EVENTS.md,
# "JVM targets"): the JVMTI agent injects a call at the entry of
# Target.register(Object) (runtime/jvmti/jv_methods.c, jv_inject.c) in
# apps/java/MethodEvents, whose rounds call it 300 times from siteA and 100
# from siteB among a million other calls and 100 calls of the same-named
# overload register(String, int). On each JDK present:
# - a capture armed before Target is loaded (hooked as it loads) and one
#   after (RetransformClasses) each report exactly 400 hits, siteA:siteB
#   300:100, and no overload frame; each ends at --max-hits 400;
# - after a capture, the JVM's own copy of Target (jhsdb clhsdb dumpclass,
#   the VM's class bytes) has register(Object) as javac wrote it, and the
#   result says GetBytecodes found no method still calling the hook;
# - hostile targets (an unknown class, a method Target lacks, a bad
#   descriptor, a java.lang method, 20 targets) are refused with their
#   reason and the JVM keeps running its rounds;
# - with [capture] method_budget_us = 0 the agent removes its hooks and the
#   result's note says so; the budget is per target: with two targets, one
#   called 400 times a round and one once (too few hits to be judged), only
#   the first is removed and named in the note, and the second counts the
#   next round's call; in Perfetto format (round 7) the trace has 400
#   instant events on the JVM's threads with both call sites' stacks;
# - a cancelled capture (the kill switch's path: the daemon cancels the
#   session) removes the hooks: CANCELLED, the agent's removal line, and
#   the VM's register(Object) is javac's again;
# - in a JVM started without the agent, the daemon loads it live and the
#   capture works the same; the rounds cannot wait for the hooks (no
#   debug log), so rounds run until --max-hits ends the capture, and the
#   hook itself stops at the max: exactly 400 hits, not what the rounds
#   made before the next check;
# - a class whose load straddles the install (its ClassFileLoadHook posted
#   before the hook was on, not yet listed as loaded; apps/java/LateLoad)
#   is hooked by the capture's recheck once defined: exactly 400 hits.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/jvm_lib.sh"
need_go
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
start_daemon

TGT='java:Target.register(Ljava/lang/Object;)V'
# Captures that count exact hits run with the widest budget (1 s a hit): on
# a loaded machine the first hits' GetStackTrace (cold jmethodIDs) and
# preemption inside the hook can pass the default 50 µs, and the budget
# would then end them early (seen once: 84 of 400 events).
WIDE=(--budget-us 1000000)

# reload: SIGHUP, and wait for its "reload done"
reload() {
	local n
	n=$(grep -c "reload done" "$T/daemon.log" || true)
	kill -HUP "$DAEMON_PID"
	for _ in $(seq 500); do [ "$(grep -c "reload done" "$T/daemon.log" || true)" -gt "$n" ] && return 0; sleep 0.02; done
	fail "no reload"
}

# wait_file PATH [SECONDS]
wait_file() {
	for _ in $(seq $((${2:-60} * 20))); do
		[ -e "$1" ] && return 0
		kill -0 "$JPID" 2>/dev/null || fail "the JVM exited: $(tail -n 5 "$T/$LOG.err")"
		sleep 0.05
	done
	fail "no $1 within ${2:-60}s"
}

# wait_hooks N: the agent logged its Nth install (debug=1 log on stderr).
wait_hooks() {
	for _ in $(seq 1200); do
		[ "$(grep -c 'method events: 1 target(s)' "$T/$LOG.err" || true)" -ge "$1" ] && return 0
		kill -0 "$RQ" 2>/dev/null || fail "the capture ended before its hooks were in: $(cat "$T/req.err")"
		sleep 0.05
	done
	fail "the agent did not install its hooks: $(tail -n 5 "$T/$LOG.err")"
}

# check_result FILE WHAT: 400 hits, both call sites at 3:1, no overload.
check_result() {
	local f=$1 what=$2
	go tool pprof -traces "$f" > "$T/tr.txt" 2>&1 || { cat "$T/tr.txt"; fail "$what: not a pprof"; }
	grep -q "hits=400 stacks=400 lost=0 dropped=0" "$T/tr.txt" ||
		{ head -n 30 "$T/tr.txt"; fail "$what: the result does not say hits=400 stacks=400"; }
	# -traces: a sample's labels ("key: value"), its value and leaf frame,
	# then its callers, one a line.
	awk '/^-+\+-+$/ { n=0; v=""; next }
		NF == 2 && v == "" && $1 ~ /^[0-9]+$/ { v=$1; leaf=$2; n=1; next }
		NF == 1 && v != "" && n == 1 { site=$1; n=2; sum[leaf " <- " site] += v }
		END { for (k in sum) print sum[k], k }' "$T/tr.txt" | sort > "$T/sites.txt"
	local a b
	a=$(awk '$2 == "Target.register" && $4 == "MethodEvents.siteA" { print $1 }' "$T/sites.txt")
	b=$(awk '$2 == "Target.register" && $4 == "MethodEvents.siteB" { print $1 }' "$T/sites.txt")
	[ "${a:-0}" -eq 300 ] && [ "${b:-0}" -eq 100 ] ||
		{ cat "$T/sites.txt"; head -n 40 "$T/tr.txt"; fail "$what: siteA:siteB is ${a:-0}:${b:-0}, want 300:100"; }
	[ "$(wc -l < "$T/sites.txt")" -eq 2 ] || { cat "$T/sites.txt"; fail "$what: stacks other than the two call sites"; }
	grep -q "method target: $TGT: 1 method(s) hooked, 400 hits" "$T/tr.txt" ||
		fail "$what: the target's comment is not '1 method(s) hooked, 400 hits'"
	! grep -q "arg[0-9]" "$T/tr.txt" || fail "$what: argument labels without #args"
	grep -q "hooks removed in .* ms: .*none calls the hook" "$T/tr.txt" ||
		{ grep -i hook "$T/tr.txt"; fail "$what: the result does not say the hooks were removed"; }
	echo "ok: $what: hits=400, siteA:siteB $a:$b, overload untouched, hooks removed"
}

# capture_round K WHAT [CMD...]: a capture of TGT around round K; CMD runs
# once the hooks are in, before the round starts.
capture_round() {
	local k=$1 what=$2 n
	shift 2
	n=$(grep -c 'method events: 1 target(s)' "$T/$LOG.err" || true)
	"$APPS/it_request" --pid "$JPID" --type methods --duration-ms 120000 --max-hits 400 \
		"${WIDE[@]}" --method "$TGT" > "$T/path" 2> "$T/req.err" &
	RQ=$!
	wait_hooks $((n + 1))
	[ $# -eq 0 ] || "$@"
	touch "$T/r/go$k"
	wait_file "$T/r/done$k"
	wait "$RQ" || fail "$what: the capture failed: $(cat "$T/req.err")"
	check_result "$(cat "$T/path")" "$what"
}

# register_code CLASSFILE: javap's listing of register(Object)'s code.
register_code() {
	"$jdk/bin/javap" -c -p "$1" | awk '/register\(java.lang.Object\)/ { on=1; next }
		on && /^ *$/ { on = 0; done = 1 } on && !done && /^ +[0-9]+: / { $1=""; print }'
}

# vm_register_code OUT: the same from the VM's own copy of Target, dumped
# by the serviceability agent (jhsdb clhsdb: find the class, dumpclass).
# 1 when jhsdb cannot (not installed, no ptrace).
vm_register_code() {
	local d=$T/dump a
	rm -rf "$d"
	mkdir -p "$d"
	[ -x "$jdk/bin/jhsdb" ] || return 1
	a=$(printf "class Target\nclasses\n" | timeout 120 "$jdk/bin/jhsdb" clhsdb --pid "$JPID" 2>&1 | tee "$T/jhsdb.out" |
		grep -o '^Target @0x[0-9a-f]*' | sed -n 1p | cut -d@ -f2) || true
	[ -n "$a" ] || return 1
	echo "dumpclass $a $d" | timeout 120 "$jdk/bin/jhsdb" clhsdb --pid "$JPID" > /dev/null 2>&1 || true
	[ -f "$d/Target.class" ] || return 1
	register_code "$d/Target.class" > "$1"
}

# While hooked, the VM's register(Object) starts with the hook's call:
# what shows that the check after the capture can see a hook.
JHSDB=1
check_hooked_in_vm() {
	if ! vm_register_code "$T/hooked.txt"; then
		JHSDB=0
		echo "note: $name: jhsdb cannot dump the VM's classes here: no class-bytes check: $(tail -n 3 "$T/jhsdb.out" | tr "\n" " ")"
		return 0
	fi
	head -n 2 "$T/hooked.txt" | qgrep "sipush" && head -n 2 "$T/hooked.txt" | qgrep "invokestatic.*profilingd/MethodHook.hit" ||
		{ cat "$T/hooked.txt"; fail "$name: the VM's Target.register(Object) does not call the hook while hooked"; }
	echo "ok: $name: while hooked, the VM's register(Object) starts with: $(head -n 2 "$T/hooked.txt" | tr -s ' ' | paste -sd';')"
}

# refused WHAT EXPECT TARGET...: it_request fails, saying EXPECT.
refused() {
	local what=$1 expect=$2 args=()
	shift 2
	for m in "$@"; do args+=(--method "$m"); done
	! "$APPS/it_request" --pid "$JPID" --type methods --duration-ms 5000 "${args[@]}" \
		> /dev/null 2> "$T/rerr" || fail "$what: accepted"
	# The agent's refusals come back in the result, admission's in the log.
	grep -q -- "$expect" "$T/rerr" || qgrep -- "$expect" "$T/daemon.log" ||
		fail "$what: no '$expect' in: $(cat "$T/rerr")"
	kill -0 "$JPID" || fail "$what: the JVM died"
	echo "ok: refused $what: $(tail -n 1 "$T/rerr" | cut -c1-160)"
}

for jdk in $JDKS; do
	name=$(jdk_name "$jdk")
	LOG=me-$name
	rm -rf "$T/r"
	mkdir "$T/r"
	jvm_start "$jdk" "$LOG" "-agentpath:$AGENT=socket=$RUNTIME_SOCKET,debug=1" \
		-cp "$CLASSES" MethodEvents "$T/r" 10
	wait_runtime "$JPID"
	line=$(grep "runtime up: pid $JPID " "$T/daemon.log" | sed -n 1p)
	[[ $line =~ caps\ 0x([0-9a-f]+) ]] || fail "$name: hello line: $line"
	# Target is not loaded yet: its class is hooked as it loads.
	grep -q "Target is not loaded yet" "$T/$LOG.err" && fail "$name: Target loaded before round 1"
	capture_round 1 "$name, hooked as it loads"
	grep -q "Target is not loaded yet: hooked when it loads" "$T/$LOG.err" ||
		fail "$name: the first capture did not wait for Target to load"
	# Between captures: the round runs on the original code.
	touch "$T/r/go2"
	wait_file "$T/r/done2"
	# Loaded now: RetransformClasses puts the hook in, and takes it out.
	JHSDB=1
	capture_round 3 "$name, retransformed" check_hooked_in_vm
	# After it: the VM's own class bytes have register(Object) as javac wrote it.
	if [ "$JHSDB" = 1 ]; then
		vm_register_code "$T/now.txt" || fail "$name: jhsdb dumped Target while hooked, not after"
		register_code "$CLASSES/Target.class" > "$T/orig.txt"
		[ -s "$T/orig.txt" ] || fail "$name: javap shows no register(Object) in the original"
		diff "$T/orig.txt" "$T/now.txt" > /dev/null ||
			{ diff "$T/orig.txt" "$T/now.txt"; fail "$name: the VM's Target.register(Object) is not the original after the capture"; }
		echo "ok: $name: after the capture, the VM's register(Object) is javac's again ($(wc -l < "$T/orig.txt") instructions)"
	fi
	# Hostile targets: refused with a reason, and the JVM runs on.
	refused "an unknown class" "NoSuchClass is not loaded and the system class loader cannot find it" \
		"java:NoSuchClass.register"
	refused "a method Target lacks" "class Target has no method noSuchMethod" "java:Target.noSuchMethod"
	refused "a descriptor no method has" "class Target has no method register()V" "java:Target.register()V"
	refused "a bad descriptor" "bad descriptor" "java:Target.register(Lfoo)V"
	refused "a java.lang method" "java.\*, jdk.\*, sun.\*" "java:java.lang.String.length"
	many=()
	for i in $(seq 20); do many+=("java:Target.register"); done
	refused "20 targets" "method events need 1..8 method_targets, got 20" "${many[@]}"
	# The overhead budget: with [capture] method_budget_us = 0 any time in
	# the hook is over it, so after 16 hits the agent takes its hooks out,
	# the capture ends long before its 120 s, and the result's note and
	# comments say why.
	printf '[capture]\nmethod_budget_us = 0\n' >> "$T/profilingd.conf"
	reload
	n=$(grep -c 'method events: 1 target(s)' "$T/$LOG.err" || true)
	"$APPS/it_request" --pid "$JPID" --type methods --duration-ms 120000 --method "$TGT" \
		> "$T/path" 2> "$T/req.err" &
	RQ=$!
	wait_hooks $((n + 1))
	touch "$T/r/go4"
	wait_file "$T/r/done4"
	wait "$RQ" || fail "$name: budget: the capture failed: $(cat "$T/req.err")"
	grep -qF "note: method target $TGT: over budget (" "$T/req.err" &&
		grep -q "ns a hit, budget 0 µs): removed" "$T/req.err" ||
		fail "$name: budget: the result's note: $(cat "$T/req.err")"
	go tool pprof -traces "$(cat "$T/path")" > "$T/tr.txt" 2>&1 || fail "$name: budget: not a pprof"
	grep -qF "method target $TGT: over budget (" "$T/tr.txt" ||
		fail "$name: budget: the result's comments do not say so"
	grep -q "hooks removed in .* ms: .*none calls the hook" "$T/tr.txt" ||
		fail "$name: budget: the hooks were not removed"
	echo "ok: $name: over a budget of 0 us the agent removed its hooks: $(sed -n 's/.*hits=\([0-9]*\) stacks=.*/hits=\1/p' "$T/tr.txt" | sed -n 1p)"
	# The budget is per target: TGT (400 hits a round) goes over the
	# budget of 0 us at the first check after its 16th hit and is removed;
	# Target.roundEnd (one hit a round: too few to be judged) keeps its
	# hook and counts the next round's call too. The capture ends at its
	# duration (generous: the two rounds take milliseconds).
	TGT2='java:Target.roundEnd'
	n=$(grep -c 'method events: 2 target(s)' "$T/$LOG.err" || true)
	"$APPS/it_request" --pid "$JPID" --type methods --duration-ms 30000 --method "$TGT" \
		--method "$TGT2" > "$T/path" 2> "$T/req.err" &
	RQ=$!
	for _ in $(seq 1200); do
		[ "$(grep -c 'method events: 2 target(s)' "$T/$LOG.err" || true)" -gt "$n" ] && break
		kill -0 "$RQ" 2>/dev/null || fail "$name: per-target budget: the capture ended: $(cat "$T/req.err")"
		sleep 0.05
	done
	over=$(grep -c "method events: target $TGT over budget" "$T/$LOG.err" || true)
	touch "$T/r/go5"
	wait_file "$T/r/done5"
	for _ in $(seq 1200); do
		[ "$(grep -c "method events: target $TGT over budget" "$T/$LOG.err" || true)" -gt "$over" ] && break
		kill -0 "$RQ" 2>/dev/null || fail "$name: per-target budget: the capture ended before $TGT was removed: $(cat "$T/req.err")"
		sleep 0.05
	done
	grep "method events: target $TGT over budget" "$T/$LOG.err" | tail -n 1 | qgrep ": removed, " ||
		fail "$name: per-target budget: no removal of $TGT: $(grep 'over budget' "$T/$LOG.err" | tail -n 1)"
	kill -0 "$RQ" 2>/dev/null || fail "$name: per-target budget: the capture ended with $TGT's removal"
	touch "$T/r/go6"
	wait_file "$T/r/done6"
	kill -0 "$RQ" 2>/dev/null || fail "$name: per-target budget: the capture ended before round 6 was done"
	wait "$RQ" || fail "$name: per-target budget: the capture failed: $(cat "$T/req.err")"
	grep -qF "note: method target $TGT: over budget (" "$T/req.err" ||
		fail "$name: per-target budget: the note: $(cat "$T/req.err")"
	grep -qF "$TGT2: over budget" "$T/req.err" && fail "$name: per-target budget: $TGT2 removed too: $(cat "$T/req.err")"
	go tool pprof -traces "$(cat "$T/path")" > "$T/tr.txt" 2>&1 || fail "$name: per-target budget: not a pprof"
	grep -qF "method target: $TGT2: 1 method(s) hooked, 2 hits" "$T/tr.txt" ||
		{ grep "method target" "$T/tr.txt"; fail "$name: per-target budget: $TGT2 did not count both rounds' calls"; }
	grep -qF "method target $TGT: over budget (" "$T/tr.txt" ||
		fail "$name: per-target budget: the comments do not name $TGT"
	grep -q "hooks removed in .* ms: .*none calls the hook" "$T/tr.txt" ||
		fail "$name: per-target budget: the hooks were not removed at the end"
	echo "ok: $name: per-target budget: $(grep -F "method target: $TGT:" "$T/tr.txt" | sed 's/^ *//' | cut -c1-90) removed; $TGT2 counted 2 hits over both rounds"
	sed -i '$d' "$T/profilingd.conf"
	sed -i '$d' "$T/profilingd.conf"
	reload
	# Cancelled while hooked (with the loader named this time): out again.
	n=$(grep -c 'method events: 1 target(s)' "$T/$LOG.err" || true)
	rm -f "$T/cancel"
	"$APPS/it_request" --pid "$JPID" --type methods --duration-ms 120000 --cancel-file "$T/cancel" \
		--method "$TGT@app" > /dev/null 2> "$T/req.err" &
	RQ=$!
	wait_hooks $((n + 1))
	removed=$(grep -c 'method events: hooks removed' "$T/$LOG.err" || true)
	[ "$JHSDB" = 0 ] || check_hooked_in_vm
	touch "$T/cancel"
	! wait "$RQ" || fail "$name: the cancelled capture was delivered"
	grep -q "cancelled" "$T/req.err" || fail "$name: the cancelled capture ended otherwise: $(cat "$T/req.err")"
	# The agent removes the hooks before it answers CANCELLED, but the
	# daemon tells the app at once: wait for the agent's line (bounded, no
	# time asserted).
	for _ in $(seq 1200); do
		[ "$(grep -c 'method events: hooks removed' "$T/$LOG.err" || true)" -gt "$removed" ] && break
		sleep 0.05
	done
	[ "$(grep -c 'method events: hooks removed' "$T/$LOG.err" || true)" -gt "$removed" ] ||
		fail "$name: no removal logged by the agent after the cancel"
	if [ "$JHSDB" = 1 ]; then
		vm_register_code "$T/now.txt" || fail "$name: jhsdb cannot dump Target after the cancel"
		diff "$T/orig.txt" "$T/now.txt" > /dev/null ||
			{ diff "$T/orig.txt" "$T/now.txt"; fail "$name: the VM's register(Object) is not the original after a cancel"; }
	fi
	echo "ok: $name: a cancelled capture took its hooks out ($(grep 'method events: hooks removed' "$T/$LOG.err" | tail -n 1 | sed 's/.*hooks removed //' | cut -c1-90))"
	# Round 7 in Perfetto format: an instant event per hit on its
	# thread's track, at its time, with its stack (docs/METHOD_EVENTS.md).
	n=$(grep -c 'method events: 1 target(s)' "$T/$LOG.err" || true)
	"$APPS/it_request" --pid "$JPID" --type methods --format perfetto --duration-ms 120000 "${WIDE[@]}" \
		--max-hits 400 --method "$TGT" > "$T/path" 2> "$T/req.err" &
	RQ=$!
	wait_hooks $((n + 1))
	touch "$T/r/go7"
	wait_file "$T/r/done7"
	wait "$RQ" || fail "$name: perfetto: the capture failed: $(cat "$T/req.err")"
	pt=$(cat "$T/path")
	case $pt in *.perfetto-trace) ;; *) fail "$name: perfetto: result named $pt" ;; esac
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
		< "$pt" > "$T/pt.txt" || fail "$name: perfetto: protoc cannot decode $pt"
	ev=$(grep -c "type: TYPE_INSTANT" "$T/pt.txt" || true)
	[ "$ev" -eq 400 ] || fail "$name: perfetto: $ev instant events for 400 hits"
	grep -q "str: \"Target.register\\\\nMethodEvents.siteA\\\\n" "$T/pt.txt" &&
		grep -q "str: \"Target.register\\\\nMethodEvents.siteB\\\\n" "$T/pt.txt" ||
		fail "$name: perfetto: the stacks lack a call site"
	awk -v pid="$JPID" '/^ *thread \{/ { t = 1 } t && /^ *pid: / { if ($2 != pid) bad = 1; t = 0 }
		/^ *timestamp_clock_id: / && $2 != 1 { bad = 1 } END { exit bad }' "$T/pt.txt" ||
		fail "$name: perfetto: a thread of another pid or a clock other than realtime"
	echo "ok: $name: perfetto: 400 instant events, both call sites, on pid $JPID's threads"
	# Arguments (#args; docs/METHOD_EVENTS.md, "Arguments") through the
	# daemon with [dlp] builtin = true: round 8 calls
	# register(int, String, Object) with (1, alice@example.com), (2, bob),
	# (3, alice@...), (4, bob); --max-hits 4 records exactly those: arg0 =
	# the int, arg1 = the string, the e-mail scrubbed by the redactor, no
	# arg2 (an Object). Round 9 the same in Perfetto format. A malformed
	# suffix is refused with its reason.
	TGT3='java:Target.register(ILjava/lang/String;Ljava/lang/Object;)V#args'
	refused "a bad #args suffix" "bad suffix '#arg'" "java:Target.register#arg"
	printf '[dlp]\nbuiltin = true\n' >> "$T/profilingd.conf"
	reload
	n=$(grep -c 'method events: 1 target(s)' "$T/$LOG.err" || true)
	"$APPS/it_request" --pid "$JPID" --type methods --duration-ms 120000 --max-hits 4 \
		"${WIDE[@]}" --method "$TGT3" > "$T/path" 2> "$T/req.err" &
	RQ=$!
	wait_hooks $((n + 1))
	touch "$T/r/go8"
	wait_file "$T/r/done8"
	wait "$RQ" || fail "$name: args: the capture failed: $(cat "$T/req.err")"
	go tool pprof -raw "$(cat "$T/path")" > "$T/raw.txt" 2>&1 || fail "$name: args: not a pprof"
	go tool pprof -traces "$(cat "$T/path")" > "$T/tr.txt" 2>&1 || fail "$name: args: not a pprof"
	grep -q "hits=4 stacks=4 lost=0 dropped=0" "$T/tr.txt" ||
		{ head -n 40 "$T/tr.txt"; fail "$name: args: not hits=4 stacks=4"; }
	grep -q "arguments: 4 recorded hit(s) with their arguments" "$T/tr.txt" ||
		{ grep arguments "$T/tr.txt"; fail "$name: args: the comments do not say 4 hits with arguments"; }
	# -raw: a sample's values and frames on a line, its labels on the
	# indented lines after it: one line a sample here.
	awk '/^Samples:/ { on = 1; next } /^Locations/ { on = 0 }
		on && /^ +[0-9]+ +[0-9]+: / { if (s != "") print s; s = $0; next }
		on && s != "" { s = s " " $0 } END { if (s != "") print s }' "$T/raw.txt" > "$T/samples.txt"
	[ "$(wc -l < "$T/samples.txt")" -eq 4 ] || { cat "$T/samples.txt"; fail "$name: args: not 4 samples"; }
	for k in 1 2 3 4; do
		if [ $((k % 2)) = 1 ]; then want='arg1:\[\[redacted\]\]'; else want='arg1:\[bob\]'; fi
		grep -q "arg0:\[$k\]" "$T/samples.txt" || { cat "$T/samples.txt"; fail "$name: args: no sample with arg0 $k"; }
		grep "arg0:\[$k\]" "$T/samples.txt" | qgrep "$want" ||
			{ cat "$T/samples.txt"; fail "$name: args: arg0 $k's arg1 is not $want"; }
	done
	! grep -q "alice" "$T/raw.txt" || { grep alice "$T/raw.txt"; fail "$name: args: the e-mail is not scrubbed"; }
	! grep -q "arg2" "$T/raw.txt" || fail "$name: args: an arg2 label for an Object"
	echo "ok: $name: args: 4 hits, arg0 1..4, arg1 bob and the e-mail scrubbed, no arg2"
	n=$(grep -c 'method events: 1 target(s)' "$T/$LOG.err" || true)
	"$APPS/it_request" --pid "$JPID" --type methods --format perfetto --duration-ms 120000 \
		--max-hits 4 "${WIDE[@]}" --method "$TGT3" > "$T/path" 2> "$T/req.err" &
	RQ=$!
	wait_hooks $((n + 1))
	touch "$T/r/go9"
	wait_file "$T/r/done9"
	wait "$RQ" || fail "$name: args perfetto: the capture failed: $(cat "$T/req.err")"
	protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
		< "$(cat "$T/path")" > "$T/pt.txt" || fail "$name: args perfetto: protoc cannot decode"
	ev=$(grep -c "type: TYPE_INSTANT" "$T/pt.txt" || true)
	[ "$ev" -eq 4 ] || fail "$name: args perfetto: $ev instant events for 4 hits"
	[ "$(grep -c 'name: "arg0"' "$T/pt.txt")" -eq 4 ] && [ "$(grep -c 'name: "arg1"' "$T/pt.txt")" -eq 4 ] ||
		{ grep -A1 'name: "arg' "$T/pt.txt"; fail "$name: args perfetto: not 4 arg0 and 4 arg1 annotations"; }
	[ "$(grep -c 'string_value: "\[redacted\]"' "$T/pt.txt")" -eq 2 ] &&
		[ "$(grep -c 'string_value: "bob"' "$T/pt.txt")" -eq 2 ] ||
		{ grep -A1 'name: "arg1"' "$T/pt.txt"; fail "$name: args perfetto: arg1 is not 2 x [redacted], 2 x bob"; }
	! grep -q "alice" "$T/pt.txt" || fail "$name: args perfetto: the e-mail is not scrubbed"
	! grep -q 'name: "arg2"' "$T/pt.txt" || fail "$name: args perfetto: an arg2 annotation"
	echo "ok: $name: args perfetto: 4 events with arg0 and arg1 annotations, the e-mail scrubbed"
	sed -i '$d' "$T/profilingd.conf"
	sed -i '$d' "$T/profilingd.conf"
	reload
	# Rounds 1..4 ran the whole program: 1600 calls counted by Target itself.
	read -r _ regs _ < "$T/r/done4"
	[ "$regs" -eq 1600 ] || fail "$name: Target counted $regs register(Object) calls, want 1600"
	echo "ok: $name: the JVM ran on through the refusals (4 rounds, 1600 calls)"
	read -r _ regs _ < "$T/r/done7"
	[ "$regs" -eq 2800 ] || fail "$name: Target counted $regs calls after 7 rounds, want 2800"
	# Its last round (10) done, the program ends by itself.
	touch "$T/r/go10"
	wait_file "$T/r/done10"
	wait "$JPID" || fail "$name: the JVM exited with $?: $(tail -n 5 "$T/$LOG.err")"

	# No agent at start: the daemon loads it through the attach socket.
	LOG=live-$name
	rm -rf "$T/r"
	mkdir "$T/r"
	jvm_start "$jdk" "$LOG" -cp "$CLASSES" MethodEvents "$T/r" 20
	"$APPS/it_request" --pid "$JPID" --type methods --duration-ms 120000 --max-hits 400 \
		"${WIDE[@]}" --method "$TGT" > "$T/path" 2> "$T/req.err" &
	RQ=$!
	for _ in $(seq 1200); do
		grep -q "methods capture of pid $JPID " "$T/daemon.log" && break
		kill -0 "$RQ" 2>/dev/null || fail "$name: live: the capture ended at once: $(cat "$T/req.err")"
		sleep 0.05
	done
	k=0
	while kill -0 "$RQ" 2>/dev/null && [ $k -lt 19 ]; do
		k=$((k + 1))
		touch "$T/r/go$k"
		wait_file "$T/r/done$k"
	done
	wait "$RQ" || fail "$name: live: the capture failed: $(cat "$T/req.err")"
	go tool pprof -traces "$(cat "$T/path")" > "$T/tr.txt" 2>&1 || fail "$name: live: not a pprof"
	h=$(sed -n 's/.*hits=\([0-9]*\) stacks=.*/\1/p' "$T/tr.txt" | sed -n 1p)
	# The hook stops at --max-hits itself: exactly 400, however many
	# rounds ran before the check ended the capture (it overshot to 800
	# when only the 100 ms check stopped it).
	[ "${h:-0}" -eq 400 ] && grep -q "hits=400 stacks=400 " "$T/tr.txt" ||
		{ head -n 30 "$T/tr.txt"; fail "$name: live: hits=${h:-none} after $k rounds, want exactly 400"; }
	grep -q "max hits: 400 reached; later hits were not recorded" "$T/tr.txt" ||
		fail "$name: live: the comments do not say the max was reached"
	grep -q "MethodEvents.siteA" "$T/tr.txt" && grep -q "MethodEvents.siteB" "$T/tr.txt" ||
		fail "$name: live: the call sites are not in the stacks"
	grep -q "hooks removed in .* ms: .*none calls the hook" "$T/tr.txt" || fail "$name: live: hooks not removed"
	kill -0 "$JPID" || fail "$name: live: the JVM died"
	kill "$JPID"
	wait "$JPID" 2>/dev/null || true
	echo "ok: $name: agent loaded live by the daemon: hits=$h in $k rounds, both call sites, hooks removed"

	# A class whose load straddles the hooks' install (apps/java/LateLoad):
	# its ClassFileLoadHook was posted before the hook was on, and it was
	# no loaded class yet when the install listed them. Once defined, the
	# capture's recheck must find and hook it: exactly 400 hits.
	LOG=late-$name
	rm -rf "$T/r"
	mkdir "$T/r"
	jvm_start "$jdk" "$LOG" "-agentpath:$AGENT=socket=$RUNTIME_SOCKET,debug=1" \
		-cp "$CLASSES" LateLoad "$T/r"
	wait_runtime "$JPID"
	wait_file "$T/r/waiting"
	"$APPS/it_request" --pid "$JPID" --type methods --duration-ms 40000 --max-hits 400 \
		"${WIDE[@]}" --method 'java:LateTarget.hit(I)V' > "$T/path" 2> "$T/req.err" &
	RQ=$!
	wait_hooks 1
	grep -q "LateTarget is not loaded yet" "$T/$LOG.err" ||
		fail "$name: late: LateTarget was not pending at the install: $(tail -n 3 "$T/$LOG.err")"
	touch "$T/r/open"
	wait_file "$T/r/defined"
	wait "$RQ" || fail "$name: late: the capture failed: $(cat "$T/req.err")"
	touch "$T/r/stop"
	go tool pprof -traces "$(cat "$T/path")" > "$T/tr.txt" 2>&1 || fail "$name: late: not a pprof"
	grep -q "hits=400 stacks=400 " "$T/tr.txt" ||
		{ head -n 12 "$T/tr.txt"; fail "$name: late: a class defined during the install was not hooked"; }
	grep -q "class(es) of a target with nothing hooked were loaded at tick" "$T/$LOG.err" ||
		fail "$name: late: the agent's recheck did not log"
	wait "$JPID" || fail "$name: late: the JVM exited with $?: $(tail -n 5 "$T/$LOG.err")"
	echo "ok: $name: a class defined across the install was hooked by the recheck: hits=400"
done
pass "JVM method events"
