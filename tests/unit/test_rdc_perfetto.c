/* Perfetto trace redaction (redact/rdc_perfetto.c, docs/PERFETTO.md). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "perfetto_trace.pb-c.h"
#include "rdc.h"

typedef Perfetto__Protos__TracePacket Packet;
typedef Perfetto__Protos__FtraceEvent FEvent;
typedef Perfetto__Protos__TrackEvent TEvent;

/* The app: pid 100 with threads 100 and 101. Someone else: pid 200
 * ("secretproc") with threads 200 and 201. */
#define APP 100
#define APP_T 101
#define FOE 200
#define FOE_T 201
#define SECRET "secretproc"
#define SYNTH(cpu) (1000000000 + (cpu))

static const int32_t app_pids[] = { APP };
static const int32_t app_tids[] = { APP, APP_T };
static const int32_t foe_ids[] = { FOE, FOE_T, 202, 203 };

static struct rdc_policy policy(const struct rdc_dlp *dlp)
{
	struct rdc_policy p = {
		.pids = app_pids, .npids = 1, .tids = app_tids, .ntids = 2, .dlp = dlp,
	};
	return p;
}

/* ---- a pool for fixture objects, freed after each test */

static void *pool[4096];
static size_t npool;

static void *talloc(size_t n)
{
	assert_true(npool < sizeof(pool) / sizeof(pool[0]));
	void *p = calloc(1, n);
	assert_non_null(p);
	pool[npool++] = p;
	return p;
}

static char *tstr(const char *s)
{
	char *d = talloc(strlen(s) + 1);
	memcpy(d, s, strlen(s) + 1);
	return d;
}

static int pool_free(void **state)
{
	while (npool)
		free(pool[--npool]);
	return 0;
}

#define NEW(T, init) ({ T *_p = talloc(sizeof(T)); T _i = init; *_p = _i; _p; })
#define ARR(T, n) ((T *)talloc(sizeof(T) * (n)))

/* ---- building traces */

static int memfd(void)
{
	int fd = memfd_create("rdc-perfetto-test", MFD_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

static size_t varint(uint8_t *b, uint64_t v)
{
	size_t n = 0;
	do {
		b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	return n;
}

static void put(int fd, const void *p, size_t n)
{
	assert_int_equal(write(fd, p, n), (ssize_t)n);
}

static void put_frame(int fd, const uint8_t *body, size_t n)
{
	uint8_t hdr[11] = { 0x0a };
	size_t h = 1 + varint(hdr + 1, n);
	put(fd, hdr, h);
	put(fd, body, n);
}

static void put_packet(int fd, const Packet *pkt)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(pkt);
	uint8_t *b = malloc(n ? n : 1);
	assert_non_null(b);
	perfetto__protos__trace_packet__pack(pkt, b);
	put_frame(fd, b, n);
	free(b);
}

static Packet *pk(uint32_t seq)
{
	Packet *p = NEW(Packet, PERFETTO__PROTOS__TRACE_PACKET__INIT);
	if (seq) {
		p->has_trusted_packet_sequence_id = 1;
		p->trusted_packet_sequence_id = seq;
	}
	return p;
}

static FEvent *fe(uint64_t ts, uint32_t cur)
{
	FEvent *e = NEW(FEvent, PERFETTO__PROTOS__FTRACE_EVENT__INIT);
	e->has_timestamp = 1;
	e->timestamp = ts;
	e->has_pid = 1;
	e->pid = cur;
	return e;
}

static FEvent *fe_switch(uint64_t ts, const char *pc, int32_t pp, const char *nc, int32_t np)
{
	FEvent *e = fe(ts, (uint32_t)pp);
	Perfetto__Protos__SchedSwitchFtraceEvent *s =
		NEW(Perfetto__Protos__SchedSwitchFtraceEvent, PERFETTO__PROTOS__SCHED_SWITCH_FTRACE_EVENT__INIT);
	s->prev_comm = tstr(pc);
	s->has_prev_pid = s->has_prev_prio = s->has_prev_state = 1;
	s->prev_pid = pp;
	s->prev_prio = 120;
	s->prev_state = 1;
	s->next_comm = tstr(nc);
	s->has_next_pid = s->has_next_prio = 1;
	s->next_pid = np;
	s->next_prio = 120;
	e->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH;
	e->sched_switch = s;
	return e;
}

static FEvent *fe_waking(uint64_t ts, uint32_t cur, const char *comm, int32_t pid)
{
	FEvent *e = fe(ts, cur);
	Perfetto__Protos__SchedWakingFtraceEvent *w =
		NEW(Perfetto__Protos__SchedWakingFtraceEvent, PERFETTO__PROTOS__SCHED_WAKING_FTRACE_EVENT__INIT);
	w->comm = tstr(comm);
	w->has_pid = w->has_prio = w->has_success = w->has_target_cpu = 1;
	w->pid = pid;
	w->prio = 120;
	w->success = 1;
	w->target_cpu = 1;
	e->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING;
	e->sched_waking = w;
	return e;
}

static FEvent *fe_wakeup(uint64_t ts, uint32_t cur, const char *comm, int32_t pid)
{
	FEvent *e = fe(ts, cur);
	Perfetto__Protos__SchedWakeupFtraceEvent *w =
		NEW(Perfetto__Protos__SchedWakeupFtraceEvent, PERFETTO__PROTOS__SCHED_WAKEUP_FTRACE_EVENT__INIT);
	w->comm = tstr(comm);
	w->has_pid = 1;
	w->pid = pid;
	e->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKEUP;
	e->sched_wakeup = w;
	return e;
}

static FEvent *fe_rename(uint64_t ts, int32_t pid, const char *old, const char *nu)
{
	FEvent *e = fe(ts, (uint32_t)pid);
	Perfetto__Protos__TaskRenameFtraceEvent *r =
		NEW(Perfetto__Protos__TaskRenameFtraceEvent, PERFETTO__PROTOS__TASK_RENAME_FTRACE_EVENT__INIT);
	r->has_pid = 1;
	r->pid = pid;
	r->oldcomm = tstr(old);
	r->newcomm = tstr(nu);
	e->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME;
	e->task_rename = r;
	return e;
}

static FEvent *fe_fork(uint64_t ts, const char *pc, int32_t pp, const char *cc, int32_t cp)
{
	FEvent *e = fe(ts, (uint32_t)pp);
	Perfetto__Protos__SchedProcessForkFtraceEvent *f =
		NEW(Perfetto__Protos__SchedProcessForkFtraceEvent,
		    PERFETTO__PROTOS__SCHED_PROCESS_FORK_FTRACE_EVENT__INIT);
	f->parent_comm = tstr(pc);
	f->has_parent_pid = f->has_child_pid = 1;
	f->parent_pid = pp;
	f->child_comm = tstr(cc);
	f->child_pid = cp;
	e->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK;
	e->sched_process_fork = f;
	return e;
}

static FEvent *fe_exit(uint64_t ts, const char *comm, int32_t pid, int32_t tgid)
{
	FEvent *e = fe(ts, (uint32_t)pid);
	Perfetto__Protos__SchedProcessExitFtraceEvent *x =
		NEW(Perfetto__Protos__SchedProcessExitFtraceEvent,
		    PERFETTO__PROTOS__SCHED_PROCESS_EXIT_FTRACE_EVENT__INIT);
	x->comm = tstr(comm);
	x->has_pid = x->has_tgid = 1;
	x->pid = pid;
	x->tgid = tgid;
	e->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_EXIT;
	e->sched_process_exit = x;
	return e;
}

static FEvent *fe_victim(uint64_t ts, int32_t pid)
{
	FEvent *e = fe(ts, 0);
	Perfetto__Protos__MarkVictimFtraceEvent *v =
		NEW(Perfetto__Protos__MarkVictimFtraceEvent, PERFETTO__PROTOS__MARK_VICTIM_FTRACE_EVENT__INIT);
	v->has_pid = 1;
	v->pid = pid;
	e->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MARK_VICTIM;
	e->mark_victim = v;
	return e;
}

static FEvent *fe_print(uint64_t ts, int32_t pid, const char *buf)
{
	FEvent *e = fe(ts, (uint32_t)pid);
	Perfetto__Protos__PrintFtraceEvent *p =
		NEW(Perfetto__Protos__PrintFtraceEvent, PERFETTO__PROTOS__PRINT_FTRACE_EVENT__INIT);
	p->buf = tstr(buf);
	e->event_case = PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT;
	e->print = p;
	return e;
}

static Packet *pk_bundle(uint32_t cpu, FEvent **ev, size_t n)
{
	Packet *p = pk(1000);
	Perfetto__Protos__FtraceEventBundle *b =
		NEW(Perfetto__Protos__FtraceEventBundle, PERFETTO__PROTOS__FTRACE_EVENT_BUNDLE__INIT);
	b->has_cpu = 1;
	b->cpu = cpu;
	b->n_event = n;
	b->event = ARR(FEvent *, n ? n : 1);
	if (n)
		memcpy(b->event, ev, n * sizeof(*ev));
	p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS;
	p->ftrace_events = b;
	return p;
}

static Packet *pk_track(uint32_t seq, uint64_t uuid, uint64_t parent, const char *name)
{
	Packet *p = pk(seq);
	Perfetto__Protos__TrackDescriptor *d =
		NEW(Perfetto__Protos__TrackDescriptor, PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT);
	d->has_uuid = 1;
	d->uuid = uuid;
	if (parent) {
		d->has_parent_uuid = 1;
		d->parent_uuid = parent;
	}
	if (name)
		d->name = tstr(name);
	p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p->track_descriptor = d;
	return p;
}

static Packet *pk_process(uint32_t seq, uint64_t uuid, int32_t pid, const char *name)
{
	Packet *p = pk_track(seq, uuid, 0, NULL);
	Perfetto__Protos__ProcessDescriptor *pd =
		NEW(Perfetto__Protos__ProcessDescriptor, PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT);
	pd->has_pid = 1;
	pd->pid = pid;
	pd->process_name = tstr(name);
	pd->n_cmdline = 1;
	pd->cmdline = ARR(char *, 1);
	pd->cmdline[0] = tstr(name);
	p->track_descriptor->process = pd;
	p->sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
	p->has_sequence_flags = 1;
	return p;
}

static Packet *pk_thread(uint32_t seq, uint64_t uuid, uint64_t parent, int32_t pid, int32_t tid,
			 const char *name)
{
	Packet *p = pk_track(seq, uuid, parent, NULL);
	Perfetto__Protos__ThreadDescriptor *td =
		NEW(Perfetto__Protos__ThreadDescriptor, PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT);
	td->has_pid = td->has_tid = 1;
	td->pid = pid;
	td->tid = tid;
	td->thread_name = tstr(name);
	p->track_descriptor->thread = td;
	return p;
}

static Packet *pk_slice(uint32_t seq, uint64_t ts, uint64_t uuid, Perfetto__Protos__TrackEvent__Type type,
			const char *name)
{
	Packet *p = pk(seq);
	p->has_timestamp = 1;
	p->timestamp = ts;
	TEvent *e = NEW(TEvent, PERFETTO__PROTOS__TRACK_EVENT__INIT);
	e->has_type = 1;
	e->type = type;
	if (uuid) {
		e->has_track_uuid = 1;
		e->track_uuid = uuid;
	}
	if (name) {
		e->name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
		e->name = tstr(name);
	}
	p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
	p->track_event = e;
	return p;
}

static Perfetto__Protos__DebugAnnotation *annot_str(const char *name, const char *value)
{
	Perfetto__Protos__DebugAnnotation *a =
		NEW(Perfetto__Protos__DebugAnnotation, PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT);
	a->name_field_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME;
	a->name = tstr(name);
	a->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE;
	a->string_value = tstr(value);
	return a;
}

static void add_annot(TEvent *e, Perfetto__Protos__DebugAnnotation *a)
{
	Perfetto__Protos__DebugAnnotation **n = ARR(Perfetto__Protos__DebugAnnotation *, e->n_debug_annotations + 1);
	if (e->n_debug_annotations)
		memcpy(n, e->debug_annotations, e->n_debug_annotations * sizeof(*n));
	n[e->n_debug_annotations++] = a;
	e->debug_annotations = n;
}

/* An unknown field (as a newer writer would add) carrying the secret.
 * protobuf-c keeps a length-prefixed field's length in its data. */
static void add_unknown(ProtobufCMessage *m, uint32_t field, const char *text)
{
	ProtobufCMessageUnknownField *u = ARR(ProtobufCMessageUnknownField, 1);
	size_t n = strlen(text);
	u->tag = field;
	u->wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
	u->data = talloc(n + 10);
	u->len = varint(u->data, n);
	memcpy(u->data + u->len, text, n);
	u->len += n;
	m->n_unknown_fields = 1;
	m->unknown_fields = u;
}

/* ---- running the redactor and reading what it wrote */

struct out {
	int rc;
	struct rdc_stats st;
	uint8_t *buf;
	size_t len;
	Perfetto__Protos__Trace *t;
};

static void out_free(struct out *o)
{
	if (o->t)
		perfetto__protos__trace__free_unpacked(o->t, NULL);
	free(o->buf);
	memset(o, 0, sizeof(*o));
}

/* Two redactions of one trace by different paths: the same answer, bytes
 * and counts (not in_bytes: the inputs may differ by a dropped field). */
static void out_same(const struct out *a, const struct out *b)
{
	assert_int_equal(a->rc, b->rc);
	assert_int_equal(a->len, b->len);
	assert_memory_equal(a->buf, b->buf, a->len);
	assert_int_equal(a->st.kept, b->st.kept);
	assert_int_equal(a->st.dropped, b->st.dropped);
	assert_int_equal(a->st.anonymised, b->st.anonymised);
	assert_int_equal(a->st.scrubbed, b->st.scrubbed);
}

/* in: the runtime's stream; kin: the kernel's, or -1. */
static struct out redact_fds(int in, int kin, const struct rdc_policy *p)
{
	struct out o = { 0 };
	int outfd = memfd();
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	if (kin >= 0)
		assert_int_equal(lseek(kin, 0, SEEK_SET), 0);
	o.rc = rdc_perfetto(in, kin, outfd, p, &o.st);
	off_t end = lseek(outfd, 0, SEEK_END);
	assert_true(end >= 0);
	o.len = (size_t)end;
	o.buf = malloc(o.len + 1);
	assert_non_null(o.buf);
	assert_int_equal(pread(outfd, o.buf, o.len, 0), (ssize_t)o.len);
	close(outfd);
	if (o.rc == 0) {
		/* What we write must be a Trace a protobuf decoder accepts. */
		o.t = perfetto__protos__trace__unpack(NULL, o.len, o.buf);
		assert_non_null(o.t);
		assert_int_equal((uint64_t)o.len, o.st.out_bytes);
	}
	return o;
}

static struct out redact_fd(int in, const struct rdc_policy *p)
{
	return redact_fds(in, -1, p);
}

/* The kernel's stream alone, with an empty runtime stream. */
static struct out redact_kernel(int kin, const struct rdc_policy *p)
{
	int in = memfd();
	struct out o = redact_fds(in, kin, p);
	close(in);
	return o;
}

static struct out redact_bytes(const void *b, size_t n, const struct rdc_policy *p)
{
	int in = memfd();
	if (n)
		put(in, b, n);
	struct out o = redact_fd(in, p);
	close(in);
	return o;
}

static bool has_bytes(const struct out *o, const char *s)
{
	return memmem(o->buf, o->len, s, strlen(s)) != NULL;
}

/* The fixture really carries what the output must not. */
static bool fd_has(int fd, const char *s)
{
	off_t n = lseek(fd, 0, SEEK_END);
	uint8_t *b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(pread(fd, b, (size_t)n, 0), n);
	bool found = memmem(b, (size_t)n, s, strlen(s)) != NULL;
	free(b);
	return found;
}

static bool is_foe(int64_t v)
{
	for (size_t i = 0; i < sizeof(foe_ids) / sizeof(foe_ids[0]); i++)
		if (v == foe_ids[i])
			return true;
	return false;
}

/* Every decoded integer field named like a pid or tid, at any depth. */
static bool id_field(const char *name)
{
	size_t n = strlen(name);
	return strstr(name, "pid") || (n >= 3 && !strcmp(name + n - 3, "tid")) || !strcmp(name, "tgid");
}

static void assert_no_foe_ids(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *base = (const char *)m + f->offset;
		size_t n = 1;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(const size_t *)((const char *)m + f->quantifier_offset);
			base = *(const char *const *)base;
		} else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (*(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
				continue;
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->type != PROTOBUF_C_TYPE_MESSAGE &&
			   f->type != PROTOBUF_C_TYPE_STRING && f->type != PROTOBUF_C_TYPE_BYTES) {
			if (!*(const protobuf_c_boolean *)((const char *)m + f->quantifier_offset))
				continue;
		}
		for (size_t k = 0; k < n; k++) {
			if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
				const ProtobufCMessage *sub = f->label == PROTOBUF_C_LABEL_REPEATED ?
					((const ProtobufCMessage *const *)base)[k] :
					*(const ProtobufCMessage *const *)base;
				if (sub)
					assert_no_foe_ids(sub);
			} else if (id_field(f->name) &&
				   (f->type == PROTOBUF_C_TYPE_INT32 || f->type == PROTOBUF_C_TYPE_UINT32)) {
				int32_t v = ((const int32_t *)base)[k];
				if (is_foe(v))
					fail_msg("foreign id %d in %s.%s", v, d->name, f->name);
			}
		}
	}
}

