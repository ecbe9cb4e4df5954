/*
 * profilingd-ftrace: records kernel scheduling data for one system-trace
 * session in a tracefs instance of its own, so the user's tracing is left
 * alone, and writes it to fd 1 as Perfetto TracePackets (FtraceEventBundle
 * per CPU). Run by the daemon as root; one status line goes to fd 2.
 *
 *   profilingd-ftrace --duration-ms D [--buffer-kb K] [--instance NAME]
 *
 * Events: sched_switch, sched_waking, sched_process_fork/exec/exit,
 * task_rename, oom mark_victim (where the kernel has them). The instance
 * clock is "boot", i.e. CLOCK_BOOTTIME, the flight recorder's clock.
 * Exit: 0 done; 69 tracefs unavailable (the reason on fd 2); 70 other.
 *
 * The text of the instance's `trace` file is parsed; fields that follow a
 * task name are found from the right, so a name that looks like a field
 * cannot move a pid.
 */
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
#include <time.h>
#include <unistd.h>

#include "perfetto_trace.pb-c.h"
#include "util.h"

#define EXIT_NOTRACEFS 69
#define EXIT_OTHER 70
#define BUNDLE_MAX 512           /* events per FtraceEventBundle packet */
#define MAX_CPUS 1024
#define LINE_MAX_LEN 4096
#define SEQ_ID_KERNEL 1          /* the kernel data's packet sequence */

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

/* One pending bundle per CPU; events own their strings until flushed. */
struct bundle {
	Perfetto__Protos__FtraceEvent ev[BUNDLE_MAX];
	union {
		Perfetto__Protos__SchedSwitchFtraceEvent sw;
		Perfetto__Protos__SchedWakingFtraceEvent wk;
		Perfetto__Protos__SchedProcessForkFtraceEvent fk;
		Perfetto__Protos__SchedProcessExecFtraceEvent ex;
		Perfetto__Protos__SchedProcessExitFtraceEvent xt;
		Perfetto__Protos__TaskRenameFtraceEvent rn;
		Perfetto__Protos__MarkVictimFtraceEvent mv;
	} body[BUNDLE_MAX];
	char strs[BUNDLE_MAX][2][64];
	Perfetto__Protos__FtraceEvent *ptrs[BUNDLE_MAX];
	unsigned n;
};

static struct bundle *bundles[MAX_CPUS];

