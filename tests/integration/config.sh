#!/usr/bin/env bash
# Config: `profilingd --check-config` validates and prints the effective
# config, which parses back to the same output (round trip); errors name
# FILE:LINE and the key. SIGHUP against a real daemon applies the reloadable
# keys (rate-limit caps: a refused app is admitted after the reload; the log
# level) and refuses restart-only keys (a socket path) keeping the old value.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)

check() { "$PROFILINGD" --check-config "$@"; }

# 1. The shipped config: valid, and every key it documents is printed.
check "$SRC/policy/profilingd.conf" > "$T/default.out" || fail "shipped config rejected"
keys=$(grep -E '^[a-z_]+ *=' "$SRC/policy/profilingd.conf" | sed 's/ *=.*//' | sort -u)
[ "$(echo "$keys" | wc -l)" -ge 40 ] || fail "policy/profilingd.conf documents too few keys"
for k in $keys; do
	grep -q "^$k = " "$T/default.out" || fail "--check-config does not print $k"
done
# Built-in defaults and the shipped file are the same configuration.
check /dev/null > "$T/builtin.out" || fail "empty config rejected"
diff <(tail -n +2 "$T/default.out") <(tail -n +2 "$T/builtin.out") ||
	fail "policy/profilingd.conf differs from the built-in defaults"

# 2. Round trip of a config using every kind of key.
cat > "$T/full.conf" <<CONF
; a comment
[daemon]
state_dir = $T/s
client_socket = $T/c.sock
runtime_socket = $T/r.sock
log_level = DEBUG
[limits]
max_clients = 100
max_clients_per_uid = 500
max_result_bytes = 1099511627776
[ratelimit]
hour_app_cap = 0
exempt_app = uid:1000/com.example.test
sync_full = yes
[redact]
user = daemon
redactor = /opt/x/profilingd-redact
[dlp]
builtin = 1
pattern = secret-[0-9]+
pattern = token=[a-f0-9]{8}
[apps]
/usr/bin/example-player = com.example.player
[trigger.enc]
type = excessive-cpu
exe = /usr/bin/ffmpeg
cpu_percent = 95
cpu_window_ms = 10000
[trigger.mem]
type = oom
capture = heap
cgroup = system.slice/foo.service
memory_bytes = 1073741824
CONF
check "$T/full.conf" > "$T/full1.out" || fail "full config rejected"
check "$T/full1.out" > "$T/full2.out" || { cat "$T/full1.out"; fail "printed config does not re-parse"; }
diff <(tail -n +2 "$T/full1.out") <(tail -n +2 "$T/full2.out") || fail "round trip changed the output"
for want in "log_level = debug" "max_clients_per_uid = 100" "sync_full = true" "builtin = true" \
	"pattern = token=[a-f0-9]{8}" "/usr/bin/example-player = com.example.player" "[trigger.mem]" \
	"capture = heap" "cgroup = system.slice/foo.service" "exe = /usr/bin/ffmpeg" "hour_app_cap = 0" \
	"max_result_bytes = 1099511627776" "exempt_app = uid:1000/com.example.test"; do
	grep -qxF "$want" "$T/full1.out" || fail "effective config lacks '$want'"
done

# 3. Errors: exit 1, one line naming FILE:LINE and the key.
expect_error() { # want-regex, then config lines
	local want=$1
	shift
	printf '%s\n' "$@" > "$T/bad.conf"
	local rc=0
	check "$T/bad.conf" > "$T/bad.out" 2> "$T/bad.err" || rc=$?
	[ "$rc" -eq 1 ] || fail "bad config ($*) exited $rc, want 1"
	[ ! -s "$T/bad.out" ] || fail "bad config printed a config"
	grep -qE "$want" "$T/bad.err" || { cat "$T/bad.err"; fail "error does not match '$want'"; }
}
expect_error "bad.conf:3: \[limits\] max_sessions = 0: out of range \(1\.\.4096\)" \
	"[limits]" "max_clients = 5" "max_sessions = 0"