/* Output events, flattened across bundles. */
static size_t out_events(const struct out *o, FEvent **ev, uint32_t *cpu, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < o->t->n_packet; i++) {
		Packet *p = o->t->packet[i];
		if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
			continue;
		for (size_t k = 0; k < p->ftrace_events->n_event && n < max; k++) {
			cpu[n] = p->ftrace_events->cpu;
			ev[n++] = p->ftrace_events->event[k];
		}
	}
	return n;
}

static size_t out_track_events(const struct out *o, TEvent **ev, size_t max)
{
	size_t n = 0;
	for (size_t i = 0; i < o->t->n_packet && n < max; i++)
		if (o->t->packet[i]->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT)
			ev[n++] = o->t->packet[i]->track_event;
	return n;
}

/* ---- a system trace: the app and secretproc sharing cpus */

/* The kernel's half, as profilingd-ftrace writes it. */
static int app_kernel(void)
{
	int fd = memfd();
	FEvent *cpu2[] = {
		/* app -> foreign: the foreign side anonymised, the app's intact */
		fe_switch(1000, "app-main", APP, SECRET, FOE),
		/* foreign -> foreign: both anonymised, the slice stays */
		fe_switch(2000, SECRET, FOE, SECRET, FOE_T),
		fe_switch(3000, SECRET, FOE_T, "app-worker", APP_T),
		fe_waking(3100, APP_T, SECRET, FOE),          /* dropped */
		fe_waking(3200, FOE, "app-main", APP),        /* kept, waker anonymised */
		fe_wakeup(3300, APP_T, SECRET, FOE_T),        /* dropped */
		fe_rename(3400, FOE, SECRET, "secretproc2"),  /* dropped */
		fe_rename(3500, APP_T, "app-worker", "app-render"),
		fe_fork(3600, SECRET, FOE, SECRET, 202),      /* dropped */
		fe_fork(3700, "app-main", APP, "app-main", 102), /* kept: 102 joins the app */
		fe_switch(3800, "app-render", APP_T, "app-main", 102),
		fe_exit(3900, SECRET, FOE_T, FOE),            /* dropped */
		fe_victim(4000, FOE),                         /* dropped */
		fe_victim(4100, APP),
		fe_print(4200, FOE, "B|200|" SECRET),         /* dropped */
		fe_print(4300, APP_T, "B|100|draw"),
		fe_switch(4400, "app-main", 102, "swapper/2", 0),
	};
	put_packet(fd, pk_bundle(2, cpu2, sizeof(cpu2) / sizeof(cpu2[0])));
	return fd;
}

/* The runtime's half: track events of the app and of secretproc. */
static int app_trace(void)
{
	int fd = memfd();
	/* The app's sequence 7: its process and thread tracks, nested slices. */
	put_packet(fd, pk_process(7, 10, APP, "com.example.app"));
	put_packet(fd, pk_thread(7, 11, 10, APP, APP, "app-main"));
	/* secretproc's sequence 9, interleaved. */
	put_packet(fd, pk_process(9, 20, FOE, SECRET));
	put_packet(fd, pk_thread(9, 21, 20, FOE, FOE_T, SECRET "-worker"));
	put_packet(fd, pk_slice(7, 5000, 11, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN, "outer"));
	put_packet(fd, pk_slice(9, 5050, 21, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN, SECRET "-slice"));
	put_packet(fd, pk_slice(7, 5100, 11, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN, "inner"));
	/* The app's sequence writing on secretproc's track: dropped. */
	put_packet(fd, pk_slice(7, 5150, 21, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "onforeign"));
	put_packet(fd, pk_slice(7, 5200, 11, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END, NULL));
	put_packet(fd, pk_slice(9, 5250, 21, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END, NULL));
	put_packet(fd, pk_slice(7, 5300, 11, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END, NULL));
	return fd;
}

