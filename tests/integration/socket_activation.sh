#!/usr/bin/env bash
# Socket activation without systemd as PID 1: systemd-socket-activate
# creates client.sock, runtime.sock and control.sock (SOCK_SEQPACKET), and
# execs profilingd
# on the first connection with LISTEN_FDS/LISTEN_PID/LISTEN_FDNAMES, as
# profilingd.socket would. The daemon adopts them (by name, then by path), a
# real app's request on the activated socket gets its result, profctl's
# first request over the activated control.sock starts the daemon, and the
# socket files survive the daemon (they belong to the socket unit). Logging:
# journald priority prefixes under systemd (INVOCATION_ID), readable lines
# with a timestamp in the foreground.
. "$(dirname "$0")/lib.sh"
command -v systemd-socket-activate > /dev/null ||
	skip "systemd-socket-activate (package systemd) is not installed"
need_redact_user # the daemon is started here without start_daemon

# activate NAMES CONF_CLIENT CONF_RUNTIME CONF_CONTROL: start the launcher;
# NAMES "" = no --fdname.
activate() {
	cat > "$T/sa.conf" <<CONF
[daemon]
state_dir = $T/state
client_socket = $2
runtime_socket = $3
control_socket = $4
[ratelimit]
hour_app_cap = 1000000
hour_system_cap = 1000000
day_app_cap = 1000000
day_system_cap = 1000000
week_app_cap = 1000000
week_system_cap = 1000000
CONF
	local names=()
	[ -n "$1" ] && names=(--fdname="$1")
	systemd-socket-activate --seqpacket -l "$T/client.sock" -l "$T/runtime.sock" \
		-l "$T/control.sock" "${names[@]}" \
		-E INVOCATION_ID=0123456789abcdef "$PROFILINGD" -c "$T/sa.conf" > "$T/daemon.log" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 200); do
		[ -S "$T/client.sock" ] && [ -S "$T/runtime.sock" ] && [ -S "$T/control.sock" ] && return 0
		kill -0 "$DAEMON_PID" 2>/dev/null || fail "systemd-socket-activate exited"
		sleep 0.05
	done
	fail "systemd-socket-activate did not create the sockets"
}

capture() { # the first connection execs the daemon
	local out
	out=$("$DEMO" --threads 1 --duration-ms 300 --frequency 100 2> "$T/demo.err") ||
		{ cat "$T/demo.err"; fail "$1: no result over the activated socket"; }
	[ -s "$out" ] || fail "$1: result '$out' is empty"
	case "$out" in "$T/state/results/"*) ;; *) fail "$1: result outside the state dir: $out";; esac
}

check_adopted() { # how
	grep -q "listening on $T/client.sock (socket-activated as '$1')" "$T/daemon.log" &&
		grep -q "listening on $T/runtime.sock (socket-activated as '$2')" "$T/daemon.log" &&
		grep -q "listening on $T/control.sock (profctl, socket-activated)" "$T/daemon.log" ||
		fail "daemon did not adopt the three activated sockets ($1/$2)"
}

# profctl's first request over the activated control.sock execs the daemon.
profctl_first() {
	"$BUILD/tools/profctl/profctl" --socket "$T/control.sock" status > "$T/status.out" 2>&1 ||
		{ cat "$T/status.out"; fail "$1: profctl status over the activated control.sock failed"; }
	grep -q "profilingd" "$T/status.out" || fail "$1: profctl status printed no daemon"
}

# 1. By name (FileDescriptorName=client / runtime). The configured paths
#    differ on purpose: the names decide, and nothing is bound there.
activate client:runtime:control "$T/conf-client.sock" "$T/conf-runtime.sock" "$T/conf-control.sock"
profctl_first "by name"
capture "by name"
check_adopted client runtime
[ ! -e "$T/conf-client.sock" ] && [ ! -e "$T/conf-runtime.sock" ] && [ ! -e "$T/conf-control.sock" ] ||
	fail "daemon bound its own sockets although systemd passed them"
# journald form: every line of the daemon is "<N>function: message".
grep -q '^<5>main: profilingd .* ready' "$T/daemon.log" || fail "no '<5>main: ... ready' line"
bad=$(grep -v '^<[0-7]>[a-z_0-9]*: ' "$T/daemon.log" | grep -v -e '^Listening on' \
	-e '^Communication attempt' -e '^Execing' || true)
[ -z "$bad" ] || { echo "$bad"; fail "daemon lines without a journald priority prefix"; }
stop_daemon
[ -S "$T/client.sock" ] && [ -S "$T/runtime.sock" ] && [ -S "$T/control.sock" ] ||
	fail "daemon removed the activated socket files (the socket unit owns them)"
rm -f "$T/client.sock" "$T/runtime.sock" "$T/control.sock"

# 2. Unnamed fds (one socket unit with three ListenSequentialPacket=):
#    matched by the configured paths.
activate "" "$T/client.sock" "$T/runtime.sock" "$T/control.sock"
capture "by path"
check_adopted unknown unknown
stop_daemon
rm -f "$T/client.sock" "$T/runtime.sock" "$T/control.sock"

# 3. Foreground: readable lines with a time stamp, even if a JOURNAL_STREAM
#    inherited from a unit names another file than our stderr.
env -u INVOCATION_ID JOURNAL_STREAM=1:1 "$PROFILINGD" -c "$T/sa.conf" > "$T/fg.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 200); do grep -q "ready" "$T/fg.log" && break; sleep 0.05; done
grep -qE '^[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} profilingd notice +main: profilingd .* ready' "$T/fg.log" ||
	{ cat "$T/fg.log"; fail "foreground log lines are not 'HH:MM:SS.mmm profilingd level func: msg'"; }
grep -q '^<' "$T/fg.log" && fail "journald prefixes in the foreground"
stop_daemon
pass "socket activation of client, runtime and control sockets by name and by path (profctl starts the daemon), journald and foreground log formats"
