#!/usr/bin/env bash
# The drivers run under `set -o pipefail` (lib.sh). There a reader that stops
# early - grep -q, grep -m, head, awk's exit - kills the writer before it is
# done with SIGPIPE, and the pipe fails although the reader found its line.
# Whether the writer is still writing is a race: it_jvm_heapgraph failed in
# CI on `echo "$facts" | grep -qx "pids $JP"` with "pids $JP" right there.
# This finds such a reader after a pipe in every script that runs under
# pipefail; use qgrep (lib.sh), `sed -n 1p`, or an awk flag instead.
# A line may opt out with "# pipes-lint: ok (why)".
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }

# An early reader right after a "|" (not "||").
EARLY='(^|[^|])\|[[:space:]]*(grep[[:space:]]+(-[a-zA-Z]*[qml][a-zA-Z]*|--quiet|--max-count)|head([[:space:]]|$)|awk[^|]*[{;[:space:]]exit([[:space:];}]|$))'

scan() { # FILE: the offending lines, "FILE:LINE: text"
	grep -nE "$EARLY" "$1" | grep -v 'pipes-lint: ok' | sed "s|^|$1:|" || true
}

# The lint finds what it is for (a pattern that stopped matching would
# pass every script).
T=$(mktemp -d /tmp/pd-pipes.XXXXXX)
trap 'rm -rf "$T"' EXIT
printf '%s\n' 'echo "$x" | grep -qx "pids 1"' 'y=$(cmd | head -n 1)' \
	'nm f | awk '"'"'{ print; exit }'"'" 'a | grep -Eq b' 'c | grep -m1 d' > "$T/bad.sh"
printf '%s\n' 'echo "$x" | qgrep -x "pids 1"' 'a || grep -q b f' 'grep -q b f' \
	'y=$(cmd | sed -n 1p)' 'z | awk '"'"'END { exit !ok }'"'"' # pipes-lint: ok (END)' > "$T/good.sh"
[ "$(scan "$T/bad.sh" | wc -l)" -eq 5 ] || fail "the lint misses a planted early reader: $(scan "$T/bad.sh")"
[ -z "$(scan "$T/good.sh")" ] || fail "the lint flags a safe line: $(scan "$T/good.sh")"

n=0 bad=
# The test drivers, the quick start, and bench/ (not tests, but a figure
# lost to the race is a run_all lost).
for f in "$SRC"/tests/integration/*.sh "$SRC"/tests/hostile/*.sh "$SRC"/tests/vm/*.sh \
	"$SRC"/bench/*.sh "$SRC"/quickstart.sh "$SRC"/.ci/run; do
	[ -f "$f" ] && [ "$f" != "$SRC/tests/integration/pipes_lint.sh" ] || continue
	# Under pipefail: set there, or through lib.sh.
	grep -qE 'pipefail|lib\.sh' "$f" || continue
	n=$((n + 1))
	l=$(scan "$f"); [ -z "$l" ] || bad+="$l"$'\n'
done
[ "$n" -gt 20 ] || fail "only $n scripts under pipefail found in $SRC"
[ -z "$bad" ] || fail "an early reader after a pipe, under pipefail:
$bad"
echo "PASS: $n scripts under pipefail, no early reader after a pipe"