static void test_sched(void **state)
{
	int in = app_trace(), kin = app_kernel();
	off_t inlen = lseek(in, 0, SEEK_END) + lseek(kin, 0, SEEK_END);
	assert_true(fd_has(kin, SECRET));
	struct rdc_policy p = policy(NULL);
	struct out o = redact_fds(in, kin, &p);
	close(in);
	close(kin);
	assert_int_equal(o.rc, 0);
	assert_int_equal(o.st.in_bytes, (uint64_t)inlen);
	assert_false(has_bytes(&o, SECRET));
	assert_no_foe_ids(&o.t->base);

	FEvent *ev[64];
	uint32_t cpu[64];
	size_t n = out_events(&o, ev, cpu, 64);
	assert_int_equal(n, 10);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(cpu[i], 2);

	Perfetto__Protos__SchedSwitchFtraceEvent *s = ev[0]->sched_switch;
	assert_int_equal(ev[0]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_SWITCH);
	assert_int_equal(ev[0]->timestamp, 1000);
	assert_string_equal(s->prev_comm, "app-main");
	assert_int_equal(s->prev_pid, APP);
	assert_int_equal(s->prev_prio, 120);
	assert_int_equal(s->prev_state, 1);
	assert_string_equal(s->next_comm, "");
	assert_int_equal(s->next_pid, SYNTH(2));
	assert_int_equal(s->next_prio, 120);

	s = ev[1]->sched_switch;
	assert_int_equal(ev[1]->timestamp, 2000);
	assert_int_equal(ev[1]->pid, SYNTH(2));
	assert_string_equal(s->prev_comm, "");
	assert_int_equal(s->prev_pid, SYNTH(2));
	assert_string_equal(s->next_comm, "");
	assert_int_equal(s->next_pid, SYNTH(2));

	s = ev[2]->sched_switch;
	assert_int_equal(s->prev_pid, SYNTH(2));
	assert_string_equal(s->next_comm, "app-worker");
	assert_int_equal(s->next_pid, APP_T);

	/* The app's wakeup stays; who woke it does not. */
	assert_int_equal(ev[3]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_WAKING);
	assert_int_equal(ev[3]->timestamp, 3200);
	assert_int_equal(ev[3]->sched_waking->pid, APP);
	assert_int_equal(ev[3]->pid, SYNTH(2));

	assert_int_equal(ev[4]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_TASK_RENAME);
	assert_string_equal(ev[4]->task_rename->newcomm, "app-render");

	assert_int_equal(ev[5]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK);
	assert_int_equal(ev[5]->sched_process_fork->child_pid, 102);

	/* 102 was forked by the app, so it is the app's. */
	s = ev[6]->sched_switch;
	assert_int_equal(s->prev_pid, APP_T);
	assert_int_equal(s->next_pid, 102);
	assert_string_equal(s->next_comm, "app-main");

	assert_int_equal(ev[7]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_MARK_VICTIM);
	assert_int_equal(ev[7]->mark_victim->pid, APP);
	assert_int_equal(ev[8]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_PRINT);
	assert_string_equal(ev[8]->print->buf, "B|100|draw");

	/* Idle stays idle (pid 0), but without a name. */
	s = ev[9]->sched_switch;
	assert_int_equal(s->next_pid, 0);
	assert_string_equal(s->next_comm, "");

	assert_true(o.st.anonymised >= 3);
	assert_true(o.st.dropped >= 8);
	out_free(&o);
}

static void test_tracks(void **state)
{
	int in = app_trace(), kin = app_kernel();
	struct rdc_policy p = policy(NULL);
	struct out o = redact_fds(in, kin, &p);
	close(in);
	close(kin);
	assert_int_equal(o.rc, 0);

	/* Only the app's descriptors. */
	size_t ndesc = 0;
	for (size_t i = 0; i < o.t->n_packet; i++) {
		Packet *pkt = o.t->packet[i];
		if (pkt->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR)
			continue;
		Perfetto__Protos__TrackDescriptor *d = pkt->track_descriptor;
		assert_true(d->uuid == 10 || d->uuid == 11);
		if (d->process)
			assert_int_equal(d->process->pid, APP);
		if (d->thread)
			assert_int_equal(d->thread->tid, APP);
		assert_int_equal(pkt->trusted_packet_sequence_id, 7);
		ndesc++;
	}
	assert_int_equal(ndesc, 2);

	/* The app's slices, in order, nested as written. */
	TEvent *ev[16];
	size_t n = out_track_events(&o, ev, 16);
	assert_int_equal(n, 4);
	assert_int_equal(ev[0]->type, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN);
	assert_string_equal(ev[0]->name, "outer");
	assert_int_equal(ev[1]->type, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN);
	assert_string_equal(ev[1]->name, "inner");
	assert_int_equal(ev[2]->type, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END);
	assert_int_equal(ev[3]->type, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END);
	uint64_t last = 0;
	for (size_t i = 0; i < o.t->n_packet; i++) {
		Packet *pkt = o.t->packet[i];
		if (pkt->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT)
			continue;
		assert_int_equal(pkt->trusted_packet_sequence_id, 7);
		assert_int_equal(pkt->track_event->track_uuid, 11);
		assert_true(pkt->timestamp > last);
		last = pkt->timestamp;
		assert_false(pkt->has_trusted_pid);
	}
	assert_false(has_bytes(&o, "onforeign"));
	out_free(&o);
}

/* Method events' arguments (docs/METHOD_EVENTS.md, "Arguments"): the
 * annotations arg<N> that htr_hit_args writes, a number and strings; the
 * strings get the DLP rules, the number and a clean string stay. */
static void test_dlp_args(void **state)
{
	struct rdc_dlp *dlp;
	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp), 0);
	int in = memfd();
	put_packet(in, pk_thread(3, 30, 0, APP, APP_T, "main"));
	Packet *e = pk_slice(3, 100, 30, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT,
			     "Target.register");
	Perfetto__Protos__DebugAnnotation *a0 =
		NEW(Perfetto__Protos__DebugAnnotation, PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT);
	a0->name_field_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME;
	a0->name = tstr("arg0");
	a0->value_case = PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_INT_VALUE;
	a0->int_value = 7;
	add_annot(e->track_event, a0);
	add_annot(e->track_event, annot_str("arg1", "alice@example.com"));
	add_annot(e->track_event, annot_str("arg2", "bob"));
	put_packet(in, e);
	struct rdc_policy p = policy(dlp);
	struct out o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, "alice"));
	TEvent *ev[2];
	assert_int_equal(out_track_events(&o, ev, 2), 1);
	assert_int_equal(ev[0]->n_debug_annotations, 3);
	assert_int_equal(ev[0]->debug_annotations[0]->int_value, 7);
	assert_string_equal(ev[0]->debug_annotations[1]->name, "arg1");
	assert_string_equal(ev[0]->debug_annotations[1]->string_value, RDC_DLP_REPLACEMENT);
	assert_string_equal(ev[0]->debug_annotations[2]->string_value, "bob");
	assert_int_equal(o.st.scrubbed, 1);
	out_free(&o);
	rdc_dlp_free(dlp);
}

static void test_dlp(void **state)
{
	struct rdc_dlp *dlp;
	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp), 0);
	int in = memfd();
	put_packet(in, pk_thread(3, 30, 0, APP, APP_T, "worker bob@example.com"));
	Packet *e = pk_slice(3, 100, 30, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT,
			     "login alice@example.org ok");
	add_annot(e->track_event, annot_str("user carol@example.net", "mail dave@example.com now"));
	add_annot(e->track_event, annot_str("peer", "10.1.2.3"));
	/* An interned name, used by a later event. */
	Perfetto__Protos__InternedData *id = NEW(Perfetto__Protos__InternedData, PERFETTO__PROTOS__INTERNED_DATA__INIT);
	Perfetto__Protos__EventName *nm = NEW(Perfetto__Protos__EventName, PERFETTO__PROTOS__EVENT_NAME__INIT);
	nm->has_iid = 1;
	nm->iid = 1;
	nm->name = tstr("sync erin@example.com");
	id->n_event_names = 1;
	id->event_names = ARR(Perfetto__Protos__EventName *, 1);
	id->event_names[0] = nm;
	Perfetto__Protos__InternedString *is = NEW(Perfetto__Protos__InternedString, PERFETTO__PROTOS__INTERNED_STRING__INIT);
	is->has_iid = is->has_str = 1;
	is->iid = 1;
	is->str.data = (uint8_t *)tstr("token 0123456789abcdef0123456789abcdef");
	is->str.len = strlen((char *)is->str.data);
	id->n_debug_annotation_string_values = 1;
	id->debug_annotation_string_values = ARR(Perfetto__Protos__InternedString *, 1);
	id->debug_annotation_string_values[0] = is;
	e->interned_data = id;
	put_packet(in, e);
	Packet *e2 = pk_slice(3, 200, 30, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, NULL);
	e2->track_event->name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
	e2->track_event->name_iid = 1;
	put_packet(in, e2);

	struct rdc_policy p = policy(dlp);
	struct out o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, "@example"));
	assert_false(has_bytes(&o, "10.1.2.3"));
	assert_false(has_bytes(&o, "0123456789abcdef0123456789abcdef"));
	assert_true(has_bytes(&o, "login " RDC_DLP_REPLACEMENT " ok"));
	assert_true(has_bytes(&o, "mail " RDC_DLP_REPLACEMENT " now"));
	assert_true(has_bytes(&o, "token " RDC_DLP_REPLACEMENT));
	assert_int_equal(o.st.scrubbed, 7);

	TEvent *ev[4];
	assert_int_equal(out_track_events(&o, ev, 4), 2);
	assert_string_equal(ev[0]->debug_annotations[0]->name, "user " RDC_DLP_REPLACEMENT);
	assert_string_equal(ev[0]->debug_annotations[1]->string_value, RDC_DLP_REPLACEMENT);
	assert_int_equal(ev[1]->name_iid, 1);
	out_free(&o);

	/* No DLP: names pass unchanged. */
	in = memfd();
	put_packet(in, pk_thread(3, 30, 0, APP, APP_T, "w"));
	put_packet(in, pk_slice(3, 100, 30, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "a@example.com"));
	p = policy(NULL);
	o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	assert_true(has_bytes(&o, "a@example.com"));
	assert_int_equal(o.st.scrubbed, 0);
	out_free(&o);
	rdc_dlp_free(dlp);
}

/* The service's trusted_pid outranks what a producer says about itself. */
static void test_trusted_pid(void **state)
{
	int in = memfd();
	/* secretproc claiming to be the app. */
	Packet *liar = pk_thread(5, 50, 0, APP, APP, "fake");
	liar->has_trusted_pid = 1;
	liar->trusted_pid = FOE;
	put_packet(in, liar);
	Packet *le = pk_slice(5, 10, 50, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, SECRET);
	le->has_trusted_pid = 1;
	le->trusted_pid = FOE;
	put_packet(in, le);
	/* The app's own sequence, with no descriptor of its own. */
	Packet *ok = pk_slice(6, 20, 0, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "mine");
	ok->has_trusted_pid = 1;
	ok->trusted_pid = APP;
	put_packet(in, ok);
	/* A packet on no sequence, on an unknown track: nobody's. */
	put_packet(in, pk_slice(0, 30, 77, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "loose"));

	struct rdc_policy p = policy(NULL);
	struct out o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, SECRET));
	assert_false(has_bytes(&o, "fake"));
	assert_false(has_bytes(&o, "loose"));
	assert_int_equal(o.t->n_packet, 1);
	assert_string_equal(o.t->packet[0]->track_event->name, "mine");
	assert_false(o.t->packet[0]->has_trusted_pid);
	out_free(&o);
}

static Packet *pk_tree(uint32_t seq, int32_t pid, int32_t ppid, const char *cmd)
{
	Packet *pkt = pk(seq);
	Perfetto__Protos__ProcessTree *t = NEW(Perfetto__Protos__ProcessTree, PERFETTO__PROTOS__PROCESS_TREE__INIT);
	Perfetto__Protos__ProcessTree__Process *pr = NEW(Perfetto__Protos__ProcessTree__Process,
							  PERFETTO__PROTOS__PROCESS_TREE__PROCESS__INIT);
	pr->has_pid = pr->has_ppid = 1;
	pr->pid = pid;
	pr->ppid = ppid;
	pr->n_cmdline = 1;
	pr->cmdline = ARR(char *, 1);
	pr->cmdline[0] = tstr(cmd);
	t->n_processes = 1;
	t->processes = ARR(Perfetto__Protos__ProcessTree__Process *, 1);
	t->processes[0] = pr;
	pkt->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE;
	pkt->process_tree = t;
	return pkt;
}

static size_t count_case(const struct out *o, Perfetto__Protos__TracePacket__DataCase c)
{
	size_t n = 0;
	for (size_t i = 0; i < o->t->n_packet; i++)
		n += o->t->packet[i]->data_case == c;
	return n;
}

