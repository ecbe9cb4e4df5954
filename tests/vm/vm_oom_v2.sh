#!/usr/bin/env bash
# OOM capture before the kill on a real cgroup v2 memory controller: the
# build's daemon and tests/integration/apps/oom_app in a VM running Debian's
# own cloud kernel under qemu (TCG: no KVM needed), with an initramfs made here
# from busybox-static, the binaries and the shared libraries ldd lists.
# tests/vm/init.sh runs the cases inside and prints "VMCASE name PASS|FAIL|
# SKIP why" lines on the serial console; this script checks them.
#
# usage: vm_oom_v2.sh BUILD_DIR [SRC_BUILD_DIR]
#   SRC_BUILD_DIR: take the daemon and apps from another build (e.g. one of
#   the code before a change) while the kernel cache stays in BUILD_DIR.
# PD_VM_CASES overrides the cases of the first VM (default below), and
# then no second VM runs; PD_VM_MEM its memory (768M), PD_VM_TIMEOUT the
# seconds it may take (500). PD_VM_JDK is the JDK whose jlink makes the jvm
# case's runtime (default java-17-openjdk-amd64; one without jlink, or an
# empty value, skips that case and says so). PD_VM_ICOUNT, when set, is
# qemu's -icount option (bench/oom_v2_bench.sh: guest time counted in
# instructions, so that its figures do not depend on the host's load).
set -euo pipefail

