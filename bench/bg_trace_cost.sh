#!/usr/bin/env bash
# bench/bg_trace_cost: the steady cost of the running background trace
# ([trace] background = on, docs/PERFETTO.md "The running background
# trace"), with the default ring (4096 KiB per CPU, or PD_BG_KB):
#   - daemon CPU: the daemon's utime+stime while the ring runs (the ring
#     has no process behind it, so this is the daemon's idle cost);
#   - kernel CPU under a sched-heavy load: bench/pingpong (two processes
#     passing a byte over pipes) with the ring recording and paused, in
#     alternating runs; the extra system time per ring event;
#   - kernel CPU "idle": /proc/stat kernel time (system+irq+softirq) over
#     windows with the ring on and paused, alternating, and the events/s
#     the ring took then, times the per-event cost from the load runs;
#   - memory: the ring's buffer_total_size_kb plus the daemon's VmRSS, and
#     how many seconds of events the ring holds at each rate (per CPU: now -
#     oldest event, once it has wrapped).
# Each of daemon CPU, kernel CPU and memory gets a summary line for both
# states, "idle" and "sched load" (pingpong), as issue #21 asks.
# Not a test: it asserts nothing. Needs root and tracefs with instances; it
# will not touch a ring that is running already (a daemon with it on).
#   usage: bench/bg_trace_cost.sh [BUILD_DIR]
set -euo pipefail
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
BUILD=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
FT=$BUILD/runtime/ftrace/profilingd-ftrace
PP=$BUILD/bench/pingpong
KB=${PD_BG_KB:-4096}
WIN=${PD_BENCH_QUICK:+3}; WIN=${WIN:-10}          # seconds per idle window
PAIRS=${PD_BENCH_QUICK:+3}; PAIRS=${PAIRS:-6}     # on/off pairs
ROUNDS=${PD_BENCH_QUICK:+100000}; ROUNDS=${ROUNDS:-300000}
[ "$(id -u)" = 0 ] || { echo "needs root (tracefs)" >&2; exit 1; }
[ -x "$FT" ] && [ -x "$PP" ] || { echo "build profilingd-ftrace and bench/pingpong first" >&2; exit 1; }
TR=
for d in /sys/kernel/tracing /sys/kernel/debug/tracing; do [ -d "$d/instances" ] && TR=$d && break; done
[ -n "$TR" ] || { echo "no tracefs with instances" >&2; exit 1; }
BG=$TR/instances/profilingd-bg
[ -d "$BG" ] && { echo "a background ring is running already ($BG): not touching it" >&2; exit 1; }
getent passwd profilingd-redact > /dev/null || { echo "the redactor's user profilingd-redact does not exist: run ./quickstart.sh" >&2; exit 1; }
T=$(mktemp -d /tmp/pd-bench.XXXXXX)
DPID=
trap '[ -n "$DPID" ] && kill $DPID 2>/dev/null; wait 2>/dev/null; "$FT" --background off 2>/dev/null; rm -rf "$T"' EXIT

printf '[trace]\nbackground = on\nbackground_buffer_kb = %s\n' "$KB" > "$T/bench.conf"
"$BUILD/service/profilingd" -f -c "$T/bench.conf" -S "$T/state" --client-socket "$T/c.sock" \
	--runtime-socket "$T/r.sock" > "$T/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 200); do grep -q 'background trace: ok' "$T/daemon.log" && break; sleep 0.05; done
grep -q 'background trace: ok background on' "$T/daemon.log" || { tail -5 "$T/daemon.log"; echo "the ring did not start" >&2; exit 1; }
HZ=$(getconf CLK_TCK)
NCPU=$(nproc)

# Another profilingd started with [trace] background off removes the ring
# (one instance for the machine): then nothing here means anything.
gone() { [ -d "$BG" ] || { echo "the ring $BG was removed (another profilingd with [trace] background off started?): no figures" >&2; exit 1; }; }
# events the ring has taken so far, all CPUs (entries + overwritten)
ring_events() { gone; cat "$BG"/per_cpu/cpu*/stats | awk '/^entries:|^overrun:/ { n += $2 } END { print n }'; }
# seconds the ring holds, the least over the CPUs that wrapped; "-" if none has
ring_held() {
	for s in "$BG"/per_cpu/cpu*/stats; do
		awk '/^overrun:/ { o = $2 } /^oldest event ts:/ { a = $4 } /^now ts:/ { n = $3 }
		     END { if (o > 0) printf "%.1f\n", n - a }' "$s"
	done | sort -n | sed -n 1p | grep . || echo -
}
kernel_ticks() { awk '/^cpu / { print $4 + $7 + $8 }' /proc/stat; }
daemon_ticks() { awk '{ print $14 + $15 }' "/proc/$DPID/stat"; }
daemon_rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$DPID/status"; }
ring() { gone; echo "$1" > "$BG/tracing_on"; }

echo "ring: $KB KiB per CPU, $(cat "$BG/buffer_total_size_kb") KiB in all ($NCPU CPUs), events: $(cat "$BG/set_event" | tr '\n' ' ')"

