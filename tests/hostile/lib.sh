# Helpers for the hostile suite: each test plays one attack as an
# unprivileged user it creates, against the real daemon, and fails if the
# attack works. Built on the integration helpers (private state dir,
# start_daemon/stop_daemon, fail/skip/pass).
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"

command -v useradd > /dev/null || skip "useradd (passwd) is needed to create the attacker's user"
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run as the attacker"

# make_user runs in a command substitution (a subshell), so the users it
# made are listed in a file, not a variable.
HOSTILE_USERS_FILE=$T/hostile-users
# hostile_keep STATUS: with PD_KEEP_LOGS=DIR, the run's logs and outputs
# ($T's *.log, *.err, *.out) are copied to DIR/<test>-<pid>-<status> before
# $T goes: a failure under load is seldom seen twice.
hostile_keep() {
	[ -n "${PD_KEEP_LOGS:-}" ] || return 0
	local d
	d=$PD_KEEP_LOGS/$(basename "$0" .sh)-$$-$1
	mkdir -p "$d" && find "$T" -maxdepth 1 -type f \( -name '*.log' -o -name '*.err' -o -name '*.out' \) \
		-exec cp {} "$d"/ \; 2>/dev/null || true
}
# hostile_cleanup [STATUS]: STATUS is the test's exit status (default $?,
# right for a trap that calls it first).
hostile_cleanup() {
	local rc=${1:-$?}
	hostile_keep "$rc"
	local u
	[ -f "$HOSTILE_USERS_FILE" ] && while read -r u; do
		# userdel refuses while a killed process is not yet reaped.
		for _ in $(seq 50); do
			pkill -KILL -u "$u" 2>/dev/null || true
			userdel "$u" 2>/dev/null && break
			getent passwd "$u" > /dev/null || break
			sleep 0.1
		done
		groupdel "$u" 2>/dev/null || true
	done < "$HOSTILE_USERS_FILE"
	cleanup
}
trap hostile_cleanup EXIT

# make_user TAG: create a fresh system user (no home, no shell) for this
# test run and print its uid. The name carries the test's pid, so tests
# that run side by side under ctest -j never share a user.
make_user() {
	local name
	name=$(printf 'pdh%s%d' "${1:0:12}" "$$")
	name=${name:0:31}
	# useradd takes /etc/passwd's lock: tests beside each other may find
	# it held for a moment, so try again a few times.
	local i
	for i in $(seq 50); do
		useradd --system --no-create-home --shell /usr/sbin/nologin --user-group \
			"$name" > "$T/useradd.err" 2>&1 && break
		[ "$i" -lt 50 ] || fail "useradd $name failed: $(cat "$T/useradd.err")"
		sleep 0.1
	done
	echo "$name" >> "$HOSTILE_USERS_FILE"
	id -u "$name"
}

# as_uid UID CMD...: run CMD with real, effective and saved ids UID, the
# user's own group and no supplementary groups, and the daemon's socket.
as_uid() {
	local uid=$1
	shift
	setpriv --reuid="$uid" --regid="$(id -g "$uid")" --clear-groups \
		env PROFILINGD_SOCKET="$PROFILINGD_SOCKET" "$@"
}

# The attacker must reach the build's binaries.
chmod o+rx "$BUILD" "$BUILD"/tests "$BUILD"/tests/hostile "$BUILD"/client 2>/dev/null || true
HOSTILE=$BUILD/tests/hostile
