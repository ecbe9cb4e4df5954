#!/usr/bin/env bash
# profctl against the real daemon: every subcommand in table and --json
# form (the JSON parsed), real captures (the demo app as root and as another
# uid, a system trace, a profctl request of a running process), the flame
# graph checked as XML and against go tool pprof's share of hot_function,
# rendered by headless Chromium where it is installed, and a non-root uid
# that sees only its own results and may not request captures.
. "$(dirname "$0")/lib.sh"
need_go
command -v python3 > /dev/null || skip "python3 is needed to parse JSON and the SVG"
command -v xmllint > /dev/null || skip "xmllint (libxml2-utils) is needed to check the SVG"
command -v setpriv > /dev/null || skip "setpriv (util-linux) is needed to run an app as another uid"
[ "$(id -u)" = 0 ] || skip "needs root (root-only request, another uid's app)"
A=61012
PROFCTL=$BUILD/tools/profctl/profctl
export PROFCTL_SOCKET=$T/state/control.sock
# The spinners profctl requests have no agent: do not wait long for one.
start_daemon "[capture]" "runtime_wait_ms = 300" \
	"[trigger.ctl-spin]" "type = excessive-cpu" "exe = /nonexistent/ctl-spin" \
	"cpu_percent = 90" "cpu_window_ms = 1000"
for _ in $(seq 100); do [ -S "$PROFCTL_SOCKET" ] && break; sleep 0.05; done
[ -S "$PROFCTL_SOCKET" ] || fail "no control socket at $PROFCTL_SOCKET"
[ "$(stat -c %a "$PROFCTL_SOCKET")" = 666 ] || fail "control.sock mode is not 0666"

json() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
as_a() { setpriv --reuid=$A --regid=$A --clear-groups env PROFCTL_SOCKET="$PROFCTL_SOCKET" \
	PROFILINGD_SOCKET="$PROFILINGD_SOCKET" "$@"; }
chmod 755 "$BUILD" "$BUILD/client" "$BUILD/tools" "$BUILD/tools/profctl" \
	"$BUILD/tests" "$BUILD/tests/integration" "$APPS" 2>/dev/null || true

# --- usage and connection errors: documented exit codes, one line each.
rc=0; "$PROFCTL" frobnicate 2> "$T/e" || rc=$?
[ $rc = 2 ] || fail "unknown command exit $rc, want 2"
rc=0; "$PROFCTL" --socket "$T/nope.sock" status 2> "$T/e" || rc=$?
[ $rc = 3 ] || fail "no daemon: exit $rc, want 3"
grep -q "cannot connect to $T/nope.sock: No such file or directory (is profilingd running? see --socket)" "$T/e" ||
	fail "connect error not readable: $(cat "$T/e")"
[ "$(wc -l < "$T/e")" = 1 ] || fail "connect error is not one line"
"$PROFCTL" --help | qgrep "flame ID -o" || fail "--help does not list flame"
# Each command's own help: its usage line and what it does; exit 0.
for c in status apps triggers ratelimit results show top flame collapsed export request; do
	"$PROFCTL" "$c" --help > "$T/h" || fail "profctl $c --help: exit $?"
	head -1 "$T/h" | qgrep "^usage: profctl .* $c" || fail "profctl $c --help: $(head -1 "$T/h")"
	[ "$(wc -l < "$T/h")" -ge 2 ] || fail "profctl $c --help says nothing about it"
done
"$PROFCTL" request --help | qgrep -- "--wait" || fail "request --help does not list --wait"
rc=0; "$PROFCTL" show 2> "$T/e" || rc=$?
[ $rc = 2 ] && grep -q "show takes one ID (see profctl show --help)" "$T/e" ||
	fail "profctl show without an ID: exit $rc, $(cat "$T/e")"

# --- captures: root's demo, uid A's demo, a system trace.
root_out=$("$DEMO" --threads 2 --duration-ms 2000 --frequency 200 2> "$T/demo.err") ||
	{ cat "$T/demo.err"; fail "root demo failed"; }
a_out=$(as_a "$DEMO" --duration-ms 500 2> "$T/a.err") || { cat "$T/a.err"; fail "app A's demo failed"; }
t_out=$("$APPS/trace_app" 2> "$T/t.err") || { cat "$T/t.err"; fail "trace_app failed"; }

