#!/usr/bin/env bash
# bench/redact_throughput: profilingd-redact throughput and peak RSS on
# synthetic captures from redact_gen: a gzip'd pprof (stored blocks, as
# profilingd's runtimes send it: PP_GZ_HOP in common/pprof.h), a Perfetto trace
# (track events on fd 0, the kernel's sched_switch bundles on fd 3, as the
# daemon hands them over) and a HotSpot-style HPROF. Each
# input is redacted to /dev/null and to a file; wall time is the best of
# ROUNDS runs, peak RSS the largest "Maximum resident set size" that
# /usr/bin/time -v saw. The trace and the HPROF also run at a quarter of
# their size, to show whether RSS grows with the input. Goals (issue #18):
# pprof > 200 MB/s with a flat peak RSS under 8 MiB, Perfetto > 400 MB/s,
# HPROF > 200 MB/s; RSS flat in the input size. The peer, in the same run
# on the same files: `protoc --decode` (one full protobuf pass; for the
# pprof behind `gzip -dc`, as the file is gzip'd), with the schemas of
# proto/. MB = 10^6 bytes, MB/s of input bytes, RSS in MiB; CPU_MB/s is
# per second of the redactor's own user + system CPU (best of ROUNDS; all
# its threads: the pprof redactor inflates and deflates on a gzip worker
# thread beside the parser, so its wall time can beat it), which a loaded
# machine stretches far less than the wall clock. The load average is
# printed first: with fewer free cores than threads the wall time is the
# threads' CPU shared out, not their overlap. redact_gen
# writes pprof with common/pprof.c (samples last: the redactor's one pass);
# the same profile re-encoded by protoc (samples first) shows the two-pass
# path. The same profile gzip'd at level 6 (what the runtimes sent before
# issue #18, and what another producer may send) is measured too, with its
# gzip floor for zlib and ISA-L: inflating it is what caps that row. The trace is
# redacted on three threads (rdc_perfetto.c: the kernel's stream on two,
# the runtime's beside it); its one-thread figure (--one-thread) is
# measured in the same run and printed beside.
# Not a test: it asserts nothing.
#   usage: bench/redact_throughput [BUILD_DIR] [HPROF_MB] [TRACE_MB] [PPROF_SAMPLES] [ROUNDS]
set -euo pipefail
# One machine-readable figure for bench/run_all.sh (see its header).
summary() { [ -z "${PD_BENCH_SUMMARY:-}" ] || printf '%s|%s|%s|%s|%s\n' "$@" >> "$PD_BENCH_SUMMARY"; }
BUILD=$(cd "${1:-$(dirname "$0")/..}" && pwd)
[ -x "$BUILD/bench/redact_gen" ] || BUILD=$(cd "$BUILD/build" && pwd)
HPROF_MB=${2:-${PD_BENCH_QUICK:+50}}
HPROF_MB=${HPROF_MB:-200}
TRACE_MB=${3:-${PD_BENCH_QUICK:+50}}
TRACE_MB=${TRACE_MB:-200}
PPROF_N=${4:-${PD_BENCH_QUICK:+50000}}
PPROF_N=${PPROF_N:-200000}
ROUNDS=${5:-${PD_BENCH_QUICK:+1}}
ROUNDS=${ROUNDS:-3}
GEN=$BUILD/bench/redact_gen
REDACT=$BUILD/redact/profilingd-redact
[ -x "$GEN" ] && [ -x "$REDACT" ] || { echo "build redact_gen and profilingd-redact first" >&2; exit 1; }
if [ ! -x /usr/bin/time ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	apt-get install -y time > /dev/null 2>&1 || true
fi
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
if ! command -v protoc > /dev/null && [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
	apt-get install -y protobuf-compiler > /dev/null 2>&1 || true
fi
# The schemas for protoc: the source tree this build came from.
SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)
PROTOC=$(command -v protoc || true)
[ -n "$PROTOC" ] && [ -f "$SRC/proto/profile.proto" ] || PROTOC=

T=$(mktemp -d /tmp/pd-redactbench.XXXXXX)
trap 'rm -rf "$T"' EXIT
PID=4242
# redact_gen's app threads are PID..PID+7.
TIDS=$(seq -s, $((PID + 1)) $((PID + 7)))
small() { local s=$(($1 / 4)); [ "$s" -ge 1 ] && echo "$s" || echo 1; }

echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "generating inputs in $T ..."
"$GEN" pprof "$(small "$PPROF_N")" "$PID" > "$T/small.pb.gz" 2> "$T/gen.log"
"$GEN" pprof "$PPROF_N" "$PID" > "$T/large.pb.gz" 2>> "$T/gen.log"
"$GEN" pprof "$PPROF_N" "$PID" 6 > "$T/large6.pb.gz" 2>> "$T/gen.log"
"$GEN" perfetto "$(small "$TRACE_MB")" "$PID" > "$T/small.pftrace" 3> "$T/small.pftrace.kernel" \
	2>> "$T/gen.log"
"$GEN" perfetto "$TRACE_MB" "$PID" > "$T/large.pftrace" 3> "$T/large.pftrace.kernel" \
	2>> "$T/gen.log"
"$GEN" hprof "$(small "$HPROF_MB")" > "$T/small.hprof" 2>> "$T/gen.log"
"$GEN" hprof "$HPROF_MB" > "$T/large.hprof" 2>> "$T/gen.log"
sed 's/^/  /' "$T/gen.log"
for f in small large; do
	echo "  $f.pb.gz inflates to $(gzip -dc "$T/$f.pb.gz" | wc -c) bytes"
done
PPROF_RAW=$(gzip -dc "$T/large.pb.gz" | wc -c)

# one FORMAT FILE SINK [FLAG..]: best wall seconds, max RSS KiB and the
# status line of ROUNDS runs into $T/res; a failed run is reported, not fatal.
one() {
	local fmt=$1 in=$2 sink=$3 best="" cpu="" rss=0 st="" rc=0
	shift 3
	local out=/dev/null kin=/dev/null kopt=()
	# A trace's kernel half comes on fd 3, as from the daemon.
	[ "$fmt" = perfetto ] && kin=$in.kernel && kopt=(--kernel-fd 3)
	[ "$sink" = file ] && out=$T/out
	for _ in $(seq "$ROUNDS"); do
		local t0 t1
		t0=$(date +%s%N)
		rc=0
		/usr/bin/time -v -o "$T/tv" "$REDACT" --format "$fmt" --pids "$PID" --tids "$TIDS" \
			"${kopt[@]}" "$@" --allow-root < "$in" 3< "$kin" > "$out" 2> "$T/st" || rc=$?
		t1=$(date +%s%N)
		st=$(grep -v '^Command exited with non-zero status' "$T/st" | tail -n 1)
		local r
		r=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$T/tv")
		[ "$r" -gt "$rss" ] && rss=$r
		local w=$((t1 - t0)) c
		{ [ -z "$best" ] || [ "$w" -lt "$best" ]; } && best=$w
		# user + system CPU, in ns: what a loaded machine does not inflate
		c=$(awk -F': ' '/User time|System time/ { s += $2 } END { printf "%d", s * 1e9 }' "$T/tv")
		{ [ -z "$cpu" ] || [ "$c" -lt "$cpu" ]; } && cpu=$c
		[ "$rc" -ne 0 ] && break
	done
	rm -f "$T/out"
	echo "$best $cpu $rss $rc $st" > "$T/res"
}

# mbps BYTES NS: MB/s. cpu_mbps BYTES CPU_NS: the same per second of CPU,
# "-" under 50 ms (/usr/bin/time counts CPU in 10 ms steps).
mbps() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.1f", b * 1e3 / ns }'; }
cpu_mbps() { awk -v b="$1" -v c="$2" 'BEGIN { if (c >= 5e7) printf "%.1f", b * 1e3 / c; else print "-" }'; }
# rates BYTES: "MB/s CPU_MB/s" of the last one() run, "- -" if it failed.
rates() {
	local ns cns rc
	read -r ns cns _ rc _ < "$T/res"
	if [ "$rc" -eq 0 ]; then echo "$(mbps "$1" "$ns") $(cpu_mbps "$1" "$cns")"; else echo "- -"; fi
}

printf '%-9s %-6s %9s %-5s %8s %9s %9s %8s  %s\n' input size MB sink wall_s MB/s CPU_MB/s RSS_MiB status
declare -A RATE RSS CPURATE
for fmt in pprof perfetto hprof; do
	case $fmt in
	pprof) ext=pb.gz ;;
	perfetto) ext=pftrace ;;
	hprof) ext=hprof ;;
	esac
	for size in small large; do
		in=$T/$size.$ext
		bytes=$(stat -c %s "$in")
		[ "$fmt" = perfetto ] && bytes=$((bytes + $(stat -c %s "$in.kernel")))
		for sink in null file; do
			one "$fmt" "$in" "$sink"
			read -r ns cns rss rc st < "$T/res"
			[ "$rc" -ne 0 ] && st="FAILED (exit $rc): $st"
			RATE[$fmt.$size.$sink]=$(mbps "$bytes" "$ns")
			CPURATE[$fmt.$size.$sink]=$(cpu_mbps "$bytes" "$cns")
			awk -v f="$fmt" -v s="$size" -v b="$bytes" -v k="$sink" -v ns="$ns" -v r="$rss" \
				-v st="$st" -v m="${RATE[$fmt.$size.$sink]}" -v cm="${CPURATE[$fmt.$size.$sink]}" 'BEGIN {
				printf "%-9s %-6s %9.1f %-5s %8.3f %9s %9s %8.1f  %s\n", f, s, b / 1e6, k,
					ns / 1e9, m, cm, r / 1024, st }'
			[ "$fmt.$size.$sink" = pprof.large.null ] && PPROF_NS=$ns
			RSS[$fmt.$size.$sink]=$(awk -v r="$rss" 'BEGIN { printf "%.1f", r / 1024 }')
		done
	done