BUILD=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
APPS=$(cd "${2:-$BUILD}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

for t in qemu-system-x86_64 cpio dpkg-deb apt-get gzip; do
	command -v "$t" >/dev/null 2>&1 || skip "$t is not installed (quickstart.sh installs qemu-system-x86, cpio)"
done
BUSYBOX=/bin/busybox
[ -x "$BUSYBOX" ] && ! ldd "$BUSYBOX" >/dev/null 2>&1 ||
	skip "no static $BUSYBOX (package busybox-static)"
for b in service/profilingd redact/profilingd-redact tools/profctl/profctl tests/integration/apps/oom_app; do
	[ -x "$APPS/$b" ] || fail "$APPS/$b is not built"
done

# The kernel: Debian's linux-image-cloud-amd64, downloaded once into the
# build dir and extracted, never installed.
KDIR=$BUILD/tests/vm/kernel
mkdir -p "$KDIR"
KERNEL=$(ls "$KDIR"/x/boot/vmlinuz-* 2>/dev/null | sed -n 1p || true)
if [ -z "$KERNEL" ]; then
	pkg=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
		awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
	[ -n "$pkg" ] || skip "apt knows no linux-image-cloud-amd64 (run apt-get update)"
	(cd "$KDIR" && apt-get download "$pkg" >/dev/null 2>&1) ||
		skip "cannot download $pkg (no network or no apt source)"
	dpkg-deb -x "$KDIR"/"$pkg"_*.deb "$KDIR/x" || fail "cannot extract $pkg"
	rm -f "$KDIR"/"$pkg"_*.deb
	KERNEL=$(ls "$KDIR"/x/boot/vmlinuz-* | sed -n 1p)
fi
echo "kernel: $KERNEL"

# jvm_runtime: $JRT, a Java runtime made by jlink from $JDK's java.base
# (HotSpot's attach listener and GC.heap_dump live in libjvm: no other
# module is needed), about 35 MiB instead of the JDK's 200+. Made once per
# build dir and again when the JDK changes (its jlink, modules file and
# release file make the stamp). Sets JVM_SKIP when it cannot.
JDK=${PD_VM_JDK-/usr/lib/jvm/java-17-openjdk-amd64}
JRT=$BUILD/tests/vm/jre
jvm_runtime() {
	if [ ! -x "$JDK/bin/jlink" ] || [ ! -f "$JDK/lib/modules" ]; then
		JVM_SKIP="no jlink in ${JDK:-(PD_VM_JDK is empty)} (package openjdk-17-jdk-headless)"
		return 1
	fi
	local opts="--add-modules java.base --strip-debug --no-man-pages --no-header-files --compress=2"
	local stamp
	stamp="$(readlink -f "$JDK/bin/jlink") $(stat -c '%s %Y' "$JDK/lib/modules") $(md5sum < "$JDK/release") $opts"
	if [ -x "$JRT/bin/java" ] && [ "$(cat "$JRT.stamp" 2>/dev/null)" = "$stamp" ]; then
		return 0
	fi
	rm -rf "$JRT" "$JRT.stamp"
	# shellcheck disable=SC2086 # opts is a list of words
	if ! "$JDK/bin/jlink" $opts --output "$JRT" > "$BUILD/tests/vm/jlink.log" 2>&1; then
		rm -rf "$JRT"
		JVM_SKIP="jlink failed (see $BUILD/tests/vm/jlink.log)"
		return 1
	fi
	echo "$stamp" > "$JRT.stamp"
}

T=$(mktemp -d /tmp/pd-vm.XXXXXX)
trap 'rm -rf "$T"' EXIT

# The initramfs: busybox, the binaries at their build-tree paths (their
# RUNPATH points there), every library ldd names, and the loader.
R=$T/root
mkdir -p "$R"/{bin,etc,proc,sys,dev,tmp,lib64}
cp "$BUSYBOX" "$R/bin/busybox"
bins=("$APPS/service/profilingd" "$APPS/redact/profilingd-redact" "$APPS/tools/profctl/profctl"
	"$APPS/tests/integration/apps/oom_app")
# bench/oom_v2_bench.sh's app, when built: the "bench" case.
[ -x "$APPS/bench/trg_bench_app" ] && bins+=("$APPS/bench/trg_bench_app")
for b in "${bins[@]}"; do
	mkdir -p "$R$(dirname "$b")"
	cp "$b" "$R$b"
done
# The jvm case: a Java runtime cut down by jlink (jvm_runtime), the JVMTI
# agent, the attach helper, the test program and the HPROF checker. Without
# one of them the case says why it is skipped.
JVM_SKIP=
# Only a run with the jvm case carries the runtime (the bench's does not).
case " ${PD_VM_CASES:-jvm} " in
*" jvm "*) jvm_runtime || true ;;
*) JVM_SKIP="the jvm case is not among PD_VM_CASES" ;;
esac
if [ -z "$JVM_SKIP" ]; then
	for f in runtime/jvmti/libprofiling_jvmti.so runtime/jvm/profilingd-jattach \
		tests/integration/check/hprof_check tests/integration/apps/java/OomGrow.class; do
		[ -f "$APPS/$f" ] || { JVM_SKIP="$APPS/$f is not built"; break; }
	done
