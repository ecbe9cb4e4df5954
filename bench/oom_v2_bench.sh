#!/usr/bin/env bash
# bench/oom_v2_bench.sh: the OOM watcher's figures of issue #15, in one run.
#   1. cgroup v2 in a VM (tests/vm: Debian's kernel under qemu, TCG): usage
#      crosses 50 % of memory.max -> OOM trigger fired, p50 and max; the
#      VM's first crossing and a freshly started daemon's first crossing
#      apart from the steady state (init.sh's case_bench says why)
#   2. cgroup v1 on this host: the same figure (triggers_bench.sh part 2)
#   3. daemon CPU in the VM watching none, then 100 idle processes each in
#      its own v2 cgroup with a memory.max
# TCG emulates every instruction: the VM's figures are upper bounds, how
# much so depends on the host's load (printed, with the CPU qemu got).
# Prints figures and rewrites bench/RESULTS-oom-v2.md (PD_BENCH_RESULTS: another
# file, "-" none); asserts nothing. Follows run_all.sh's convention
# (PD_BENCH_QUICK, PD_BENCH_SUMMARY). Needs root, qemu-system-x86,
# busybox-static, cpio.
#   usage: bench/oom_v2_bench.sh [BUILD_DIR]
#   PD_BENCH_N: crossings per daemon (quick 8, else 15)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-$HERE/../build}" && pwd)
[ -x "$BUILD/bench/trg_bench_app" ] ||
	{ echo "no $BUILD/bench/trg_bench_app: build the trg_bench_app target first" >&2; exit 1; }
T=$(mktemp -d /tmp/pd-oomv2bench.XXXXXX)
trap 'rm -rf "$T"' EXIT
N=${PD_BENCH_N:-$([ -n "${PD_BENCH_QUICK:-}" ] && echo 8 || echo 15)}
RESULTS=${PD_BENCH_RESULTS:-$HERE/RESULTS-oom-v2.md}
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }

stats() { # "n p50 max" of the numbers on stdin (nearest rank)
	sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print 0, "-", "-"; exit }
		printf "%d %.1f %.1f\n", NR, v[int(NR * 0.5 + 0.999999)], v[NR] }'
}
# col K FILTER: column K of the v2_cross lines FILTER (an awk condition) selects
col() { awk -v k="$1" "\$1 == \"VMBENCH\" && \$2 == \"v2_cross\" && ($2) && \$k != \"none\" { print \$k }" "$T/vm.out"; }

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load0=$(cut -d' ' -f1-3 /proc/loadavg)
machine="$(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), host kernel $(uname -r)"
echo "oom_v2_bench: $started, $machine, load $load0"
echo "== 1, 3: cgroup v2 in the VM ($N crossings under each of two daemons, then 100 idle processes)"
# qemu's CPU time over the wall time: how much of a host core the VM got.
s0=$(date +%s.%N)
c0=$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat)
PD_VM_CASES=bench PD_VM_MEM=1G PD_VM_TIMEOUT=${PD_VM_TIMEOUT:-500} PD_BENCH_N=$N \
	bash "$HERE/../tests/vm/vm_oom_v2.sh" "$BUILD" > "$T/vm.out" 2>&1
vmrc=$?
c1=$(awk '{ print $14 + $15 + $16 + $17 }' /proc/$$/stat)
s1=$(date +%s.%N)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
vmcpu=$(awk -v a="$c0" -v b="$c1" -v s="$s0" -v e="$s1" -v hz="$(getconf CLK_TCK)" \
	'BEGIN { printf "%.0f s of CPU in %.0f s (%.0f %% of a core)", (b - a) / hz, e - s, (b - a) / hz / (e - s) * 100 }')
if [ "$vmrc" -ne 0 ]; then
	tail -n 30 "$T/vm.out"
	grep -q '^skipped' "$T/vm.out" && exit 77
	echo "the VM did not finish (exit $vmrc)"
	exit 1