done

# The peer: best wall time of ROUNDS runs of `protoc --decode` (text to
# /dev/null) over the same large files; "-" when protoc is missing.
peer_ns() {
	local best="" t0 t1
	for _ in $(seq "$ROUNDS"); do
		t0=$(date +%s%N)
		"$@" > /dev/null 2>&1 || { echo -; return; }
		t1=$(date +%s%N)
		{ [ -z "$best" ] || [ $((t1 - t0)) -lt "$best" ]; } && best=$((t1 - t0))
	done
	echo "$best"
}
pprof_decode() { gzip -dc "$T/large.pb.gz" | protoc --decode=perftools.profiles.Profile \
	-I "$SRC/proto" "$SRC/proto/profile.proto"; }
trace_decode() { cat "$T/large.pftrace.kernel" "$T/large.pftrace" | protoc \
	--decode=perfetto.protos.Trace -I "$SRC/proto" "$SRC/proto/perfetto_trace.proto"; }
# The same profile gzip'd at level 6: a producer other than profilingd's
# runtimes (or the runtimes before issue #18).
one pprof "$T/large6.pb.gz" null
read -r L6_RATE L6_CPU < <(rates "$(stat -c %s "$T/large6.pb.gz")")
# The pprof redactor's gzip floor on that level-6 file, in-process:
# inflating the input once, deflating (level 1) what it keeps once; zlib's,
# and ISA-L's when the build has it (then the redactor uses it).
"$REDACT" --format pprof --pids "$PID" --allow-root < "$T/large6.pb.gz" 2> /dev/null |
	gzip -dc > "$T/kept.pb" 2> /dev/null || true
