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

#include "trace_fmt.h"
#include "profiling/profiling.h"
#include "util.h"


#ifdef TRC_TEST_COPY_HOOK
/* The unit test's build only (tests/unit/test_trace.c): called before the
 * snapshot copies each event, so that a test can lap the copy at a chosen
 * point, as a writer does when the snapshot's thread is preempted. */
void TRC_TEST_COPY_HOOK(int32_t tid, uint64_t i);
#endif

struct trc_ring {
	_Atomic uint64_t head;   /* events ever written; only the owner writes it */
	/* A discard window (trc_discard_begin): the owner's head when it first
	 * wrote in window win, and the events it dropped since. Only the owner
	 * writes these; win last, so a reader that sees win sees the rest. */
	_Atomic uint64_t win, base, discarded;
	int32_t tid;
	char comm[16];
	struct trc_ev ev[TRC_RING_EVENTS];
};

/* Slot states: 0 never used, -1 free (its thread exited), > 0 owner tid. */
static _Atomic int32_t state[TRC_MAX_RINGS];
static struct trc_ring *_Atomic rings[TRC_MAX_RINGS];
static _Atomic uint32_t skipped;
/* The discard window now open, 0 for none (ring mode); ids never repeat. */
static _Atomic uint64_t window, windows;
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
			atomic_store(&r->win, 0); /* a dead thread's window is not ours */
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
	uint64_t w = atomic_load_explicit(&window, memory_order_acquire);
	if (w) {
		/* Discard: this thread's window starts at its first event in it,
		 * and once the ring holds TRC_RING_EVENTS of them the rest are
		 * counted, not written, so no event of the window is overwritten. */
		if (atomic_load_explicit(&r->win, memory_order_relaxed) != w) {
			atomic_store_explicit(&r->base, h, memory_order_relaxed);
			atomic_store_explicit(&r->discarded, 0, memory_order_relaxed);
			atomic_store_explicit(&r->win, w, memory_order_release);
		}
		if (h - atomic_load_explicit(&r->base, memory_order_relaxed) >= TRC_RING_EVENTS) {
			uint64_t d = atomic_load_explicit(&r->discarded, memory_order_relaxed);
			atomic_store_explicit(&r->discarded, d + 1, memory_order_relaxed);
			return;
		}
	}
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

/* The live name of a thread, if it still runs; else the one it had. */
static void thread_name(const struct trc_ring *r, char comm[17])
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)r->tid);
	if (util_read_file(path, comm, 17) < 0) {
		memcpy(comm, r->comm, 16);
		comm[16] = '\0';
	}
	comm[strcspn(comm, "\n")] = '\0';
}

void trc_discard_begin(void)
{
	atomic_store(&window, atomic_fetch_add(&windows, 1) + 1);
}

void trc_discard_end(void)
{
	atomic_store(&window, 0);
}

#define COPY_TRIES 3

/*
 * Copy ring events [start, h) that are whole into copy; *n is how many.
 * Returns 1 if the writer lapped the copy (some event was overwritten
 * before or while it was copied), else 0. What was copied before the last
 * overwritten event is then older than a hole, and a hole would pair a
 * begin before it with an end after it that was not its own: only the run
 * after it is kept, so a thread's events never have a gap.
 */
static int copy_run(const struct trc_ring *ring, uint64_t start, uint64_t h,
		    struct trc_ev *copy, size_t *n)
{
	int lapped = 0;
	*n = 0;
	for (uint64_t k = start; k < h; k++) {
#ifdef TRC_TEST_COPY_HOOK
		TRC_TEST_COPY_HOOK(ring->tid, k - start);
#endif
		const struct trc_ev *e = &ring->ev[k % TRC_RING_EVENTS];
		uint64_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
		int whole = s1 == k + 1;
		if (whole) {
			memcpy(&copy[*n], e, sizeof(*e));
			atomic_thread_fence(memory_order_acquire);
			whole = atomic_load_explicit(&e->seq, memory_order_relaxed) == s1;
		}
		if (!whole) {
			lapped = 1;
			*n = 0;
			continue;
		}
		(*n)++;
	}
	return lapped;
}

