#!/usr/bin/env bash
# Every docs/man/*.[0-9] renders with `man -l` (MANWIDTH=80) to a non-empty
# page with its NAME section, and groff reports no warning (-ww). The C
# example in libprofiling(3) compiles against the tree's header.
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
CC=${PD_CC:-cc}
command -v man > /dev/null || { echo "skipped: man (man-db) is not installed"; exit 77; }
command -v groff > /dev/null || { echo "skipped: groff (groff-base) is not installed"; exit 77; }
T=$(mktemp -d /tmp/pd-man.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

n=0
for page in "$SRC"/docs/man/*.[0-9]; do
	[ -e "$page" ] || fail "no man pages in docs/man"
	name=$(basename "$page")
	groff -ww -man -Tutf8 -z "$page" > "$T/groff.log" 2>&1 || true
	[ ! -s "$T/groff.log" ] || { cat "$T/groff.log"; fail "$name: groff warnings"; }
	MANWIDTH=80 MAN_KEEP_FORMATTING= man -l "$page" > "$T/page.txt" 2> "$T/man.err" ||
		{ cat "$T/man.err"; fail "$name: man -l failed"; }
	[ ! -s "$T/man.err" ] || { cat "$T/man.err"; fail "$name: man -l printed errors"; }
	lines=$(wc -l < "$T/page.txt")
	[ "$lines" -ge 20 ] || fail "$name: only $lines lines rendered"
	grep -q "^NAME" "$T/page.txt" && grep -q "^SEE ALSO" "$T/page.txt" ||
		fail "$name: no NAME or SEE ALSO section"
	long=$(awk 'length > 80' "$T/page.txt" | head -3)
	[ -z "$long" ] || { echo "$long"; fail "$name: lines wider than MANWIDTH=80"; }
	echo "$name: $lines lines"
	n=$((n + 1))
done
for want in profilingd.8 profilingd.conf.5 libprofiling.3; do
	[ -f "$SRC/docs/man/$want" ] || fail "docs/man/$want is missing"
done

# libprofiling(3)'s example, unescaped from roff, is a valid program.
sed -n '/^\.SH EXAMPLES/,/^\.SH/p' "$SRC/docs/man/libprofiling.3" |
	sed -n '/^\.EX/,/^\.EE/p' | sed '1d;$d' | head -n 200 |
	sed -e 's/\\-/-/g' -e 's/\\e/\\/g' > "$T/example.c"
grep -q "prof_add_trigger" "$T/example.c" || fail "no example in libprofiling(3)"
"$CC" -std=c11 -Wall -Wextra -Wno-unused-parameter -Werror -fsyntax-only -I "$SRC/client/include" "$T/example.c" ||
	{ cat -n "$T/example.c"; fail "libprofiling(3) example does not compile"; }
echo "PASS: $n man pages render cleanly; libprofiling(3) example compiles"