read -r INFLATE_NS DEFLATE_NS IINFLATE_NS IDEFLATE_NS < <("$GEN" zlib "$T/large6.pb.gz" \
	"$T/kept.pb" 2> /dev/null || echo - - - -)
# The same profile in protoc's field order (strings and tables after the
# samples, as Go and protobuf-c write it): the redactor's two-pass path.
# redact_gen writes with common/pprof.c, samples last: one pass.
TWO_RATE=- TWO_CPU=-
if [ -n "$PROTOC" ]; then
	gzip -dc "$T/large.pb.gz" | protoc --decode=perftools.profiles.Profile -I "$SRC/proto" \
		"$SRC/proto/profile.proto" | protoc --encode=perftools.profiles.Profile \
		-I "$SRC/proto" "$SRC/proto/profile.proto" | "$GEN" gz > "$T/twopass.pb.gz"
	one pprof "$T/twopass.pb.gz" null
	read -r TWO_RATE TWO_CPU < <(rates "$(stat -c %s "$T/twopass.pb.gz")")
fi
# The trace on one thread (the kernel's stream is redacted on two by
# default, rdc_perfetto.c): what the second thread adds, in this run.
one perfetto "$T/large.pftrace" null --one-thread
read -r PF1_RATE PF1_CPU < <(rates $(( $(stat -c %s "$T/large.pftrace") + $(stat -c %s "$T/large.pftrace.kernel") )))
declare -A PEER
PEER[pprof]=- PEER[perfetto]=- PEER[hprof]=-
if [ -n "$PROTOC" ]; then
	PEER[pprof]=$(peer_ns pprof_decode)
	PEER[perfetto]=$(peer_ns trace_decode)
fi