/* Sequences a runtime can put kernel-looking packets on: none, one that no
 * packet declares, and the app's own (7, declared by its descriptor). */
static const uint32_t forged_seqs[] = { 0, 4242, 7 };

/* The app cannot speak for the kernel (issue 14): a fork by the app of
 * secretproc's tasks, in the runtime's stream, is ignored on any sequence,
 * so the kernel's own switches of secretproc stay anonymous. */
static void test_forged_fork_ignored(void **state)
{
	int in = memfd(), kin = memfd();
	put_packet(in, pk_process(7, 10, APP, "com.example.app"));
	put_packet(in, pk_slice(7, 5, 10, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "mine"));
	for (size_t i = 0; i < 3; i++) {
		FEvent *forged[] = { fe_fork(10, "app-main", APP, SECRET, FOE),
				     fe_fork(11, "app-main", APP, SECRET, FOE_T) };
		Packet *f = pk_bundle(0, forged, 2);
		f->has_trusted_packet_sequence_id = forged_seqs[i] != 0;
		f->trusted_packet_sequence_id = forged_seqs[i];
		f->has_trusted_pid = 1;
		f->trusted_pid = APP;
		put_packet(in, f);
	}
	/* The real kernel data: secretproc's threads run beside the app. */
	FEvent *real[] = { fe_switch(20, "app-main", APP, SECRET, FOE_T),
			   fe_switch(21, SECRET, FOE_T, SECRET, FOE),
			   fe_waking(22, FOE, SECRET, FOE_T) };
	put_packet(kin, pk_bundle(0, real, 3));

	struct rdc_policy p = policy(NULL);
	struct out o = redact_fds(in, kin, &p);
	close(in);
	close(kin);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, SECRET));
	assert_no_foe_ids(&o.t->base);
	FEvent *ev[8];
	uint32_t cpu[8];
	/* The two switches, anonymised; the waking of a foreign task goes. */
	assert_int_equal(out_events(&o, ev, cpu, 8), 2);
	assert_int_equal(ev[0]->sched_switch->next_pid, SYNTH(0));
	assert_int_equal(ev[1]->sched_switch->prev_pid, SYNTH(0));
	assert_int_equal(ev[1]->sched_switch->next_pid, SYNTH(0));
	assert_true(has_bytes(&o, "mine"));
	out_free(&o);
}

/* Forks from the kernel's stream do widen the app: the child and its
 * descriptor (from the runtime's stream, read after) are the app's, until a
 * fork by someone else hands the id out again. */
static void test_kernel_fork_honoured(void **state)
{
	int in = memfd(), kin = memfd();
	FEvent *k[] = {
		fe_fork(10, "app-main", APP, "app-child", 102),
		fe_switch(11, "app-main", APP, "app-child", 102),
		fe_rename(12, 102, "app-child", "app-renamed"),
		fe_exit(13, "app-renamed", 102, 102),
		/* 102 again, forked by secretproc: not the app's any more */
		fe_fork(14, SECRET, FOE, SECRET, 102),
		fe_switch(15, "app-main", APP, SECRET, 102),
	};
	put_packet(kin, pk_bundle(1, k, 6));
	put_packet(in, pk_process(8, 12, 102, "app-child-proc"));

	struct rdc_policy p = policy(NULL);
	struct out o = redact_fds(in, kin, &p);
	close(in);
	close(kin);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, SECRET));
	FEvent *ev[8];
	uint32_t cpu[8];
	assert_int_equal(out_events(&o, ev, cpu, 8), 5);
	assert_int_equal(ev[0]->event_case, PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SCHED_PROCESS_FORK);
	assert_int_equal(ev[0]->sched_process_fork->child_pid, 102);
	assert_int_equal(ev[1]->sched_switch->next_pid, 102);
	assert_string_equal(ev[1]->sched_switch->next_comm, "app-child");
	assert_string_equal(ev[2]->task_rename->newcomm, "app-renamed");
	assert_int_equal(ev[3]->sched_process_exit->pid, 102);
	assert_int_equal(ev[4]->sched_switch->next_pid, SYNTH(1));
	assert_string_equal(ev[4]->sched_switch->next_comm, "");
	out_free(&o);

	/* The child's descriptor is judged after the kernel's stream: the
	 * fork made 102 the app's. Without the pid reuse it stays. */
	in = memfd();
	kin = memfd();
	put_packet(kin, pk_bundle(1, k, 2));
	put_packet(in, pk_process(8, 12, 102, "app-child-proc"));
	o = redact_fds(in, kin, &p);
	close(in);
	close(kin);
	assert_int_equal(o.rc, 0);
	assert_true(has_bytes(&o, "app-child-proc"));
	out_free(&o);
}

/* Kernel-origin packets in the runtime's stream go, whatever their
 * sequence and even when all they say is about the app. */
static void test_runtime_kernel_packets_dropped(void **state)
{
	int in = memfd();
	put_packet(in, pk_process(7, 10, APP, "com.example.app"));
	for (size_t i = 0; i < 3; i++) {
		FEvent *mine[] = { fe_switch(10, "app-main", APP, "app-worker", APP_T),
				   fe_rename(11, APP_T, "app-worker", "app-fake") };
		Packet *b = pk_bundle(0, mine, 2);
		b->has_trusted_packet_sequence_id = forged_seqs[i] != 0;
		b->trusted_packet_sequence_id = forged_seqs[i];
		put_packet(in, b);
		put_packet(in, pk_tree(forged_seqs[i], APP, FOE, "tree-" SECRET));
		put_packet(in, pk_tree(forged_seqs[i], FOE, APP, SECRET));
	}
	put_packet(in, pk_slice(7, 5, 10, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "mine"));

	struct rdc_policy p = policy(NULL);
	struct out o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, SECRET));
	assert_false(has_bytes(&o, "app-fake"));
	assert_int_equal(count_case(&o, PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS), 0);
	assert_int_equal(count_case(&o, PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE), 0);
	assert_int_equal(o.t->n_packet, 2);
	assert_int_equal(o.st.dropped, 9);
	out_free(&o);

	/* With nothing else of the app's, such a stream is no result. */
	in = memfd();
	FEvent *only[] = { fe_switch(10, "app-main", APP, "app-worker", APP_T) };
	put_packet(in, pk_bundle(0, only, 1));
	put_packet(in, pk_tree(0, APP, 1, "com.example.app"));
	o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);

	/* The kernel's stream in turn carries nothing but kernel data. */
	int kin = memfd();
	FEvent *k[] = { fe_switch(10, "app-main", APP, "app-worker", APP_T) };
	put_packet(kin, pk_bundle(0, k, 1));
	put_packet(kin, pk_thread(1000, 30, 0, APP, APP, "kernel-track"));
	put_packet(kin, pk_slice(1000, 5, 30, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "kernel-slice"));
	o = redact_kernel(kin, &p);
	close(kin);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, "kernel-track"));
	assert_false(has_bytes(&o, "kernel-slice"));
	assert_int_equal(o.t->n_packet, 1);
	out_free(&o);
}

/* Interned data and sequence flags only on the app's sequences; unknown
 * content is dropped and unknown fields are stripped. */
static void test_sequence_state(void **state)
{
	int in = memfd();
	put_packet(in, pk_thread(8, 80, 0, FOE, FOE, SECRET));
	Packet *fi = pk(8);
	fi->interned_data = NEW(Perfetto__Protos__InternedData, PERFETTO__PROTOS__INTERNED_DATA__INIT);
	Perfetto__Protos__EventName *nm = NEW(Perfetto__Protos__EventName, PERFETTO__PROTOS__EVENT_NAME__INIT);
	nm->name = tstr(SECRET "-interned");
	fi->interned_data->n_event_names = 1;
	fi->interned_data->event_names = ARR(Perfetto__Protos__EventName *, 1);
	fi->interned_data->event_names[0] = nm;
	put_packet(in, fi);

	put_packet(in, pk_thread(4, 40, 0, APP, APP, "main"));
	/* Interned data alone on the app's sequence: kept. */
	Packet *ai = pk(4);
	ai->interned_data = NEW(Perfetto__Protos__InternedData, PERFETTO__PROTOS__INTERNED_DATA__INIT);
	Perfetto__Protos__EventName *an = NEW(Perfetto__Protos__EventName, PERFETTO__PROTOS__EVENT_NAME__INIT);
	an->has_iid = 1;
	an->iid = 5;
	an->name = tstr("draw-frame");
	ai->interned_data->n_event_names = 1;
	ai->interned_data->event_names = ARR(Perfetto__Protos__EventName *, 1);
	ai->interned_data->event_names[0] = an;
	put_packet(in, ai);
	/* A kept event with an unknown field inside: the field goes. */
	Packet *ue = pk_slice(4, 10, 40, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "x");
	add_unknown(&ue->track_event->base, 999, SECRET "-unknown");
	put_packet(in, ue);
	/* Content we do not model (TraceConfig is field 33): dropped. */
	Packet *cfg = pk(4);
	add_unknown(&cfg->base, 33, SECRET "-config");
	put_packet(in, cfg);
	/* Clock snapshots stay, whoever wrote them. */
	Packet *cs = pk(1);
	cs->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT;
	cs->clock_snapshot = NEW(Perfetto__Protos__ClockSnapshot, PERFETTO__PROTOS__CLOCK_SNAPSHOT__INIT);
	Perfetto__Protos__ClockSnapshot__Clock *ck =
		NEW(Perfetto__Protos__ClockSnapshot__Clock, PERFETTO__PROTOS__CLOCK_SNAPSHOT__CLOCK__INIT);
	ck->has_clock_id = ck->has_timestamp = 1;
	ck->clock_id = 6;
	ck->timestamp = 123456;
	cs->clock_snapshot->n_clocks = 1;
	cs->clock_snapshot->clocks = ARR(Perfetto__Protos__ClockSnapshot__Clock *, 1);
	cs->clock_snapshot->clocks[0] = ck;
	put_packet(in, cs);

	assert_true(fd_has(in, SECRET "-unknown"));
	assert_true(fd_has(in, SECRET "-config"));
	struct rdc_policy p = policy(NULL);
	struct out o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, SECRET));
	assert_true(has_bytes(&o, "draw-frame"));
	bool clock = false;
	size_t bare = 0;
	for (size_t i = 0; i < o.t->n_packet; i++) {
		Packet *pkt = o.t->packet[i];
		if (pkt->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT) {
			clock = true;
			assert_int_equal(pkt->clock_snapshot->clocks[0]->timestamp, 123456);
		}
		if (pkt->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA__NOT_SET) {
			assert_non_null(pkt->interned_data);
			bare++;
		}
		assert_int_equal(pkt->base.n_unknown_fields, 0);
	}
	assert_true(clock);
	assert_int_equal(bare, 1);
	out_free(&o);
}