fi
if [ -z "$JVM_SKIP" ]; then
	jbins=("$APPS/runtime/jvmti/libprofiling_jvmti.so" "$APPS/runtime/jvm/profilingd-jattach"
		"$APPS/tests/integration/check/hprof_check")
	bins+=("${jbins[@]}")
	for b in "${jbins[@]}" "$APPS"/tests/integration/apps/java/OomGrow*.class; do
		mkdir -p "$R$(dirname "$b")"
		cp "$b" "$R$b"
	done
	mkdir -p "$R$JRT"
	cp -a "$JRT/." "$R$JRT/"
	# Its libraries from the host; its own (libjli, libjava, ...) came with it.
	jlibs=$(ldd "$JRT/bin/java" "$JRT"/lib/*.so "$JRT"/lib/server/*.so 2>/dev/null |
		awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | grep -v "^$JRT/" | sort -u)
	echo "jvm: $(du -sm "$JRT" | cut -f1) MiB runtime from $JDK"
fi
# libgcc_s is dlopen'd (unwinding, thread cancellation), not listed by ldd.
libs=$(ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $1 !~ /:$/ { print $1 }' | sort -u)
for l in $libs ${jlibs:-} $(ls /lib/x86_64-linux-gnu/libgcc_s.so.1 2>/dev/null); do
	mkdir -p "$R$(dirname "$l")"
	cp -L "$l" "$R$l"
done
# The JVM's user (its /tmp holds the attach socket and the dump).
chmod 1777 "$R/tmp"
echo "root:x:0:0:root:/root:/bin/sh" > "$R/etc/passwd"
echo "pdjava:x:61023:61023::/tmp:/bin/sh" >> "$R/etc/passwd"
echo "nobody:x:65534:65534:nobody:/nonexistent:/bin/false" >> "$R/etc/passwd"
# The redactor's own user, as the package and the quick start create it.
echo "profilingd-redact:x:998:998::/nonexistent:/usr/sbin/nologin" >> "$R/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\nprofilingd-redact:x:998:\npdjava:x:61023:\n' > "$R/etc/group"
cp "$HERE/init.sh" "$R/init"
chmod 755 "$R/init"

# run_vm MEM CASES: boot, run CASES, print the console; the console is kept in $T/console.
run_vm() {
	echo "BUILD=$APPS" > "$R/vm.env"
	echo "CASES=\"$2\"" >> "$R/vm.env"
	echo "BENCH_N=${PD_BENCH_N:-9}" >> "$R/vm.env"
	echo "JRT=$JRT" >> "$R/vm.env"
	echo "JVM_SKIP=\"$JVM_SKIP\"" >> "$R/vm.env"
	(cd "$R" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$T/initrd.gz"
	local rc=0
	# -no-reboot with panic=-1: a kernel panic ends qemu instead of looping.
	timeout "${PD_VM_TIMEOUT:-500}" qemu-system-x86_64 -accel tcg ${PD_VM_ICOUNT:+-icount "$PD_VM_ICOUNT"} \
		-m "$1" -smp 1 -nographic -no-reboot \
		-kernel "$KERNEL" -initrd "$T/initrd.gz" \
		-append "console=ttyS0 panic=-1 quiet loglevel=3" < /dev/null > "$T/console" 2>&1 || rc=$?
	# The console minus the firmware's escape codes; kept for a look afterwards.
	tr -d '\r' < "$T/console" | sed 's/\x1b\[[0-9;?]*[a-zA-Z]//g' > "$T/console.txt"
	cp "$T/console.txt" "$BUILD/tests/vm/console-$1.txt"
	sed -n '/vm: kernel/,$p' "$T/console.txt" | sed 's/^.*vm: kernel/vm: kernel/'
	[ "$rc" -eq 0 ] || echo "qemu exited with $rc"
	grep -q VMDONE "$T/console" || fail "the VM did not finish its cases"
}

CASES=${PD_VM_CASES:-"status max parent high psi oomd jvm"}
run_vm "${PD_VM_MEM:-768M}" "$CASES"
cp "$T/console" "$T/console.1"
if [ -z "${PD_VM_CASES:-}" ]; then
	# The Java runtime would only take 34 MiB of the small VM's RAM.
	rm -rf "${R:?}$JRT"
	run_vm 256M "global avail kmsg"
	cat "$T/console" >> "$T/console.1"
fi

failed=0
passed=
for c in $CASES $([ -z "${PD_VM_CASES:-}" ] && echo global avail kmsg); do
	line=$(tr -d '\r' < "$T/console.1" | grep "^VMCASE $c " | tail -n 1 || true)
	case "$line" in
	"VMCASE $c PASS"*) passed="$passed $c" ;;
	"VMCASE $c SKIP"*) echo "skipped: case $c: ${line#VMCASE $c SKIP }" ;;
	*) echo "FAIL: case $c: ${line:-no result}"; failed=1 ;;
	esac
done
[ "$failed" -eq 0 ] || exit 1
echo "PASS: OOM on cgroup v2 (Debian kernel $(basename "$KERNEL"), TCG):$passed"