fi
vmkernel=$(sed -n 's/^vm: kernel \([^,]*\),.*/\1/p' "$T/vm.out" | head -n 1)
echo "  VM: kernel $vmkernel, 1 vCPU, 1 GiB; the VM run took $vmcpu; load $load0 -> $load1"
grep -a '^VMBENCH v2_cross\|^oom-swarm' "$T/vm.out" | sed 's/^/  /'

read -r ns ps ms < <(col 5 '$4 > 1' | stats)          # steady: fire - after
read -r _ pb mb < <(awk '$1 == "VMBENCH" && $2 == "v2_cross" && $4 > 1 && $5 != "none" { print $5 + $7 }' "$T/vm.out" | stats) # fire - before
read -r _ pw mw < <(col 6 '$4 > 1' | stats)          # steady: warning - after
nonev2=$(awk '$1 == "VMBENCH" && $2 == "v2_cross" && $5 == "none"' "$T/vm.out" | wc -l)
first() { # RUN: "fire ms (warning ms)" of that daemon's first crossing
	awk -v r="$1" '$1 == "VMBENCH" && $2 == "v2_cross" && $3 == r && $4 == 1 {
		printf "%s ms (warning %s ms)", $5, $6 }' "$T/vm.out"
}
f1=$(first 1) f2=$(first 2)
idle_n=$(awk '$2 == "idle_watched" { print $3 }' "$T/vm.out")
idle_v2=$(awk '$2 == "idle_v2" { print $3 }' "$T/vm.out")
idle_rss=$(awk '$2 == "idle_rss" { print $3 }' "$T/vm.out")
idle_s=$(awk '$2 == "idle_start_s" { print $3 }' "$T/vm.out")
idle_cpu=$(awk '$2 == "idle_cpu_pct" { print $3 }' "$T/vm.out")
base_cpu=$(awk '$2 == "base_cpu_pct" { print $3 }' "$T/vm.out")

echo "== 2: cgroup v1 on the host (bench/triggers_bench.sh part 2)"
PD_BENCH_PARTS=2 PD_BENCH_SUMMARY= bash "$HERE/triggers_bench.sh" "$BUILD" > "$T/v1.out" 2>&1
grep -a 'fire - stamp\|crossed without\|skipped' "$T/v1.out" | sed 's/^/  /'
read -r v1n v1p v1m < <(sed -n 's/.*fire - stamp after the crossing 256 KiB step (ms): n=\([0-9]*\) min [-0-9.]* p50 \([-0-9.]*\) max \([-0-9.]*\).*/\1 \2 \3/p' "$T/v1.out")
read -r v1pb v1mb < <(sed -n 's/.*fire - stamp before that step (ms): p50 \([-0-9.]*\) max \([-0-9.]*\).*/\1 \2/p' "$T/v1.out")

v2row="n=$ns: p50 $ps ms, max $ms ms (from the step's start: p50 $pb, max $mb); watcher's warning p50 $pw, max $mw ms; $nonev2 crossings without a fire"
v1row=$([ -n "${v1n:-}" ] && echo "n=$v1n: p50 $v1p ms, max $v1m ms (from the step's start: p50 ${v1pb:-?}, max ${v1mb:-?})" || echo "not measured (see above)")
cpurow="${idle_cpu:-?} % of the VM's CPU with ${idle_n:-?} watched (${idle_v2:-?} by their v2 cgroup, ${idle_rss:-?} by RSS; all registered in ${idle_s:-?} s); ${base_cpu:-?} % watching none"
table() {
	echo "| figure | value | goal |"
	echo "|---|---|---|"
	echo "| v2 (VM, TCG), steady state (each daemon's crossings after its first): usage crosses 50 % of memory.max -> oom fire | $v2row | < 10 ms |"
	echo "| v2 (VM, TCG), the VM's first crossing (code not yet translated by qemu, daemon fresh) | ${f1:-?} | - |"
	echo "| v2 (VM, TCG), a second, fresh daemon's first crossing (code translated, daemon fresh) | ${f2:-?} | - |"
	echo "| v1 (host, native): usage crosses 50 % of the limit -> oom fire | $v1row | < 10 ms |"
	echo "| v2 (VM, TCG): daemon CPU, 100 idle processes each in its own cgroup with a memory.max | $cpurow | - |"
}
echo
table

