/*
 * profilingd-ftrace: records kernel scheduling data for one system-trace
 * session in a tracefs instance of its own, so the user's tracing is left
 * alone, and writes it to fd 1 as Perfetto TracePackets (FtraceEventBundle
 * per CPU). Run by the daemon as root; one status line goes to fd 2.
 *
 *   profilingd-ftrace --duration-ms D [--buffer-kb K] [--fill ring|discard]
 *                     [--instance NAME] [--background-from NS [--no-lead]]
 *                     [--debug-seccomp]
 *   profilingd-ftrace --background on [--buffer-kb K]
 *   profilingd-ftrace --background off
 *
 * --fill is the buffer fill policy (Android's KEY_BUFFER_FILL_POLICY):
 * ring (default) overwrites the oldest events when the per-CPU buffer is
 * full, so the trace keeps the end; discard stops recording then, so it
 * keeps the start. It is the instance's options/overwrite (1 or 0).
 *
 * Events: sched_switch, sched_waking, sched_process_fork/exec/exit,
 * task_rename, oom mark_victim (where the kernel has them). The instance
 * clock is "boot", i.e. CLOCK_BOOTTIME, the flight recorder's clock.
 * Exit: 0 done; 69 tracefs unavailable (the reason on fd 2); 70 other.
 *
 * The text of the instance's `trace` file is parsed; fields that follow a
 * task name are found from the right, so a name that looks like a field
 * cannot move a pid.
 *
 * The instance is named NAME.PID (NAME from --instance, default
 * "profilingd"). A recorder killed with SIGKILL (the daemon's time cap, or
 * the daemon's own death) cannot remove its instance, whose ring buffers
 * hold kernel memory; so each run first removes the instances named
 * profilingd*.PID whose PID is no longer a profilingd-ftrace. Other
 * instances are left alone.
 *
 * The background trace (docs/PERFETTO.md, "The running background trace")
 * is the instance BG_INSTANCE, which outlives every run: "--background on"
 * creates (or re-sizes) it, with the same events and clock, and leaves
 * tracing on in a ring that overwrites its oldest pages, so it costs
 * kernel memory (K KiB per CPU) and the events' kernel work, and no
 * process at all. "--background off" removes it. Its name has no ".PID",
 * so the stale sweep never takes it. A session run with --background-from
 * NS (CLOCK_BOOTTIME ns, at most BG_MAX_MS back) first turns its own
 * instance on, then copies the ring's events from NS up to that moment
 * (a non-consuming read of its `trace`, with the ring's pause-on-trace
 * off so it keeps recording), then records as usual: one stream, without
 * a gap or a duplicate at the seam. --background on|off exits before the
 * seccomp filter would go on: like a session's setup, it only writes
 * tracefs files.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "ft_parse.h"
#include "ftrace_policy.h"
#include "perfetto_trace.pb-c.h"
#include "sandbox.h"
#include "util.h"

#define MAX_CPUS 1024
#define SEQ_ID_KERNEL 1          /* the kernel data's packet sequence */
#define BG_INSTANCE "profilingd-bg"
#define BG_MAX_MS 3600000u       /* the most --background-from may reach back */

static char inst[512];
static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	stop = 1;
}

static int write_str(const char *dir, const char *file, const char *val)
{
	char path[768];
	if (util_fmt(path, sizeof(path), "%s/%s", dir, file) < 0)
		return -ENAMETOOLONG;
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = util_write_all(fd, val, strlen(val));
	close(fd);
	return r;
}

static int find_tracefs(char *out, size_t n)
{
	static const char *const cand[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	struct stat st;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < 2; i++) {
			char probe[128];
			snprintf(probe, sizeof(probe), "%s/instances", cand[i]);
			if (stat(probe, &st) == 0 && S_ISDIR(st.st_mode)) {
				util_strlcpy(out, cand[i], n);
				return 0;
			}
		}
		/* Not mounted: mount it once, then look again. */
		if (pass == 0 && mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) < 0 &&
		    errno != EBUSY)
			return -errno;
	}
	return -ENOENT;
}

static void remove_instance(void)
{
	if (inst[0]) {
		write_str(inst, "tracing_on", "0");
		rmdir(inst);
	}
}

/* Is pid a running profilingd-ftrace (comm is cut to 15 bytes)? */
static bool recorder_alive(long pid)
{
	char path[64], comm[32];
	snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
	return util_read_file(path, comm, sizeof(comm)) > 0 && !strncmp(comm, "profilingd-ftra", 15);
}

