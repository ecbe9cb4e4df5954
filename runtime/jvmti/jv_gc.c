/*
 * GC pauses for system traces. GarbageCollectionStart/Finish run inside
 * the pause on a VM thread, where JNI is forbidden and any delay stalls
 * every Java thread: the callbacks only claim a slot of a lock-free ring
 * with one atomic add and store the time (CLOCK_BOOTTIME, like the native
 * flight recorder) and the tid. The agent thread turns the ring into
 * Perfetto "GC" slices when a trace is asked for. JVG_RING events are kept;
 * older ones are overwritten (counted as dropped).
 */
#include "jv.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace_fmt.h"
#include "util.h"

struct jvg_ev {
	_Atomic uint64_t seq; /* i + 1 once slot holds event i; 0 while written */
	uint64_t ts;
	int32_t tid;
	uint8_t start;
};

static struct jvg_ev G_ring[JVG_RING];
static _Atomic uint64_t G_head;

static void put(uint8_t start)
{
	struct timespec t;
	uint64_t i = atomic_fetch_add_explicit(&G_head, 1, memory_order_relaxed);
	struct jvg_ev *e = &G_ring[i % JVG_RING];
	atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	clock_gettime(CLOCK_BOOTTIME, &t);
	e->ts = (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
	e->tid = (int32_t)gettid();
	e->start = start;
	atomic_store_explicit(&e->seq, i + 1, memory_order_release);
}

void JNICALL jvg_on_gc_start(jvmtiEnv *j)
{
	put(1);
}

void JNICALL jvg_on_gc_finish(jvmtiEnv *j)
{
	put(0);
}

#define JVG_MAX_TIDS 64

static void comm_of(pid_t tid, char *out, size_t n)
{
	char path[64];
	util_fmt(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	if (util_read_file(path, out, n) <= 0)
		util_strlcpy(out, "GC", n);
	out[strcspn(out, "\n")] = '\0';
}

int jvg_write_trace(int fd, uint64_t *bytes, uint64_t *events, uint64_t *dropped)
{
	struct tfmt_out *o = malloc(sizeof(*o));
	struct jvg_ev *copy = calloc(JVG_RING, sizeof(*copy));
	struct { pid_t tid; int depth; } tids[JVG_MAX_TIDS];
	unsigned ntids = 0;
	uint64_t head = atomic_load_explicit(&G_head, memory_order_acquire);
	uint64_t first = head > JVG_RING ? head - JVG_RING : 0, n = 0;
	pid_t pid = getpid();
	char comm[64];
	int r;

	if (!o || !copy) {
		free(o);
		free(copy);
		return -ENOMEM;
	}
	*events = 0;
	*dropped = first;
	/* Copy out first: a slot being rewritten has a seq that no longer fits. */
	for (uint64_t i = first; i < head; i++) {
		struct jvg_ev *e = &G_ring[i % JVG_RING];
		if (atomic_load_explicit(&e->seq, memory_order_acquire) != i + 1)
			continue;
		struct jvg_ev c;
		c.ts = e->ts;
		c.tid = e->tid;
		c.start = e->start;
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->seq, memory_order_relaxed) != i + 1)
			continue;
		copy[n].ts = c.ts;
		copy[n].tid = c.tid;
		copy[n].start = c.start;
		n++;
	}
	tfmt_init(o, fd);
	if (util_read_file("/proc/self/comm", comm, sizeof(comm)) <= 0)
		util_strlcpy(comm, "java", sizeof(comm));
	comm[strcspn(comm, "\n")] = '\0';
	tfmt_process(o, pid, comm, NULL);
	for (uint64_t i = 0; i < n; i++) {
		unsigned t;
		for (t = 0; t < ntids && tids[t].tid != copy[i].tid; t++)
			;
		if (t == ntids) {
			if (ntids == JVG_MAX_TIDS) {
				(*dropped)++;
				continue;
			}
			tids[ntids].tid = copy[i].tid;
			tids[ntids++].depth = 0;
			char tc[64];
			comm_of(copy[i].tid, tc, sizeof(tc));
			tfmt_thread(o, pid, copy[i].tid, tc);
		}
		/* A finish whose start was overwritten has no slice to end. */
		if (!copy[i].start && tids[t].depth == 0)
			continue;
		struct trc_ev ev;
		memset(&ev, 0, sizeof(ev));
		ev.ts = copy[i].ts;
		ev.type = copy[i].start ? EV_BEGIN : EV_END;
		ev.len = 2;
		memcpy(ev.name, "GC", 2);
		tfmt_event(o, pid, copy[i].tid, &ev);
		tids[t].depth += copy[i].start ? 1 : -1;
		if (!copy[i].start)
			(*events)++;
	}
	r = tfmt_finish(o, bytes);
	free(o);
	free(copy);
	return r;
}
