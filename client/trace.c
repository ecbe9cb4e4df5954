#include "trace.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "perfetto_trace.pb-c.h"
#include "profiling/profiling.h"
#include "util.h"

enum { EV_BEGIN = 1, EV_END, EV_INSTANT, EV_COUNTER };

struct trc_ev {
	/* i + 1 once slot holds event i; 0 while it is being written. */
	_Atomic uint64_t seq;
	uint64_t ts;
	int64_t value;
	uint8_t type, len;
	char name[TRC_NAME_MAX];
};

struct trc_ring {
	_Atomic uint64_t head;   /* events ever written; only the owner writes it */
	int32_t tid;
	char comm[16];
	struct trc_ev ev[TRC_RING_EVENTS];
};

/* Slot states: 0 never used, -1 free (its thread exited), > 0 owner tid. */
static _Atomic int32_t state[TRC_MAX_RINGS];
static struct trc_ring *_Atomic rings[TRC_MAX_RINGS];
static _Atomic uint32_t skipped;
static pthread_key_t ring_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static __thread struct trc_ring *my_ring __attribute__((tls_model("initial-exec")));
static __thread int my_ring_none __attribute__((tls_model("initial-exec")));

static void ring_release(void *arg)
{
	struct trc_ring *r = arg;
	for (int i = 0; i < TRC_MAX_RINGS; i++) {
		if (atomic_load(&rings[i]) == r) {
			/* Its events stay readable until another thread takes the slot. */
			atomic_store(&state[i], -1);
			break;
		}
	}
}

static void key_init(void)
{
	pthread_key_create(&ring_key, ring_release);
}

static struct trc_ring *ring_claim(void)
{
	int32_t tid = (int32_t)syscall(SYS_gettid);

	pthread_once(&key_once, key_init);
	for (int pass = 0; pass < 2; pass++) {
		/* Fresh slots first, so dead threads' events survive longest. */
		int32_t want = pass == 0 ? 0 : -1;
		for (int i = 0; i < TRC_MAX_RINGS; i++) {
			int32_t s = want;
			if (!atomic_compare_exchange_strong(&state[i], &s, tid))
				continue;
			struct trc_ring *r = atomic_load(&rings[i]);
			if (!r) {
				r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
					 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
				if (r == MAP_FAILED) {
					atomic_store(&state[i], want);
					return NULL;
				}
				atomic_store(&rings[i], r);
			}
			atomic_store(&r->head, 0);
			r->tid = tid;
			memset(r->comm, 0, sizeof(r->comm));
			prctl(PR_GET_NAME, r->comm, 0, 0, 0);
			pthread_setspecific(ring_key, r);
			return r;
		}
	}
	atomic_fetch_add(&skipped, 1);
	return NULL;
}

static void put(uint8_t type, const char *name, int64_t value)
{
	struct trc_ring *r = my_ring;
	if (!r) {
		if (my_ring_none)
			return;
		r = my_ring = ring_claim();
		if (!r) {
			my_ring_none = 1;
			return;
		}
	}
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	struct trc_ev *e = &r->ev[h % TRC_RING_EVENTS];
	atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	struct timespec ts;
	clock_gettime(CLOCK_BOOTTIME, &ts);
	e->ts = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	e->type = type;
	e->value = value;
	size_t n = 0;
	if (name)
		while (n < TRC_NAME_MAX - 1 && name[n]) {
			e->name[n] = name[n];
			n++;
		}
	e->len = (uint8_t)n;
	atomic_store_explicit(&e->seq, h + 1, memory_order_release);
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
}

void prof_trace_begin(const char *name)
{
	put(EV_BEGIN, name, 0);
}

void prof_trace_end(void)
{
	put(EV_END, NULL, 0);
}

void prof_trace_instant(const char *name)
{
	put(EV_INSTANT, name, 0);
}

void prof_trace_counter(const char *name, int64_t value)
{
	put(EV_COUNTER, name, value);
}

/* ------------------------------------------------------------ snapshot */

