#!/usr/bin/env bash
# bench/flood_connect: another uid's connect round trip while one uid
# floods the daemon with refused requests (issue 14: 31 ms worst before).
# Starts a daemon with the shipped limits and logging (info, to a file),
# then runs bench/flood_connect (as root: it takes the two uids itself).
#   usage: bench/flood_connect.sh [BUILD_DIR] [SECONDS] [FLOODERS]
set -euo pipefail
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
BUILD=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[ -x "$BUILD/service/profilingd" ] || BUILD=$(cd "$BUILD/build" && pwd)
SECS=${2:-${PD_BENCH_QUICK:+5}}
SECS=${SECS:-10}
N=${3:-32}
[ "$(id -u)" = 0 ] || { echo "flood_connect needs root (it runs the two uids)"; exit 1; }
T=$(mktemp -d /tmp/pd-bench.XXXXXX)
chmod 755 "$T"
: > "$T/bench.conf"
"$BUILD/service/profilingd" -f -c "$T/bench.conf" -S "$T/state" --client-socket "$T/c.sock" \
	--runtime-socket "$T/r.sock" > "$T/daemon.log" 2>&1 &
DPID=$!
trap 'kill $DPID 2>/dev/null; wait $DPID 2>/dev/null; rm -rf "$T"' EXIT
for _ in $(seq 100); do [ -S "$T/c.sock" ] && break; sleep 0.05; done
t0=$(awk '{print $14 + $15}' "/proc/$DPID/stat")
"$BUILD/bench/flood_connect" "$T/c.sock" "$SECS" "$N" | tee "$T/out"
t1=$(awk '{print $14 + $15}' "/proc/$DPID/stat")
echo "  daemon: $(wc -l < "$T/daemon.log") log lines ($(du -k "$T/daemon.log" | cut -f1) KiB)," \
	"$(( (t1 - t0) * 100 / $(getconf CLK_TCK) / 100 )) s of CPU over the run, RSS $(ps -o rss= -p $DPID) KiB"
read -r p50 p99 max base rate < <(awk '/^RESULT/ { print $3, $5, $7, $9, $11 }' "$T/out")
ms() { awk -v u="$1" 'BEGIN { printf "%.2f ms", u / 1000 }'; }
summary "flood_connect: another uid's connect+hello+refused request p99, one uid flooding ($N conns)" \
	"$(ms "$p99")" "-" "-" "< 5 ms"
summary "flood_connect: the same, max (p50 $(ms "$p50"); no flood: p99 $(ms "$base"))" \
	"$(ms "$max")" "-" "-" "-"
