#!/usr/bin/env bash
# perf's ELF parse as root: an unprivileged program without an agent asks for
# a stack sample of itself, so profilingd-perf reads its modules, whose paths
# come from the target's /proc/<pid>/maps. The attacker runs its program from
# a bind mount in its own user and mount namespace: maps then shows a path
# that, in the daemon's namespace, is a symlink the attacker planted to a
# root-only (0600) ELF file. The helper must neither open that file as root
# nor follow the link: the delivered profile must not hold the root-only
# file's function name (zz_root_only_secret) or its build id. A plain run of
# the same program (no namespace) must still be sampled and symbolised.
. "$(dirname "$0")/lib.sh"

PERF=$BUILD/runtime/perf/profilingd-perf
[ -x "$PERF" ] || skip "no profilingd-perf in this build (runtime/perf needs libdw)"
[ -r /proc/sys/kernel/perf_event_paranoid ] || skip "kernel without perf events"
command -v unshare > /dev/null || skip "unshare (util-linux) is needed for the attacker's mount namespace"
command -v readelf > /dev/null || skip "readelf (binutils) is needed to read the build id"

ATT=$(make_user perfelf)
as_uid "$ATT" unshare -Urm true 2> /dev/null ||
	skip "unprivileged user namespaces are off (kernel.unprivileged_userns_clone or user.max_user_namespaces): the attacker cannot bind-mount"

# The root-only file: the attacker's program rebuilt with another name for
# its hot function, 0600 root in a 0700 root dir.
mkdir -m 700 "$T/secret"
cp "$HOSTILE/hostile_perf_secret" "$T/secret/elf"
chmod 600 "$T/secret/elf"
secret_bid=$(readelf -n "$T/secret/elf" | awk '/Build ID:/ && !d { print $3; d = 1 }')
[ -n "$secret_bid" ] || fail "the root-only ELF has no build id"
as_uid "$ATT" cat "$T/secret/elf" > /dev/null 2>&1 && fail "setup: uid $ATT can read the root-only ELF"

# The attacker's directory: real/prog is its program; view/prog, which it
# plants itself, is a symlink to the root-only file.
mkdir -p "$T/att/real" "$T/att/view"
cp "$HOSTILE/hostile_perf_elf" "$T/att/real/prog"
chown -R "$ATT:$(id -g "$ATT")" "$T/att"
as_uid "$ATT" ln -s "$T/secret/elf" "$T/att/view/prog"

start_daemon "[capture]" "runtime_wait_ms = 200"

# Friendly: the program run from its real path is sampled agentless and
# symbolised from its own file (as its own user).
out=$(as_uid "$ATT" "$T/att/real/prog" 2> "$T/friendly.err") ||
	{ cat "$T/friendly.err" >&2; fail "the friendly agentless capture failed"; }
[ -f "$out" ] || fail "friendly: '$out' is not a file"
grep -q "no agent in pid [0-9]*: sampling it with perf_event_open" "$T/daemon.log" ||
	fail "the daemon did not go agentless"
zcat "$out" | qgrep -a spin_attacker_hot__ || fail "friendly: spin_attacker_hot__ is not in the profile"
echo "ok: friendly agentless capture symbolised: $out"

# The attack: inside its namespaces view/ is real/, so the program runs as
# view/prog; outside, view/prog is the planted link.
rc=0
out=$(as_uid "$ATT" unshare -Urm sh -c 'mount --bind "$1" "$2" && exec "$2/prog"' sh \
	"$T/att/real" "$T/att/view" 2> "$T/attack.err") || rc=$?
daemon_alive || fail "the daemon died during the attack"
case $rc in
0)
	[ -f "$out" ] || fail "attack: '$out' is not a file"
	n=$(zcat "$out" | grep -ac zz_root_only_secret || true)
	[ "$n" -eq 0 ] || fail "the root-only ELF's symbol zz_root_only_secret is in uid $ATT's profile $out"
	zcat "$out" | qgrep -a "$secret_bid" &&
		fail "the root-only ELF's build id $secret_bid is in uid $ATT's profile $out: profilingd-perf opened it"
	echo "ok: attack delivered a profile without the root-only file's names or build id"
	;;
3) echo "ok: attack capture failed: $(cat "$T/attack.err")" ;;
*) cat "$T/attack.err" >&2; fail "the attacker exited $rc" ;;
esac
stop_daemon
pass "profilingd-perf did not read a root-only ELF planted at the target's module path"
