#!/usr/bin/env bash
# Another user's file where a JVM's attach socket goes. HotSpot names its
# socket /tmp/.java_pid<pid>; a VM that died by SIGKILL leaves it behind,
# and /tmp is sticky, so a later VM of another user with that pid could
# neither remove nor replace it: its attach listener never came up and
# every capture of it timed out (seen in CI: it_jvm_heapgraph, after
# it_jvm_mem_oom's OOM-killed VMs left theirs and pids came round). An
# attacker can plant one on purpose.
#  1. stale: the attacker binds the name and leaves (what a dead VM
#     leaves), and creates the trigger file /tmp/.attach_pid<pid> 0600
#     (the helper, as the VM's user, could not create its own over it:
#     "Permission denied"). The victim's heap dump must succeed; the
#     helper says what it removed, and the socket is the VM's own after.
#  2. live: the attacker listens on the name. The dump fails, and says
#     that another user's file holds the name; the attacker's listener
#     never receives a byte (no command goes to a socket that is not the
#     VM's user's).
#  3. own pid namespace: the attacker's VM is pid 1 of a pid namespace of
#     its own (set up here as root with unshare; an app gets one through
#     a user namespace, and there chooses its namespace pid) and shares
#     the host's /tmp, so its names are /tmp/.java_pid1 and .attach_pid1.
#     The victim's files of those names (a stale socket, a trigger) must
#     survive a capture of the attacker's VM: root removes nothing for a
#     VM whose namespace pid is not its pid.
#  4. own user and mount namespace: the attacker (unshare -Urm, no root)
#     mounts /dev/shm, sticky like /tmp, on its VM's /tmp. The victim's
#     stale socket and trigger in /dev/shm, named for the attacker's VM,
#     must survive a capture of that VM: root removes nothing in a mount
#     namespace another user namespace owns (before, root found a sticky
#     "/tmp" and removed both). The same namespace lets the attacker
#     mount a file over the name to hide a live listener under it
#     (test_ja_stale covers that case).
. "$(dirname "$0")/lib.sh"

CLASSES=$APPS/java
[ -f "$CLASSES/HeapGraphCounts.class" ] || skip "Java test programs were not built (no javac)"
JDKS=
for d in /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/temurin-25-jdk-amd64; do
	[ -x "$d/bin/java" ] && JDKS="$JDKS $d"
done
[ -n "$JDKS" ] || skip "no JDK under /usr/lib/jvm (OpenJDK 17 or Temurin 25)"

VIC=$(make_user jvmvictim)
ATK=$(make_user jvmattack)
JPIDS=
attach_cleanup() {
	local rc=$? p
	for p in $JPIDS; do
		kill -9 "$p" 2>/dev/null && rm -f "/tmp/.java_pid$p"
	done
	# What the two users left in /tmp (userdel leaves files): planted
	# names, and each user's VMs' perf data directory.
	find /tmp /dev/shm -maxdepth 1 \( -name '.java_pid*' -o -name '.attach_pid*' \) \
		\( -user "$ATK" -o -user "$VIC" \) -delete 2>/dev/null || true
	for p in "$ATK" "$VIC"; do
		p=$(id -nu "$p" 2>/dev/null) && rm -rf "/tmp/hsperfdata_$p"
	done
	hostile_cleanup "$rc"
}
trap attach_cleanup EXIT

# jvm JDK NAME: a victim VM that has printed "ready"; JP is its pid.
jvm() {
	# setpriv execs java: $! is the VM's pid.
	setpriv --reuid="$VIC" --regid="$(id -g "$VIC")" --clear-groups "$1/bin/java" -Xmx64m \
		-cp "$CLASSES" HeapGraphCounts 100 50 x 300 > "$T/$2.out" 2>&1 &
	JP=$!
	JPIDS="$JPIDS $JP"
	for _ in $(seq 600); do grep -qx ready "$T/$2.out" && return 0; sleep 0.1; done
	fail "$2: the victim's JVM did not start: $(cat "$T/$2.out")"
}

