#!/usr/bin/env bash
# Packaging: `cmake --install` into a temp prefix, then only the installed
# tree is used: its profilingd (helpers found in <prefix>/libexec/profilingd),
# a tiny app built with `pkg-config --cflags --libs libprofiling`, the same
# app built by a CMake project with find_package(profiling), and the README's
# C examples compiled against it. The apps connect and get delivered results.
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
P=$T/prefix
CC=${PD_CC:-cc}
# A sanitizer build's library needs the sanitizer runtime in the executable.
SANFLAGS=
[ -n "${PD_SANITIZE:-}" ] && SANFLAGS="-fsanitize=address,undefined"

cmake --install "$BUILD" --prefix "$P" > "$T/install.log" 2>&1 ||
	{ cat "$T/install.log"; fail "cmake --install failed"; }
# The redactor runs as its own user: it must reach its binary.
chmod -R go+rX "$P"

for f in sbin/profilingd libexec/profilingd/profilingd-redact libexec/profilingd/profilingd-ftrace \
	 libexec/profilingd/profilingd-perf include/profiling/profiling.h \
	 lib/pkgconfig/libprofiling.pc lib/cmake/profiling/profilingConfig.cmake \
	 lib/systemd/system/profilingd.service lib/systemd/system/profilingd.socket \
	 etc/profilingd/profilingd.conf; do
	[ -e "$P/$f" ] || fail "not installed: $f"
done
for m in "$SRC"/docs/man/*.[0-9]; do
	[ -e "$m" ] || continue
	s=${m##*.}
	[ -f "$P/share/man/man$s/$(basename "$m")" ] || fail "man page not installed: $(basename "$m")"
done
soname=$(readelf -d "$P/lib/libprofiling.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libprofiling.so.1 ] || fail "libprofiling soname is '$soname', want libprofiling.so.1"
[ -f "$P/lib/$soname" ] || fail "$soname is not installed"
grep -q "^ExecStart=$(cd "$BUILD" && cmake -L -N . 2>/dev/null | sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p')/sbin/profilingd$" \
	"$P/lib/systemd/system/profilingd.service" || fail "the unit's ExecStart is not the configured sbin/profilingd"

# The shipped default config passes --check-config with the installed daemon.
"$P/sbin/profilingd" --check-config "$P/etc/profilingd/profilingd.conf" > /dev/null ||
	fail "the installed default config does not pass --check-config"

export PKG_CONFIG_PATH=$P/lib/pkgconfig
flags=$(pkg-config --cflags --libs libprofiling) || fail "pkg-config does not know libprofiling"
libdir=$(pkg-config --variable=libdir libprofiling)
echo "pkg-config: $flags"
case "$flags" in *"$BUILD"*|*"$SRC"*) fail "pkg-config points into the build or source tree";; esac
# shellcheck disable=SC2086
$CC -std=c11 -Wall -Wextra -Werror $SANFLAGS -o "$T/pkg_app" "$SRC/tests/integration/apps/install/pkg_app.c" \
	$flags -Wl,-rpath,"$libdir" 2> "$T/cc.log" || { cat "$T/cc.log"; fail "tiny app does not build"; }
# (into a file: grep -q ending a pipe early would fail it under pipefail)
ldd "$T/pkg_app" > "$T/ldd.txt"
grep -q "libprofiling.so.1 => $P/" "$T/ldd.txt" || { cat "$T/ldd.txt"; fail "app does not load the installed lib"; }

# The README's examples, as printed there: the file-scope part of the first
# block (the callback), then its body as a main(). A later block that
# connects itself (the OOM trigger) is the body of a main() of its own; one
# that does not (the budget query) goes on after the first block's body,
# whose connection it uses.
awk '/^```c$/ { n++; on=1; next } /^```$/ { on=0 } on { print > (dir "/readme" n ".c.part") }' \
	dir="$T" "$SRC/README.md"
[ -f "$T/readme1.c.part" ] && [ -f "$T/readme2.c.part" ] || fail "README has no two C examples"
grep -lq PROF_TRIGGER_OOM "$T"/readme[2-9].c.part || fail "no README C example is the OOM trigger"
end=$(grep -n '^}' "$T/readme1.c.part" | sed -n 1p | cut -d: -f1)
examples=()
for part in "$T"/readme[2-9].c.part; do
	n=$(basename "$part" .c.part)
	if grep -q prof_connect "$part"; then
		{
			echo '#include <stdio.h>'
			head -n "$end" "$T/readme1.c.part"
			echo 'int main(void) { int err;'
			cat "$part"
			echo 'prof_close(c); return 0; }'
		} > "$T/$n.c"
	else
		{
			echo '#include <stdio.h>'
			head -n "$end" "$T/readme1.c.part"
			echo 'int main(void) {'
			tail -n +"$((end + 1))" "$T/readme1.c.part"
			cat "$part"
			echo 'return 0; }'
		} > "$T/$n.c"
	fi
	examples+=("$n")
done
{
	echo '#include <stdio.h>'
	head -n "$end" "$T/readme1.c.part"
	echo 'int main(void) {'
	tail -n +"$((end + 1))" "$T/readme1.c.part"
	echo 'return 0; }'
} > "$T/readme1.c"
for ex in readme1 "${examples[@]}"; do
	# shellcheck disable=SC2086
	$CC -std=c11 -Wall -Werror $SANFLAGS -o "$T/$ex" "$T/$ex.c" $flags 2> "$T/cc.log" ||
		{ cat -n "$T/$ex.c"; cat "$T/cc.log"; fail "README example $ex does not compile"; }
done

# find_package(profiling) from a CMake project.
cmake -S "$SRC/tests/integration/apps/install/consumer" -B "$T/consumer" -DCMAKE_PREFIX_PATH="$P" \
	-DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$SANFLAGS" -DCMAKE_BUILD_RPATH="$libdir" \
	> "$T/consumer.log" 2>&1 && cmake --build "$T/consumer" >> "$T/consumer.log" 2>&1 ||
	{ cat "$T/consumer.log"; fail "find_package(profiling) consumer does not build"; }

# The installed daemon, not the build tree's.
PROFILINGD=$P/sbin/profilingd
start_daemon
grep -q "redactor $P/libexec/profilingd/profilingd-redact" "$T/daemon.log" ||
	fail "the installed daemon does not use the installed redactor"

out=$("$T/pkg_app" 2> "$T/app.err") || { cat "$T/app.err"; fail "pkg-config app got no result"; }
cat "$T/app.err"
case "$out" in "$T/state/results/$(id -u)/"*) ;; *) fail "unexpected result path '$out'";; esac
[ -s "$out" ] || fail "delivered result $out is empty"
out2=$("$T/consumer/pkg_app_cmake" 2> "$T/app2.err") || { cat "$T/app2.err"; fail "find_package app got no result"; }
[ -s "$out2" ] && [ "$out2" != "$out" ] || fail "find_package app: bad result '$out2'"
daemon_alive || fail "daemon died"
stop_daemon
pass "installed tree: daemon + helpers from $P, pkg-config and find_package apps got $(stat -c %s "$out") and $(stat -c %s "$out2") byte results"