struct out {
	int fd;
	uint8_t buf[1 << 16];
	size_t len;
	uint64_t total;
	int err;
};

static void out_flush(struct out *o)
{
	if (o->len && !o->err) {
		int r = util_write_all(o->fd, o->buf, o->len);
		if (r < 0)
			o->err = r;
		o->total += o->len;
	}
	o->len = 0;
}

/* Frame one packet as Trace.packet (field 1, length-delimited). */
static void out_packet(struct out *o, const Perfetto__Protos__TracePacket *p)
{
	size_t n = perfetto__protos__trace_packet__get_packed_size(p);
	uint8_t hdr[11];
	size_t h = 0;
	hdr[h++] = 0x0a;
	for (size_t v = n; ; v >>= 7) {
		hdr[h++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		if (v <= 0x7f)
			break;
	}
	if (o->len + h + n > sizeof(o->buf))
		out_flush(o);
	if (h + n > sizeof(o->buf)) {
		uint8_t *big = malloc(n);
		if (!big) {
			o->err = -ENOMEM;
			return;
		}
		perfetto__protos__trace_packet__pack(p, big);
		if (!o->err && ((o->err = util_write_all(o->fd, hdr, h)) == 0))
			o->err = util_write_all(o->fd, big, n);
		o->total += h + n;
		free(big);
		return;
	}
	memcpy(o->buf + o->len, hdr, h);
	perfetto__protos__trace_packet__pack(p, o->buf + o->len + h);
	o->len += h + n;
}

#define SEQ_ID(pid) (0x10000u + (uint32_t)(pid))
#define PROCESS_UUID(pid) ((uint64_t)(uint32_t)(pid) | (1ull << 40))
#define THREAD_UUID(tid) ((uint64_t)(uint32_t)(tid) | (2ull << 40))

static uint64_t counter_uuid(const char *name, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (uint8_t)name[i];
		h *= 1099511628211ull;
	}
	return (h & ((1ull << 40) - 1)) | (3ull << 40);
}

static void read_cmdline(char *out, size_t n)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	out[0] = '\0';
	if (fd < 0)
		return;
	ssize_t r = read(fd, out, n - 1);
	close(fd);
	out[r > 0 ? r : 0] = '\0';
}

static void emit_descriptors(struct out *o, pid_t pid)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;
	char cmd[256], comm[17] = "";
	char *argv0 = cmd;

	read_cmdline(cmd, sizeof(cmd));
	prctl(PR_GET_NAME, comm, 0, 0, 0);
	pd.has_pid = 1;
	pd.pid = pid;
	pd.process_name = comm;
	pd.n_cmdline = 1;
	pd.cmdline = &argv0;
	td.has_uuid = 1;
	td.uuid = PROCESS_UUID(pid);
	td.process = &pd;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID(pid);
	p.has_sequence_flags = 1;
	p.sequence_flags = 1; /* SEQ_INCREMENTAL_STATE_CLEARED */
	p.has_first_packet_on_sequence = 1;
	p.first_packet_on_sequence = 1;
	out_packet(o, &p);
}

static void emit_thread(struct out *o, pid_t pid, const struct trc_ring *r)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__ThreadDescriptor th = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
	char comm[17], path[64];

	/* The live name, if the thread still runs; else the one it had. */
	memcpy(comm, r->comm, 16);
	comm[16] = '\0';
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)r->tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, comm, 16);
		close(fd);
		if (n > 0) {
			comm[n] = '\0';
			char *nl = strchr(comm, '\n');
			if (nl)
				*nl = '\0';
		}
	}
	th.has_pid = 1;
	th.pid = pid;
	th.has_tid = 1;
	th.tid = r->tid;
	th.thread_name = comm;
	td.has_uuid = 1;
	td.uuid = THREAD_UUID(r->tid);
	td.has_parent_uuid = 1;
	td.parent_uuid = PROCESS_UUID(pid);
	td.thread = &th;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID(pid);
	out_packet(o, &p);
}