summary "oom_v2: usage crosses 50 % of memory.max -> oom fire, v2 in a VM under TCG, steady p50 (n=$ns; v1 native on the host)" \
	"$ps ms" "v1 (host)" "${v1p:-not measured} ms" "< 10 ms"
summary "oom_v2: the same, steady max (v1: its max)" "$ms ms" "v1 (host)" "${v1m:-not measured} ms" "< 10 ms"
summary "oom_v2: the same, the VM's first crossing (qemu translating cold code)" "${f1%% (*}" "-" "-" "-"
summary "oom_v2: daemon CPU in the VM (TCG), ${idle_n:-?} idle processes in their own v2 cgroups (peer: watching none)" \
	"${idle_cpu:-?} %" "none watched" "${base_cpu:-?} %" "-"

[ "$RESULTS" = - ] && exit 0
{
	echo "# OOM watcher on cgroup v2: figures (bench/oom_v2_bench.sh)"
	echo
	echo "Written by \`bench/oom_v2_bench.sh\` (issue #15's benchmark) on $started:"
	echo "$machine; host load $load0 at the start, $load1 after the VM (other"
	echo "engineers' builds share the machine). The v2 figures come from a VM:"
	echo "Debian's $vmkernel under qemu with TCG (every instruction emulated, 1 vCPU,"
	echo "1 GiB), which took $vmcpu: they are upper bounds whose"
	echo "size depends on the host's load. The v1 figure is native."
	echo
	table
	echo
	cat <<'EOF'
How each is taken: `trg_bench_app oom CGDIR` commits 256 KiB a
millisecond and stamps the step that crossed the line (CLOCK_REALTIME,
before and after the step); the figure is the daemon log's "oom trigger ...
fired" stamp (ms) minus the stamp after the step, so it includes admission
and the session row, not only the watcher; "warning" is the watcher's own
"OOM warning" line. A figure below 0 means the daemon saw the crossing while
the app, sharing the VM's one CPU, had not yet taken its stamp. On v2 the
crossing is seen by the memory.current read, whose interval shrinks with
the distance to the line and the growth since the last read (5 ms near it).

First crossings: init.sh's case_bench runs the crossings under one daemon,
then under a second daemon started afresh (a new process with a new state
directory and database). The VM's first crossing runs daemon, kernel and
library code qemu has not translated yet; the second daemon's first runs
the same code already translated (qemu keeps translations per guest
physical page, and the binaries' pages stay in the page cache) with the
daemon's own state as cold as the first's. When only the VM's first is
slow, the cost is qemu's translation, not ours.

Idle processes: one `trg_bench_app oom-swarm` forks the 100 (no exec and
dynamic link each, tens of ms under TCG), each moves into its own cgroup
and takes one of 4 uids: the daemon takes at most 64 client connections
(max_clients_per_uid) and 32 v2 cgroups (MEM_MAX_CG_UID) per uid, and the
earlier bench, 100 processes of root, had the rest refused (they exited)
or watched by RSS, and waited 10 minutes for registrations that could
never come. The CPU share is the daemon's utime+stime over 20 s.

The first crossings' daemon log, from the watcher's warning to the fire
(VMLOG run line):

```
EOF
	grep -a '^VMLOG' "$T/vm.out" | cut -c1-160
	echo '```'
} > "$T/results.md"
cp "$T/results.md" "$RESULTS"
echo "(written to $RESULTS)"
