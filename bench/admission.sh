#!/usr/bin/env bash
# bench/admission: start a daemon with budgets that cannot run out and no
# runtime wait, then run the admission client swarm against it.
#   usage: bench/admission [BUILD_DIR] [CLIENTS] [SECONDS]
set -euo pipefail
# One machine-readable figure for bench/run_all.sh (see its header).
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
BUILD=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[ -x "$BUILD/service/profilingd" ] || BUILD=$(cd "$BUILD/build" && pwd)
N=${2:-32}
SECS=${3:-${PD_BENCH_QUICK:+3}}
SECS=${SECS:-5}
T=$(mktemp -d /tmp/pd-bench.XXXXXX)
cat > "$T/bench.conf" <<CONF
[limits]
max_sessions = 4096
max_clients = 4096
max_clients_per_uid = 4096
[capture]
runtime_wait_ms = 0
[ratelimit]
hour_app_cap = 4000000000
hour_system_cap = 4000000000
day_app_cap = 4000000000
day_system_cap = 4000000000
week_app_cap = 4000000000
week_system_cap = 4000000000
CONF
getent passwd profilingd-redact > /dev/null || { echo "the redactor's user profilingd-redact does not exist: run ./quickstart.sh" >&2; exit 1; }
"$BUILD/service/profilingd" -f -c "$T/bench.conf" -S "$T/state" --client-socket "$T/c.sock" \
	--runtime-socket "$T/r.sock" > "$T/daemon.log" 2>&1 &
DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -S "$T/c.sock" ] && break; sleep 0.05; done
PROFILINGD_SOCKET=$T/c.sock "$BUILD/bench/admission" "$N" "$SECS" | tee "$T/out"
echo "  store: $(du -h "$T/state/ratelimit.db" | cut -f1) ratelimit.db, daemon RSS $(ps -o rss= -p $DPID) KiB"
summary "admission: decisions/s, $N clients, each admission committed to both databases" \
	"$(sed -n 's/^  decisions .*(\([0-9]*\)\/s)/\1\/s/p' "$T/out")" "-" "-" "> 20000/s"
summary "admission: request -> reply latency p99, $N clients" \
	"$(sed -n 's/^  latency .*p99 \([0-9]*\) us.*/\1 us/p' "$T/out")" "-" "-" "-"
