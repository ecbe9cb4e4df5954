#!/usr/bin/env bash
# bench/oom_v2_bench.sh: the OOM watcher's figures of issue #15, in one run.
#   1. cgroup v2 in a VM (tests/vm: Debian's kernel under qemu, TCG): usage
#      crosses 50 % of memory.max -> OOM trigger fired, p50 and max
#   2. cgroup v1 on this host: the same figure (triggers_bench.sh part 2)
#   3. daemon CPU in the VM while 100 idle processes, each in its own v2
#      cgroup with a memory.max, are watched
# TCG emulates every instruction: the VM's figures are upper bounds, how
# much so depends on the host's load (printed). Prints figures; asserts
# nothing. Needs root, qemu-system-x86, busybox-static, cpio.
#   usage: bench/oom_v2_bench.sh [BUILD_DIR]
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-$HERE/../build}" && pwd)
[ -x "$BUILD/bench/trg_bench_app" ] ||
	{ echo "no $BUILD/bench/trg_bench_app: build the trg_bench_app target first" >&2; exit 1; }
T=$(mktemp -d /tmp/pd-oomv2bench.XXXXXX)
trap 'rm -rf "$T"' EXIT

stats() { # "n p50 max" of the numbers on stdin (nearest rank)
	sort -g | awk '{ v[NR] = $1 } END { if (!NR) { print 0, "-", "-"; exit }
		printf "%d %.3f %.3f\n", NR, v[int(NR * 0.5 + 0.999999)], v[NR] }'
}

echo "oom_v2_bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, host kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== 1, 3: cgroup v2 in the VM"
PD_VM_CASES=bench PD_VM_MEM=1G PD_VM_TIMEOUT=1500 PD_BENCH_N=${PD_BENCH_N:-15} \
	bash "$HERE/../tests/vm/vm_oom_v2.sh" "$BUILD" > "$T/vm.out" 2>&1
grep -a 'vm: kernel' "$T/vm.out" | sed 's/^/  /'
awk '$1 == "VMBENCH" && $2 == "v2_fire_ms" && $3 != "none" { print $3 }' "$T/vm.out" > "$T/v2.lat"
nonev2=$(grep -c 'v2_fire_ms none' "$T/vm.out")
read -r n2 p2 m2 < <(stats < "$T/v2.lat")
idle_n=$(awk '$2 == "idle_watched" { print $3 }' "$T/vm.out")
idle_cpu=$(awk '$2 == "idle_cpu_pct" { print $3 }' "$T/vm.out")
base_cpu=$(awk '$2 == "base_cpu_pct" { print $3 }' "$T/vm.out")
echo "== 2: cgroup v1 on the host (bench/triggers_bench.sh part 2)"
PD_BENCH_PARTS=2 bash "$HERE/triggers_bench.sh" "$BUILD" > "$T/v1.out" 2>&1
grep -a 'fire - stamp after\|crossed without\|skipped' "$T/v1.out" | sed 's/^/  /'
v1=$(sed -n 's/.*fire - stamp after the crossing 256 KiB step (ms): n=\([0-9]*\) min [-0-9.]* p50 \([0-9.]*\) max \([0-9.]*\).*/n=\1 p50 \2 ms, max \3 ms/p' "$T/v1.out")

echo
echo "| figure | value | goal |"
echo "|---|---|---|"
echo "| v2 (VM, TCG): usage crosses 50 % of memory.max -> oom fire | n=$n2 p50 ${p2} ms, max ${m2} ms; $nonev2 without a fire | < 10 ms |"
echo "| v1 (host): usage crosses 50 % of the limit -> oom fire | ${v1:-not measured} | < 10 ms |"
echo "| v2 (VM, TCG): daemon CPU, $idle_n idle watched processes in their own cgroups | ${idle_cpu:-?} % of the VM's one CPU (${base_cpu:-?} % watching none) | - |"