static void test_compact_sched(void **state)
{
	int in = memfd();
	Packet *pkt = pk_bundle(3, NULL, 0);
	Perfetto__Protos__FtraceEventBundle__CompactSched *cs =
		NEW(Perfetto__Protos__FtraceEventBundle__CompactSched,
		    PERFETTO__PROTOS__FTRACE_EVENT_BUNDLE__COMPACT_SCHED__INIT);
	char *tab[] = { tstr(SECRET), tstr("app-main"), tstr("app-worker") };
	cs->n_intern_table = 3;
	cs->intern_table = tab;
	uint64_t sts[] = { 1000, 10, 10, 10 };
	int64_t sst[] = { 0, 1, 1, 0 };
	int32_t spid[] = { FOE, APP, FOE_T, APP_T };
	int32_t sprio[] = { 120, 120, 120, 120 };
	uint32_t scomm[] = { 0, 1, 0, 2 };
	cs->n_switch_timestamp = cs->n_switch_prev_state = cs->n_switch_next_pid = 4;
	cs->n_switch_next_prio = cs->n_switch_next_comm_index = 4;
	cs->switch_timestamp = sts;
	cs->switch_prev_state = sst;
	cs->switch_next_pid = spid;
	cs->switch_next_prio = sprio;
	cs->switch_next_comm_index = scomm;
	/* Wakings at 2000 (foreign), 2005 (app), 2007 (foreign), 2020 (app). */
	uint64_t wts[] = { 2000, 5, 2, 13 };
	int32_t wpid[] = { FOE, APP_T, FOE, APP };
	int32_t wcpu[] = { 1, 2, 3, 0 };
	int32_t wprio[] = { 120, 110, 120, 100 };
	uint32_t wcomm[] = { 0, 2, 0, 1 };
	uint32_t wflags[] = { 1, 2, 3, 4 };
	cs->n_waking_timestamp = cs->n_waking_pid = cs->n_waking_target_cpu = 4;
	cs->n_waking_prio = cs->n_waking_comm_index = cs->n_waking_common_flags = 4;
	cs->waking_timestamp = wts;
	cs->waking_pid = wpid;
	cs->waking_target_cpu = wcpu;
	cs->waking_prio = wprio;
	cs->waking_comm_index = wcomm;
	cs->waking_common_flags = wflags;
	pkt->ftrace_events->compact_sched = cs;
	put_packet(in, pkt);

	struct rdc_policy p = policy(NULL);
	struct out o = redact_kernel(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, SECRET));
	assert_no_foe_ids(&o.t->base);
	assert_int_equal(o.t->n_packet, 1);
	cs = o.t->packet[0]->ftrace_events->compact_sched;
	assert_non_null(cs);

	assert_int_equal(cs->n_switch_next_pid, 4);
	int32_t want_pid[] = { SYNTH(3), APP, SYNTH(3), APP_T };
	const char *want_comm[] = { "", "app-main", "", "app-worker" };
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(cs->switch_next_pid[i], want_pid[i]);
		assert_true(cs->switch_next_comm_index[i] < cs->n_intern_table);
		assert_string_equal(cs->intern_table[cs->switch_next_comm_index[i]], want_comm[i]);
		assert_int_equal(cs->switch_timestamp[i], sts[i]);
		assert_int_equal(cs->switch_prev_state[i], sst[i]);
	}
	assert_int_equal(cs->n_waking_pid, 2);
	assert_int_equal(cs->n_waking_common_flags, 2);
	/* Absolute times survive the dropped entries. */
	assert_int_equal(cs->waking_timestamp[0], 2005);
	assert_int_equal(cs->waking_timestamp[0] + cs->waking_timestamp[1], 2020);
	assert_int_equal(cs->waking_pid[0], APP_T);
	assert_int_equal(cs->waking_pid[1], APP);
	assert_int_equal(cs->waking_target_cpu[0], 2);
	assert_int_equal(cs->waking_prio[1], 100);
	assert_int_equal(cs->waking_common_flags[0], 2);
	assert_string_equal(cs->intern_table[cs->waking_comm_index[0]], "app-worker");
	assert_string_equal(cs->intern_table[cs->waking_comm_index[1]], "app-main");
	out_free(&o);

	/* Columns of different lengths do not parse. */
	in = memfd();
	cs = pkt->ftrace_events->compact_sched;
	cs->n_switch_next_prio = 3;
	put_packet(in, pkt);
	put_packet(in, pk_slice(6, 20, 0, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "mine"));
	o = redact_kernel(in, &p);
	close(in);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);
	/* Nor a comm index past the table. */
	in = memfd();
	cs->n_switch_next_prio = 4;
	scomm[2] = 7;
	put_packet(in, pkt);
	o = redact_kernel(in, &p);
	close(in);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);
}

static void test_process_tree(void **state)
{
	int in = memfd();
	Packet *pkt = pk(1000);
	Perfetto__Protos__ProcessTree *t = NEW(Perfetto__Protos__ProcessTree, PERFETTO__PROTOS__PROCESS_TREE__INIT);
	Perfetto__Protos__ProcessTree__Process *pa = NEW(Perfetto__Protos__ProcessTree__Process,
							  PERFETTO__PROTOS__PROCESS_TREE__PROCESS__INIT);
	pa->has_pid = pa->has_ppid = 1;
	pa->pid = APP;
	pa->ppid = FOE;
	pa->n_cmdline = 1;
	pa->cmdline = ARR(char *, 1);
	pa->cmdline[0] = tstr("com.example.app");
	Perfetto__Protos__ProcessTree__Process *pf = NEW(Perfetto__Protos__ProcessTree__Process,
							  PERFETTO__PROTOS__PROCESS_TREE__PROCESS__INIT);
	pf->has_pid = 1;
	pf->pid = FOE;
	pf->n_cmdline = 1;
	pf->cmdline = ARR(char *, 1);
	pf->cmdline[0] = tstr("/system/bin/" SECRET);
	t->n_processes = 2;
	t->processes = ARR(Perfetto__Protos__ProcessTree__Process *, 2);
	t->processes[0] = pf;
	t->processes[1] = pa;
	Perfetto__Protos__ProcessTree__Thread *ta = NEW(Perfetto__Protos__ProcessTree__Thread,
							 PERFETTO__PROTOS__PROCESS_TREE__THREAD__INIT);
	ta->has_tid = ta->has_tgid = 1;
	ta->tid = APP_T;
	ta->tgid = APP;
	ta->name = tstr("app-worker");
	Perfetto__Protos__ProcessTree__Thread *tf = NEW(Perfetto__Protos__ProcessTree__Thread,
							 PERFETTO__PROTOS__PROCESS_TREE__THREAD__INIT);
	tf->has_tid = tf->has_tgid = 1;
	tf->tid = FOE_T;
	tf->tgid = FOE;
	tf->name = tstr(SECRET);
	t->n_threads = 2;
	t->threads = ARR(Perfetto__Protos__ProcessTree__Thread *, 2);
	t->threads[0] = tf;
	t->threads[1] = ta;
	pkt->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE;
	pkt->process_tree = t;
	put_packet(in, pkt);
	/* Only foreign processes: the packet goes. */
	t->n_processes = 1;
	t->n_threads = 1;
	put_packet(in, pkt);

	struct rdc_policy p = policy(NULL);
	struct out o = redact_kernel(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	assert_false(has_bytes(&o, SECRET));
	assert_no_foe_ids(&o.t->base);
	assert_int_equal(o.t->n_packet, 1);
	t = o.t->packet[0]->process_tree;
	assert_int_equal(t->n_processes, 1);
	assert_int_equal(t->processes[0]->pid, APP);
	assert_false(t->processes[0]->has_ppid);
	assert_string_equal(t->processes[0]->cmdline[0], "com.example.app");
	assert_int_equal(t->n_threads, 1);
	assert_int_equal(t->threads[0]->tid, APP_T);
	out_free(&o);
}

/* Nothing of the app's left is not a result. */
static void test_nothing_left(void **state)
{
	struct rdc_policy p = policy(NULL);
	struct out o = redact_bytes("", 0, &p);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);

	int in = memfd(), kin = memfd();
	FEvent *ev[] = { fe_switch(1, SECRET, FOE, SECRET, FOE_T), fe_waking(2, FOE, SECRET, FOE_T) };
	put_packet(kin, pk_bundle(0, ev, 2));
	put_packet(in, pk_process(9, 20, FOE, SECRET));
	put_packet(in, pk_slice(9, 3, 20, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "x"));
	o = redact_fds(in, kin, &p);
	close(in);
	close(kin);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);

	assert_int_equal(rdc_perfetto(0, -1, 1, NULL, NULL), -EINVAL);
	assert_int_equal(rdc_perfetto(0, -2, 1, &p, NULL), -EINVAL);
}

/* Every truncation of a valid stream, the runtime's or the kernel's, is
 * refused, except at a packet boundary, where what is left is itself a
 * trace. */
static void truncations(int full, bool kernel)
{
	off_t len = lseek(full, 0, SEEK_END);
	uint8_t *b = malloc((size_t)len);
	assert_non_null(b);
	assert_int_equal(pread(full, b, (size_t)len, 0), len);
	close(full);

	bool *boundary = calloc((size_t)len + 1, 1);
	assert_non_null(boundary);
	for (size_t off = 0; off < (size_t)len;) {
		boundary[off] = true;
		uint64_t n = 0;
		size_t i = off + 1;
		for (unsigned s = 0;; s += 7) {
			n |= (uint64_t)(b[i] & 0x7f) << s;
			if (!(b[i++] & 0x80))
				break;
		}
		off = i + (size_t)n;
	}
	boundary[len] = true;

	struct rdc_policy p = policy(NULL);
	size_t ok = 0;
	for (off_t cut = 0; cut <= len; cut++) {
		int part = memfd();
		if (cut)
			put(part, b, (size_t)cut);
		struct out o = kernel ? redact_kernel(part, &p) : redact_fd(part, &p);
		close(part);
		if (boundary[cut] && cut > 0)
			assert_true(o.rc == 0 || o.rc == -EBADMSG);
		else
			assert_int_equal(o.rc, -EBADMSG);
		if (o.rc == 0) {
			assert_false(has_bytes(&o, SECRET));
			ok++;
		}
		out_free(&o);
	}
	assert_true(ok > 0);
	free(boundary);
	free(b);
}

static void test_truncated(void **state)
{
	truncations(app_trace(), false);
	truncations(app_kernel(), true);
}

static void test_caps_and_garbage(void **state)
{
	struct rdc_policy p = policy(NULL);

	/* A packet over the cap is refused before it is read. */
	uint8_t big[12] = { 0x0a };
	size_t h = 1 + varint(big + 1, (1u << 20) + 1);
	struct out o = redact_bytes(big, h, &p);
	assert_int_equal(o.rc, -E2BIG);
	out_free(&o);

	size_t n = (1u << 20) + 1;
	uint8_t *pl = calloc(1, n + 16);
	assert_non_null(pl);
	int in = memfd();
	put_frame(in, pl, n);
	o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, -E2BIG);
	out_free(&o);
	/* Exactly at the cap is fine as framing (this one is all zeros:
	 * field 0 is malformed). */
	in = memfd();
	put_frame(in, pl, 1u << 20);
	o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);
	free(pl);

	/* A group, which protobuf-c cannot parse. */
	o = redact_bytes("\x0a\x02\x0b\x0c", 4, &p);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);
	/* A field 0 at the top. */
	o = redact_bytes("\x02\x00", 2, &p);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);
	/* A length running past the end. */
	o = redact_bytes("\x0a\x05\x08\x01", 4, &p);
	assert_int_equal(o.rc, -EBADMSG);
	out_free(&o);

	/* Random bytes: refused, never crash. */
	uint8_t junk[4096];
	unsigned seed = 12345;
	for (int round = 0; round < 300; round++) {
		size_t len = (size_t)(rand_r(&seed) % sizeof(junk)) + 1;
		for (size_t i = 0; i < len; i++)
			junk[i] = (uint8_t)rand_r(&seed);
		if (round & 1)
			junk[0] = 0x0a; /* looks like a packet */
		o = redact_bytes(junk, len, &p);
		assert_true(o.rc < 0);
		out_free(&o);
	}
}

