/*
 * redact_gen: synthetic raw captures for bench/redact_throughput, written
 * to stdout. A one-line summary goes to stderr. Deterministic (fixed seed).
 *
 *   redact_gen pprof N_SAMPLES PID [LEVEL] > f.pb.gz
 *	A gzip'd pprof, at zlib LEVEL (default 0: stored, PP_GZ_HOP, as
 *	profilingd's runtimes send it), of N_SAMPLES samples over 2,000 functions (8,000
 *	locations in one user mapping, 256 in the kernel's). Even samples are
 *	the app's (pid=PID), odd ones another process's (pid=PID+1), so the
 *	redactor drops half. Every sample has a thread_id label; about a
 *	third start with one to four kernel frames (>= 0xffff800000000000).
 *
 *   redact_gen perfetto SIZE_MB PID > f.pftrace 3> f.pftrace.kernel
 *	A Perfetto trace in its two streams, as the redactor gets them:
 *	on stdout the runtime's, the app's process and thread track
 *	descriptors (threads PID..PID+7, so redact with --tids
 *	PID+1,..,PID+7) and another process's (PID+1000), TrackEvent
 *	slices on both; on fd 3 the kernel's (for --kernel-fd 3),
 *	FtraceEventBundle packets of 400 sched_switch events each over
 *	8 cpus, switching between the app's threads and foreign tasks.
 *	Until SIZE_MB (10^6 bytes) in both together.
 *
 *   redact_gen hprof SIZE_MB > f.hprof
 *	A HotSpot-style HPROF 1.0.2 heap dump with 8-byte ids: UTF8 names
 *	(and unreferenced literals), LOAD CLASS records, a stack trace, then
 *	HEAP DUMP SEGMENTs of about 4 MiB holding class dumps (first
 *	segment), sticky-class, thread and JNI global roots, linked instances, 1 KiB
 *	(average) byte arrays and object arrays; HEAP DUMP END. About
 *	SIZE_MB (10^6 bytes).
 *
 *   redact_gen gz [LEVEL] < RAW > RAW.gz
 *	Not a generator: gzip stdin at zlib LEVEL (0-9; gzip(1) has no 0),
 *	by default PP_GZ_HOP, as the runtimes send it.
 *
 *   redact_gen zlib GZ_FILE RAW_FILE
 *	Not a generator: the gzip floor of the pprof redactor, in-process
 *	(no process start, no pipe). Prints two numbers, the best of 5 runs
 *	in ns: inflating GZ_FILE whole, and deflating RAW_FILE at level 1,
 *	with zlib; then the same two with ISA-L when built with it (as the
 *	redactor then is), else "- -".
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#ifdef RDC_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include "perfetto_trace.pb-c.h"
#include "pprof.h"
#include "trace_fmt.h"

#define MB 1000000ull

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* xorshift64*: fast, deterministic, good enough for shapes. */
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)((rnd() >> 32) % n);
}