echo
echo "goals: pprof > 200 MB/s and peak RSS < 8 MiB, Perfetto > 400 MB/s, HPROF > 200 MB/s;"
echo "peak RSS flat in the input size (large vs small, to /dev/null). Peer: protoc --decode."
for fmt in pprof perfetto hprof; do
	rate=${RATE[$fmt.large.null]} rf=${RATE[$fmt.large.file]}
	rs=${RSS[$fmt.small.null]} rl=${RSS[$fmt.large.null]}
	case $fmt in
	pprof) goal=200 ext=pb.gz ;;
	perfetto) goal=400 ext=pftrace ;;
	hprof) goal=200 ext=hprof ;;
	esac
	bytes=$(stat -c %s "$T/large.$ext")
	[ "$fmt" = perfetto ] && bytes=$((bytes + $(stat -c %s "$T/large.pftrace.kernel")))
	peer=- prate=-
	if [ "${PEER[$fmt]}" != - ]; then
		prate=$(awk -v b="$bytes" -v ns="${PEER[$fmt]}" 'BEGIN { printf "%.1f", b * 1e3 / ns }')
		peer="protoc --decode"
	fi
	awk -v f="$fmt" -v rate="$rate" -v rf="$rf" -v rs="$rs" -v rl="$rl" -v g="$goal" \
		-v pr="$prate" 'BEGIN {
		met = rate > g ? "goal met" : "below goal"
		if (f == "pprof" && rl >= 8) met = met ", RSS over 8 MiB"
		flat = rl / rs < 1.25 ? "flat" : "grows"
		printf "  %-9s %7.1f MB/s to /dev/null, %7.1f to a file (> %d: %s); RSS %.1f -> %.1f MiB, x%.2f (%s); protoc --decode %s MB/s\n",
			f, rate, rf, g, met, rs, rl, rl / rs, flat, pr }'
	goaltext="> $goal MB/s"
	[ "$fmt" = pprof ] && goaltext="> 200 MB/s, peak RSS < 8 MiB"
	label="redactor: $fmt throughput to /dev/null (peak RSS ${rl} MiB)"
	[ "$fmt" = pprof ] && label="redactor: pprof throughput to /dev/null, input gzip'd as the runtimes send it (stored; at level 6: $L6_RATE MB/s; peak RSS ${rl} MiB)"
	[ "$fmt" = perfetto ] && label="redactor: perfetto throughput to /dev/null, on 3 threads (on 1: $PF1_RATE MB/s; peak RSS ${rl} MiB)"
	summary "$label" "$rate MB/s" "$peer" \
		"$([ "$prate" = - ] && echo - || echo "$prate MB/s")" "$goaltext"
	# A goal missed: the reason in this run's figures (bench/run_all.sh).
	if [ -n "${PD_BENCH_WHY:-}" ] && awk -v r="$rate" -v g="$goal" 'BEGIN { exit !(r <= g) }'; then
		cr=${CPURATE[$fmt.large.null]}
		if [ "$cr" = - ]; then
			cr="its CPU was under what /usr/bin/time resolves (50 ms): the input is too small to tell CPU from start-up"
		else
			cr="per second of its own CPU (user + system, all threads) it did $cr MB/s in this run: below $goal, the CPU is short however the threads overlap; above it, the wall time lost to waiting or to other jobs"
		fi
		printf '%s|%s\n' "redactor: $fmt > $goal MB/s: $rate MB/s" \
			"${cr^} (load average $(cut -d' ' -f1-3 /proc/loadavg) after the run, $(nproc) CPUs)." \
			>> "$PD_BENCH_WHY"
	fi
done
echo "  perfetto: on three threads (the kernel's stream on two, the runtime's beside it); on one (--one-thread) $PF1_RATE MB/s," \
	"CPU $PF1_CPU MB/s"
awk -v raw="$PPROF_RAW" -v ns="$PPROF_NS" 'BEGIN {
	printf "  pprof MB/s is of the input as the runtimes send it (gzip, stored blocks: the\n"
	printf "  profile plus 5 bytes a 64 KiB block); of the profile itself %.1f MB/s.\n", raw * 1e3 / ns }'
echo "  the same profile gzip'd at level 6 (another producer; the runtimes before issue #18):" \
	"$L6_RATE MB/s, CPU $L6_CPU MB/s"
echo "  the same profile in protoc's field order (tables after the samples: two passes):" \
	"$TWO_RATE MB/s, CPU $TWO_CPU MB/s"
[ "$INFLATE_NS" != - ] && [ "$DEFLATE_NS" != - ] && awk -v b="$(stat -c %s "$T/large6.pb.gz")" \
	-v i="$INFLATE_NS" -v d="$DEFLATE_NS" -v ii="$IINFLATE_NS" -v id="$IDEFLATE_NS" 'BEGIN {
	printf "  the gzip floor in-process, for the level-6 file: inflating it takes %.1f ms with zlib, deflating\n", i / 1e6
	printf "  what is kept at level 1 %.1f ms", d / 1e6
	if (ii != "-")
		printf "; with ISA-L (what the redactor uses) %.1f and %.1f ms", ii / 1e6, id / 1e6
	else { ii = i; id = d }
	printf ".\n  The redactor inflates once when the samples come last (common/pprof.c), twice\n"
	printf "  otherwise, and deflates once, both on one gzip worker thread beside the\n"
	printf "  parser, which runs a codec itself when it would wait: inflating alone caps it\n"
	printf "  near %.1f MB/s (one pass) with a core each; inflate and deflate on one core,\n", b * 1e3 / ii
	printf "  %.1f MB/s (one pass), %.1f (two), which the parser helping can pass.\n",
		b * 1e3 / (ii + id), b * 1e3 / (2 * ii + id) }'
[ -n "$PROTOC" ] || echo "  protoc not found (apt-get install protobuf-compiler): no peer figure."
