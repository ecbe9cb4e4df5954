#!/usr/bin/env bash
# Delivery of a file the app swapped: an app's results wait in its own
# directory until it acknowledges them, and the daemon opens them again to
# redeliver. The attacker leaves results unacknowledged, then puts at their
# paths a hard link to a root-owned file it may link (fs.protected_hardlinks
# allows a file the user can read and write: here a 0666 root file; a
# root-only file would need protected_hardlinks=0, which this test does not
# change), a file of its own with two links, and a symlink. None of them may
# be delivered; an untouched result still is.
. "$(dirname "$0")/lib.sh"

ATT=$(make_user deliver)
ATTG=$(id -g "$ATT")
start_daemon

# The app's result directory exists once it has a result.
dir=$T/state/results/$ATT
mkdir -p "$T/state/results"
as_uid "$ATT" "$HOSTILE/hostile_delivery" queue 4 "$dir" > "$T/queued" 2> "$T/queue.err" ||
	{ cat "$T/queue.err" >&2; fail "the attacker could not queue its results"; }
mapfile -t res < "$T/queued"
[ "${#res[@]}" -eq 4 ] || fail "queued ${#res[@]} results, want 4"
sleep 0.5

# A root-owned file the attacker may read and write, so the kernel lets it
# make a hard link (a stand-in for any file that is not the app's).
echo "root's shared file" > "$T/shared"
chmod 666 "$T/shared"
as_uid "$ATT" sh -c 'rm -f "$1" && ln "$2" "$1"' sh "${res[0]}" "$T/shared" ||
	fail "setup: the attacker cannot hard-link the 0666 root file"
as_uid "$ATT" sh -c 'rm -f "$1" && echo mine > "$1" && ln "$1" "$1.second"' sh "${res[1]}" ||
	fail "setup: two links to the attacker's own file"
as_uid "$ATT" sh -c 'rm -f "$1" && ln -s "$2" "$1"' sh "${res[2]}" "$T/shared" ||
	fail "setup: symlink"
[ "$(stat -c '%u %h' "${res[0]}")" = "0 2" ] || fail "setup: ${res[0]} is $(stat -c '%u %h' "${res[0]}")"

as_uid "$ATT" "$HOSTILE/hostile_delivery" listen 3000 > "$T/got" 2> "$T/listen.err" ||
	{ cat "$T/listen.err" >&2; fail "the attacker's listener failed"; }
cat "$T/got"
bad=$(grep "^got " "$T/got" | grep -v " uid=$ATT nlink=1$" || true)
[ -z "$bad" ] || fail "delivered a file that is not the app's: $bad"
grep -q "^got ${res[3]} uid=$ATT nlink=1$" "$T/got" || fail "the untouched result ${res[3]} was not redelivered"
for i in 0 1; do
	grep -q "result [0-9]*: ${res[$i]} is .*: not delivered" "$T/daemon.log" ||
		fail "no log line for the refused ${res[$i]}"
done
# Refused results leave the queue: a second listener gets none of them.
as_uid "$ATT" "$HOSTILE/hostile_delivery" listen 1000 > "$T/got2" 2> /dev/null || true
grep -q "^got .*nlink=[02-9]" "$T/got2" && fail "a refused result was offered again: $(cat "$T/got2")"
daemon_alive || fail "the daemon died"
stop_daemon
pass "a swapped result (root's hard link, two links, symlink) is not delivered; the untouched one is"