# The load: pingpong with the ring paused and recording, alternating.
sys_off=0 sys_on=0 ev_on=0 wall_on=0 wall_off=0 dl_on=0 dl_off=0
for i in $(seq "$PAIRS"); do
	for mode in 0 1; do
		ring "$mode"
		e0=$(ring_events) d0=$(daemon_ticks)
		line=$("$PP" "$ROUNDS")
		e1=$(ring_events) d1=$(daemon_ticks)
		s=$(sed 's/.*sys_ms=//' <<< "$line")
		w=$(sed 's/.*wall_ms=\([0-9.]*\).*/\1/' <<< "$line")
		if [ "$mode" = 1 ]; then
			sys_on=$(awk -v a="$sys_on" -v b="$s" 'BEGIN { print a + b }')
			wall_on=$(awk -v a="$wall_on" -v b="$w" 'BEGIN { print a + b }')
			ev_on=$((ev_on + e1 - e0))
			dl_on=$((dl_on + d1 - d0))
		else
			sys_off=$(awk -v a="$sys_off" -v b="$s" 'BEGIN { print a + b }')
			wall_off=$(awk -v a="$wall_off" -v b="$w" 'BEGIN { print a + b }')
			dl_off=$((dl_off + d1 - d0))
		fi
		echo "  pingpong $ROUNDS rounds, ring $([ "$mode" = 1 ] && echo on || echo paused): $line, ring events $((e1 - e0))"
	done
done
ring 1
held_load=$(ring_held)
rss_load=$(daemon_rss_kb)
read -r dlpct dlpoff <<< "$(awk -v on="$dl_on" -v off="$dl_off" -v won="$wall_on" -v woff="$wall_off" \
	-v hz="$HZ" 'BEGIN { printf "%.3f %.3f\n", won ? 100 * on / hz / (won / 1e3) : 0,
	woff ? 100 * off / hz / (woff / 1e3) : 0 }')"
read -r per_round per_event pct rate <<< "$(awk -v on="$sys_on" -v off="$sys_off" -v ev="$ev_on" \
	-v n="$((ROUNDS * PAIRS))" -v w="$wall_on" 'BEGIN {
	d = (on - off) * 1e6                      # extra system ns
	printf "%.0f %.0f %.2f %.0f\n", d / n, ev ? d / ev : 0, off ? 100 * (on - off) / off : 0, w ? ev / (w / 1e3) : 0 }')"
echo "load: system time $sys_off ms paused, $sys_on ms recording over $((ROUNDS * PAIRS)) rounds:" \
	"+$per_round ns a round, +$per_event ns a ring event (+$pct % system time); $rate events/s; the ring holds $held_load s;" \
	"daemon $dlpct % of one CPU with the ring on, $dlpoff % paused; daemon RSS $rss_load KiB"

# "Idle": whatever this machine runs, with the ring on and paused.
k_on=0 k_off=0 d_on=0 d_off=0 ev_idle=0
for i in $(seq "$PAIRS"); do
	for mode in 1 0; do
		ring "$mode"
		k0=$(kernel_ticks) d0=$(daemon_ticks) e0=$(ring_events)
		sleep "$WIN"
		k1=$(kernel_ticks) d1=$(daemon_ticks) e1=$(ring_events)
		if [ "$mode" = 1 ]; then
			k_on=$((k_on + k1 - k0)); d_on=$((d_on + d1 - d0)); ev_idle=$((ev_idle + e1 - e0))
		else
			k_off=$((k_off + k1 - k0)); d_off=$((d_off + d1 - d0))
		fi
	done
done
ring 1
sleep 1
held_idle=$(ring_held)
rss_idle=$(daemon_rss_kb)
secs=$((WIN * PAIRS))
read -r kon koff dpct dpoff evs est <<< "$(awk -v kon="$k_on" -v koff="$k_off" -v d="$d_on" -v doff="$d_off" -v ev="$ev_idle" \
	-v s="$secs" -v hz="$HZ" -v nc="$NCPU" -v pe="$per_event" 'BEGIN {
	printf "%.2f %.2f %.3f %.3f %.0f %.4f\n", 100 * kon / hz / s / nc, 100 * koff / hz / s / nc,
		100 * d / hz / s, 100 * doff / hz / s, ev / s, 100 * (ev / s) * pe / 1e9 }')"
echo "idle ($secs s each way): kernel time $kon % of all CPUs with the ring on, $koff % paused" \
	"(other users' noise included); $evs events/s x $per_event ns = $est % of one CPU;" \
	"daemon $dpct % of one CPU with the ring on, $dpoff % paused (its watchers; the ring adds no work to it);" \
	"the ring holds $held_idle s; daemon RSS $rss_idle KiB"
ring_kb=$(cat "$BG/buffer_total_size_kb")
summary "background trace: kernel time per sched event (pingpong)" "$per_event ns" - - -
summary "background trace, idle: kernel CPU at this machine's rate ($evs events/s)" "$est %" - - "< 1 %"
summary "background trace, sched load: kernel CPU, extra system time under pingpong ($rate events/s)" "$pct %" - - -
summary "background trace, idle: daemon CPU, ring on (paused: $dpoff %)" "$dpct %" - - "no more than paused"
summary "background trace, sched load: daemon CPU, ring on (paused: $dlpoff %)" "$dlpct %" - - "no more than paused"
summary "background trace, idle: memory, ring ($KB KiB per CPU) + daemon RSS" "$((ring_kb + rss_idle)) KiB" - - -
summary "background trace, sched load: memory, ring + daemon RSS" "$((ring_kb + rss_load)) KiB" - - -
summary "background trace: seconds held, idle / pingpong" "$held_idle s / $held_load s" - - -
