#!/usr/bin/env bash
# The generated systemd units (build/policy/systemd) pass
# `systemd-analyze verify` with no warning, ExecStart pointed at this build's
# daemon (the installed path does not exist here).
. "$(dirname "$0")/lib.sh"
command -v systemd-analyze > /dev/null || skip "systemd-analyze (package systemd) is not installed"
U=$BUILD/policy/systemd
[ -f "$U/profilingd.service" ] && [ -f "$U/profilingd.socket" ] || fail "units not generated in $U"
mkdir -p "$T/units"
FTRACE=$BUILD/runtime/ftrace/profilingd-ftrace
sed -e "s|^ExecStart=.*/profilingd\$|ExecStart=$PROFILINGD|" \
	-e "s|^ExecStopPost=-.*/profilingd-ftrace |ExecStopPost=-$FTRACE |" \
	"$U/profilingd.service" > "$T/units/profilingd.service"
cp "$U/profilingd.socket" "$T/units/"
grep -q "^ExecStart=$PROFILINGD\$" "$T/units/profilingd.service" || fail "no ExecStart to rewrite"
# The background trace's ring is removed after every stop (issue #21).
grep -qx "ExecStopPost=-$FTRACE --background off" "$T/units/profilingd.service" ||
	fail "no ExecStopPost removing the background trace's ring"
rc=0
SYSTEMD_LOG_LEVEL=info systemd-analyze verify --man=no "$T/units/profilingd.service" \
	"$T/units/profilingd.socket" > "$T/verify.log" 2>&1 || rc=$?
if grep -q "Failed to .*\(bus\|connect\|initialize\)\|System has not been booted with systemd" "$T/verify.log"; then
	cat "$T/verify.log"
	skip "systemd-analyze verify cannot run in this environment"
fi
[ "$rc" -eq 0 ] && [ ! -s "$T/verify.log" ] || { cat "$T/verify.log"; fail "systemd-analyze verify: rc $rc"; }
# The directives the daemon depends on are there.
for d in "Type=notify" "PrivateTmp=no" "ProtectSystem=strict" "NoNewPrivileges=yes" \
	"RestrictAddressFamilies=AF_UNIX AF_NETLINK" "CapabilityBoundingSet=CAP_"; do
	grep -q "^$d" "$T/units/profilingd.service" || fail "profilingd.service lacks $d"
done
for d in "ListenSequentialPacket=/run/profilingd/client.sock" \
	"ListenSequentialPacket=/run/profilingd/runtime.sock" "SocketMode=0666"; do
	grep -qx "$d" "$T/units/profilingd.socket" || fail "profilingd.socket lacks $d"
done
# A unit with a mistake does not pass (the check is not vacuous).
sed 's/^NoNewPrivileges=yes/NoNewPrivileges=maybe/' "$T/units/profilingd.service" > "$T/units/bad.service"
systemd-analyze verify --man=no "$T/units/bad.service" > "$T/bad.log" 2>&1 || true
[ -s "$T/bad.log" ] || fail "systemd-analyze verify did not notice a bad value"
pass "systemd-analyze verify: profilingd.service and profilingd.socket clean"
