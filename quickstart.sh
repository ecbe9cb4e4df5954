#!/usr/bin/env bash
# profilingd quick start. Two commands:
#   ./quickstart.sh demo   install what is missing, build, run the daemon and the
#                          demo app, print the delivered result and its pprof top
#   ./quickstart.sh test   install what is missing, build (normal and ASan/UBSan
#                          with libFuzzer targets), run the whole ctest suite
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$(pwd)

PKGS_BUILD="build-essential cmake pkg-config libevent-dev libprotobuf-c-dev protobuf-c-compiler
 libsqlite3-dev libseccomp-dev libcmocka-dev libunwind-dev libdw-dev libinih-dev zlib1g-dev libisal-dev
 golang-go openjdk-17-jdk-headless"
PKGS_TEST="clang libclang-rt-14-dev protobuf-compiler sqlite3 man-db groff-base systemd
 dpkg-dev file visualvm libxml2-utils python3 gdb qemu-system-x86 busybox-static cpio
 nodejs"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

install_missing() {
	local missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" > /dev/null ||
			missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing: ${missing[*]}"
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# The redactor's own system user ([redact] user): the daemon refuses to
# start without it. The .deb's postinst makes it the same way.
REDACT_USER=profilingd-redact
redact_user() {
	getent passwd "$REDACT_USER" > /dev/null && return 0
	say "creating the redactor's system user $REDACT_USER"
	local sudo=
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
		--user-group "$REDACT_USER"
}

build() { # build DIR [cmake args...]
	local dir=$1
	shift
	say "building in $dir"
	cmake -S "$ROOT" -B "$dir" "$@" >/dev/null
	cmake --build "$dir" -j"$(nproc)"
}

DAEMON_PID=
stop_daemon() {
	[ -n "$DAEMON_PID" ] || return 0
	kill -TERM "$DAEMON_PID" 2>/dev/null || true
	wait "$DAEMON_PID" 2>/dev/null || true
	DAEMON_PID=
}

demo() {
	install_missing $PKGS_BUILD
	redact_user
	build "$ROOT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
	local state=$ROOT/build/demo-state
	# A fresh state each run: the demo's app budget (one app capture per
	# hour by default) would otherwise refuse a second run within the hour.
	rm -rf "$state"
	mkdir -p "$state"
	local csock=$state/client.sock rsock=$state/runtime.sock
	say "starting profilingd (state in $state); Ctrl-C stops it"
	"$ROOT/build/service/profilingd" --foreground --state-dir "$state" \
		--client-socket "$csock" --runtime-socket "$rsock" &
	DAEMON_PID=$!
	# Stop the daemon cleanly whatever happens (including Ctrl-C).
	trap 'stop_daemon; exit 130' INT TERM
	trap 'stop_daemon' EXIT
	for _ in $(seq 100); do [ -S "$csock" ] && [ -S "$rsock" ] && break; sleep 0.05; done
	say "running the demo app: 2 threads, hot_function:cold_function = 3:1, 2 s stack sample"
	local out
	out=$(PROFILINGD_SOCKET=$csock "$ROOT/build/client/profiling-demo" --threads 2 --duration-ms 2000)
	say "delivered result: $out"
	say "go tool pprof -top $out"
	HOME=${HOME:-/root} go tool pprof -top "$out"
	say "done; stopping profilingd"
}

test_all() {
	install_missing $PKGS_BUILD $PKGS_TEST
	redact_user
	build "$ROOT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
	build "$ROOT/build-asan" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
		-DPROFILINGD_SANITIZE=ON -DPROFILINGD_FUZZ=ON
	say "test suite (release build)"
	(cd "$ROOT/build" && ctest --output-on-failure -j2)
	say "test suite (ASan + UBSan build, fuzz targets included)"
	(cd "$ROOT/build-asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
		UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j2)
}

case "${1:-}" in
demo) demo ;;
test) test_all ;;
-h|--help|"")
	sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
	[ -n "${1:-}" ] || exit 2 ;;
*) echo "unknown command '$1' (demo | test)" >&2; exit 2 ;;
esac