/* Deeply nested annotations are refused before protobuf-c recurses. */
static void test_nesting(void **state)
{
	struct rdc_policy p = policy(NULL);
	for (int depth = 10; depth <= 200; depth += 190) {
		int in = memfd();
		put_packet(in, pk_thread(3, 30, 0, APP, APP, "main"));
		Packet *e = pk_slice(3, 1, 30, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "deep");
		Perfetto__Protos__DebugAnnotation *top = annot_str("k", "v"), *cur = top;
		for (int i = 0; i < depth; i++) {
			Perfetto__Protos__DebugAnnotation *child = annot_str("k", "v");
			cur->n_dict_entries = 1;
			cur->dict_entries = ARR(Perfetto__Protos__DebugAnnotation *, 1);
			cur->dict_entries[0] = child;
			cur = child;
		}
		add_annot(e->track_event, top);
		put_packet(in, e);
		struct out o = redact_fd(in, &p);
		close(in);
		assert_int_equal(o.rc, depth < 64 ? 0 : -EBADMSG);
		out_free(&o);
	}
}

/* Other top-level fields of Trace are skipped, as protobuf would. */
static void test_unknown_top_level(void **state)
{
	int in = memfd();
	put(in, "\x10\x05", 2);          /* field 2 varint */
	put(in, "\x1a\x03" "abc", 5);    /* field 3 bytes */
	put_packet(in, pk_slice(6, 20, 0, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "mine"));
	Packet *ok = pk_slice(6, 21, 0, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "mine2");
	ok->has_trusted_pid = 1;
	ok->trusted_pid = APP;
	put_packet(in, ok);
	struct rdc_policy p = policy(NULL);
	struct out o = redact_fd(in, &p);
	close(in);
	assert_int_equal(o.rc, 0);
	/* The first packet predates the proof that sequence 6 is the app's. */
	assert_int_equal(o.t->n_packet, 1);
	assert_false(has_bytes(&o, "abc"));
	out_free(&o);
}

/* The kernel's bundles of switch and wakeup events take a fast path that
 * rewrites them on the wire (rdc_perfetto.c); an unknown field in the
 * bundle sends the same packet down the general path, which drops that
 * field. Both must write the same bytes and count the same. */
static uint32_t fx_rng = 1;

static uint32_t fx_rnd(uint32_t n)
{
	fx_rng = fx_rng * 1103515245u + 12345u;
	return (fx_rng >> 8) % n;
}

static int32_t fx_pid(void)
{
	static const int32_t who[] = { APP, APP_T, FOE, FOE_T, 0, 4242, -5 };
	return who[fx_rnd(7)];
}

static const char *fx_comm(void)
{
	static const char *const c[] = {
		"app-main", SECRET, "", "mail bob@example.com now",
		"a-long-thread-name-past-the-dlp-cache-width-0123456789abcdef0123456789abcdef",
	};
	return c[fx_rnd(5)];
}

static FEvent *fx_event(void)
{
	FEvent *e = fe(1000 + fx_rnd(1u << 30), (uint32_t)fx_pid());
	if (fx_rnd(8) == 0)
		e->has_timestamp = 0;
	if (fx_rnd(8) == 0)
		e->has_pid = 0;
	switch (fx_rnd(4)) {
	case 0:
	case 1: {
		FEvent *w = fe_switch(e->timestamp, fx_comm(), fx_pid(), fx_comm(), fx_pid());
		Perfetto__Protos__SchedSwitchFtraceEvent *s = w->sched_switch;
		s->prev_prio = (int32_t)fx_rnd(200) - 50;
		s->prev_state = fx_rnd(4) ? (int64_t)fx_rnd(1024) : -1;
		if (fx_rnd(6) == 0)
			s->has_prev_pid = 0;
		if (fx_rnd(6) == 0)
			s->has_next_pid = 0;
		if (fx_rnd(6) == 0)
			s->prev_comm = NULL;
		if (fx_rnd(6) == 0)
			s->next_comm = NULL;
		if (fx_rnd(6) == 0)
			s->has_prev_state = 0;
		e->event_case = w->event_case;
		e->sched_switch = s;
		break;
	}
	case 2: {
		FEvent *w = fe_waking(e->timestamp, e->pid, fx_comm(), fx_pid());
		w->sched_waking->target_cpu = (int32_t)fx_rnd(8);
		if (fx_rnd(5) == 0)
			w->sched_waking->has_success = 0;
		e->event_case = w->event_case;
		e->sched_waking = w->sched_waking;
		break;
	}
	default: {
		FEvent *w = fe_wakeup(e->timestamp, e->pid, fx_comm(), fx_pid());
		e->event_case = w->event_case;
		e->sched_wakeup = w->sched_wakeup;
		break;
	}
	}
	return e;
}

static void test_fast_equals_general(void **state)
{
	struct rdc_dlp *dlp;
	size_t compared = 0;

	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp), 0);
	for (uint32_t seed = 1; seed <= 80; seed++) {
		fx_rng = seed;
		int fast = memfd(), general = memfd();
		for (size_t k = 0, np = 1 + fx_rnd(4); k < np; k++) {
			size_t n = 1 + fx_rnd(40);
			FEvent **ev = ARR(FEvent *, n);
			for (size_t i = 0; i < n; i++)
				ev[i] = fx_event();
			Packet *p = pk_bundle(fx_rnd(8), ev, n);
			if (fx_rnd(2)) {
				p->has_timestamp = 1;
				p->timestamp = 5000000000ull + seed;
			}
			if (fx_rnd(3) == 0) {
				p->has_trusted_pid = 1;
				p->trusted_pid = 555;
			}
			if (fx_rnd(4) == 0)
				p->has_trusted_packet_sequence_id = 0;
			put_packet(fast, p);
			add_unknown(&p->ftrace_events->base, 99, "newer-writer");
			put_packet(general, p);
			p->ftrace_events->base.n_unknown_fields = 0;
		}
		struct rdc_policy pol = policy(seed % 2 ? dlp : NULL);
		struct out a = redact_kernel(fast, &pol), b = redact_kernel(general, &pol);
		out_same(&a, &b);
		assert_false(has_bytes(&b, "newer-writer"));
		compared += a.rc == 0;
		out_free(&a);
		out_free(&b);
		close(fast);
		close(general);
		pool_free(NULL);
	}
	/* Most traces hold something of the app's: the bytes were compared. */
	assert_true(compared > 40);
	rdc_dlp_free(dlp);
}

/* ---- the runtime's lean track path (rdc_perfetto.c lean_track) against
 * the general path. Stream a holds the packets as they are; stream b the
 * same, each with an unknown field 99 at the end, which the lean path
 * refuses and the general path drops. Both must write the same bytes and
 * count the same, for protobuf-c's packets (taken by the lean path) and
 * for hand-written ones it must refuse (a NUL in a name, name and
 * name_iid together, padded or negative varints, too many categories). */

struct tl_buf {
	uint8_t b[512];
	size_t n;
};

static void tl_v(struct tl_buf *o, uint64_t v)
{
	o->n += varint(o->b + o->n, v);
}

static void tl_bytes(struct tl_buf *o, const void *p, size_t n)
{
	assert_true(o->n + n <= sizeof(o->b));
	memcpy(o->b + o->n, p, n);
	o->n += n;
}

/* One packet of stream a and of stream b. */
static void tl_put(int a, int b, const uint8_t *p, size_t n)
{
	static const uint8_t unknown[] = { 0x98, 0x06, 0x01 }; /* field 99: 1 */
	uint8_t *x = malloc(n + sizeof(unknown));
	assert_non_null(x);
	if (n)
		memcpy(x, p, n);
	memcpy(x + n, unknown, sizeof(unknown));
	put_frame(a, p, n);
	put_frame(b, x, n + sizeof(unknown));
	free(x);
}

static void tl_packet(int a, int b, const Packet *pkt)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(pkt);
	uint8_t *p = malloc(n + 1);
	assert_non_null(p);
	perfetto__protos__trace_packet__pack(pkt, p);
	tl_put(a, b, p, n);
	free(p);
}

/* Hand-written: a track event on sequence 7, track 11 (the app's), its
 * body [ev, ev + n), and trusted_pid's bytes (tp, ntp) after it. */
static void tl_raw(int a, int b, const void *ev, size_t n, const void *tp, size_t ntp)
{
	struct tl_buf o = { .n = 0 };
	tl_bytes(&o, "\x40\x88\x27\x50\x07\x5a", 6); /* timestamp 5000, seq 7, event */
	tl_v(&o, n);
	tl_bytes(&o, ev, n);
	if (ntp)
		tl_bytes(&o, tp, ntp);
	tl_put(a, b, o.b, o.n);
}

/* An empty name and category, trusted_pid the app's: taken, and kept as
 * they are. */
static void tl_empty(int a, int b)
{
	tl_raw(a, b, "\x58\x0b\xb2\x01\x00\xba\x01\x00", 8, "\xf8\x04\x64", 3);
}

