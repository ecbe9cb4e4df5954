#!/usr/bin/env bash
# Forged kernel packets (issue 14, item 2). An attacker app, as a user of
# its own, plays its runtime and writes into its system trace ftrace
# bundles with no trusted sequence id and with an undeclared one: a fork
# by itself of every pid in /proc, and sched_switch/rename/exec/exit/waking
# events and a process_tree naming a victim process of another user that
# runs with a distinctive name throughout. The delivered trace must hold
# nothing of the victim (its name, in the raw bytes and decoded, or its
# pid), no foreign task's name at all, and still the attacker's own
# slices and its own sched data from the kernel.
. "$(dirname "$0")/lib.sh"
command -v protoc > /dev/null || skip "protoc (protobuf-compiler) is not installed"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

ATT=$(make_user fkatt)
VIC=$(make_user fkvic)

# The victim: a shell under a distinctive name that runs and sleeps in
# turn, so the kernel records its switches during the capture.
VNAME=pdvictim$$
VNAME=${VNAME:0:15}
mkdir -m 755 "$T/v"
cp "$(command -v dash)" "$T/v/$VNAME"
chmod 755 "$T/v/$VNAME"
as_uid "$VIC" "$T/v/$VNAME" -c \
	'while :; do i=0; while [ $i -lt 3000 ]; do i=$((i+1)); done; sleep 0.02; done' \
	> /dev/null 2>&1 &
VPID=
for _ in $(seq 100); do
	VPID=$(pgrep -u "$VIC" -x "$VNAME" | sed -n 1p) && [ -n "$VPID" ] && break
	sleep 0.05
done
[ -n "$VPID" ] || fail "the victim $VNAME did not start"

start_daemon
out=$(as_uid "$ATT" env PROFILING_NO_AGENT=1 "$HOSTILE/hostile_forged_kernel" \
	"$RUNTIME_SOCKET" "$VPID" "$VNAME" 2> "$T/att.err") || {
	cat "$T/att.err"; fail "the attacker's own system trace failed"; }
cat "$T/att.err"
APID=$(sed -n 's/.*: pid \([0-9]*\) forged.*/\1/p' "$T/att.err")
[ -n "$APID" ] || fail "the attacker did not say its pid"
[ -f "$out" ] || fail "no result file at '$out'"

protoc --decode=perfetto.protos.Trace --proto_path="$SRC/proto" perfetto_trace.proto \
	< "$out" > "$T/trace.txt" || fail "protoc cannot decode the delivered trace"
echo "delivered: $(stat -c %s "$out") bytes, $(grep -c '^packet {' "$T/trace.txt") packets"

# Task names in sched data: only the attacker's own may be left.
grep -oE '^ *(prev_comm|next_comm|comm|child_comm|parent_comm|newcomm|oldcomm|filename|name|cmdline|thread_name|process_name): "[^"]+"' \
	"$T/trace.txt" | sed 's/^ *//' > "$T/names.txt" || true
grep -vE ': "(hostile_forged_|hostile-app|own-slice-[0-9]+)"$' "$T/names.txt" > "$T/foreign.txt" || true
nforeign=$(wc -l < "$T/foreign.txt")
nvictim=$(grep -ac "$VNAME" "$out" || true)
npid=$(grep -cE "^ *(pid|prev_pid|next_pid|child_pid|parent_pid|tgid|tid|old_pid|ppid): $VPID\$" \
	"$T/trace.txt" || true)
echo "foreign named fields: $nforeign; lines with the victim's name in the raw bytes: $nvictim; fields with its pid $VPID: $npid"
if [ "$nforeign" -gt 0 ] || [ "$nvictim" -gt 0 ] || [ "$npid" -gt 0 ]; then
	sort "$T/foreign.txt" | uniq -c | sort -rn | sed -n 1,5p
	fail "forged kernel packets widened the app: $nforeign foreign named fields, victim name $nvictim times, victim pid $npid times"
fi

# The friendly path: the attacker's own slices, and its own sched data
# from the kernel's stream, are still there.
nslices=$(grep -c 'name: "own-slice-' "$T/trace.txt" || true)
[ "$nslices" -eq 20 ] || fail "want the attacker's 20 own slices, got $nslices"
nsched=$(grep -cE "^ +(next|prev)_pid: $APID\$" "$T/trace.txt" || true)
if [ "$nsched" -eq 0 ]; then
	grep -q "no kernel sched data" "$T/daemon.log" &&
		skip "tracefs not usable here: $(grep 'no kernel sched data' "$T/daemon.log" | tail -1)"
	fail "no sched events of the attacker's own pid $APID from the kernel"
fi
echo "attacker's own: $nslices slices, $nsched sched_switch sides"

# The project's own trace reader sees the attacker's slices, nothing else.
RID=${out##*_}
RID=${RID%%.*}
PROFCTL_SOCKET=$T/state/control.sock "$BUILD/tools/profctl/profctl" collapsed "$RID" \
	> "$T/collapsed.txt" 2> "$T/profctl.err" || {
	cat "$T/profctl.err"; fail "profctl cannot read result $RID"; }
grep -q 'own-slice-' "$T/collapsed.txt" || fail "profctl collapsed $RID lacks the attacker's slices"
grep -aq "$VNAME" "$T/collapsed.txt" && fail "profctl collapsed $RID names the victim"
echo "profctl collapsed $RID: $(wc -l < "$T/collapsed.txt") stacks, none of the victim's"
stop_daemon
pass "forged kernel packets from the runtime are ignored; the app's own data stays"
