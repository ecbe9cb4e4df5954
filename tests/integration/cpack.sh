#!/usr/bin/env bash
# `cpack -G DEB` makes a package of the daemon, its helpers, the library with
# its soname, header, pkg-config and CMake files, units, man pages and the
# config (a conffile), with shared-library dependencies filled in.
. "$(dirname "$0")/lib.sh"
command -v dpkg-deb > /dev/null || skip "dpkg-deb is not installed"
command -v dpkg-shlibdeps > /dev/null || skip "dpkg-shlibdeps (dpkg-dev) is not installed"
(cd "$T" && cpack -G DEB -B "$T/pkg" --config "$BUILD/CPackConfig.cmake") > "$T/cpack.log" 2>&1 ||
	{ tail -n 30 "$T/cpack.log"; fail "cpack -G DEB failed"; }
deb=$(ls "$T"/pkg/profilingd_*.deb 2>/dev/null | sed -n 1p)
[ -n "$deb" ] || { tail "$T/cpack.log"; fail "no .deb produced"; }
dpkg-deb -c "$deb" | awk '{ print $NF }' > "$T/files"
for f in sbin/profilingd libexec/profilingd/profilingd-redact libexec/profilingd/profilingd-perf \
	libexec/profilingd/profilingd-ftrace include/profiling/profiling.h libprofiling.so.1 \
	pkgconfig/libprofiling.pc cmake/profiling/profilingConfig.cmake \
	lib/systemd/system/profilingd.service lib/systemd/system/profilingd.socket \
	man8/profilingd.8 man5/profilingd.conf.5 man3/libprofiling.3 etc/profilingd/profilingd.conf; do
	grep -q "$f\$" "$T/files" || { cat "$T/files"; fail "package lacks $f"; }
done
dpkg-deb -f "$deb" Depends > "$T/depends"
for d in libevent libsqlite3 libseccomp libdw1; do
	grep -q "$d" "$T/depends" || fail "Depends lacks $d: $(cat "$T/depends")"
done
# the daemon speaks sd_notify and socket activation itself (svc_sd.c)
! grep -q libsystemd "$T/depends" || fail "Depends has libsystemd: $(cat "$T/depends")"
dpkg-deb -e "$deb" "$T/ctl"
grep -q "/etc/profilingd/profilingd.conf$" "$T/ctl/conffiles" || fail "config is not a conffile"
# Maintainer scripts: executable, valid sh, and postinst enables both
# units through deb-systemd-helper (a stand-in here that logs its calls).
for f in postinst prerm postrm; do
	[ -x "$T/ctl/$f" ] || fail "no executable $f in the package"
	sh -n "$T/ctl/$f" || fail "$f is not valid sh"
done
mkdir -p "$T/fakebin"
printf '#!/bin/sh\necho "$(basename "$0") $*" >> "%s/helper.log"\n[ "$1" != --quiet ] || exit 0\n' "$T" \
	> "$T/fakebin/deb-systemd-helper"
cp "$T/fakebin/deb-systemd-helper" "$T/fakebin/deb-systemd-invoke"
cp "$T/fakebin/deb-systemd-helper" "$T/fakebin/systemctl"
chmod +x "$T/fakebin/"*
# getent and useradd stand-ins: the redactor's user is missing at first.
printf '#!/bin/sh\necho "getent $*" >> "%s/helper.log"\ngrep -q "^useradd .* profilingd-redact$" "%s/helper.log"\n' \
	"$T" "$T" > "$T/fakebin/getent"
printf '#!/bin/sh\necho "useradd $*" >> "%s/helper.log"\n' "$T" > "$T/fakebin/useradd"
chmod +x "$T/fakebin/"*
PATH="$T/fakebin:$PATH" sh "$T/ctl/postinst" configure || fail "postinst configure failed"
for u in profilingd.socket profilingd.service; do
	grep -q "^deb-systemd-helper enable $u$" "$T/helper.log" ||
		fail "postinst does not enable $u: $(cat "$T/helper.log")"
done
grep -q "^useradd --system .*--shell /usr/sbin/nologin .*profilingd-redact$" "$T/helper.log" ||
	fail "postinst does not create the redactor's user: $(cat "$T/helper.log")"
# Configured again (an upgrade): the user exists, no second useradd.
PATH="$T/fakebin:$PATH" sh "$T/ctl/postinst" configure 1.0 || fail "postinst configure (upgrade) failed"
[ "$(grep -c "^useradd " "$T/helper.log")" -eq 1 ] ||
	fail "postinst runs useradd although the user exists: $(cat "$T/helper.log")"
PATH="$T/fakebin:$PATH" sh "$T/ctl/postrm" purge || fail "postrm purge failed"
grep -q "^deb-systemd-helper purge profilingd.socket profilingd.service$" "$T/helper.log" ||
	fail "postrm purge does not purge the units' state"
pass "$(basename "$deb"): $(wc -l < "$T/files") entries, depends on $(tr ',' '\n' < "$T/depends" | wc -l) packages"