static void tl_refused(int a, int b)
{
	/* First: the trusted_pids below leave sequence 7 foreign. */
	tl_empty(a, b);
	/* a NUL in the name: protobuf-c's copy ends at it */
	tl_raw(a, b, "\x58\x0b\xba\x01\x05" "ab\0cd", 10, NULL, 0);
	/* name_iid and name: one oneof */
	tl_raw(a, b, "\x50\x03\x58\x0b\xba\x01\x02hi", 9, NULL, 0);
	/* name before track_uuid: not protobuf-c's order */
	tl_raw(a, b, "\xba\x01\x02hi\x58\x0b", 7, NULL, 0);
	/* a padded track_uuid */
	tl_raw(a, b, "\x58\x8b\x00\xba\x01\x02hi", 8, NULL, 0);
	/* a negative type (10 bytes) */
	tl_raw(a, b, "\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x58\x0b", 13, NULL, 0);
	/* a negative trusted_pid */
	tl_raw(a, b, "\x58\x0b\xba\x01\x02hi", 7, "\xf8\x04\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12);
	/* trusted_pid twice */
	tl_raw(a, b, "\x58\x0b", 2, "\xf8\x04\x05\xf8\x04\x06", 6);
	/* nine categories */
	struct tl_buf o = { .n = 0 };
	tl_bytes(&o, "\x58\x0b", 2);
	for (int i = 0; i < 9; i++)
		tl_bytes(&o, "\xb2\x01\x01x", 4);
	tl_raw(a, b, o.b, o.n, NULL, 0);
}

static void test_track_lean_equals_general(void **state)
{
	static const char *const names[] = {
		"outer", "inner-slice", "", "mail bob@example.com now", "ip 10.1.2.3 here",
		"a-long-slice-name-past-the-dlp-cache-width-0123456789abcdef0123456789abcdef",
	};
	static const uint64_t uuids[] = { 0, 10, 11, 20, 21, 99 };
	static const uint32_t seqs[] = { 0, 7, 9, 13 };
	struct rdc_dlp *dlp;
	size_t compared = 0;

	/* Alone after the app's tracks, the empty strings' packet is kept. */
	struct rdc_policy pol0 = policy(NULL);
	int a0 = memfd(), b0 = memfd();
	tl_packet(a0, b0, pk_process(7, 10, APP, "com.example.app"));
	tl_packet(a0, b0, pk_thread(7, 11, 10, APP, APP, "app-main"));
	tl_empty(a0, b0);
	struct out x0 = redact_fd(a0, &pol0), y0 = redact_fd(b0, &pol0);
	assert_int_equal(x0.rc, 0);
	assert_int_equal(x0.st.kept, 3);
	out_same(&x0, &y0);
	out_free(&x0);
	out_free(&y0);
	close(a0);
	close(b0);

	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp), 0);
	for (uint32_t seed = 1; seed <= 60; seed++) {
		fx_rng = seed;
		int a = memfd(), b = memfd();
		/* The tracks: the app's on sequence 7, secretproc's on 9. */
		tl_packet(a, b, pk_process(7, 10, APP, "com.example.app"));
		tl_packet(a, b, pk_thread(7, 11, 10, APP, APP, "app-main"));
		tl_packet(a, b, pk_process(9, 20, FOE, SECRET));
		tl_packet(a, b, pk_thread(9, 21, 20, FOE, FOE_T, SECRET "-worker"));
		if (seed % 5 == 0)
			tl_refused(a, b);
		for (size_t k = 0, np = 1 + fx_rnd(60); k < np; k++) {
			Packet *p = pk_slice(seqs[fx_rnd(4)], 5000 + k, uuids[fx_rnd(6)],
					     (Perfetto__Protos__TrackEvent__Type)fx_rnd(5), NULL);
			TEvent *e = p->track_event;
			if (fx_rnd(4) == 0)
				p->has_timestamp = 0;
			if (fx_rnd(5) == 0)
				e->has_type = 0;
			if (fx_rnd(3) == 0) {
				p->has_trusted_pid = 1;
				p->trusted_pid = fx_rnd(2) ? APP : FOE;
			}
			switch (fx_rnd(3)) {
			case 0:
				e->name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
				e->name = tstr(names[fx_rnd(6)]);
				break;
			case 1:
				e->name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID;
				e->name_iid = 1 + fx_rnd(300);
				break;
			}
			if ((e->n_categories = fx_rnd(4) ? 0 : 1 + fx_rnd(3))) {
				e->categories = ARR(char *, e->n_categories);
				for (size_t i = 0; i < e->n_categories; i++)
					e->categories[i] = tstr(names[fx_rnd(6)]);
			}
			tl_packet(a, b, p);
		}
		struct rdc_policy pol = policy(seed % 2 ? dlp : NULL);
		struct out x = redact_fd(a, &pol), y = redact_fd(b, &pol);
		out_same(&x, &y);
		assert_false(has_bytes(&x, SECRET));
		compared += x.rc == 0;
		out_free(&x);
		out_free(&y);
		close(a);
		close(b);
		pool_free(NULL);
	}
	assert_true(compared > 40);
	rdc_dlp_free(dlp);
}

/* ---- the lean path (canonical switches copied as spans) on bytes that
 * protobuf-c would not write: varints padded with a 0x80 0x00, and an
 * event's fields now and then in reverse order. The lean path must hand
 * those events (or bundles) to the fast path's parser, and the bytes out
 * must still be the general path's. */

static uint32_t nc_rng = 1;

static uint32_t nc_rnd(uint32_t n)
{
	nc_rng = nc_rng * 1103515245u + 12345u;
	return (nc_rng >> 8) % n;
}

static uint64_t nc_get(const uint8_t **p)
{
	uint64_t v = 0;
	for (unsigned k = 0;; k++) {
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << (7 * k);
		if (!(b & 0x80))
			return v;
	}
}

/* A varint, padded by a byte when pad (and it has room: 10 at most). */
static size_t nc_put(uint8_t *o, uint64_t v, bool pad)
{
	size_t n = varint(o, v);
	if (pad && n < 10) {
		o[n - 1] |= 0x80;
		o[n++] = 0;
	}
	return n;
}

/* Levels: 0 TracePacket, 1 FtraceEventBundle, 2 FtraceEvent, 3 an event. */
static bool nc_sub(int level, uint64_t num)
{
	return (level == 0 && num == 1) || (level == 1 && num == 2) ||
	       (level == 2 && (num == 4 || num == 17 || num == 20 || num == 114));
}

/* protobuf-c's bytes [p, p + n) of a message at level, re-encoded into o
 * (room for 2n + 64); unknown: a field 99 ends the bundle. */
static size_t nc_msg(uint8_t *o, const uint8_t *p, size_t n, int level, bool unknown)
{
	const uint8_t *at[128], *e = p + n;
	size_t nf = 0, w = 0;

	while (p < e) {
		assert_true(nf < 128);
		at[nf++] = p;
		uint64_t tag = nc_get(&p);
		if ((tag & 7) == 0)
			nc_get(&p);
		else if ((tag & 7) == 2)
			p += nc_get(&p);
		else
			fail_msg("wire type %u", (unsigned)(tag & 7));
	}
	bool rev = level == 2 && nc_rnd(6) == 0;
	for (size_t k = 0; k < nf; k++) {
		const uint8_t *q = at[rev ? nf - 1 - k : k];
		uint64_t tag = nc_get(&q);
		w += varint(o + w, tag);
		uint64_t v = nc_get(&q);
		if ((tag & 7) == 0) {
			w += nc_put(o + w, v, nc_rnd(4) == 0);
		} else if (nc_sub(level, tag >> 3)) {
			uint8_t *sub = malloc(2 * v + 64);
			assert_non_null(sub);
			size_t m = nc_msg(sub, q, v, level + 1, unknown);
			w += nc_put(o + w, m, nc_rnd(8) == 0);
			memcpy(o + w, sub, m);
			w += m;
			free(sub);
		} else {
			w += nc_put(o + w, v, nc_rnd(8) == 0);
			memcpy(o + w, q, v);
			w += v;
		}
	}
	if (unknown && level == 1) {
		static const char txt[] = "newer-writer";
		w += varint(o + w, 99 << 3 | 2);
		w += varint(o + w, sizeof(txt) - 1);
		memcpy(o + w, txt, sizeof(txt) - 1);
		w += sizeof(txt) - 1;
	}
	return w;
}

static void nc_packet(int fd, const Packet *pkt, uint32_t seed, bool unknown)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(pkt);
	uint8_t *b = malloc(n + 1), *o = malloc(2 * n + 64);
	assert_non_null(b);
	assert_non_null(o);
	perfetto__protos__trace_packet__pack(pkt, b);
	nc_rng = seed;
	put_frame(fd, o, nc_msg(o, b, n, 0, unknown));
	free(b);
	free(o);
}

static void test_lean_noncanonical(void **state)
{
	struct rdc_dlp *dlp;
	size_t compared = 0;

	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp), 0);
	for (uint32_t seed = 1; seed <= 80; seed++) {
		fx_rng = seed;
		int fast = memfd(), general = memfd();
		for (size_t k = 0, np = 1 + fx_rnd(4); k < np; k++) {
			size_t n = 1 + fx_rnd(40);
			FEvent **ev = ARR(FEvent *, n);
			for (size_t i = 0; i < n; i++)
				ev[i] = fx_event();
			Packet *p = pk_bundle(fx_rnd(8), ev, n);
			if (fx_rnd(2)) {
				p->has_timestamp = 1;
				p->timestamp = 5000000000ull + seed;
			}
			uint32_t s = seed * 7919u + (uint32_t)k;
			nc_packet(fast, p, s, false);
			nc_packet(general, p, s, true);
		}
		struct rdc_policy pol = policy(seed % 2 ? dlp : NULL);
		struct out a = redact_kernel(fast, &pol), b = redact_kernel(general, &pol);
		out_same(&a, &b);
		assert_false(has_bytes(&b, "newer-writer"));
		compared += a.rc == 0;
		out_free(&a);
		out_free(&b);
		close(fast);
		close(general);
		pool_free(NULL);
	}
	assert_true(compared > 40);
	rdc_dlp_free(dlp);
}

/* A bundle whose rewrite outgrows the write buffer's free room: 6,000
 * switches of one-byte foreign pids and no comms (8 bytes each) become
 * 20 bytes each (a synthetic tid is 5 bytes, an empty comm is written),
 * 120 KB from 48 KB, so the lean path moves to its own buffer midway. */
static void test_lean_grows(void **state)
{
	enum { N = 6000 };
	FEvent **ev = ARR(FEvent *, N);
	FEvent *foe = fe_switch(0, "", 7, "", 8);
	foe->has_timestamp = foe->has_pid = 0;
	foe->sched_switch->prev_comm = foe->sched_switch->next_comm = NULL;
	foe->sched_switch->has_prev_prio = foe->sched_switch->has_next_prio = 0;
	foe->sched_switch->has_prev_state = 0;
	ev[0] = fe_switch(1000, "app-main", APP, SECRET, FOE);
	for (size_t i = 1; i < N; i++)
		ev[i] = foe;
	int fast = memfd(), general = memfd();
	for (int k = 0; k < 3; k++) {
		Packet *p = pk_bundle((uint32_t)k, ev, N);
		put_packet(fast, p);
		add_unknown(&p->ftrace_events->base, 99, "newer-writer");
		put_packet(general, p);
		p->ftrace_events->base.n_unknown_fields = 0;
	}
	struct rdc_policy pol = policy(NULL);
	struct out a = redact_kernel(fast, &pol), b = redact_kernel(general, &pol);
	assert_int_equal(a.rc, 0);
	assert_int_equal(b.rc, 0);
	assert_true(a.len > 3 * 100000);
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.buf, b.buf, a.len);
	assert_int_equal(a.st.kept, b.st.kept);
	assert_int_equal(a.st.anonymised, b.st.anonymised);
	assert_false(has_bytes(&a, SECRET));
	out_free(&a);
	out_free(&b);
	close(fast);
	close(general);
}

/* ---- the kernel's stream on two threads (rdc_perfetto.c, par_*): a
 * second thread redacts every other chunk from a guess that the chunk
 * before it did not change who the app is. Forks by the app, a task id
 * handed out again by a foe, process lists and top-level fields that are
 * not packets land anywhere in the chunks, which are small here (many
 * pairs a trace, the guess both right and wrong). The bytes out, the
 * counts and the answer must be those of one thread, and so must the
 * runtime's packets judged after it, which name the forked tasks. */

/* Tasks forked and handed out again in these traces. */
#define PAR_KID 300
/* 31 bytes: under the DLP cache's width */
#define BUDGET_COMM "abcdefghijklmnopqrstuvwxyz01234"

static FEvent *par_event(void)
{
	uint64_t ts = 1000 + fx_rnd(1u << 30);
	int32_t kid = PAR_KID + (int32_t)fx_rnd(8);
	switch (fx_rnd(6)) {
	case 0: {
		static const int32_t parent[] = { APP, APP_T, FOE, PAR_KID, PAR_KID + 1 };
		return fe_fork(ts, "parent", parent[fx_rnd(5)], fx_comm(), kid);
	}
	case 1:
		return fe_switch(ts, fx_comm(), kid, fx_comm(), fx_pid());
	case 2:
		return fe_switch(ts, fx_comm(), fx_pid(), fx_comm(), kid);
	case 3:
		return fe_rename(ts, kid, "old", fx_comm());
	default:
		return fx_event();
	}
}

/* Top-level fields that are not packets, as a newer writer might add:
 * a varint, a fixed64, a fixed32 and a length-delimited one of n bytes. */