static void flush_bundle(struct out *o, unsigned cpu)
{
	struct bundle *b = bundles[cpu];
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

/* The last " key=" in [s, end), or NULL. */
static const char *rfind(const char *s, const char *end, const char *key)
{
	size_t k = strlen(key);
	for (const char *p = end - (ptrdiff_t)k; p >= s; p--)
		if (memcmp(p, key, k) == 0)
			return p;
	return NULL;
}

static bool num_after(const char *p, const char *key, long *v)
{
	char *e;
	p += strlen(key);
	errno = 0;
	*v = strtol(p, &e, 10);
	return e != p && errno == 0;
}

/* Copy [a, b) into dst (64 bytes), NUL-terminated. */
static char *span(char *dst, const char *a, const char *b)
{
	size_t n = b > a ? (size_t)(b - a) : 0;
	if (n > 63)
		n = 63;
	memcpy(dst, a, n);
	dst[n] = '\0';
	return dst;
}

struct parsed {
	unsigned cpu;
	long pid;
	uint64_t ts;
	const char *event, *fields, *end;
};

/* "<comm>-<pid> [<cpu>] <flags> <secs>.<usecs>: <event>: <fields>" */
static bool parse_header(char *line, struct parsed *pr)
{
	char *br = NULL;
	for (char *p = line; (p = strstr(p, " [")) != NULL; p++) {
		char *q = p + 2;
		while (*q >= '0' && *q <= '9')
			q++;
		if (q > p + 2 && *q == ']') {
			br = p;
			break;
		}
	}
	if (!br)
		return false;
	/* pid: the digits right before " [", after the task name's last '-'. */
	char *d = br;
	while (d > line && d[-1] == ' ')
		d--;
	char *ds = d;
	while (ds > line && ds[-1] >= '0' && ds[-1] <= '9')
		ds--;
	if (ds == d || ds == line || ds[-1] != '-')
		return false;
	pr->pid = strtol(ds, NULL, 10);
	pr->cpu = (unsigned)strtoul(br + 2, NULL, 10);
	char *p = strchr(br, ']') + 1;
	while (*p == ' ')
		p++;
	while (*p && *p != ' ')
		p++; /* flags */
	while (*p == ' ')
		p++;
	char *e;
	unsigned long long secs = strtoull(p, &e, 10);
	if (e == p || *e != '.')
		return false;
	char *u = e + 1;
	unsigned long long frac = strtoull(u, &e, 10);
	int digits = (int)(e - u);
	if (digits <= 0 || digits > 9 || *e != ':')
		return false;
	for (int i = digits; i < 9; i++)
		frac *= 10;
	pr->ts = secs * 1000000000ull + frac;
	p = e + 1;
	while (*p == ' ')
		p++;
	char *colon = strstr(p, ": ");
	if (!colon)
		return false;
	*colon = '\0';
	pr->event = p;
	pr->fields = colon + 2;
	pr->end = pr->fields + strlen(pr->fields);
	return true;
}

static bool parse_event(struct bundle *b, struct parsed *pr)
{
	unsigned i = b->n;
	Perfetto__Protos__FtraceEvent *ev = &b->ev[i];
	const char *f = pr->fields, *end = pr->end;
	long v1, v2, v3;

	perfetto__protos__ftrace_event__init(ev);
	ev->has_timestamp = 1;
	ev->timestamp = pr->ts;
	ev->has_pid = 1;
	ev->pid = (uint32_t)pr->pid;
	if (!strcmp(pr->event, "sched_switch")) {
		Perfetto__Protos__SchedSwitchFtraceEvent *s = &b->body[i].sw;
		perfetto__protos__sched_switch_ftrace_event__init(s);
		const char *np = rfind(f, end, " next_prio="), *npid, *nc, *arrow, *ps, *pp, *ppid;
		if (!np || !(npid = rfind(f, np, " next_pid=")) || !(nc = rfind(f, npid, " next_comm=")) ||
		    !(arrow = rfind(f, nc + 1, " ==>")) || !(ps = rfind(f, arrow, " prev_state=")) ||
		    !(pp = rfind(f, ps, " prev_prio=")) || !(ppid = rfind(f, pp, " prev_pid=")) ||
		    strncmp(f, "prev_comm=", 10) != 0)
			return false;
		if (!num_after(np, " next_prio=", &v1) || !num_after(npid, " next_pid=", &v2) ||
		    !num_after(pp, " prev_prio=", &v3))
			return false;
		s->has_next_prio = 1; s->next_prio = (int32_t)v1;
		s->has_next_pid = 1; s->next_pid = (int32_t)v2;
		s->has_prev_prio = 1; s->prev_prio = (int32_t)v3;
		if (!num_after(ppid, " prev_pid=", &v1))
			return false;
		s->has_prev_pid = 1; s->prev_pid = (int32_t)v1;
		s->next_comm = span(b->strs[i][0], nc + 11, npid);
		s->prev_comm = span(b->strs[i][1], f + 10, ppid);
		/* prev_state letters back to the kernel's TASK_* bits (R = 0). */
		s->has_prev_state = 1;
		s->prev_state = 0;
		for (const char *q = ps + 12; *q && *q != ' '; q++) {
			const char *letters = "SDTtXZPI";
			const char *hit = strchr(letters, *q);
			if (hit && *q)
				s->prev_state |= *q == 'I' ? 0x402 : 1 << (hit - letters);
		}
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH;
		ev->sched_switch = s;
	} else if (!strcmp(pr->event, "sched_waking")) {
		Perfetto__Protos__SchedWakingFtraceEvent *s = &b->body[i].wk;
		perfetto__protos__sched_waking_ftrace_event__init(s);
		const char *tc = rfind(f, end, " target_cpu="), *pr_, *pd;
		if (!tc || !(pr_ = rfind(f, tc, " prio=")) || !(pd = rfind(f, pr_, " pid=")) ||
		    strncmp(f, "comm=", 5) != 0 || !num_after(pd, " pid=", &v1) ||
		    !num_after(tc, " target_cpu=", &v2) || !num_after(pr_, " prio=", &v3))
			return false;
		s->has_pid = 1; s->pid = (int32_t)v1;
		s->has_target_cpu = 1; s->target_cpu = (int32_t)v2;
		s->has_prio = 1; s->prio = (int32_t)v3;
		s->comm = span(b->strs[i][0], f + 5, pd);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING;
		ev->sched_waking = s;
	} else if (!strcmp(pr->event, "sched_process_fork")) {
		Perfetto__Protos__SchedProcessForkFtraceEvent *s = &b->body[i].fk;
		perfetto__protos__sched_process_fork_ftrace_event__init(s);
		const char *cp = rfind(f, end, " child_pid="), *cc, *pd;
		if (!cp || !(cc = rfind(f, cp, " child_comm=")) || !(pd = rfind(f, cc, " pid=")) ||
		    strncmp(f, "comm=", 5) != 0 || !num_after(cp, " child_pid=", &v1) ||
		    !num_after(pd, " pid=", &v2))
			return false;
		s->has_child_pid = 1; s->child_pid = (int32_t)v1;
		s->has_parent_pid = 1; s->parent_pid = (int32_t)v2;
		s->child_comm = span(b->strs[i][0], cc + 12, cp);
		s->parent_comm = span(b->strs[i][1], f + 5, pd);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK;
		ev->sched_process_fork = s;
	} else if (!strcmp(pr->event, "sched_process_exec")) {
		Perfetto__Protos__SchedProcessExecFtraceEvent *s = &b->body[i].ex;
		perfetto__protos__sched_process_exec_ftrace_event__init(s);
		const char *op = rfind(f, end, " old_pid="), *pd;
		if (!op || !(pd = rfind(f, op, " pid=")) || strncmp(f, "filename=", 9) != 0 ||
		    !num_after(op, " old_pid=", &v1) || !num_after(pd, " pid=", &v2))
			return false;
		s->has_old_pid = 1; s->old_pid = (int32_t)v1;
		s->has_pid = 1; s->pid = (int32_t)v2;
		s->filename = span(b->strs[i][0], f + 9, pd);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXEC;
		ev->sched_process_exec = s;
	} else if (!strcmp(pr->event, "sched_process_exit")) {
		Perfetto__Protos__SchedProcessExitFtraceEvent *s = &b->body[i].xt;
		perfetto__protos__sched_process_exit_ftrace_event__init(s);
		const char *pr_ = rfind(f, end, " prio="), *pd;
		if (!pr_ || !(pd = rfind(f, pr_, " pid=")) || strncmp(f, "comm=", 5) != 0 ||
		    !num_after(pd, " pid=", &v1))
			return false;
		s->has_pid = 1; s->pid = (int32_t)v1;
		s->comm = span(b->strs[i][0], f + 5, pd);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXIT;
		ev->sched_process_exit = s;
	} else if (!strcmp(pr->event, "task_rename")) {
		Perfetto__Protos__TaskRenameFtraceEvent *s = &b->body[i].rn;
		perfetto__protos__task_rename_ftrace_event__init(s);
		const char *oom = rfind(f, end, " oom_score_adj="), *nc, *oc;
		if (!oom || !(nc = rfind(f, oom, " newcomm=")) || !(oc = rfind(f, nc, " oldcomm=")) ||
		    strncmp(f, "pid=", 4) != 0 || !num_after(f - 1, " pid=", &v1))
			return false;
		s->has_pid = 1; s->pid = (int32_t)v1;
		s->oldcomm = span(b->strs[i][0], oc + 9, nc);
		s->newcomm = span(b->strs[i][1], nc + 9, oom);
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME;
		ev->task_rename = s;
	} else if (!strcmp(pr->event, "mark_victim")) {
		Perfetto__Protos__MarkVictimFtraceEvent *s = &b->body[i].mv;
		perfetto__protos__mark_victim_ftrace_event__init(s);
		if (strncmp(f, "pid=", 4) != 0 || !num_after(f - 1, " pid=", &v1))
			return false;
		s->has_pid = 1; s->pid = (int32_t)v1;
		ev->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MARK_VICTIM;
		ev->mark_victim = s;
	} else {
		return false;
	}
	b->n++;
	return true;
}

static int enable_events(void)
{
	static const char *const ev[] = {
		"sched/sched_switch", "sched/sched_waking", "sched/sched_process_fork",
		"sched/sched_process_exec", "sched/sched_process_exit", "task/task_rename",
		"oom/mark_victim",
	};
	int ok = 0;
	write_str(inst, "events/enable", "0");
	for (size_t i = 0; i < sizeof(ev) / sizeof(ev[0]); i++) {
		char f[128];
		snprintf(f, sizeof(f), "events/%s/enable", ev[i]);
		if (write_str(inst, f, "1") == 0)
			ok++;
	}
	return ok;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "buffer-kb", required_argument, NULL, 'b' },
		{ "instance", required_argument, NULL, 'i' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	unsigned long dur = 0, kb = 4096;
	char name[64], tracefs[128], val[32];
	int c, r;

	snprintf(name, sizeof(name), "profilingd-%d", (int)getpid());
	while ((c = getopt_long(argc, argv, "d:b:i:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd': dur = strtoul(optarg, NULL, 10); break;
		case 'b': kb = strtoul(optarg, NULL, 10); break;
		case 'i':
			if (strchr(optarg, '/') || util_strlcpy(name, optarg, sizeof(name)) >= sizeof(name))
				goto usage;
			break;
		case 'h':
		default:
			goto usage;
		}
	}
	if (dur < 1 || dur > 600000 || kb < 64 || kb > 1048576)
		goto usage;
	if ((r = find_tracefs(tracefs, sizeof(tracefs))) < 0) {
		dprintf(2, "error: tracefs unavailable: %s\n", strerror(-r));
		return EXIT_NOTRACEFS;
	}
	if (util_fmt(inst, sizeof(inst), "%s/instances/%s", tracefs, name) < 0)
		return EXIT_OTHER;
	rmdir(inst); /* left by a run that was killed */
	if (mkdir(inst, 0700) < 0) {
		dprintf(2, "error: cannot create trace instance %s: %s\n", inst, strerror(errno));
		inst[0] = '\0';
		return EXIT_NOTRACEFS;
	}
	atexit(remove_instance);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	snprintf(val, sizeof(val), "%lu", kb);
	if (write_str(inst, "trace_clock", "boot") < 0 || write_str(inst, "buffer_size_kb", val) < 0) {
		dprintf(2, "error: cannot configure %s\n", inst);
		return EXIT_OTHER;
	}
	int nev = enable_events();
	if (nev == 0) {
		dprintf(2, "error: no sched events in %s\n", inst);
		return EXIT_NOTRACEFS;
	}
	write_str(inst, "tracing_on", "1");
	uint64_t until = util_mono_ms() + dur;
	while (!stop && util_mono_ms() < until)
		poll(NULL, 0, 20);
	write_str(inst, "tracing_on", "0");

	char tpath[640];
	util_fmt(tpath, sizeof(tpath), "%s/trace", inst);
	FILE *f = fopen(tpath, "re");
	if (!f) {
		dprintf(2, "error: cannot read %s: %s\n", tpath, strerror(errno));
		return EXIT_OTHER;
	}
	struct out *o = calloc(1, sizeof(*o));
	char *line = malloc(LINE_MAX_LEN);
	uint64_t events = 0, unparsed = 0, lost = 0;
	unsigned maxcpu = 0;
	if (!o || !line)
		return EXIT_OTHER;
	while (fgets(line, LINE_MAX_LEN, f)) {
		if (line[0] == '#')
			continue;
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (strstr(line, "LOST") && strstr(line, "EVENTS")) {
			lost++;
			continue;
		}
		struct parsed pr;
		if (!parse_header(line, &pr) || pr.cpu >= MAX_CPUS) {
			if (line[0])
				unparsed++;
			continue;
		}
		if (!bundles[pr.cpu] && !(bundles[pr.cpu] = calloc(1, sizeof(struct bundle))))
			return EXIT_OTHER;
		if (!parse_event(bundles[pr.cpu], &pr)) {
			unparsed++;
			continue;
		}
		events++;
		if (pr.cpu > maxcpu)
			maxcpu = pr.cpu;
		if (bundles[pr.cpu]->n == BUNDLE_MAX)
			flush_bundle(o, pr.cpu);
	}
	fclose(f);
	for (unsigned cpu = 0; cpu <= maxcpu; cpu++)
		flush_bundle(o, cpu);
	out_flush(o);
	if (o->err) {
		dprintf(2, "error: writing the trace: %s\n", strerror(-o->err));
		return EXIT_OTHER;
	}
	dprintf(2, "ok events=%llu unparsed=%llu lost=%llu bytes=%llu enabled=%d\n",
		(unsigned long long)events, (unsigned long long)unparsed, (unsigned long long)lost,
		(unsigned long long)o->total, nev);
	for (unsigned cpu = 0; cpu < MAX_CPUS; cpu++)
		free(bundles[cpu]);
	free(o);
	free(line);
	return 0;
usage:
	fprintf(stderr, "usage: profilingd-ftrace --duration-ms 1..600000 [--buffer-kb 64..1048576] "
		"[--instance NAME]\nRecords sched events in a tracefs instance of its own and writes "
		"them as Perfetto packets on stdout.\n");
	return EXIT_OTHER;
}