int trc_snapshot(int fd, struct trc_stats *st, uint64_t *bytes)
{
	struct tfmt_out *o = malloc(sizeof(*o));
	struct trc_ev *copy = malloc(sizeof(struct trc_ev) * TRC_RING_EVENTS);
	pid_t pid = getpid();
	char cmd[256], comm[17] = "";

	memset(st, 0, sizeof(*st));
	if (!o || !copy) {
		free(o);
		free(copy);
		return -ENOMEM;
	}
	tfmt_init(o, fd);
	read_cmdline(cmd, sizeof(cmd));
	prctl(PR_GET_NAME, comm, 0, 0, 0);
	tfmt_process(o, pid, comm, cmd);
	uint64_t w = atomic_load(&window);
	for (int i = 0; i < TRC_MAX_RINGS; i++) {
		struct trc_ring *ring = atomic_load(&rings[i]);
		if (!ring || atomic_load(&state[i]) == 0)
			continue;
		uint64_t start, h;
		if (w) {
			/* Discard: only the window's events, none overwritten. A
			 * thread that wrote nothing in it has nothing to give. */
			if (atomic_load_explicit(&ring->win, memory_order_acquire) != w)
				continue;
			start = atomic_load_explicit(&ring->base, memory_order_relaxed);
			st->discarded += atomic_load_explicit(&ring->discarded, memory_order_relaxed);
			h = atomic_load_explicit(&ring->head, memory_order_acquire);
		} else {
			h = atomic_load_explicit(&ring->head, memory_order_acquire);
			start = h > TRC_RING_EVENTS ? h - TRC_RING_EVENTS : 0;
		}
		size_t n = 0;
		/* Ring: a copy the writer lapped is taken again from its new
		 * head, at most COPY_TRIES times, as a lap is mostly this thread
		 * preempted once; the last try stands, lapped or not. */
		for (int t = 1;; t++) {
			int lapped = copy_run(ring, start, h, copy, &n);
			if (!lapped || w || t == COPY_TRIES)
				break;
			h = atomic_load_explicit(&ring->head, memory_order_acquire);
			start = h > TRC_RING_EVENTS ? h - TRC_RING_EVENTS : 0;
		}
		/* Overwritten before the copy, plus those before the last one
		 * overwritten during it (in a discard window: none, and nothing
		 * before the window counts). */
		st->dropped += (w ? 0 : start) + ((h - start) - n);
		if (!n)
			continue;
		st->threads++;
		char tname[17];
		thread_name(ring, tname);
		tfmt_thread(o, pid, ring->tid, tname);
		for (size_t k = 0; k < n; k++)
			tfmt_event(o, pid, ring->tid, &copy[k]);
		st->events += n;
	}
	st->threads_skipped = atomic_load(&skipped);
	int r = tfmt_finish(o, bytes);
	free(o);
	free(copy);
	return r;
}

/*
 * In a fatal-signal handler: write()s only. The rings are dumped as they
 * are; the redactor sorts out what is valid (docs/PERFETTO.md).
 */
int trc_crash_dump(int fd)
{
	struct tfmt_dump_hdr h;
	uint32_t n = 0;
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < TRC_MAX_RINGS; i++)
		if (atomic_load(&rings[i]) && atomic_load(&state[i]) != 0)
			n++;
	memcpy(h.magic, TFMT_DUMP_MAGIC, 8);
	h.version = 1;
	h.pid = (uint32_t)getpid();
	h.nrings = n;
	h.ring_events = TRC_RING_EVENTS;
	h.ev_size = sizeof(struct trc_ev);
	if (write(fd, &h, sizeof(h)) != sizeof(h))
		return -EIO;
	for (int i = 0; i < TRC_MAX_RINGS && n; i++) {
		struct trc_ring *ring = atomic_load(&rings[i]);
		if (!ring || atomic_load(&state[i]) == 0)
			continue;
		struct tfmt_dump_ring rh;
		memset(&rh, 0, sizeof(rh));
		rh.tid = ring->tid;
		memcpy(rh.comm, ring->comm, 16);
		rh.head = atomic_load(&ring->head);
		if (write(fd, &rh, sizeof(rh)) != sizeof(rh) ||
		    write(fd, ring->ev, sizeof(ring->ev)) != (ssize_t)sizeof(ring->ev))
			return -EIO;
		n--;
	}
	return 0;
}