# --- status while an app with a runtime agent captures itself: its runtime is listed.
"$DEMO" --threads 1 --duration-ms 3000 > /dev/null 2>&1 &
DEMO_PID=$!
rt=
for _ in $(seq 150); do
	rt=$("$PROFCTL" --json status | json "[(r['kind'], r['caps']) for r in d['runtimes'] if r['pid']==$DEMO_PID]")
	[ "$rt" != "[]" ] && break
	sleep 0.1
done
echo "status: runtime of pid $DEMO_PID: $rt"
echo "$rt" | qgrep "'native', \[.*'stack_sampling'" || fail "status does not list the demo's runtime"
"$PROFCTL" status > "$T/st-rt.txt" || fail "status with a runtime"
grep -Eq "^$DEMO_PID +0 +native +.*stack_sampling" "$T/st-rt.txt" ||
	{ kill -0 $DEMO_PID 2> /dev/null || skip_rt=1; [ -n "${skip_rt:-}" ] ||
	  fail "status table lacks the runtime of $DEMO_PID: $(cat "$T/st-rt.txt")"; }
wait $DEMO_PID || fail "the background demo failed"

# --- status
"$PROFCTL" status > "$T/status.txt" || fail "status failed"
cat "$T/status.txt"
ver=$("$PROFILINGD" -V | cut -d' ' -f2)
grep -q "^profilingd $ver, pid $DAEMON_PID, up" "$T/status.txt" ||
	fail "status header"
for w in process-events cpu hang memory pressure; do
	grep -q "^$w " "$T/status.txt" || fail "status lacks watcher $w"
done
grep -q "^system " "$T/status.txt" || fail "status lacks the system budget"
"$PROFCTL" --json status > "$T/status.json" || fail "status --json failed"
python3 -m json.tool "$T/status.json" > /dev/null || fail "status --json is not JSON"
[ "$(json 'len(d["watchers"])' < "$T/status.json")" = 5 ] || fail "status --json watchers"
[ "$(json 'd["ratelimit"][0]["windows"][0]["length_s"]' < "$T/status.json")" = 3600 ] ||
	fail "status --json: first window is not 1 h"
[ "$(json 'd["pid"]' < "$T/status.json")" = "$DAEMON_PID" ] || fail "status --json pid"

# --- results, show: ids of root's and A's captures.
"$PROFCTL" --json results > "$T/results.json" || fail "results --json"
python3 -m json.tool "$T/results.json" > /dev/null || fail "results --json is not JSON"
RID=$(json "[r['id'] for r in d if r['path']=='$root_out'][0]" < "$T/results.json") || fail "root's result not listed"
AID=$(json "[r['id'] for r in d if r['path']=='$a_out'][0]" < "$T/results.json") || fail "A's result not listed"
TID=$(json "[r['id'] for r in d if r['path']=='$t_out'][0]" < "$T/results.json") || fail "the trace not listed"
"$PROFCTL" results > "$T/results.txt" || fail "results"
grep -Eq "^$RID +.* uid:0 +stack " "$T/results.txt" || fail "results table lacks $RID"
grep -Eq "^$AID +.* uid:$A +stack " "$T/results.txt" || fail "results table lacks $AID"
"$PROFCTL" results $A | qgrep -E "^$RID " && fail "results $A lists root's result"
"$PROFCTL" show "$RID" > "$T/show.txt" || fail "show"
grep -q "^Path: *$root_out\$" "$T/show.txt" || fail "show: path"
grep -q "^Type: *stack" "$T/show.txt" || fail "show: type"
[ "$("$PROFCTL" --json show "$RID" | json 'd["format"]')" = pprof ] || fail "show --json format"

# --- apps, triggers, ratelimit
"$PROFCTL" apps | qgrep -E "^uid:$A +$A " || fail "apps lacks uid:$A"
"$PROFCTL" --json apps > "$T/apps.json" && python3 -m json.tool "$T/apps.json" > /dev/null || fail "apps --json"
[ "$(json "[a['results'] for a in d if a['app']=='uid:$A'][0]" < "$T/apps.json")" -ge 1 ] || fail "apps --json results of A"
"$PROFCTL" triggers | qgrep -E "^sys:ctl-spin +excessive-cpu +stack " || fail "triggers lacks the system trigger"
[ "$("$PROFCTL" --json triggers | json '[t["detail"] for t in d if t["app"]=="sys:ctl-spin"][0]')" = \
  "cpu >= 90% for 1000 ms; /nonexistent/ctl-spin" ] || fail "triggers --json detail"