static void par_unknown(int fd, size_t n)
{
	uint8_t b[32];
	size_t k = 0;
	b[k++] = 2 << 3 | 0;
	k += varint(b + k, 300 + fx_rnd(100000));
	b[k++] = 3 << 3 | 1;
	memset(b + k, 0xab, 8);
	k += 8;
	b[k++] = 4 << 3 | 5;
	memset(b + k, 0xcd, 4);
	k += 4;
	b[k++] = 5 << 3 | 2;
	k += varint(b + k, n);
	put(fd, b, k);
	uint8_t *body = malloc(n ? n : 1);
	assert_non_null(body);
	memset(body, 'z', n);
	put(fd, body, n);
	free(body);
}

static struct out par_redact(int in, int kin, const struct rdc_dlp *dlp, size_t chunk)
{
	struct rdc_policy pol = policy(dlp);
	pol.pf_chunk = chunk;
	return redact_fds(in, kin, &pol);
}

/* The kernel's stream through a pipe, written by a child in pieces of
 * 1-300 bytes: reads that end anywhere, and no file to read again. */
static struct out par_redact_pipe(int in, int kin, const struct rdc_dlp *dlp, size_t chunk)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		uint8_t b[300];
		ssize_t n;
		off_t at = 0;
		while ((n = pread(kin, b, 1 + fx_rnd(sizeof(b)), at)) > 0) {
			if (write(pfd[1], b, (size_t)n) != n)
				_exit(1);
			at += n;
		}
		_exit(0);
	}
	close(pfd[1]);
	struct rdc_policy pol = policy(dlp);
	pol.pf_chunk = chunk;
	struct out o = { 0 };
	int outfd = memfd();
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	o.rc = rdc_perfetto(in, pfd[0], outfd, &pol, &o.st);
	close(pfd[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	off_t end = lseek(outfd, 0, SEEK_END);
	assert_true(end >= 0);
	o.len = (size_t)end;
	o.buf = malloc(o.len + 1);
	assert_non_null(o.buf);
	assert_int_equal(pread(outfd, o.buf, o.len, 0), (ssize_t)o.len);
	close(outfd);
	return o;
}

static void par_same(const struct out *a, const struct out *b, bool bytes)
{
	assert_int_equal(a->rc, b->rc);
	if (bytes || a->rc == 0) {
		out_same(a, b);
		assert_int_equal(a->st.in_bytes, b->st.in_bytes);
	}
}

static void par_compare(int in, int kin, const struct rdc_dlp *dlp, size_t chunk, bool bytes)
{
	struct out a = par_redact(in, kin, dlp, SIZE_MAX), b = par_redact(in, kin, dlp, chunk);
	par_same(&a, &b, bytes);
	if (fx_rnd(3) == 0) {
		struct out c = par_redact_pipe(in, kin, dlp, chunk);
		par_same(&a, &c, bytes);
		out_free(&c);
	}
	out_free(&a);
	out_free(&b);
}

static void test_par_equals_serial(void **state)
{
	struct rdc_dlp *dlp;
	size_t ok = 0;

	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp), 0);
	for (uint32_t seed = 1; seed <= 60; seed++) {
		fx_rng = seed;
		int kin = memfd(), in = memfd();
		for (size_t k = 0, np = 20 + fx_rnd(80); k < np; k++) {
			if (fx_rnd(10) == 0)
				par_unknown(kin, fx_rnd(300));
			if (fx_rnd(12) == 0) {
				put_packet(kin, pk_tree(0, PAR_KID + (int32_t)fx_rnd(8), APP, "forked"));
			} else if (fx_rnd(15) == 0) {
				/* The packet's tag in two bytes (0x8a 0x00): still a
				 * packet to protobuf, and to both readers. */
				FEvent **ev = ARR(FEvent *, 1);
				ev[0] = par_event();
				Packet *pkt = pk_bundle(fx_rnd(4), ev, 1);
				size_t n = perfetto__protos__trace_packet__get_packed_size(pkt);
				uint8_t *b = malloc(n + 16);
				assert_non_null(b);
				b[0] = 0x8a;
				b[1] = 0x00;
				size_t h = 2 + varint(b + 2, n);
				perfetto__protos__trace_packet__pack(pkt, b + h);
				put(kin, b, h + n);
				free(b);
			} else {
				size_t n = fx_rnd(12);
				FEvent **ev = ARR(FEvent *, n ? n : 1);
				for (size_t i = 0; i < n; i++)
					ev[i] = par_event();
				put_packet(kin, pk_bundle(fx_rnd(4), ev, n));
			}
			pool_free(NULL);
		}
		/* Longer than a read's room past the chunk: skipped across reads. */
		if (seed % 20 == 0)
			par_unknown(kin, (1u << 20) + 4096);
		/* The runtime's tracks for the forked tasks, named by tid
		 * alone: whose they are is what the kernel's stream taught, to
		 * its end (the runtime's thread guesses, and is checked). */
		put_packet(in, pk_process(7, 1, APP, "app"));
		for (int32_t t = 0; t < 8; t++) {
			Packet *th = pk_thread(7, 10 + (uint64_t)t, 1, APP, PAR_KID + t, "kid");
			th->track_descriptor->thread->has_pid = 0;
			put_packet(in, th);
			put_packet(in, pk_slice(7, 5000 + (uint64_t)t, 10 + (uint64_t)t,
						PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "work"));
		}
		pool_free(NULL);
		const struct rdc_dlp *d = seed % 2 ? dlp : NULL;
		size_t chunk = 1 + fx_rnd(seed % 3 ? 400 : 4000);
		par_compare(in, kin, d, chunk, true);
		struct out o = par_redact(in, kin, d, chunk);
		ok += o.rc == 0;
		out_free(&o);
		/* Cut short anywhere: the same answer as one thread. */
		off_t size = lseek(kin, 0, SEEK_END);
		assert_true(size > 0);
		assert_int_equal(ftruncate(kin, (off_t)fx_rnd((uint32_t)size)), 0);
		par_compare(in, kin, d, chunk, false);
		close(kin);
		close(in);
	}
	/* Most traces kept something of the app's: bytes, not only errors. */
	assert_true(ok > 40);
	rdc_dlp_free(dlp);
}

/* A packet fits the unpack budget (64 MiB of arena a packet), or does
 * not, whatever came before it and on whichever thread: the arena counts
 * only the packet's own blocks, and a DLP cache hit takes what a miss
 * takes. Here the kernel's stream leaves spare arena blocks behind (a
 * process list of 60000 foreign processes) and names a 31-byte app comm
 * only in a chunk of the second thread (its DLP cache alone); the runtime's
 * stream is one track event of n empty annotations and that comm. Near
 * the largest n one thread redacts, and at one more, three threads agree. */
static int budget_kernel(void)
{
	int kin = memfd();
	size_t np = 60000;
	Perfetto__Protos__ProcessTree t = PERFETTO__PROTOS__PROCESS_TREE__INIT;
	Perfetto__Protos__ProcessTree__Process *pr = calloc(np, sizeof(*pr));
	t.processes = calloc(np, sizeof(*t.processes));
	assert_non_null(pr);
	assert_non_null(t.processes);
	for (size_t i = 0; i < np; i++) {
		Perfetto__Protos__ProcessTree__Process init = PERFETTO__PROTOS__PROCESS_TREE__PROCESS__INIT;
		pr[i] = init;
		pr[i].has_pid = 1;
		pr[i].pid = 5000 + (int32_t)i;
		t.processes[i] = &pr[i];
	}
	t.n_processes = np;
	Packet *p = pk(0);
	p->data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_PROCESS_TREE;
	p->process_tree = &t;
	put_packet(kin, p);
	free(t.processes);
	free(pr);
	/* In chunks of a packet, pairs (list, x) and (x, comm): the comm is
	 * seen by the second thread alone. */
	for (int i = 0; i < 3; i++) {
		FEvent **ev = ARR(FEvent *, 1);
		ev[0] = fe_switch(1000 + (uint64_t)i, i == 2 ? BUDGET_COMM : "x", APP, "other", FOE);
		put_packet(kin, pk_bundle(0, ev, 1));
	}
	return kin;
}

static int budget_runtime(size_t n)
{
	int in = memfd();
	put_packet(in, pk_process(7, 1, APP, "app"));
	Packet *p = pk_slice(7, 5000, 1, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT, "x");
	Perfetto__Protos__DebugAnnotation *empty =
		NEW(Perfetto__Protos__DebugAnnotation, PERFETTO__PROTOS__DEBUG_ANNOTATION__INIT);
	TEvent *e = p->track_event;
	e->n_debug_annotations = n + 1;
	e->debug_annotations = ARR(Perfetto__Protos__DebugAnnotation *, n + 1);
	for (size_t i = 0; i < n; i++)
		e->debug_annotations[i] = empty;
	e->debug_annotations[n] = annot_str("comm", BUDGET_COMM);
	put_packet(in, p);
	return in;
}

static void test_par_budget(void **state)
{
	struct rdc_dlp *dlp;
	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp), 0);
	int kin = budget_kernel();
	size_t lo = 1000, hi = 2000000;
	while (lo + 1 < hi) {
		size_t m = lo + (hi - lo) / 2;
		int in = budget_runtime(m);
		struct out o = par_redact(in, kin, dlp, SIZE_MAX);
		lo = o.rc == 0 ? m : lo;
		hi = o.rc == 0 ? hi : m;
		out_free(&o);
		close(in);
		pool_free(NULL);
	}
	/* The edge exists: the budget, not the input's size, stops it. */
	assert_true(hi < 2000000);
	for (size_t n = lo > 4 ? lo - 4 : lo; n <= hi; n++) {
		int in = budget_runtime(n);
		par_compare(in, kin, dlp, 1, false);
		close(in);
		pool_free(NULL);
	}
	close(kin);
	rdc_dlp_free(dlp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_sched, pool_free),
		cmocka_unit_test_teardown(test_tracks, pool_free),
		cmocka_unit_test_teardown(test_dlp, pool_free),
		cmocka_unit_test_teardown(test_dlp_args, pool_free),
		cmocka_unit_test_teardown(test_trusted_pid, pool_free),
		cmocka_unit_test_teardown(test_forged_fork_ignored, pool_free),
		cmocka_unit_test_teardown(test_kernel_fork_honoured, pool_free),
		cmocka_unit_test_teardown(test_runtime_kernel_packets_dropped, pool_free),
		cmocka_unit_test_teardown(test_sequence_state, pool_free),
		cmocka_unit_test_teardown(test_compact_sched, pool_free),
		cmocka_unit_test_teardown(test_process_tree, pool_free),
		cmocka_unit_test_teardown(test_nothing_left, pool_free),
		cmocka_unit_test_teardown(test_truncated, pool_free),
		cmocka_unit_test_teardown(test_caps_and_garbage, pool_free),
		cmocka_unit_test_teardown(test_nesting, pool_free),
		cmocka_unit_test_teardown(test_unknown_top_level, pool_free),
		cmocka_unit_test_teardown(test_fast_equals_general, pool_free),
		cmocka_unit_test_teardown(test_lean_noncanonical, pool_free),
		cmocka_unit_test_teardown(test_track_lean_equals_general, pool_free),
		cmocka_unit_test_teardown(test_lean_grows, pool_free),
		cmocka_unit_test_teardown(test_par_equals_serial, pool_free),
		cmocka_unit_test_teardown(test_par_budget, pool_free),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