start_daemon
for J in $JDKS; do
	name=$(basename "$J")
	jvm "$J" "stale-$name"
	out=$(as_uid "$ATK" "$HOSTILE/hostile_attach_sock" stale "/tmp/.java_pid$JP") ||
		fail "$name: the attacker could not plant /tmp/.java_pid$JP: $out"
	as_uid "$ATK" sh -c "umask 077 && : > /tmp/.attach_pid$JP" || fail "$name: could not plant the trigger"
	[ "$(stat -c %u "/tmp/.java_pid$JP")" = "$ATK" ] || fail "$name: the planted name is not the attacker's"
	path=$("$APPS/it_request" --pid "$JP" --type heapdump 2> "$T/stale-$name.err") ||
		fail "$name: a stale socket and trigger of uid $ATK blocked the heap dump: $(cat "$T/stale-$name.err")"
	[ -s "$path" ] || fail "$name: no dump delivered"
	grep -q "JVM heap dump of pid $JP: ok .*stale_socket_removed_uid=$ATK stale_trigger_removed_uid=$ATK" \
		"$T/daemon.log" || fail "$name: the helper did not report the stale socket and trigger it removed"
	[ "$(stat -c %u "/tmp/.java_pid$JP")" = "$VIC" ] ||
		fail "$name: /tmp/.java_pid$JP is not the victim VM's own after the dump"
	pass "$name: another uid's stale attach socket and trigger removed, heap dump delivered ($(stat -c %s "$path") bytes)"
	kill "$JP"
	wait "$JP" 2> /dev/null || true
done

set -- $JDKS
J=$1
jvm "$J" live
as_uid "$ATK" "$HOSTILE/hostile_attach_sock" live "/tmp/.java_pid$JP" 60 > "$T/live.log" 2>&1 &
for _ in $(seq 100); do grep -q listening "$T/live.log" && break; sleep 0.1; done
grep -q listening "$T/live.log" || fail "the attacker's listener did not start: $(cat "$T/live.log")"
if "$APPS/it_request" --pid "$JP" --type heapdump > "$T/live.path" 2> "$T/live.err"; then
	fail "a heap dump was delivered while another user's listener held the VM's socket name"
fi
grep -q "another user.s file (a live socket or a directory) holds the name of the VM.s attach socket (uid $ATK)" \
	"$T/live.err" ||
	fail "the failure does not name the other user's socket: $(cat "$T/live.err")"
bad=$(grep -v '^conn bytes=0$' "$T/live.log" | grep '^conn' || true)
[ -z "$bad" ] || fail "the attacker's socket was sent data: $bad"
pass "a live listener of uid $ATK on the name: refused with the reason, $(grep -c '^conn' "$T/live.log") probe(s), 0 bytes sent to it"
kill "$JP"
wait "$JP" 2> /dev/null || true

# victim_names DIR N: the victim's stale socket DIR/.java_pidN and its
# trigger DIR/.attach_pidN, which root must leave alone in parts 3 and 4.
victim_names() {
	as_uid "$VIC" "$HOSTILE/hostile_attach_sock" stale "$1/.java_pid$2" > /dev/null ||
		fail "the victim could not make $1/.java_pid$2"
	as_uid "$VIC" sh -c "umask 077 && : > $1/.attach_pid$2" || fail "the victim could not make $1/.attach_pid$2"
}