static void die(const char *what, int err)
{
	fprintf(stderr, "redact_gen: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* ---- buffered stdout */

struct out {
	int fd;
	uint8_t *buf;
	size_t len, cap;
	uint64_t total;
};

static void out_flush(struct out *o)
{
	size_t off = 0;
	while (off < o->len) {
		ssize_t n = write(o->fd, o->buf + off, o->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write", n < 0 ? errno : EIO);
		off += (size_t)n;
	}
	o->total += o->len;
	o->len = 0;
}

static void out_put(struct out *o, const void *p, size_t n)
{
	if (o->len + n > o->cap)
		out_flush(o);
	if (n > o->cap) {
		/* Bigger than the buffer: straight through. */
		struct out tmp = { .fd = o->fd, .buf = (uint8_t *)p, .len = n, .cap = n };
		out_flush(&tmp);
		o->total += n;
		return;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

static void out_init(struct out *o, size_t cap)
{
	o->buf = malloc(cap);
	if (!o->buf)
		die("malloc", ENOMEM);
	o->fd = 1;
	o->cap = cap;
	o->len = 0;
	o->total = 0;
}

static void out_fini(struct out *o)
{
	out_flush(o);
	free(o->buf);
	o->buf = NULL;
}

/* ---- pprof */

#define PP_FUNCS 2000
#define PP_LOCS 8000
#define PP_KLOCS 256
#define PP_USER_BASE 0x7f12000000ull
#define PP_KERNEL_BASE 0xffffffff81000000ull

static int gen_pprof(long nsamples, int32_t pid, int level)
{
	struct pp_builder *b;
	uint64_t umap, kmap, fid[PP_FUNCS], *loc, kfid[16];
	char name[128], file[128];
	int r;

	if ((r = pp_new(&b)) < 0)
		die("pp_new", r);
	loc = calloc(PP_LOCS + PP_KLOCS, sizeof(*loc));
	if (!loc)
		die("calloc", ENOMEM);
	if ((r = pp_add_sample_type(b, "samples", "count")) < 0 ||
	    (r = pp_add_sample_type(b, "cpu", "nanoseconds")) < 0 ||
	    (r = pp_set_period(b, "cpu", "nanoseconds", 10000000)) < 0 ||
	    (r = pp_set_default_sample_type(b, "cpu")) < 0 ||
	    (r = pp_add_comment(b, "redact_gen synthetic profile")) < 0)
		die("pprof header", r);
	pp_set_time(b, 1700000000000000000ll, 30000000000ll);
	if ((r = pp_add_mapping(b, PP_USER_BASE, PP_USER_BASE + (64u << 20), 0,
				"/data/app/com.example.app/lib/arm64/libapp.so",
				"4f1c2a7b9e0d3c5a6b8f7e1d2c3b4a59", true, true, &umap)) < 0 ||
	    (r = pp_add_mapping(b, PP_KERNEL_BASE, PP_KERNEL_BASE + (32u << 20), 0,
				"[kernel.kallsyms]", NULL, true, false, &kmap)) < 0)
		die("pp_add_mapping", r);
	for (unsigned i = 0; i < PP_FUNCS; i++) {
		snprintf(name, sizeof(name), "com::example::pkg%u::Class%u::method%u", i / 100,
			 i / 10, i);
		snprintf(file, sizeof(file), "src/pkg%u/Class%u.cc", i / 100, i / 10);
		if ((r = pp_add_function(b, name, NULL, file, 10 + i % 500, &fid[i])) < 0)
			die("pp_add_function", r);
	}
	for (unsigned i = 0; i < 16; i++) {
		snprintf(name, sizeof(name), "kernel_func_%u", i);
		if ((r = pp_add_function(b, name, NULL, NULL, 0, &kfid[i])) < 0)
			die("pp_add_function", r);
	}
	for (unsigned i = 0; i < PP_LOCS; i++)
		if ((r = pp_add_location(b, umap, PP_USER_BASE + 0x1000 + (uint64_t)i * 24,
					 fid[i % PP_FUNCS], 10 + i % 500 + i / PP_FUNCS,
					 &loc[i])) < 0)
			die("pp_add_location", r);
	for (unsigned i = 0; i < PP_KLOCS; i++)
		if ((r = pp_add_location(b, kmap, PP_KERNEL_BASE + 0x100 + (uint64_t)i * 0x40,
					 kfid[i % 16], 0, &loc[PP_LOCS + i])) < 0)
			die("pp_add_location", r);

	uint64_t stack[64];
	long kernel = 0;
	for (long s = 0; s < nsamples; s++) {
		bool app = (s & 1) == 0;
		int32_t spid = app ? pid : pid + 1;
		size_t n = 0;
		/* Leaf first: sometimes a few kernel frames, then user frames. */
		if (rnd_below(3) == 0) {
			unsigned k = 1 + rnd_below(4);
			for (unsigned i = 0; i < k; i++)
				stack[n++] = loc[PP_LOCS + rnd_below(PP_KLOCS)];
			kernel++;
		}
		unsigned depth = 6 + rnd_below(34);
		/* A shared root (main loop, thread start) under random frames. */
		for (unsigned i = 0; i + 3 < depth; i++)
			stack[n++] = loc[rnd_below(PP_LOCS)];
		unsigned root = rnd_below(16);
		for (unsigned i = 0; i < 3; i++)
			stack[n++] = loc[root * 3 + i];
		int64_t values[2] = { 1 + rnd_below(4), 10000000ll * (1 + rnd_below(4)) };
		struct pp_label labels[3] = {
			{ .key = "pid", .num = spid },
			{ .key = "thread_id", .num = spid + (int32_t)rnd_below(8) },
			{ .key = "thread_name", .str = app ? "RenderThread" : "other-worker" },
		};
		if ((r = pp_add_sample(b, stack, n, values, 2, labels, 3)) < 0)
			die("pp_add_sample", r);
	}
	uint64_t written = 0;
	if ((r = pp_write_gz_level(b, 1, level, &written)) < 0)
		die("pp_write_gz_level", r);
	fprintf(stderr,
		"redact_gen pprof: %ld samples (%ld with kernel frames), %u functions, %u locations, "
		"%llu bytes gzip'd at level %d\n",
		nsamples, kernel, PP_FUNCS, PP_LOCS + PP_KLOCS, (unsigned long long)written, level);
	pp_free(b);
	free(loc);
	return 0;
}

/* ---- Perfetto */

#define PF_CPUS 8
#define PF_APP_THREADS 8
#define PF_BUNDLE_EVENTS 400
#define PF_FOREIGN_TASKS 64

typedef Perfetto__Protos__TracePacket Packet;

static void put_packet(struct out *o, const Packet *p, uint8_t **scratch, size_t *cap)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(p);
	if (n > *cap) {
		free(*scratch);
		*cap = n * 2;
		*scratch = malloc(*cap);
		if (!*scratch)
			die("malloc", ENOMEM);
	}
	perfetto__protos__trace_packet__pack(p, *scratch);
	uint8_t hdr[11];
	size_t h = 0;
	hdr[h++] = 0x0a; /* Trace.packet */
	for (uint64_t v = n;; v >>= 7) {
		hdr[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	out_put(o, hdr, h);
	out_put(o, *scratch, n);
}

static void slice(struct tfmt_out *t, pid_t pid, pid_t tid, uint64_t ts, int type,
		  const char *name)
{
	struct trc_ev e;
	memset(&e, 0, sizeof(e));
	e.ts = ts;
	e.type = (uint8_t)type;
	size_t len = strlen(name);
	if (len >= TRC_NAME_MAX)
		len = TRC_NAME_MAX - 1;
	memcpy(e.name, name, len);
	e.len = (uint8_t)len;
	tfmt_event(t, pid, tid, &e);
}

static int gen_perfetto(uint64_t size_mb, int32_t pid)
{
	static const char *const foreign_comm[] = {
		"kworker/u16:3", "surfaceflinger", "system_server", "ksoftirqd/0",
		"android.hardwar", "logd", "rcu_preempt", "binder:1234_5",
	};
	static const char *const slice_names[] = {
		"Choreographer#doFrame", "traversal", "draw", "inflate", "RV OnBindView",
		"Lock contention on a monitor lock", "decodeBitmap", "queueBuffer",
	};
	char app_comm[PF_APP_THREADS][16];
	const int32_t foreign_pid = pid + 1000;
	struct tfmt_out *t = malloc(sizeof(*t));
	struct out o;
	uint8_t *scratch = NULL;
	size_t scap = 0;
	uint64_t target = size_mb * MB, ts = 1000000000000ull, events = 0, slices = 0;
	int r;

	if (!t)
		die("malloc", ENOMEM);
	out_init(&o, 1u << 20);
	/* The kernel's stream has a file of its own (rdc_perfetto's two inputs). */
	o.fd = 3;
	if (fcntl(3, F_GETFD) < 0)
		die("fd 3 (the kernel stream's file) is not open", errno);
	tfmt_init(t, 1);
	tfmt_process(t, pid, "com.example.app", "com.example.app");
	for (int i = 0; i < PF_APP_THREADS; i++) {
		if (i == 0)
			snprintf(app_comm[i], sizeof(app_comm[i]), "example.app");
		else
			snprintf(app_comm[i], sizeof(app_comm[i]), "worker-%d", i);
		tfmt_thread(t, pid, pid + i, app_comm[i]);
	}
	tfmt_process(t, foreign_pid, "com.other.app", "com.other.app");
	tfmt_thread(t, foreign_pid, foreign_pid, "other.app");
	uint64_t tfmt_bytes = 0;
	if ((r = tfmt_finish(t, &tfmt_bytes)) < 0)
		die("write", r);

	/* One bundle's messages, reused: only the values change. */
	Perfetto__Protos__FtraceEvent ev[PF_BUNDLE_EVENTS], *evp[PF_BUNDLE_EVENTS];
	Perfetto__Protos__SchedSwitchFtraceEvent sw[PF_BUNDLE_EVENTS];
	for (int i = 0; i < PF_BUNDLE_EVENTS; i++) {
		Perfetto__Protos__FtraceEvent e0 = PERFETTO__PROTOS__FTRACE_EVENT__INIT;
		Perfetto__Protos__SchedSwitchFtraceEvent s0 =
			PERFETTO__PROTOS__SCHED_SWITCH_FTRACE_EVENT__INIT;
		ev[i] = e0;
		sw[i] = s0;
		ev[i].has_timestamp = ev[i].has_pid = 1;
		ev[i].event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH;
		ev[i].sched_switch = &sw[i];
		sw[i].has_prev_pid = sw[i].has_prev_prio = sw[i].has_prev_state = 1;
		sw[i].has_next_pid = sw[i].has_next_prio = 1;
		evp[i] = &ev[i];
	}
	/* The task on each cpu; starts idle. */
	int32_t cur[PF_CPUS] = { 0 };
	const char *cur_comm[PF_CPUS];
	for (int c = 0; c < PF_CPUS; c++)
		cur_comm[c] = "swapper/0";

	uint64_t bundles = 0;
	while (o.total + o.len + tfmt_bytes < target) {
		/* A round of app slices (and another app's, to be dropped)... */
		tfmt_init(t, 1);
		for (int i = 0; i < 48; i++) {
			pid_t tid = pid + (pid_t)rnd_below(PF_APP_THREADS);
			const char *nm = slice_names[rnd_below(8)];
			slice(t, pid, tid, ts, EV_BEGIN, nm);
			slice(t, pid, tid, ts + 20000, EV_END, nm);
			slices++;
			if (i % 4 == 0) {
				slice(t, foreign_pid, foreign_pid, ts + 5000, EV_BEGIN, nm);
				slice(t, foreign_pid, foreign_pid, ts + 9000, EV_END, nm);
			}
			ts += 30000;
		}
		uint64_t n = 0;
		if ((r = tfmt_finish(t, &n)) < 0)
			die("write", r);
		tfmt_bytes += n;

		/* ...then one sched_switch bundle per cpu. */
		for (uint32_t c = 0; c < PF_CPUS; c++) {
			uint64_t cts = ts;
			for (int i = 0; i < PF_BUNDLE_EVENTS; i++) {
				int32_t next;
				const char *next_comm;
				uint32_t k = rnd_below(16);
				if (k < 7) {
					int a = (int)rnd_below(PF_APP_THREADS);
					next = pid + a;
					next_comm = app_comm[a];
				} else if (k < 15) {
					uint32_t f = rnd_below(PF_FOREIGN_TASKS);
					next = 200 + (int32_t)f * 37;
					next_comm = foreign_comm[f % 8];
				} else {
					next = 0;
					next_comm = "swapper/0";
				}
				if (next == cur[c]) { /* a switch changes the task */
					next = next ? 0 : pid;
					next_comm = next ? app_comm[0] : "swapper/0";
				}
				cts += 1000 + rnd_below(50000);
				ev[i].timestamp = cts;
				ev[i].pid = (uint32_t)cur[c];
				sw[i].prev_pid = cur[c];
				sw[i].prev_comm = (char *)cur_comm[c];
				sw[i].prev_prio = cur[c] >= pid && cur[c] < pid + PF_APP_THREADS ? 110 : 120;
				sw[i].prev_state = cur[c] ? (int64_t)rnd_below(3) : 0;
				sw[i].next_pid = next;
				sw[i].next_comm = (char *)next_comm;
				sw[i].next_prio = next >= pid && next < pid + PF_APP_THREADS ? 110 : 120;
				cur[c] = next;
				cur_comm[c] = next_comm;
			}
			Perfetto__Protos__FtraceEventBundle fb = PERFETTO__PROTOS__FTRACE_EVENT_BUNDLE__INIT;
			fb.has_cpu = 1;
			fb.cpu = c;
			fb.n_event = PF_BUNDLE_EVENTS;
			fb.event = evp;
			Packet p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
			p.has_timestamp = 1;
			p.timestamp = cts;
			p.has_trusted_packet_sequence_id = 1;
			p.trusted_packet_sequence_id = 1; /* traced_probes' writer */
			p.has_trusted_pid = 1;
			p.trusted_pid = 555;
			p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS;
			p.ftrace_events = &fb;
			put_packet(&o, &p, &scratch, &scap);
			events += PF_BUNDLE_EVENTS;
			bundles++;
		}
		ts += 2000000;
	}
	out_flush(&o);
	fprintf(stderr,
		"redact_gen perfetto: %llu bytes: %llu ftrace bundles (%llu sched_switch), "
		"%llu app slices; app pid %d, tids %d..%d\n",
		(unsigned long long)(o.total + tfmt_bytes), (unsigned long long)bundles,
		(unsigned long long)events, (unsigned long long)slices, pid, pid,
		pid + PF_APP_THREADS - 1);
	out_fini(&o);
	free(scratch);
	free(t);
	return 0;
}

/* ---- HPROF */

#define HP_ID 8
#define HP_SEGMENT (4u << 20)

enum {
	N_OBJECT = 1, N_NODE, N_BYTES, N_OBJARR, N_COUNT, N_STAMP, N_NEXT, N_INSTANCES,
	N_ROOT, N_LITERALS /* first unreferenced literal */
};

/* Class ids: plausible heap addresses of the class mirrors. */
#define C_OBJECT 0x00000007c0000000ull
#define C_NODE 0x00000007c0000400ull
#define C_BYTES 0x00000007c0000800ull
#define C_OBJARR 0x00000007c0000c00ull

struct seg {
	uint8_t *d;
	size_t n;
};

static void sbe(struct seg *s, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		s->d[s->n++] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static void obe(struct out *o, uint64_t v, unsigned n)
{
	uint8_t x[8];
	for (unsigned i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	out_put(o, x, n);
}

static void rec_hdr(struct out *o, unsigned tag, uint32_t len)
{
	obe(o, tag, 1);
	obe(o, 0, 4); /* time */
	obe(o, len, 4);
}

static void utf8(struct out *o, uint64_t id, const char *s)
{
	size_t n = strlen(s);
	rec_hdr(o, 0x01, (uint32_t)(HP_ID + n));
	obe(o, id, HP_ID);
	out_put(o, s, n);
}

static void load_class(struct out *o, uint32_t serial, uint64_t cls, uint64_t name)
{
	rec_hdr(o, 0x02, 2 * HP_ID + 8);
	obe(o, serial, 4);
	obe(o, cls, HP_ID);
	obe(o, 1, 4); /* stack trace serial */
	obe(o, name, HP_ID);
}

struct field {
	uint64_t name;
	uint8_t type;
};

/* CLASS DUMP: no constant pool; statics and instance fields as given. */
static void class_dump(struct seg *s, uint64_t id, uint64_t super, uint32_t inst_size,
		       const struct field *st, unsigned nst, const struct field *f, unsigned nf)
{
	sbe(s, 0x20, 1);
	sbe(s, id, HP_ID);
	sbe(s, 1, 4);           /* stack trace serial */
	sbe(s, super, HP_ID);
	sbe(s, 0, HP_ID);       /* class loader: bootstrap */
	sbe(s, 0, HP_ID);       /* signers */
	sbe(s, 0, HP_ID);       /* protection domain */
	sbe(s, 0, HP_ID);       /* reserved */
	sbe(s, 0, HP_ID);       /* reserved */
	sbe(s, inst_size, 4);
	sbe(s, 0, 2);           /* constant pool */
	sbe(s, nst, 2);
	for (unsigned i = 0; i < nst; i++) {
		sbe(s, st[i].name, HP_ID);
		sbe(s, st[i].type, 1);
		if (st[i].type == 2)
			sbe(s, C_NODE + 0x10, HP_ID);
		else /* int */
			sbe(s, 0x12345678, 4);
	}
	sbe(s, nf, 2);
	for (unsigned i = 0; i < nf; i++) {
		sbe(s, f[i].name, HP_ID);
		sbe(s, f[i].type, 1);
	}
}

static void seg_flush(struct out *o, struct seg *s)
{
	if (!s->n)
		return;
	rec_hdr(o, 0x1c, (uint32_t)s->n);
	out_put(o, s->d, s->n);
	s->n = 0;
}

static int gen_hprof(uint64_t size_mb)
{
	struct out o;
	struct seg s = { .d = malloc(HP_SEGMENT + 8192) };
	uint64_t target = size_mb * MB;
	uint64_t next_id = 0x0000000700000000ull; /* object ids: 16-byte aligned addresses */
	uint64_t instances = 0, parrays = 0, oarrays = 0, segments = 0, parray_bytes = 0;
	char lit[64];

	if (!s.d)
		die("malloc", ENOMEM);
	out_init(&o, 1u << 20);
	static const char hdr[] = "JAVA PROFILE 1.0.2";
	out_put(&o, hdr, sizeof(hdr)); /* with its NUL */
	obe(&o, HP_ID, 4);
	obe(&o, 0x0000018c12345678ull, 8);

	utf8(&o, N_OBJECT, "java/lang/Object");
	utf8(&o, N_NODE, "com/example/app/Node");
	utf8(&o, N_BYTES, "[B");
	utf8(&o, N_OBJARR, "[Ljava/lang/Object;");
	utf8(&o, N_COUNT, "count");
	utf8(&o, N_STAMP, "stamp");
	utf8(&o, N_NEXT, "next");
	utf8(&o, N_INSTANCES, "instances");
	utf8(&o, N_ROOT, "root");
	/* HotSpot dumps its whole symbol table: literals nobody names. */
	for (unsigned i = 0; i < 2000; i++) {
		snprintf(lit, sizeof(lit), "user-%u@example.com token %08x", i, (unsigned)rnd());
		utf8(&o, N_LITERALS + i, lit);
	}
	load_class(&o, 1, C_OBJECT, N_OBJECT);
	load_class(&o, 2, C_NODE, N_NODE);
	load_class(&o, 3, C_BYTES, N_BYTES);
	load_class(&o, 4, C_OBJARR, N_OBJARR);
	/* STACK TRACE serial 1, thread serial 1, no frames */
	rec_hdr(&o, 0x05, 12);
	obe(&o, 1, 4);
	obe(&o, 1, 4);
	obe(&o, 0, 4);

	/* First segment: the classes, their sticky roots. */
	const struct field node_f[] = { { N_COUNT, 10 }, { N_STAMP, 11 }, { N_NEXT, 2 } };
	const struct field node_st[] = { { N_INSTANCES, 10 }, { N_ROOT, 2 } };
	const uint32_t node_bytes = 4 + 8 + HP_ID;
	class_dump(&s, C_OBJECT, 0, 0, NULL, 0, NULL, 0);
	class_dump(&s, C_NODE, C_OBJECT, node_bytes + 12, node_st, 2, node_f, 3);
	class_dump(&s, C_BYTES, C_OBJECT, 0, NULL, 0, NULL, 0);
	class_dump(&s, C_OBJARR, C_OBJECT, 0, NULL, 0, NULL, 0);
	const uint64_t classes[] = { C_OBJECT, C_NODE, C_BYTES, C_OBJARR };
	for (unsigned i = 0; i < 4; i++) {
		sbe(&s, 0x05, 1); /* ROOT STICKY CLASS */
		sbe(&s, classes[i], HP_ID);
	}

	uint64_t prev = 0, recent[32] = { 0 };
	while (o.total + o.len + s.n < target) {
		/* A group: a byte array, 24 linked nodes, an object array. */
		uint32_t alen = 512 + rnd_below(1025);
		if (s.n + 24 + alen + 24 * 64 + 32 * HP_ID + 64 > HP_SEGMENT) {
			seg_flush(&o, &s);
			segments++;
		}
		uint64_t arr = next_id;
		next_id += (16 + alen + 15) & ~15ull;
		sbe(&s, 0x23, 1); /* PRIMITIVE ARRAY DUMP */
		sbe(&s, arr, HP_ID);
		sbe(&s, 1, 4);
		sbe(&s, alen, 4);
		sbe(&s, 8, 1); /* byte */
		uint64_t x = rnd();
		for (uint32_t i = 0; i < alen; i++) {
			if ((i & 7) == 0)
				x = rnd();
			s.d[s.n++] = (uint8_t)(x >> (8 * (i & 7))) | 1;
		}
		parrays++;
		parray_bytes += alen;

		for (unsigned i = 0; i < 24; i++) {
			uint64_t id = next_id;
			next_id += 32;
			sbe(&s, 0x21, 1); /* INSTANCE DUMP */
			sbe(&s, id, HP_ID);
			sbe(&s, 1, 4);
			sbe(&s, C_NODE, HP_ID);
			sbe(&s, node_bytes, 4);
			/* Node's own fields, in CLASS DUMP order; Object has none. */
			sbe(&s, rnd_below(100000), 4);
			sbe(&s, rnd(), 8);
			sbe(&s, prev, HP_ID); /* next: a chain through the heap */
			prev = id;
			recent[(instances++) % 32] = id;
		}

		if (!oarrays) { /* the first node stands in for the main thread */
			sbe(&s, 0x08, 1); /* ROOT THREAD OBJECT: object, thread serial, trace serial */
			sbe(&s, recent[0], HP_ID);
			sbe(&s, 1, 4);
			sbe(&s, 1, 4);
		}
		uint64_t oa = next_id;
		next_id += 16 + 32 * HP_ID;
		sbe(&s, 0x22, 1); /* OBJECT ARRAY DUMP */
		sbe(&s, oa, HP_ID);
		sbe(&s, 1, 4);
		sbe(&s, 32, 4);
		sbe(&s, C_OBJARR, HP_ID);
		sbe(&s, arr, HP_ID);
		for (unsigned i = 1; i < 32; i++)
			sbe(&s, recent[i], HP_ID);
		oarrays++;

		if (oarrays % 64 == 0) {
			sbe(&s, 0x01, 1); /* ROOT JNI GLOBAL: object, global ref id */
			sbe(&s, oa, HP_ID);
			sbe(&s, 0x00007f0000100000ull + oarrays, HP_ID);
		}
	}
	seg_flush(&o, &s);
	segments++;
	rec_hdr(&o, 0x2c, 0); /* HEAP DUMP END */
	out_flush(&o);
	fprintf(stderr,
		"redact_gen hprof: %llu bytes: %llu segments, %llu instances, %llu byte arrays "
		"(%llu bytes of data), %llu object arrays\n",
		(unsigned long long)o.total, (unsigned long long)segments,
		(unsigned long long)instances, (unsigned long long)parrays,
		(unsigned long long)parray_bytes, (unsigned long long)oarrays);
	out_fini(&o);
	free(s.d);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: redact_gen pprof N_SAMPLES PID [LEVEL]\n"
			"       redact_gen perfetto SIZE_MB PID 3> KERNEL_FILE\n"
			"       redact_gen hprof SIZE_MB\n"
			"       redact_gen gz [LEVEL] < RAW > RAW.gz\n"
			"       redact_gen zlib GZ_FILE RAW_FILE\n");
	exit(2);
}

/* ---- the zlib floor */

static uint8_t *load(const char *path, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t end = -1;
	uint8_t *b;

	if (fd < 0 || (end = lseek(fd, 0, SEEK_END)) < 0)
		die(path, errno);
	b = malloc((size_t)end + 1);
	if (!b)
		die("malloc", ENOMEM);
	if (pread(fd, b, (size_t)end, 0) != end)
		die(path, EIO);
	close(fd);
	*n = (size_t)end;
	return b;
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Through a 256 KiB window, as the redactor does: the output is dropped. */
static void zlib_pass(bool inflating, const uint8_t *in, size_t n)
{
	static uint8_t win[256 << 10];
	z_stream z;
	int zr;

	memset(&z, 0, sizeof(z));
	if ((inflating ? inflateInit2(&z, 15 + 16) :
	     deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY)) != Z_OK)
		die("zlib init", ENOMEM);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	do {
		z.next_out = win;
		z.avail_out = sizeof(win);
		zr = inflating ? inflate(&z, Z_NO_FLUSH) : deflate(&z, Z_FINISH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR)
			die(inflating ? "inflate" : "deflate", EBADMSG);
	} while (zr != Z_STREAM_END);
	if (inflating)
		inflateEnd(&z);
	else
		deflateEnd(&z);
}

#ifdef RDC_HAVE_ISAL
/* The same with ISA-L, set up as redact/rdc_pprof.c sets it up. */
static void isal_pass(bool inflating, const uint8_t *in, size_t n)
{
	static uint8_t win[256 << 10];
	static struct inflate_state st;
	static struct isal_zstream zs;
	static uint8_t level_buf[ISAL_DEF_LVL1_DEFAULT];

	if (inflating) {
		isal_inflate_init(&st);
		st.crc_flag = ISAL_GZIP;
		st.next_in = (uint8_t *)in;
		st.avail_in = (uint32_t)n;
		while (st.block_state != ISAL_BLOCK_FINISH) {
			st.next_out = win;
			st.avail_out = sizeof(win);
			int r = isal_inflate(&st);
			if (r < 0 || (r == ISAL_END_INPUT && st.block_state != ISAL_BLOCK_FINISH &&
				      st.avail_out))
				die("isal_inflate", EBADMSG);
		}
		return;
	}
	isal_deflate_init(&zs);
	zs.level = 1;
	zs.level_buf = level_buf;
	zs.level_buf_size = sizeof(level_buf);
	zs.gzip_flag = IGZIP_GZIP;
	zs.end_of_stream = 1;
	zs.next_in = (uint8_t *)in;
	zs.avail_in = (uint32_t)n;
	while (zs.internal_state.state != ZSTATE_END) {
		zs.next_out = win;
		zs.avail_out = sizeof(win);
		if (isal_deflate(&zs) != COMP_OK)
			die("isal_deflate", EIO);
	}
}
#endif

static int zlib_floor(const char *gz, const char *raw)
{
	size_t ng, nr;
	uint8_t *g = load(gz, &ng), *r = load(raw, &nr);
	uint64_t best[4] = { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX };
#ifdef RDC_HAVE_ISAL
	int nlib = 2;
#else
	int nlib = 1;
#endif

	for (int round = 0; round < 5; round++)
		for (int k = 0; k < 2 * nlib; k++) {
			uint64_t t0 = now_ns();
			if (k < 2)
				zlib_pass(k == 0, k == 0 ? g : r, k == 0 ? ng : nr);
#ifdef RDC_HAVE_ISAL
			else
				isal_pass(k == 2, k == 2 ? g : r, k == 2 ? ng : nr);
#endif
			uint64_t t = now_ns() - t0;
			if (t < best[k])
				best[k] = t;
		}
	printf("%llu %llu", (unsigned long long)best[0], (unsigned long long)best[1]);
	if (nlib == 2)
		printf(" %llu %llu\n", (unsigned long long)best[2], (unsigned long long)best[3]);
	else
		printf(" - -\n");
	free(g);
	free(r);
	return 0;
}

static long num_arg(const char *s, long max)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end || v <= 0 || v > max)
		usage();
	return v;
}

/* A zlib level, 0-9. */
static int level_arg(const char *s)
{
	if (s[0] < '0' || s[0] > '9' || s[1])
		usage();
	return s[0] - '0';
}

/* gzip stdin to stdout at a zlib level. */
static int regz(int level)
{
	static uint8_t in[1 << 16], out[1 << 16];
	z_stream z;
	ssize_t n;
	int flush, zr;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		die("deflateInit2", ENOMEM);
	do {
		n = read(0, in, sizeof(in));
		if (n < 0)
			die("read", errno);
		flush = n == 0 ? Z_FINISH : Z_NO_FLUSH;
		z.next_in = in;
		z.avail_in = (uInt)n;
		do {
			z.next_out = out;
			z.avail_out = sizeof(out);
			zr = deflate(&z, flush);
			if (zr == Z_STREAM_ERROR)
				die("deflate", EIO);
			size_t have = sizeof(out) - z.avail_out;
			if (have && fwrite(out, 1, have, stdout) != have)
				die("write", EIO);
		} while (z.avail_out == 0);
	} while (flush != Z_FINISH);
	deflateEnd(&z);
	return fflush(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "pprof"))
		return gen_pprof(num_arg(argv[2], PP_MAX_ENTRIES), (int32_t)num_arg(argv[3], 1 << 22),
				 argc == 5 ? level_arg(argv[4]) : PP_GZ_HOP);
	if ((argc == 2 || argc == 3) && !strcmp(argv[1], "gz"))
		return regz(argc == 3 ? level_arg(argv[2]) : PP_GZ_HOP);
	if (argc == 4 && !strcmp(argv[1], "perfetto"))
		return gen_perfetto((uint64_t)num_arg(argv[2], 1 << 20),
				    (int32_t)num_arg(argv[3], 1 << 22));
	if (argc == 3 && !strcmp(argv[1], "hprof"))
		return gen_hprof((uint64_t)num_arg(argv[2], 1 << 20));
	if (argc == 4 && !strcmp(argv[1], "zlib"))
		return zlib_floor(argv[2], argv[3]);
	usage();
	return 2;
}