"$PROFCTL" ratelimit uid:0 > "$T/rl.txt" || fail "ratelimit uid:0"
grep -Eq "^uid:0 +[0-9]+/1000000 " "$T/rl.txt" || fail "ratelimit table: $(cat "$T/rl.txt")"
used=$("$PROFCTL" --json ratelimit 0 | json '[b for b in d if b["app"]=="uid:0"][0]["windows"][0]["used"]')
[ "$used" -ge 10 ] || fail "ratelimit --json: root's app used $used, want >= 10 (one request)"

# --- top vs go tool pprof
"$PROFCTL" top "$RID" > "$T/top.txt" || fail "top"
cat "$T/top.txt"
ours=$(awk '$NF == "hot_function" { sub("%", "", $2); print $2 }' "$T/top.txt")
theirs=$(pprof_flat "$root_out" hot_function)
awk -v a="$ours" -v b="$theirs" 'BEGIN { d = a - b; exit !(a > 0 && d < 0.5 && d > -0.5) }' ||
	fail "top: hot_function flat ${ours}% vs go tool pprof ${theirs}%"
"$PROFCTL" --json top "$RID" > "$T/top.json" && python3 -m json.tool "$T/top.json" > /dev/null || fail "top --json"
[ "$(json 'd["functions"][0]["name"]' < "$T/top.json")" = hot_function ] || fail "top --json: first is not hot_function"

# --- collapsed: the same shares
"$PROFCTL" collapsed "$RID" > "$T/collapsed.txt" || fail "collapsed"
head -3 "$T/collapsed.txt"
cshare=$(awk '{ n = $NF; t += n; if ($0 ~ /;hot_function [0-9]+$/) h += n } END { printf "%.2f", 100 * h / t }' "$T/collapsed.txt")
awk -v a="$cshare" -v b="$theirs" 'BEGIN { d = a - b; exit !(d < 0.5 && d > -0.5) }' ||
	fail "collapsed: hot_function ${cshare}% vs ${theirs}%"
"$PROFCTL" --json collapsed "$RID" | python3 -m json.tool > /dev/null || fail "collapsed --json"

# --- flame: well-formed XML, hot_function's width is its share
"$PROFCTL" flame "$RID" -o "$T/flame.svg" > "$T/flame.out" || fail "flame"
cat "$T/flame.out"
xmllint --noout "$T/flame.svg" || fail "flame SVG is not well-formed XML"
grep -Eq '(href|src)=|url\(' "$T/flame.svg" && fail "flame SVG references an external resource"
fshare=$(python3 - "$T/flame.svg" <<'EOF'
import sys, xml.etree.ElementTree as ET
ns = {"s": "http://www.w3.org/2000/svg"}
root = ET.parse(sys.argv[1]).getroot()
total = hot = 0.0
for g in root.iter("{http://www.w3.org/2000/svg}g"):
    r = g.find("s:rect", ns)
    if g.get("data-d") == "0":
        total = float(r.get("width"))
    if g.get("data-n") == "hot_function":
        hot += float(r.get("width"))
print("%.2f" % (100 * hot / total))
EOF
) || fail "cannot measure the SVG"
echo "flame: hot_function ${fshare}% of the width; go tool pprof: ${theirs}%"
awk -v a="$fshare" -v b="$theirs" 'BEGIN { d = a - b; exit !(d < 1 && d > -1) }' ||
	fail "flame: hot_function is ${fshare}% wide, go tool pprof says ${theirs}%"
"$PROFCTL" --json flame "$RID" -o "$T/flame2.svg" | python3 -m json.tool > /dev/null || fail "flame --json"
# A trace's slices as a flame graph.
"$PROFCTL" flame "$TID" -o "$T/trace.svg" > /dev/null || fail "flame of the trace"
xmllint --noout "$T/trace.svg" || fail "trace flame SVG is not well-formed"
grep -q 'data-n="inner-1"' "$T/trace.svg" || fail "trace flame lacks trace_app's slice inner-1"