static void emit_counter_track(struct out *o, pid_t pid, const char *name, uint64_t uuid)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackDescriptor td = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;
	Perfetto__Protos__CounterDescriptor cd = PERFETTO__PROTOS__COUNTER_DESCRIPTOR__INIT;
	td.has_uuid = 1;
	td.uuid = uuid;
	td.has_parent_uuid = 1;
	td.parent_uuid = PROCESS_UUID(pid);
	td.name = (char *)name;
	td.counter = &cd;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR;
	p.track_descriptor = &td;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID(pid);
	out_packet(o, &p);
}

static void emit_event(struct out *o, pid_t pid, const struct trc_ring *r, const struct trc_ev *e,
		       uint64_t *counters, unsigned *ncounters)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackEvent te = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	char name[TRC_NAME_MAX];

	memcpy(name, e->name, e->len);
	name[e->len] = '\0';
	te.has_track_uuid = 1;
	te.track_uuid = THREAD_UUID(r->tid);
	te.has_type = 1;
	switch (e->type) {
	case EV_BEGIN:
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
		break;
	case EV_END:
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END;
		break;
	case EV_INSTANT:
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;
		break;
	case EV_COUNTER: {
		uint64_t uuid = counter_uuid(e->name, e->len);
		unsigned i;
		for (i = 0; i < *ncounters && counters[i] != uuid; i++)
			;
		if (i == *ncounters && *ncounters < 64) {
			counters[(*ncounters)++] = uuid;
			emit_counter_track(o, pid, name, uuid);
		}
		te.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER;
		te.track_uuid = uuid;
		te.counter_value_field_case = PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE;
		te.counter_value = e->value;
		break;
	}
	default:
		return;
	}
	if (e->type == EV_BEGIN || e->type == EV_INSTANT) {
		te.name_field_case = PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME;
		te.name = name;
	}
	p.has_timestamp = 1;
	p.timestamp = e->ts;
	p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
	p.track_event = &te;
	p.has_trusted_packet_sequence_id = 1;
	p.trusted_packet_sequence_id = SEQ_ID(pid);
	out_packet(o, &p);
}

int trc_snapshot(int fd, struct trc_stats *st, uint64_t *bytes)
{
	struct out *o = malloc(sizeof(*o));
	struct trc_ev *copy = malloc(sizeof(struct trc_ev) * TRC_RING_EVENTS);
	uint64_t counters[64];
	unsigned ncounters = 0;
	pid_t pid = getpid();
	int r = 0;

	memset(st, 0, sizeof(*st));
	if (!o || !copy) {
		free(o);
		free(copy);
		return -ENOMEM;
	}
	o->fd = fd;
	o->len = 0;
	o->total = 0;
	o->err = 0;
	emit_descriptors(o, pid);
	for (int i = 0; i < TRC_MAX_RINGS; i++) {
		struct trc_ring *ring = atomic_load(&rings[i]);
		if (!ring || atomic_load(&state[i]) == 0)
			continue;
		uint64_t h = atomic_load_explicit(&ring->head, memory_order_acquire);
		uint64_t start = h > TRC_RING_EVENTS ? h - TRC_RING_EVENTS : 0;
		size_t n = 0;
		for (uint64_t k = start; k < h; k++) {
			const struct trc_ev *e = &ring->ev[k % TRC_RING_EVENTS];
			uint64_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
			if (s1 != k + 1)
				continue; /* overwritten, or being written */
			copy[n] = *e;
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load_explicit(&e->seq, memory_order_relaxed) != s1)
				continue; /* overwritten while we copied it */
			n++;
		}
		/* Overwritten before the copy, plus overwritten during it. */
		st->dropped += start + ((h - start) - n);
		if (!n)
			continue;
		st->threads++;
		emit_thread(o, pid, ring);
		for (size_t k = 0; k < n; k++)
			emit_event(o, pid, ring, &copy[k], counters, &ncounters);
		st->events += n;
	}
	st->threads_skipped = atomic_load(&skipped);
	out_flush(o);
	r = o->err;
	if (bytes)
		*bytes = o->total;
	free(o);
	free(copy);
	return r;
}