expect_error "bad.conf:2: unknown key \[daemon\] colour" "[daemon]" "colour = blue"
expect_error "bad.conf:2: syntax error" "[daemon]" "just words"
expect_error "bad.conf:2: \[dlp\] pattern = \(: not a POSIX" "[dlp]" "pattern = ("
expect_error "bad.conf:3: \[trigger.x\] type = sometimes" "[trigger.x]" "exe = /bin/true" "type = sometimes"
expect_error "bad.conf: \[daemon\] state_dir = rel: must be an absolute path" "[daemon]" "state_dir = rel"
expect_error "bad.conf:2: \[redact\] timeout_ms = -5: out of range" "[redact]" "timeout_ms = -5"
rc=0; check "$T/missing.conf" 2> "$T/bad.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "missing.conf: cannot read" "$T/bad.err" || fail "missing file: rc $rc"

# 4. SIGHUP against the real daemon (no -d: the log level is the config's).
write_conf() { # hour_app_cap log_level client_socket
	cat > "$T/hup.conf" <<CONF
[daemon]
state_dir = $T/state
client_socket = $3
runtime_socket = $RUNTIME_SOCKET
log_level = $2
[ratelimit]
hour_system_cap = 1000000
day_system_cap = 1000000
week_system_cap = 1000000
day_app_cap = 1000000
week_app_cap = 1000000
hour_app_cap = $1
CONF
}
write_conf 10 info "$PROFILINGD_SOCKET"
need_redact_user # the daemon is started here without start_daemon
"$PROFILINGD" -f -c "$T/hup.conf" >> "$T/daemon.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 200); do [ -S "$PROFILINGD_SOCKET" ] && [ -S "$RUNTIME_SOCKET" ] && break; sleep 0.05; done
[ -S "$RUNTIME_SOCKET" ] || fail "daemon did not start"

demo() { "$DEMO" --threads 1 --duration-ms 300 --frequency 100 > "$T/demo.out" 2> "$T/demo.err"; }
demo || { cat "$T/demo.err"; fail "first capture (cost 10 of 10) failed"; }
demo && fail "second capture admitted over hour_app_cap = 10"
grep -q "RATE_LIMIT_PROCESS\|rate limit" "$T/demo.err" || { cat "$T/demo.err"; fail "refusal is not a rate limit"; }

# Wait for a log line to appear (the signal is handled asynchronously).
wait_log() {
	for _ in $(seq 200); do grep -qE "$1" "$T/daemon.log" && return 0; sleep 0.05; done
	fail "no log line '$1' after SIGHUP"
}
write_conf 1000 debug "$T/other.sock"
kill -HUP "$DAEMON_PID"
wait_log "reload done: 2 change\(s\) applied, 1 refused"
grep -q "\[ratelimit\] hour_app_cap: 10 -> 1000" "$T/daemon.log" || fail "cap change not logged"
grep -q "\[daemon\] log_level: info -> debug" "$T/daemon.log" || fail "log level change not logged"
grep -q "\[daemon\] client_socket: .* needs a restart; keeping $PROFILINGD_SOCKET" "$T/daemon.log" ||
	fail "restart-only key not refused"
[ -S "$PROFILINGD_SOCKET" ] && [ ! -e "$T/other.sock" ] || fail "client socket moved on reload"
demo || { cat "$T/demo.err"; tail "$T/daemon.log"; fail "capture refused after hour_app_cap was raised"; }
grep -q " debug " "$T/daemon.log" || fail "no debug lines after log_level = debug"

# A broken config on SIGHUP: logged, the daemon keeps running unchanged.
echo "max_sessions = lots" >> "$T/hup.conf"
kill -HUP "$DAEMON_PID"
wait_log "reload failed: the running config is unchanged"
grep -q "hup.conf:13: unknown key \[ratelimit\] max_sessions" "$T/daemon.log" ||
	fail "reload error does not name the file, line and key"
demo || fail "capture refused after a failed reload"
daemon_alive || fail "daemon died"
stop_daemon
pass "check-config round trip, 8 error cases, SIGHUP: 2 applied, 1 refused, bad file kept"