CHROME=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -n "$CHROME" ]; then
	timeout 60 "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--user-data-dir="$T/chrome" --window-size=1200,400 \
		--screenshot="$T/flame.png" "file://$T/flame.svg" > "$T/chrome.log" 2>&1 ||
		{ cat "$T/chrome.log"; fail "chromium could not render the flame graph"; }
	colours=$(python3 - "$T/flame.png" <<'EOF'
import sys, zlib, struct
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        bpp = {2: 3, 6: 4}[ctype]
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp
prev = bytearray(stride)
colours = set()
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    prev = line
    for x in range(0, w, 3):
        colours.add(bytes(line[x * bpp:x * bpp + 3]))
print(len(colours))
EOF
) || fail "cannot read chromium's screenshot"
	echo "chromium screenshot: $colours distinct colours"
	[ "$colours" -ge 8 ] || fail "the rendered flame graph looks blank ($colours colours)"
else
	echo "skipped: chromium not installed (headless rendering of the flame graph)"
fi

# --- export: byte-identical copy
mkdir "$T/exp"
"$PROFCTL" export "$RID" "$T/exp" > /dev/null || fail "export to a directory"
cmp "$root_out" "$T/exp/$(basename "$root_out")" || fail "export differs from the result"
"$PROFCTL" --json export "$RID" "$T/exp/copy.pb.gz" | python3 -m json.tool > /dev/null || fail "export --json"
cmp "$root_out" "$T/exp/copy.pb.gz" || fail "export (file) differs"

# --- request --wait, not on a TTY: plain phase lines; then --json.
"$DEMO" --no-request --threads 1 --duration-ms 30000 2> /dev/null &
SPIN=$!
timeout 120 "$PROFCTL" request --pid $SPIN --type stack --duration 1s --hz 200 --wait > "$T/req.txt" ||
	{ cat "$T/req.txt"; fail "request --wait failed"; }
cat "$T/req.txt"
grep -Eq "^request [0-9]+: capturing \(" "$T/req.txt" || fail "no plain 'capturing' line"
grep -Eq "^request [0-9]+: redacting \(" "$T/req.txt" || fail "no plain 'redacting' line"
grep -Eq "^request [0-9]+: done: result [0-9]+ at $T/state/results/0/" "$T/req.txt" || fail "no 'done' line"
grep -q $'\r' "$T/req.txt" && fail "progress bar escapes written to a non-TTY"
echo "$(date +%T) request --json --wait"
timeout 120 "$PROFCTL" --json request --pid $SPIN --type stack --duration 500ms --wait > "$T/req.json" ||
	{ cat "$T/req.json"; fail "request --json --wait"; }
[ "$(json 'd["phase"]' < "$T/req.json")" = done ] || fail "request --json: $(cat "$T/req.json")"
json 'd["phases"]' < "$T/req.json" | qgrep capturing || fail "request --json phases"
# Without --wait: accepted at once; status shows the session running.
echo "$(date +%T) request without --wait"
sid=$(timeout 60 "$PROFCTL" --json request --pid $SPIN --type stack --duration 3s | json 'd["request_id"]') ||
	fail "request without --wait"
seen=
for _ in $(seq 100); do
	"$PROFCTL" --json status > "$T/st.json" || fail "status during a capture"
	seen=$(json "[s['phase'] for s in d['sessions'] if s['id']==$sid and s['pid']==$SPIN]" < "$T/st.json")
	[ "$seen" != "[]" ] && break
	sleep 0.1
done
echo "status during request $sid: phase $seen"
echo "$seen" | qgrep -E "waiting-for-runtime|capturing|redacting" || fail "status does not show session $sid"
"$PROFCTL" status | qgrep -E "^$sid +$SPIN +uid:0 +stack " || true
# Until it ended (the next request of the same pid would be refused meanwhile).
for _ in $(seq 120); do
	[ "$("$PROFCTL" --json status | json "any(s['id']==$sid for s in d['sessions'])")" = True ] || break
	sleep 0.25
done
echo "$(date +%T) request $sid ended"
rc=0; "$PROFCTL" request --pid 999999999 --type stack 2> "$T/e" || rc=$?
[ $rc = 1 ] || fail "request of a missing pid: exit $rc, want 1"
kill $SPIN 2> /dev/null || true