# names_left PID TAG DIR N WHAT: a heap dump of the attacker's VM PID ran
# the helper, which removed none of victim_names DIR N and said so (the
# request's stderr in $T/TAG.err).
names_left() {
	local pid=$1 err=$T/$2.err f
	"$APPS/it_request" --pid "$pid" --type heapdump > /dev/null 2> "$err" || true
	grep -q "heap dump of JVM pid $pid through the attach protocol" "$T/daemon.log" ||
		fail "the helper never ran for the attacker's VM (pid $pid): $(cat "$err")"
	for f in "$3/.java_pid$4" "$3/.attach_pid$4"; do
		[ "$(stat -c %u "$f" 2> /dev/null)" = "$VIC" ] || fail "the victim's $f was removed for $5"
	done
	grep -q "pid $pid: ok .*stale_" "$T/daemon.log" && fail "a stale name was removed for pid $pid"
	grep -q "another user.s file holds the name of the VM.s attach socket or trigger and was left in place" "$err" ||
		fail "the failure for pid $pid does not say that another user's file was left: $(cat "$err")"
}

rm -f /tmp/.java_pid1 /tmp/.attach_pid1 # pid 1's names: no VM on the host has them
victim_names /tmp 1
unshare --pid --fork setpriv --reuid="$ATK" --regid="$(id -g "$ATK")" --clear-groups "$J/bin/java" \
	-Xmx64m -cp "$CLASSES" HeapGraphCounts 100 50 x 300 > "$T/ns.out" 2>&1 &
NSP=$!
JPIDS="$JPIDS $NSP"
for _ in $(seq 600); do grep -qx ready "$T/ns.out" && break; sleep 0.1; done
grep -qx ready "$T/ns.out" || fail "the attacker's JVM in its own pid namespace did not start: $(cat "$T/ns.out")"
AP=$(pgrep -P "$NSP" | sed -n 1p)
JPIDS="$JPIDS $AP"
[ "$(awk '$1 == "NSpid:" { print $NF }' "/proc/$AP/status")" = 1 ] || fail "the attacker's VM is not pid 1 in its namespace"
names_left "$AP" ns /tmp 1 "a VM in its own pid namespace"
pass "a VM in its own pid namespace (pid $AP, namespace pid 1): the victim's /tmp/.java_pid1 and .attach_pid1 untouched ($(sed 's/^it_request: //' "$T/ns.err" | cut -c 1-90))"

kill "$AP" "$NSP" 2> /dev/null || true
wait "$NSP" 2> /dev/null || true

# 4. The attacker's VM in a user and mount namespace of its own.
if ! as_uid "$ATK" unshare -Urm true 2> "$T/userns.err"; then
	echo "skipped: part 4: unprivileged user namespaces are off here: $(cat "$T/userns.err")"
else
	# setpriv, unshare and sh exec: $! is the VM's pid. No perf data: it would be
	# /dev/shm/hsperfdata_root, root's name inside the namespace.
	# The classes may be under /tmp (a build there): bound on /mnt first.
	setpriv --reuid="$ATK" --regid="$(id -g "$ATK")" --clear-groups \
		unshare -Urm sh -c 'mount --bind "$0" /mnt && mount --bind /dev/shm /tmp && exec "$@"' \
		"$CLASSES" "$J/bin/java" -XX:-UsePerfData -Xmx64m -cp /mnt HeapGraphCounts 100 50 x 300 \
		> "$T/userns.out" 2>&1 &
	UP=$!
	JPIDS="$JPIDS $UP"
	for _ in $(seq 600); do grep -qx ready "$T/userns.out" && break; sleep 0.1; done
	grep -qx ready "$T/userns.out" || fail "the attacker's JVM in its own user namespace did not start: $(cat "$T/userns.out")"
	[ "$(readlink "/proc/$UP/ns/user")" != "$(readlink /proc/self/ns/user)" ] ||
		fail "the attacker's VM is not in a user namespace of its own"
	victim_names /dev/shm "$UP"
	names_left "$UP" userns /dev/shm "$UP" "a VM whose /tmp is the attacker's mount"
	rm -f "/dev/shm/.java_pid$UP" "/dev/shm/.attach_pid$UP"
	pass "a VM in its own user namespace with /dev/shm mounted on its /tmp (pid $UP): the victim's names there untouched ($(sed 's/^it_request: //' "$T/userns.err" | cut -c 1-90))"
fi