/* Remove the instances of recorders that died without cleaning up. */
static unsigned remove_stale(const char *tracefs)
{
	char dir[160], path[512];
	unsigned n = 0;
	snprintf(dir, sizeof(dir), "%s/instances", tracefs);
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	for (struct dirent *e; (e = readdir(d));) {
		const char *dot = strrchr(e->d_name, '.');
		if (strncmp(e->d_name, "profilingd", 10) || !dot || !isdigit((unsigned char)dot[1]))
			continue;
		char *end;
		long pid = strtol(dot + 1, &end, 10);
		if (*end || pid <= 0 || recorder_alive(pid))
			continue;
		if (util_fmt(path, sizeof(path), "%s/%s", dir, e->d_name) < 0)
			continue;
		write_str(path, "tracing_on", "0");
		if (rmdir(path) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* ---------------------------------------------------------- the output */

struct out {
	uint8_t buf[1 << 16];
	size_t len;
	int err;
	uint64_t total;
};

static void out_flush(struct out *o)
{
	if (o->len && !o->err)
		o->err = util_write_all(1, o->buf, o->len);
	o->total += o->len;
	o->len = 0;
}

static void out_packet(struct out *o, const Perfetto__Protos__TracePacket *p)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(p);
	uint8_t hdr[11];
	size_t h = 0;
	hdr[h++] = 0x0a;
	for (size_t v = n;; v >>= 7) {
		hdr[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	if (o->len + h + n > sizeof(o->buf))
		out_flush(o);
	uint8_t *dst = o->buf + o->len;
	uint8_t *big = NULL;
	if (h + n > sizeof(o->buf)) {
		big = malloc(h + n);
		if (!big) {
			o->err = -ENOMEM;
			return;
		}
		dst = big;
	}
	memcpy(dst, hdr, h);
	perfetto__protos__trace_packet__pack(p, dst + h);
	if (big) {
		if (!o->err)
			o->err = util_write_all(1, big, h + n);
		o->total += h + n;
		free(big);
	} else {
		o->len += h + n;
	}
}

static struct ft_bundle *bundles[MAX_CPUS];

static void flush_bundle(struct out *o, unsigned cpu)
{
	struct ft_bundle *b = bundles[cpu];
	if (!b || !b->n)
		return;
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__FtraceEventBundle fb = PERFETTO__PROTOS__FTRACE_EVENT_BUNDLE__INIT;
	for (unsigned i = 0; i < b->n; i++)
		b->ptrs[i] = &b->ev[i];
	fb.has_cpu = 1;
	fb.cpu = cpu;
	fb.n_event = b->n;
	fb.event = b->ptrs;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS;
	p.ftrace_events = &fb;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID_KERNEL;
	out_packet(o, &p);
	b->n = 0;
}

/* ---------------------------------------------------------- parsing */

static int enable_events(const char *dir)
{
	static const char *const ev[] = {
		"sched/sched_switch", "sched/sched_waking", "sched/sched_process_fork",
		"sched/sched_process_exec", "sched/sched_process_exit", "task/task_rename",
		"oom/mark_victim",
	};
	int ok = 0;
	write_str(dir, "events/enable", "0");
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		char f[128];
		snprintf(f, sizeof(f), "events/%s/enable", ev[i]);
		if (write_str(dir, f, "1") == 0)
			ok++;
	}
	return ok;
}

/* What a read of one `trace` file found (the status line's figures). */
struct read_stats {
	uint64_t events, unparsed, lost, skipped;
	uint64_t first_ns, last_ns;      /* of the events kept; 0 if none */
	uint64_t short_ns;               /* a window: how far the ring falls short of lo */
};

/* Append one line's event to its CPU's bundle (flushed when full). */
static int add_line(struct out *o, char *line, struct read_stats *st, unsigned *maxcpu)
{
	struct ft_line pr;
	if (ft_parse_header(line, &pr) < 0 || pr.cpu >= MAX_CPUS) {
		st->unparsed++;
		return 0;
	}
	if (!bundles[pr.cpu] && !(bundles[pr.cpu] = calloc(1, sizeof(struct ft_bundle))))
		return EX_SOFTWARE;
	if (ft_parse_event(bundles[pr.cpu], &pr) < 0) {
		st->unparsed++;
		return 0;
	}
	st->events++;
	if (!st->first_ns || pr.ts < st->first_ns)
		st->first_ns = pr.ts;
	if (pr.ts > st->last_ns)
		st->last_ns = pr.ts;
	if (pr.cpu > *maxcpu)
		*maxcpu = pr.cpu;
	if (bundles[pr.cpu]->n == FT_BUNDLE_MAX)
		flush_bundle(o, pr.cpu);
	return 0;
}

/*
 * Convert the events of the `trace` file at path whose timestamps lie in
 * [lo, hi) to bundles on fd 1, all flushed before it returns (so a second
 * read starts on empty bundles). 0, or an EX_* code with the reason on
 * fd 2.
 *
 * With lead (a window of the ring) each CPU's window is led by the last
 * sched_switch before lo on that CPU: it says who ran there when the
 * window opens, so the trace starts at or before lo rather than at the
 * window's first event, wherever the ring reaches back that far. Without
 * (--no-lead: lo is the target's birth, and a switch before it may name
 * the previous holder of its pid) nothing before lo is written.
 */
static int read_trace(const char *path, struct out *o, uint64_t lo, uint64_t hi, bool lead,
		      struct read_stats *st)
{
	static char *held[MAX_CPUS];     /* the lead switch's raw line, per CPU */
	static uint64_t oldest[MAX_CPUS]; /* each CPU's oldest event in the file */
	int rc = 0;
	FILE *f = fopen(path, "re");
	if (!f) {
		dprintf(2, "error: cannot read %s: %s\n", path, strerror(errno));
		return EX_SOFTWARE;
	}
	/* The header is parsed on a copy (the parse cuts its line up) to
	 * choose; add_line parses the line itself. */
	char *line = malloc(FT_LINE_MAX), *hdr = malloc(FT_LINE_MAX);
	unsigned maxcpu = 0;
	if (!line || !hdr) {
		fclose(f);
		free(line);
		free(hdr);
		return EX_SOFTWARE;
	}
	while (!rc && fgets(line, FT_LINE_MAX, f)) {
		if (line[0] == '#')
			continue;
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (strstr(line, "LOST") && strstr(line, "EVENTS")) {
			st->lost++;
			continue;
		}
		size_t len = strlen(line) + 1;
		memcpy(hdr, line, len);
		struct ft_line pr;
		if (ft_parse_header(hdr, &pr) < 0 || pr.cpu >= MAX_CPUS) {
			if (line[0])
				st->unparsed++;
			continue;
		}
		if (lo && !oldest[pr.cpu])
			oldest[pr.cpu] = pr.ts;
		if (pr.ts < lo || pr.ts >= hi) {
			if (pr.ts < lo && lead && !strcmp(pr.event, "sched_switch")) {
				if (!held[pr.cpu] && !(held[pr.cpu] = malloc(FT_LINE_MAX)))
					rc = EX_SOFTWARE;
				else
					memcpy(held[pr.cpu], line, len);
			}
			st->skipped++;
			continue;
		}
		if (held[pr.cpu] && held[pr.cpu][0]) {
			rc = add_line(o, held[pr.cpu], st, &maxcpu);
			held[pr.cpu][0] = '\0';
		}
		if (!rc)
			rc = add_line(o, line, st, &maxcpu);
	}
	/* CPUs whose window had no event still say who ran there. A CPU whose
	 * oldest event is after lo lost the start of the window (the ring
	 * wrapped, or began later). */
	for (unsigned cpu = 0; cpu < MAX_CPUS; cpu++) {
		if (oldest[cpu] > lo && oldest[cpu] - lo > st->short_ns)
			st->short_ns = oldest[cpu] - lo;
		oldest[cpu] = 0;
		if (held[cpu] && held[cpu][0] && !rc)
			rc = add_line(o, held[cpu], st, &maxcpu);
		free(held[cpu]);
		held[cpu] = NULL;
	}
	fclose(f);
	free(line);
	free(hdr);
	for (unsigned cpu = 0; cpu <= maxcpu; cpu++)
		flush_bundle(o, cpu);
	return rc;
}

/* The instance's clock, "boot": what the `trace` timestamps count. */
static uint64_t boot_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * --background on|off: set up or remove the running ring, then exit. The
 * setup is redone on an existing instance, so a new ring size takes effect
 * (the kernel drops the ring's contents when it is resized).
 */
static int background(const char *tracefs, bool on, unsigned long kb)
{
	char dir[256], val[32];
	if (util_fmt(dir, sizeof(dir), "%s/instances/" BG_INSTANCE, tracefs) < 0)
		return EX_SOFTWARE;
	if (!on) {
		if (write_str(dir, "tracing_on", "0") == -ENOENT) {
			dprintf(2, "ok background off removed=0\n");
			return 0;
		}
		if (rmdir(dir) < 0 && errno != ENOENT) {
			dprintf(2, "error: cannot remove %s: %s\n", dir, strerror(errno));
			return EX_SOFTWARE;
		}
		dprintf(2, "ok background off removed=1\n");
		return 0;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		dprintf(2, "error: cannot create trace instance %s: %s\n", dir, strerror(errno));
		return EX_UNAVAILABLE;
	}
	snprintf(val, sizeof(val), "%lu", kb);
	write_str(dir, "tracing_on", "0");
	if (write_str(dir, "trace_clock", "boot") < 0 || write_str(dir, "buffer_size_kb", val) < 0 ||
	    write_str(dir, "options/overwrite", "1") < 0) {
		dprintf(2, "error: cannot configure %s\n", dir);
		rmdir(dir);
		return EX_SOFTWARE;
	}
	/* A session's read must not stop the ring (kernels before 5.11 have
	 * no such option and pause it for the read: a short gap). */
	write_str(dir, "options/pause-on-trace", "0");
	int nev = enable_events(dir);
	if (nev == 0) {
		dprintf(2, "error: no sched events in %s\n", dir);
		rmdir(dir);
		return EX_UNAVAILABLE;
	}
	if (write_str(dir, "tracing_on", "1") < 0) {
		dprintf(2, "error: cannot start %s\n", dir);
		rmdir(dir);
		return EX_SOFTWARE;
	}
	dprintf(2, "ok background on buffer_kb=%lu enabled=%d\n", kb, nev);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "buffer-kb", required_argument, NULL, 'b' },
		{ "instance", required_argument, NULL, 'i' },
		{ "fill", required_argument, NULL, 'f' },
		{ "background", required_argument, NULL, 'B' },
		{ "background-from", required_argument, NULL, 'n' },
		{ "no-lead", no_argument, NULL, 'L' },
		{ "debug-seccomp", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long dur = 0, kb = 4096;
	unsigned long long bg_from = 0;
	char name[64], tracefs[128], val[32];
	int c, r, bg_mode = -1; /* --background: -1 absent, 0 off, 1 on */
	bool debug_seccomp = false, lead = true;
	bool discard = false;

	/* It holds the whole machine's sched data (sandbox.h). */
	if ((r = sbx_no_dump()) < 0)
		return util_fail(EX_SOFTWARE, "PR_SET_DUMPABLE: %s", strerror(-r));
	util_strlcpy(name, "profilingd", sizeof(name));
	while ((c = getopt_long(argc, argv, "d:b:i:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dur = strtoul(optarg, NULL, 10); break;
		case 'b': kb = strtoul(optarg, NULL, 10); break;
		case 'i':
			if (strchr(optarg, '/') || util_strlcpy(name, optarg, sizeof(name)) >= 48)
				goto usage;
			break;
		case 'f':
			if (!strcmp(optarg, "discard"))
				discard = true;
			else if (strcmp(optarg, "ring"))
				goto usage;
			break;
		case 'B':
			if (!strcmp(optarg, "on"))
				bg_mode = 1;
			else if (!strcmp(optarg, "off"))
				bg_mode = 0;
			else
				goto usage;
			break;
		case 'n': bg_from = strtoull(optarg, NULL, 10); break;
		case 'L': lead = false; break;
		case 'S':
			debug_seccomp = true;
			break;
		case 'h':
		default:
			goto usage;
		}
	}
	if (kb < 64 || kb > 1048576)
		goto usage;
	if (bg_mode < 0 && (dur < 1 || dur > 600000))
		goto usage;
	if ((r = find_tracefs(tracefs, sizeof(tracefs))) < 0) {
		dprintf(2, "error: tracefs unavailable: %s\n", strerror(-r));
		return EX_UNAVAILABLE;
	}
	if (bg_mode >= 0)
		return background(tracefs, bg_mode == 1, kb);
	unsigned stale = remove_stale(tracefs);
	if (util_fmt(inst, sizeof(inst), "%s/instances/%s.%d", tracefs, name, (int)getpid()) < 0)
		return EX_SOFTWARE;
	if (mkdir(inst, 0700) < 0) {
		dprintf(2, "error: cannot create trace instance %s: %s\n", inst, strerror(errno));
		inst[0] = '\0';
		return EX_UNAVAILABLE;
	}
	atexit(remove_instance);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	snprintf(val, sizeof(val), "%lu", kb);
	if (write_str(inst, "trace_clock", "boot") < 0 || write_str(inst, "buffer_size_kb", val) < 0 ||
	    write_str(inst, "options/overwrite", discard ? "0" : "1") < 0) {
		dprintf(2, "error: cannot configure %s\n", inst);
		return EX_SOFTWARE;
	}
	int nev = enable_events(inst);
	if (nev == 0) {
		dprintf(2, "error: no sched events in %s\n", inst);
		return EX_UNAVAILABLE;
	}
	/* The seam: the ring gives what came before, this instance the rest. */
	uint64_t seam = boot_ns();
	write_str(inst, "tracing_on", "1");
	/* Sandbox last: what is left is the wait, reading out and the rmdir. */
	if ((r = sbx_install(ftrace_policy, ftrace_policy_count, debug_seccomp)) < 0) {
		dprintf(2, "error: cannot install the seccomp filter: %s\n", strerror(-r));
		return EX_SOFTWARE;
	}
	uint64_t until = util_mono_ms() + dur;
	struct out *o = calloc(1, sizeof(*o));
	struct read_stats bg = { 0 }, own = { 0 };
	const char *bg_note = "none";
	if (!o)
		return EX_SOFTWARE;
	if (bg_from) {
		/* No ring (background = off, or removed): the session goes on
		 * without the time before it, and the status line says so. */
		char bgpath[256];
		struct stat sb;
		util_fmt(bgpath, sizeof(bgpath), "%s/instances/" BG_INSTANCE "/trace", tracefs);
		bg_note = "absent";
		if (stat(bgpath, &sb) == 0) {
			uint64_t far = seam > BG_MAX_MS * 1000000ull ? seam - BG_MAX_MS * 1000000ull : 0;
			uint64_t lo = bg_from > far ? bg_from : far;
			if ((r = read_trace(bgpath, o, lo, seam, lead, &bg)) != 0)
				return r;
			bg_note = "read";
		}
	}
	while (!stop && util_mono_ms() < until)
		poll(NULL, 0, 20);
	write_str(inst, "tracing_on", "0");

	char tpath[640];
	util_fmt(tpath, sizeof(tpath), "%s/trace", inst);
	if ((r = read_trace(tpath, o, 0, UINT64_MAX, false, &own)) != 0)
		return r;
	out_flush(o);
	if (o->err) {
		dprintf(2, "error: writing the trace: %s\n", strerror(-o->err));
		return EX_SOFTWARE;
	}
	dprintf(2, "ok events=%llu unparsed=%llu lost=%llu bytes=%llu enabled=%d stale_removed=%u "
		"fill=%s", (unsigned long long)own.events, (unsigned long long)(own.unparsed + bg.unparsed),
		(unsigned long long)(own.lost + bg.lost), (unsigned long long)o->total, nev, stale,
		discard ? "discard" : "ring");
	if (bg_from)
		dprintf(2, " background=%s bg_events=%llu bg_from_ms=%llu bg_short_ms=%llu",
			bg_note, (unsigned long long)bg.events,
			(unsigned long long)(bg.first_ns ? (seam - bg.first_ns) / 1000000 : 0),
			(unsigned long long)(bg.short_ns / 1000000));
	dprintf(2, "\n");
	for (unsigned cpu = 0; cpu < MAX_CPUS; cpu++)
		free(bundles[cpu]);
	free(o);
	return 0;
usage:
	fprintf(stderr, "usage: profilingd-ftrace --duration-ms 1..600000 [--buffer-kb 64..1048576] "
		"[--fill ring|discard] [--instance NAME]\n       [--background-from BOOTTIME_NS [--no-lead]] [--debug-seccomp]\n"
		"       profilingd-ftrace --background on [--buffer-kb K] | --background off\nRecords sched events in a tracefs instance of its own and writes "
		"them as Perfetto packets on stdout.\nOnce tracing is on it runs under "
		"policy/seccomp/ftrace.policy; --debug-seccomp traps\na forbidden call and names it "
		"(exit 75) instead of a kill.\n--background on|off sets up or removes the running ring "
		"(instances/" BG_INSTANCE ");\n--background-from NS starts the stream with its events since NS "
		"(CLOCK_BOOTTIME, at most %u ms back).\n", BG_MAX_MS);
	return EX_SOFTWARE;
}