# --- request --wait on a TTY: a progress bar, redrawn in place.
if command -v script > /dev/null; then
	"$DEMO" --no-request --threads 1 --duration-ms 30000 2> /dev/null &
	SPIN=$!
	timeout 120 script -qec "$PROFCTL request --pid $SPIN --type stack --duration 1s --wait" /dev/null > "$T/tty.txt" ||
		{ cat "$T/tty.txt"; fail "request --wait on a pty"; }
	kill $SPIN 2> /dev/null || true
	grep -q $'\r\[#*\.*\] *[0-9.]*s/1.0s capturing' "$T/tty.txt" || fail "no progress bar on a TTY: $(cat -v "$T/tty.txt")"
	grep -q "done: result" "$T/tty.txt" || fail "no result line after the progress bar"
	echo "tty progress: $(tr '\r' '\n' < "$T/tty.txt" | grep -c capturing) redraws while capturing"
fi

# --- caps: connections per uid (max_control_per_uid = 4), request size.
python3 - "$PROFCTL_SOCKET" <<'PYEOF' || fail "control connection caps"
import socket, sys, time
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    s.settimeout(10)
    return s
held = [conn() for _ in range(4)]
time.sleep(0.5)
fifth = conn()
assert fifth.recv(100) == b"", "a 5th connection of one uid was kept"
big = held[0]
big.send(b"\x08\x01" + b"\x00" * 5000)
assert big.recv(100) == b"", "an oversized request did not close the connection"
for s in held + [fifth]:
    s.close()
print("caps: 5th connection of a uid closed; oversized request closed its connection")
PYEOF
"$PROFCTL" status > /dev/null || fail "status after the cap test"

# --- a non-root uid: its own results only, no request.
as_a "$PROFCTL" --json results > "$T/a.json" || fail "results as uid $A"
[ "$(json "sorted(set(r['uid'] for r in d))" < "$T/a.json")" = "[$A]" ] || fail "uid $A sees others' results: $(cat "$T/a.json")"
as_a "$PROFCTL" results | qgrep -E "^$RID " && fail "uid $A's results table lists root's result"
as_a "$PROFCTL" show "$AID" > /dev/null || fail "uid $A cannot show its own result"
as_a "$PROFCTL" top "$AID" > /dev/null || fail "uid $A cannot top its own result"
rc=0; as_a "$PROFCTL" show "$RID" 2> "$T/e" || rc=$?
[ $rc = 1 ] || fail "uid $A: show of root's result exit $rc, want 1"
rc=0; as_a "$PROFCTL" export "$RID" "$T/stolen" 2> "$T/e" || rc=$?
[ $rc = 1 ] && [ ! -e "$T/stolen" ] || fail "uid $A exported root's result"
rc=0; as_a "$PROFCTL" results uid:0 2> "$T/e" || rc=$?
[ $rc = 1 ] && grep -q "may only see its own apps" "$T/e" || fail "uid $A: results uid:0 not refused"
rc=0; as_a "$PROFCTL" request --pid $$ --type stack 2> "$T/e" || rc=$?
[ $rc = 1 ] || fail "uid $A: request exit $rc, want 1"
grep -q "^profctl: request is root-only: run profctl as root" "$T/e" || fail "request refusal: $(cat "$T/e")"
as_a "$PROFCTL" --json status > "$T/a-status.json" || fail "status as uid $A"
[ "$(json "[b['app'] for b in d['ratelimit']]" < "$T/a-status.json")" = "[None, 'uid:$A']" ] ||
	fail "uid $A's status shows budgets of others: $(json "d['ratelimit']" < "$T/a-status.json")"
as_a "$PROFCTL" triggers | qgrep "sys:" && fail "uid $A sees system triggers"
as_a "$PROFCTL" --json apps | python3 -c "import json,sys; a=json.load(sys.stdin); sys.exit(any(x['uid']!=$A for x in a))" ||
	fail "uid $A sees other apps"

# An app that puts a FIFO where its result was cannot stall the daemon.
as_a sh -c "rm -f '$a_out' && mkfifo '$a_out'" || fail "cannot replace A's result with a FIFO"
rc=0; as_a timeout 20 "$PROFCTL" top "$AID" 2> "$T/e" || rc=$?
[ $rc = 1 ] && grep -q "not a regular file" "$T/e" || fail "FIFO result: exit $rc: $(cat "$T/e")"
"$PROFCTL" status > /dev/null || fail "daemon stuck after a FIFO result"

daemon_alive || fail "daemon died"
stop_daemon
[ -S "$PROFCTL_SOCKET" ] && fail "control socket not removed at exit"
pass "profctl: every subcommand in table and JSON; flame hot_function ${fshare}% vs pprof ${theirs}%"
